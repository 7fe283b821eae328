"""Retention: remove failure records older than a number of days, in batches, so that every
group counter, hourly bucket, daily rollup and facet stays equal to what the remaining
records add up to. On PostgreSQL, where the records are partitioned by day, whole days are
dropped first (triage.upkeep.partitions) and batches remove only the default partition's
records.

Each batch is one short transaction. It locks the oldest records (FOR UPDATE), then their
groups in id order with the same no-key lock ingest takes, so a prune and an ingest of one
group queue on the group row instead of deadlocking. Apps whose rows point at the records
mark them (Quality Lab results say their record was pruned), the records are deleted and
exactly what they contributed is subtracted. A counter that would go below zero, or a bucket,
day or facet row that is missing, means the counters had drifted before: the batch rolls back
and the run fails with a message naming the groups, rather than making them more wrong.

What retention keeps on purpose: groups (with their status, assignee, notes and history,
even at zero records; `first_seen` and `last_seen` stay as history, the counters describe
the records that remain), receipts, audit events and the ingest ledger with its item claims
(so a runtime re-sending a pruned item's id still gets `duplicate`, not a second copy).

One prune at a time: a PostgreSQL session advisory lock, or on SQLite a lock file under
TRIAGE_VAR_DIR. A prune that finds it taken leaves a `skipped` ledger row and does nothing.
"""

from __future__ import annotations

import fcntl
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone
from django.utils.translation import gettext_noop

from triage.models import (
    FailureGroup,
    FailureRecord,
    RetentionRun,
    RetentionStatus,
    RunnerEvent,
)
from triage.timebins import day_floor, hour_floor
from triage.upkeep import partitions
from triage.upkeep.counters import ID_CHUNK, RetentionDriftError, delete_ids, subtract_counts

logger = logging.getLogger(__name__)

# Any constant 64-bit key; advisory locks are scoped to the current database.
_ADVISORY_LOCK_KEY = 0x7472_6961_6765_0001


class PrunedListener(Protocol):
    def __call__(
        self, *, records: models.QuerySet[FailureRecord], pruned_at: datetime, days: int
    ) -> None: ...


class PrunedEventsListener(Protocol):
    def __call__(self, *, events: Sequence[PrunedEvent]) -> None: ...


@dataclass(frozen=True)
class PrunedEvent:
    """A runner event retention removed, as a listener needs it (the row is gone)."""

    collection: str
    tool: str
    event_type: str
    occurred_at: datetime


_LISTENERS: list[PrunedListener] = []
_EVENT_LISTENERS: list[PrunedEventsListener] = []


