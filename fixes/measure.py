"""Counting a fix's figures from what the desk stores, and carrying what retention prunes.

A fix's eight figures (failures and successes, before and after, over 24 hours and 7 days)
are counted by `fix_measure`: three aggregate queries (the failures, the runner's successes,
the receipts' successes), each over the fix's two weeks only. Successes are counted as the
contracts page counts them: runner `step.completed` events or successful receipts, whichever
is larger, so a call reported both ways counts once.

Retention removes records and runner events; before it does, its hooks hand the rows here
and each unsettled fix whose windows they fall in adds them to `carried`, so a measurement
after the prune still counts them. Receipts are never pruned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Min, Q, QuerySet
from django.db.models.functions import Coalesce, Lower
from django.utils import timezone

from fixes import efficacy
from fixes.models import FIGURES, SPANS, Fix, FixKind, Verdict
from learning.models import Suggestion, SuggestionStatus
from triage.models import QUALITY_LAB_SOURCE, FailureRecord, Receipt, RunnerEvent
from triage.upkeep.retention import PrunedEvent
from triage.vocabulary.lanes import SUCCESS_EVENT, SUCCESS_RESULTS

SOURCES = ("records", "runner", "receipts")
# A fix's figures change as records arrive; counting its fortnight again more often than this
# would cost the database more than the page gains.
REMEASURE = timedelta(minutes=15)


def _window_filters(fix: Fix, field: str) -> dict[str, Q]:
    """One Q per (side, span): `field` inside that window."""
    return {
        key: Q(**{f"{field}__gte": start, f"{field}__lt": end})
        for key, (start, end) in efficacy.all_windows(fix.fixed_at).items()
    }


def _failures(fix: Fix) -> QuerySet[FailureRecord]:
    if fix.group_id is not None:
        rows = FailureRecord.objects.filter(group_id=fix.group_id)
    else:
        rows = FailureRecord.objects.filter(collection=fix.collection, tool=fix.tool)
    # Quality Lab's own runs are tests: they say nothing about production.
    return rows.exclude(source=QUALITY_LAB_SOURCE)


def _runner_successes(fix: Fix) -> QuerySet[RunnerEvent]:
    return RunnerEvent.objects.filter(
        collection=fix.collection, tool=fix.tool, event_type=SUCCESS_EVENT
    )


def _receipt_successes(fix: Fix) -> QuerySet[Receipt]:
    return (
        Receipt.objects.filter(collection=fix.collection, tool=fix.tool)
        .filter(execution_state="completed")
        .annotate(result_lower=Lower("result"))
        .filter(result_lower__in=sorted(SUCCESS_RESULTS))
        .annotate(occurred=Coalesce("ended_at", "started_at", "received_at"))
    )


def _count(rows: QuerySet[Any], fix: Fix, field: str) -> dict[str, int]:
    windows = efficacy.all_windows(fix.fixed_at)
    start, end = windows["before_week"][0], windows["after_week"][1]
    filters = _window_filters(fix, field)
    counted = rows.filter(**{f"{field}__gte": start, f"{field}__lt": end}).aggregate(
        **{key: Count("pk", filter=condition) for key, condition in filters.items()}
    )
    return {key: int(value or 0) for key, value in counted.items()}


def fix_counts(fix: Fix) -> dict[str, int]:
    """The eight figures as the stored rows (and what retention carried) say now."""
    sources = {
        "records": _count(_failures(fix), fix, "occurred_at"),
        "runner": (_count(_runner_successes(fix), fix, "occurred_at") if fix.tool else {}),
        "receipts": _count(_receipt_successes(fix), fix, "occurred") if fix.tool else {},
    }
    for source in SOURCES:
        for key, amount in (fix.carried.get(source) or {}).items():
            sources[source][key] = sources[source].get(key, 0) + int(amount)
    figures = {}
    for span in SPANS:
        for side in ("before", "after"):
            key = f"{side}_{span}"
            figures[f"failures_{key}"] = sources["records"].get(key, 0)
            figures[f"successes_{key}"] = max(
                sources["runner"].get(key, 0), sources["receipts"].get(key, 0)
            )
    return figures


def fix_measure(fix: Fix, *, now: datetime | None = None) -> Fix:
    """Count the fix's figures, read its verdict from the widest closed span, and store both
    (settled, never measured again, once its week after has closed)."""
    now = now or timezone.now()
    with transaction.atomic():
        # Retention carries and deletes in one transaction under this lock: the count sees
        # the rows before it, or its carried counts after it, never neither.
        fix.carried = (
            Fix.objects.select_for_update().values_list("carried", flat=True).get(pk=fix.pk)
        )
        figures = fix_counts(fix)
    for name in FIGURES:
        setattr(fix, name, figures[name])
    closed = efficacy.closed_spans(fix.fixed_at, now)
    if closed:
        span = closed[-1]
        reading = efficacy.read(**fix.figures(span))
        fix.verdict, fix.verdict_span = reading.verdict, span
    else:
        fix.verdict, fix.verdict_span = Verdict.MEASURING, ""
    fix.settled = "week" in closed
    fix.measured_at = now
    fix.save(update_fields=[*FIGURES, "verdict", "verdict_span", "settled", "measured_at"])
    return fix


def fixes_measure(*, now: datetime | None = None, limit: int = 500) -> int:
    """Measure the unsettled fixes not measured in the last REMEASURE (the beat task, every
    5 minutes: each fix about every quarter of an hour); returns how many."""
    now = now or timezone.now()
    due = Q(measured_at__isnull=True) | Q(measured_at__lte=now - REMEASURE)
    fixes = list(
        Fix.objects.filter(due, settled=False, fixed_at__lte=now).order_by("measured_at", "id")[
            :limit
        ]
    )
    for fix in fixes:
        fix_measure(fix, now=now)
    return len(fixes)


# --- retention's hooks ---------------------------------------------------------------------


def _unsettled_touching(earliest: datetime) -> list[Fix]:
    """Unsettled fixes whose windows reach back to `earliest` or later."""
    return list(
        Fix.objects.filter(
            settled=False, fixed_at__gt=earliest - efficacy.SPAN_LENGTH["week"]
        ).select_for_update()
    )


def _carry(fix: Fix, source: str, rows: Iterable[datetime]) -> bool:
    """Add rows (their times) that fall in the fix's windows to what it carries."""
    windows = efficacy.all_windows(fix.fixed_at)
    carried = fix.carried.setdefault(source, {})
    changed = False
    for moment in rows:
        for key, (start, end) in windows.items():
            if start <= moment < end:
                carried[key] = int(carried.get(key, 0)) + 1
                changed = True
    return changed


