"""Quality Lab's side of retention: a result whose failure record is pruned says so."""

from __future__ import annotations

from datetime import datetime

from django.db.models import OuterRef, QuerySet, Subquery

from qualitylab.models import CaseResult
from triage.models import FailureRecord


def case_results_mark_pruned(
    *, records: QuerySet[FailureRecord], pruned_at: datetime, days: int
) -> None:
    """Called by triage.upkeep.retention before the records go: keep when, the age limit and the
    group (which outlives its records) on every result that linked one of them."""
    group_of_record = FailureRecord.objects.filter(pk=OuterRef("failure_record_id")).values(
        "group_id"
    )[:1]
    # Every SET expression reads the row as it was, so the group is found before the link
    # is cleared.
    CaseResult.objects.filter(failure_record_id__in=records.values("pk")).update(
        pruned_record_group_id=Subquery(group_of_record),
        failure_record_pruned_at=pruned_at,
        failure_record_retention_days=days,
        failure_record=None,
    )