def on_records_pruned(listener: PrunedListener) -> None:
    """Register from an app's ready(): called in each batch's transaction, before the records
    are deleted, so rows pointing at them can say they were pruned (and still read them).
    `records` is a batch of rows or, on a partitioned table, a whole day."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def on_runner_events_pruned(listener: PrunedEventsListener) -> None:
    """Register from an app's ready(): called in each batch's transaction with the runner
    events it removed (exactly those: an event a new record came to point at stays)."""
    if listener not in _EVENT_LISTENERS:
        _EVENT_LISTENERS.append(listener)


def retention_cutoff(*, days: int, now: datetime) -> datetime:
    """Records that occurred before this moment are older than `days` days (ingest refuses
    them)."""
    return now - timedelta(days=days)


def prune_cutoff(*, days: int, now: datetime) -> datetime:
    """What a prune removes records before. On a table partitioned by day, the start of the
    oldest day it keeps when that is earlier than the retention cutoff: a day goes whole once
    it has ended an hour's grace before the cutoff (triage.upkeep.partitions), so the day the
    cutoff falls in stays until then, and no row of it is deleted one by one."""
    return partitions.kept_from(retention_cutoff(days=days, now=now))


@dataclass(frozen=True)
class PrunePreview:
    """What a prune would remove now (the command's --dry-run)."""

    cutoff: datetime
    records: int
    groups: int
    runner_events: int


def records_prune_preview(*, days: int, now: datetime | None = None) -> PrunePreview:
    cutoff = prune_cutoff(days=days, now=now or timezone.now())
    old = FailureRecord.objects.filter(occurred_at__lt=cutoff)
    kept_backing = FailureRecord.objects.filter(
        runner_event=OuterRef("pk"), occurred_at__gte=cutoff
    )
    return PrunePreview(
        cutoff=cutoff,
        records=old.count(),
        groups=old.values("group_id").distinct().count(),
        runner_events=RunnerEvent.objects.filter(occurred_at__lt=cutoff)
        .exclude(Exists(kept_backing))
        .count(),
    )


def retention_runs_recent(*, limit: int = 5) -> list[RetentionRun]:
    """The newest ledger rows, for the ingestion page."""
    return list(RetentionRun.objects.order_by("-started_at", "-id")[:limit])


@contextmanager
def prune_lock() -> Iterator[bool]:
    """Held for a whole prune; yields False when another prune holds it.

    Session-level, not per transaction, because a prune is many transactions; it goes away
    with the process (its connection or its open file), so a killed prune never wedges the
    next one.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [_ADVISORY_LOCK_KEY])
            row = cursor.fetchone()
            acquired = bool(row and row[0])
        try:
            yield acquired
        finally:
            if acquired:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [_ADVISORY_LOCK_KEY])
        return
    path = Path(settings.VAR_DIR) / "retention.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def records_prune(
    *,
    days: int,
    batch_size: int,
    channel: str,
    now: datetime | None = None,
    max_seconds: float | None = None,
    on_batch: Callable[[RetentionRun], None] | None = None,
) -> RetentionRun:
    """Remove records (then orphaned runner events) older than `days` days; return the ledger
    row. Stops starting batches after `max_seconds` (status `partial`: the next run goes on).
    An error ends the run as `failed` with the message; the batch it hit is rolled back."""
    if days < 1:
        raise ValueError("days must be at least 1")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    now = now or timezone.now()
    retention_ends = retention_cutoff(days=days, now=now)
    cutoff = partitions.kept_from(retention_ends)
    fields: dict[str, Any] = {
        "channel": channel,
        "days": days,
        "cutoff": cutoff,
        "batch_size": batch_size,
    }
    with prune_lock() as acquired:
        if not acquired:
            return RetentionRun.objects.create(
                **fields,
                status=RetentionStatus.SKIPPED,
                finished_at=timezone.now(),
                error=gettext_noop("Another prune was running; this one removed nothing."),
            )
        # Only the lock holder runs, so a row still marked running lost its process.
        RetentionRun.objects.filter(status=RetentionStatus.RUNNING).update(
            status=RetentionStatus.INTERRUPTED,
            error=gettext_noop("Its process stopped before it finished; the next run went on."),
        )
        run = RetentionRun.objects.create(**fields)
        pruner = _Pruner(
            run=run,
            now=now,
            retention_ends=retention_ends,
            max_seconds=max_seconds,
            on_batch=on_batch,
        )
        try:
            complete = (
                pruner.drop_days() and pruner.prune_records() and pruner.prune_runner_events()
            )
        except Exception as exc:
            logger.exception("retention run %s failed", run.pk)
            pruner.finish(RetentionStatus.FAILED, error=f"{exc.__class__.__name__}: {exc}")
        except BaseException:  # Ctrl-C, worker shutdown: say so, then let it propagate
            pruner.finish(
                RetentionStatus.INTERRUPTED, error=gettext_noop("Stopped before it finished.")
            )
            raise
        else:
            pruner.finish(RetentionStatus.DONE if complete else RetentionStatus.PARTIAL)
    return run


class _Pruner:
    """One run's batches; keeps the ledger row in step with what each batch committed."""

    def __init__(
        self,
        *,
        run: RetentionRun,
        now: datetime,
        retention_ends: datetime,
        max_seconds: float | None,
        on_batch: Callable[[RetentionRun], None] | None,
    ) -> None:
        self.run = run
        self.now = now
        self.retention_ends = retention_ends
        self.started = time.monotonic()
        self.max_seconds = max_seconds
        self.on_batch = on_batch
        self.touched: set[int] = set()

    def out_of_time(self) -> bool:
        # At least one batch always runs, so a tiny budget still makes progress.
        return (
            self.max_seconds is not None
            and self.run.batches > 0
            and time.monotonic() - self.started >= self.max_seconds
        )

    def drop_days(self) -> bool:
        """On a partitioned table: whole days before the cutoff, each dropped with its counts
        (a day an earlier run detached first). Then only the default partition's stragglers
        are left for `prune_records`."""
        if not partitions.partitioned():
            return True
        for dropped in partitions.drop_detached(cutoff=self.run.cutoff):
            self.count_dropped(dropped)
        for day in partitions.droppable_days(self.retention_ends):
            if self.out_of_time():
                return False
            dropped = partitions.drop_day(
                day, before_detach=self.tell_listeners, cutoff=self.run.cutoff
            )
            self.count_dropped(dropped)
        return True

    def tell_listeners(self, start: datetime, end: datetime) -> None:
        records = FailureRecord.objects.filter(occurred_at__gte=start, occurred_at__lt=end)
        for listener in _LISTENERS:
            listener(records=records, pruned_at=self.now, days=self.run.days)
        _clear_remaining_pointers(records)

    def count_dropped(self, dropped: partitions.DroppedDay) -> None:
        self.touched |= dropped.groups
        self.run.batches += 1
        self.run.records_deleted += dropped.records
        self.run.groups_touched = len(self.touched)
        RetentionRun.objects.filter(pk=self.run.pk).update(
            batches=self.run.batches,
            records_deleted=self.run.records_deleted,
            groups_touched=self.run.groups_touched,
        )
        if self.on_batch is not None:
            self.on_batch(self.run)

    def prune_records(self) -> bool:
        """Batches until nothing older than the cutoff is left (True) or time is up (False)."""
        while True:
            if self.out_of_time():
                return False
            with transaction.atomic():
                pruned = _prune_record_batch(
                    cutoff=self.run.cutoff,
                    size=self.run.batch_size,
                    days=self.run.days,
                    pruned_at=self.now,
                )
                if pruned is None:
                    return True
                records, groups = pruned
                touched = self.touched | groups
                RetentionRun.objects.filter(pk=self.run.pk).update(
                    batches=F("batches") + 1,
                    records_deleted=F("records_deleted") + records,
                    groups_touched=len(touched),
                )
            self.touched = touched
            self.run.batches += 1
            self.run.records_deleted += records
            self.run.groups_touched = len(touched)
            if self.on_batch is not None:
                self.on_batch(self.run)

    def prune_runner_events(self) -> bool:
        """Runner events older than the cutoff that no remaining record points at."""
        while True:
            if self.out_of_time():
                return False
            with transaction.atomic():
                deleted = _prune_runner_event_batch(
                    cutoff=self.run.cutoff, size=self.run.batch_size
                )
                if deleted is None:
                    return True
                RetentionRun.objects.filter(pk=self.run.pk).update(
                    batches=F("batches") + 1,
                    runner_events_deleted=F("runner_events_deleted") + deleted,
                )
            self.run.batches += 1
            self.run.runner_events_deleted += deleted
            if self.on_batch is not None:
                self.on_batch(self.run)

    def finish(self, status: str, *, error: str = "") -> None:
        touched = sorted(self.touched)
        emptied = sum(
            FailureGroup.objects.filter(pk__in=touched[start : start + ID_CHUNK], count=0).count()
            for start in range(0, len(touched), ID_CHUNK)
        )
        self.run.status = status
        self.run.error = error[:2000]
        self.run.groups_emptied = emptied
        self.run.finished_at = timezone.now()
        self.run.save(update_fields=["status", "error", "groups_emptied", "finished_at"])


_RECORD_COLUMNS = (
    "id",
    "group_id",
    "occurred_at",
    "retryable",
    "contradictions",
    "source",
    "lane",
    "execution_state",
    "release",
)


def _prune_record_batch(
    *, cutoff: datetime, size: int, days: int, pruned_at: datetime
) -> tuple[int, set[int]] | None:
    """Delete the oldest `size` records before the cutoff and take them out of their groups'
    counters, buckets and facets. Runs inside the caller's transaction; None when none left."""
    rows = list(
        FailureRecord.objects.select_for_update()
        .filter(occurred_at__lt=cutoff)
        .order_by("occurred_at", "id")
        .values_list(*_RECORD_COLUMNS)[:size]
    )
    if not rows:
        return None
    record_ids = [row[0] for row in rows]
    group_ids = sorted({row[1] for row in rows})
    # Ingest's order: group rows in id order, before any bucket or facet row.
    list(
        FailureGroup.objects.select_for_update(no_key=True)
        .filter(pk__in=group_ids)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    records = FailureRecord.objects.filter(pk__in=record_ids, occurred_at__lt=cutoff)
    for listener in _LISTENERS:
        listener(records=records, pruned_at=pruned_at, days=days)
    _clear_remaining_pointers(records)
    deleted = delete_ids(FailureRecord, record_ids)
    if deleted != len(record_ids):  # the rows were locked: nobody else can have removed them
        raise RetentionDriftError(f"deleted {deleted} of {len(record_ids)} locked records")

    per_group: dict[int, list[int]] = {}
    hours: Counter[tuple[int, datetime]] = Counter()
    day_counts: Counter[tuple[int, datetime]] = Counter()
    facets: Counter[tuple[int, str, str]] = Counter()
    for _, group_id, occurred, retryable, contradictions, source, lane, state, release in rows:
        totals = per_group.setdefault(group_id, [0, 0, 0])
        totals[0] += 1
        totals[1] += int(retryable)
        totals[2] += int(bool(contradictions))
        # The same UTC bins, as the same aware datetimes, as ingest counted them in.
        hours[(group_id, hour_floor(occurred))] += 1
        day_counts[(group_id, day_floor(occurred))] += 1
        facets[(group_id, "source", source)] += 1
        facets[(group_id, "lane", lane)] += 1
        facets[(group_id, "execution_state", state)] += 1
        if release:
            facets[(group_id, "release", release)] += 1
    subtract_counts(per_group=per_group, hours=hours, days=day_counts, facets=facets, cutoff=cutoff)
    return len(record_ids), set(group_ids)


def _clear_remaining_pointers(records: models.QuerySet[FailureRecord]) -> None:
    """Null any other SET_NULL reference to the records (as Django's delete would), so a
    model added later without a listener never makes retention fail."""
    # include_hidden: Quality Lab's link has related_name="+", which related_objects omits.
    for relation in FailureRecord._meta.get_fields(include_hidden=True):
        if not isinstance(relation, models.ForeignObjectRel):
            continue
        if relation.on_delete is not models.SET_NULL:
            continue
        name = relation.field.name
        relation.field.model._base_manager.filter(**{f"{name}__in": records.values("pk")}).update(
            **{name: None}
        )


def _prune_runner_event_batch(*, cutoff: datetime, size: int) -> int | None:
    backing = FailureRecord.objects.filter(runner_event=OuterRef("pk"))
    rows = {
        pk: PrunedEvent(collection, tool, event_type, occurred_at)
        for pk, collection, tool, event_type, occurred_at in RunnerEvent.objects.filter(
            occurred_at__lt=cutoff
        )
        .exclude(Exists(backing))
        .order_by("occurred_at", "id")
        .values_list("pk", "collection", "tool", "event_type", "occurred_at")[:size]
    }
    event_ids = list(rows)
    if not event_ids:
        return None
    event_table = connection.ops.quote_name(RunnerEvent._meta.db_table)
    record_table = connection.ops.quote_name(FailureRecord._meta.db_table)
    # Checked again in the DELETE itself: an event still backing a record stays.
    deleted = delete_ids(
        RunnerEvent,
        event_ids,
        extra_condition=(
            f"NOT EXISTS (SELECT 1 FROM {record_table} "
            f"WHERE {record_table}.runner_event_id = {event_table}.id)"
        ),
    )
    if _EVENT_LISTENERS and deleted:
        if deleted != len(event_ids):
            for kept in RunnerEvent.objects.filter(pk__in=event_ids).values_list("pk", flat=True):
                rows.pop(kept)
        for listener in _EVENT_LISTENERS:
            listener(events=list(rows.values()))
    # None also when none of them could go, so the phase cannot select them forever.
    return deleted or None