def carry_pruned_records(
    *, records: QuerySet[FailureRecord], pruned_at: datetime, days: int
) -> None:
    """Retention's hook, in its transaction before the records go (a batch of rows, or a
    whole day's partition: each unsettled fix reads only its own group's or tool's)."""
    counted = records.exclude(source=QUALITY_LAB_SOURCE)
    earliest = counted.aggregate(earliest=Min("occurred_at"))["earliest"]
    if earliest is None:
        return
    for fix in _unsettled_touching(earliest):
        mine = (
            counted.filter(group_id=fix.group_id)
            if fix.group_id is not None
            else counted.filter(collection=fix.collection, tool=fix.tool)
        )
        if _carry(fix, "records", mine.values_list("occurred_at", flat=True).iterator()):
            fix.save(update_fields=["carried"])


def carry_pruned_runner_events(*, events: Sequence[PrunedEvent]) -> None:
    """Retention's hook for runner events, in its batch's transaction, with those it removed."""
    successes = [event for event in events if event.event_type == SUCCESS_EVENT and event.tool]
    if not successes:
        return
    for fix in _unsettled_touching(min(event.occurred_at for event in successes)):
        mine = [
            event.occurred_at
            for event in successes
            if (event.collection, event.tool) == (fix.collection, fix.tool)
        ]
        if _carry(fix, "runner", mine):
            fix.save(update_fields=["carried"])


# --- promoted learning suggestions -------------------------------------------------------------


def suggestions_track() -> int:
    """A fix for each promoted suggestion with a target tool that has none yet: measured in
    production on its tool from the moment it was promoted."""
    created = 0
    promoted = (
        Suggestion.objects.filter(
            status=SuggestionStatus.PROMOTED, promoted_at__isnull=False, production_fix=None
        )
        .exclude(target="")
        .select_related("collection")
    )
    for suggestion in promoted:
        assert suggestion.promoted_at is not None
        Fix.objects.get_or_create(
            suggestion=suggestion,
            defaults={
                "kind": FixKind.PROMOTED_SUGGESTION,
                "collection": suggestion.collection.name,
                "tool": suggestion.target,
                "fixed_at": suggestion.promoted_at,
                "actor": suggestion.promoted_by,
                "actor_label": suggestion.promoted_by_label,
                "note": suggestion.promotion_reason[:4000],
            },
        )
        created += 1
    return created
