from __future__ import annotations

from django.apps import AppConfig


class ContractsConfig(AppConfig):
    name = "contracts"
    verbose_name = "Contracts"

    def ready(self) -> None:
        # The triage pages badge a first-batch tool that sends none of the five fields; they
        # ask through a hook, so triage never imports this app (the arrow points one way).
        from contracts import selectors
        from triage.badges import register_tool_badges

        register_tool_badges(selectors.uncontracted_first_batch)
