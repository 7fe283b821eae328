from __future__ import annotations

from django.apps import AppConfig


class FixesConfig(AppConfig):
    name = "fixes"
    verbose_name = "Fixes"

    def ready(self) -> None:
        # Retention tells this app what it is about to prune, and Quality Lab when a run
        # ends; both through hooks, so neither imports this app (the arrows point one way).
        from fixes import measure, verification
        from qualitylab.signals import run_finished
        from triage.upkeep.retention import on_records_pruned, on_runner_events_pruned

        on_records_pruned(measure.carry_pruned_records)
        on_runner_events_pruned(measure.carry_pruned_runner_events)
        run_finished.connect(verification.run_finished, dispatch_uid="fixes.verification")
