from __future__ import annotations

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        # Ingest publishes what a batch did to its groups; alerts listens (ingest never
        # imports alerts: the arrow points one way).
        from alerts import services
        from triage.intake.ingest import on_batch_committed

        on_batch_committed(services.batch_committed_hand_on)
