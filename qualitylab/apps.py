from __future__ import annotations

from django.apps import AppConfig


class QualityLabConfig(AppConfig):
    name = "qualitylab"
    verbose_name = "Quality Lab"

    def ready(self) -> None:
        from qualitylab.retention import case_results_mark_pruned
        from triage.upkeep.retention import on_records_pruned

        # Results keep saying which failure they hit after retention removes the record.
        on_records_pruned(case_results_mark_pruned)
