"""Retention: pruning old records keeps every counter, bucket, day and facet exact (checked
against a recomputation from the records that remain), leaves a ledger row, and the pages
that pointed at a pruned record say so."""

from __future__ import annotations

import importlib
import io
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from qualitylab.models import CaseResult, CaseRun, Collection, CollectionVersion, QualityCase
from tests.factories import failure_item, runner_event_item
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, DESK_SOURCES, batch_ingest
from triage.models import (
    QUALITY_LAB_SOURCE,
    FailureGroup,
    FailureGroupBucket,
    FailureGroupDay,
    FailureGroupFacet,
    FailureReasonBucket,
    FailureRecord,
    GroupStatus,
    RetentionRun,
    RetentionStatus,
    RunnerEvent,
)
from triage.selectors import having_production_records
from triage.tasks import prune_old_records
from triage.upkeep import retention

DAYS = 90
# Half past an hour in the past: the cutoff splits its hour, so that bucket is only partly
# pruned, and every item is older than the real clock (ingest refuses the future).
NOW = timezone.now().astimezone(UTC).replace(minute=30, second=0, microsecond=0) - timedelta(
    hours=2
)
CUTOFF = NOW - timedelta(days=DAYS)
CUTOFF_HOUR = CUTOFF.replace(minute=0)

# (stage, reason, sent fields): retryable reads, an input_stale synthesis, a policy block
# whose runtime claims it is retryable (a contradiction), an unmapped reason, an adapter stage.
KINDS: list[tuple[str, str, dict[str, Any]]] = [
    ("execute", "http_5xx", {"evidence": {"http_status": 503, "http_method": "GET"}}),
    ("execute", "timeout", {"evidence": {"timeout_ms": 30000, "request_sent": True}}),
    ("synthesize", "unsatisfied_field", {"evidence": {"field_name": "orderNo"}}),
    ("execute", "auth_failed", {"retryable": True, "evidence": {"http_status": 401}}),
    ("execute", "brand_new_reason", {"lane": "manual_investigation"}),
    ("adapter_checkout", "cart_locked", {"execution_state": "not_started"}),
]
TOOLS = ["getOrderDetail", "createRefund", "sendInvoice", ""]
COLLECTIONS = ["shop", "billing", ""]
SOURCES = ["runtime", "learning", "log"]  # quality_lab is the desk's own


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def realistic_items(seed: int = 7) -> list[dict[str, Any]]:
    """Failures over 120 days (many per hour, every kind, tool, collection and source),
    runner events with and without a failure, a group with only old records, and records
    on both sides of the cutoff inside its hour."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for number in range(260):
        stage, reason, sent = rng.choice(KINDS)
        occurred = NOW - timedelta(days=rng.uniform(0, 120), minutes=rng.randint(0, 59))
        items.append(
            failure_item(
                f"mix-{seed}-{number}",
                stage=stage,
                reason=reason,
                tool=rng.choice(TOOLS),
                collection=rng.choice(COLLECTIONS),
                source=rng.choice(SOURCES),
                occurred_at=_stamp(occurred),
                **sent,
            )
        )
    # A burst: many records in a few old and new hours of one group.
    for number in range(30):
        base = NOW - timedelta(days=100 if number % 2 else 10)
        items.append(
            failure_item(
                f"burst-{seed}-{number}", occurred_at=_stamp(base + timedelta(minutes=number))
            )
        )
    # The cutoff's hour: two records before the cutoff, one exactly at it (kept: only
    # records before the cutoff are older than DAYS days) and one after.
    for number, offset in enumerate(
        [timedelta(minutes=-20), timedelta(seconds=-1), timedelta(0), timedelta(minutes=10)]
    ):
        items.append(
            failure_item(
                f"edge-{seed}-{number}", tool="edgeTool", occurred_at=_stamp(CUTOFF + offset)
            )
        )
    # A group whose every record is older than the cutoff.
    for number in range(5):
        items.append(
            failure_item(
                f"archive-{seed}-{number}",
                collection="archive",
                tool="legacyTool",
                occurred_at=_stamp(CUTOFF - timedelta(days=3, hours=number)),
            )
        )
    # Runner events: failures (they become records) and plain progress events, old and new.
    for number in range(24):
        occurred = NOW - timedelta(days=rng.uniform(0, 120))
        kind = "step.failed" if number % 2 else "plan.started"
        items.append(
            runner_event_item(
                f"event-{seed}-{number}",
                type=kind,
                plan_id=f"plan-{number}",
                occurred_at=_stamp(occurred),
            )
        )
    # Quality Lab's own results, before and after the cutoff, in a group runtimes also
    # report and in one of their own: the groups count them apart (quality_lab_count).
    for number in range(6):
        items.append(
            failure_item(
                f"lab-{seed}-{number}",
                tool=("getOrderDetail", "labOnlyTool")[number % 2],
                collection="shop",
                source=QUALITY_LAB_SOURCE,
                occurred_at=_stamp(CUTOFF + timedelta(days=(-2, 2)[number // 3 % 2], hours=number)),
            )
        )
    rng.shuffle(items)
    return items


def ingest_all(items: list[dict[str, Any]], *, owner: str = "runtime-a") -> None:
    """A history older than retention keeps, loaded as if retention were off (ingest refuses
    what the next prune would remove), so that a prune has something to remove. Quality
    Lab's records come through the desk's own channel, as its runs send them."""
    with override_settings(TRIAGE_RETENTION_DAYS=0):
        for start in range(0, len(items), 70):
            batch = items[start : start + 70]
            lab = [item for item in batch if item["body"].get("source") in DESK_SOURCES]
            runtime = [item for item in batch if item["body"].get("source") not in DESK_SOURCES]
            for sender, channel, part in ((owner, "api", runtime), (DESK_OWNER, DESK_CHANNEL, lab)):
                if part:
                    outcome = batch_ingest(owner=sender, items=part, channel=channel)
                    assert outcome.all_stored, [item for item in outcome.items if item.error]


@dataclass
class Counters:
    groups: dict[tuple[str, ...], tuple[int, int, int, int]]
    buckets: dict[tuple[tuple[str, ...], datetime], int]
    days: dict[tuple[tuple[str, ...], datetime], int]
    facets: dict[tuple[tuple[str, ...], str, str], int]
    # Per (stage, reason) and hour, across groups.
    reason_hours: dict[tuple[str, str, datetime], int]


def _group_keys() -> dict[int, tuple[str, ...]]:
    return {
        pk: (collection, stage, reason, tool)
        for pk, collection, stage, reason, tool in FailureGroup.objects.values_list(
            "pk", "collection", "stage", "reason", "tool"
        )
    }


def stored_counters() -> Counters:
    """What ingest and retention maintain, by natural keys (ids differ between databases)."""
    keys = _group_keys()
    return Counters(
        groups={
            keys[pk]: (count, retryable, contradictions, quality_lab)
            for pk, count, retryable, contradictions, quality_lab in (
                FailureGroup.objects.values_list(
                    "pk", "count", "retryable_count", "contradiction_count", "quality_lab_count"
                )
            )
        },
        buckets={
            (keys[group_id], hour.astimezone(UTC)): count
            for group_id, hour, count in FailureGroupBucket.objects.values_list(
                "group_id", "hour", "count"
            )
        },
        days={
            (keys[group_id], day.astimezone(UTC)): count
            for group_id, day, count in FailureGroupDay.objects.values_list(
                "group_id", "day", "count"
            )
        },
        facets={
            (keys[group_id], dimension, value): count
            for group_id, dimension, value, count in FailureGroupFacet.objects.values_list(
                "group_id", "dimension", "value", "count"
            )
        },
        reason_hours={
            (stage, reason, hour.astimezone(UTC)): count
            for stage, reason, hour, count in FailureReasonBucket.objects.values_list(
                "stage", "reason", "hour", "count"
            )
        },
    )


def recomputed_counters() -> Counters:
    """The same numbers added up from the records that are there (groups at zero included,
    no bucket or facet row for what has no record)."""
    keys = _group_keys()
    groups: dict[tuple[str, ...], list[int]] = {key: [0, 0, 0, 0] for key in keys.values()}
    buckets: Counter[tuple[tuple[str, ...], datetime]] = Counter()
    days: Counter[tuple[tuple[str, ...], datetime]] = Counter()
    facets: Counter[tuple[tuple[str, ...], str, str]] = Counter()
    for (
        group_id,
        occurred,
        retryable,
        contradictions,
        source,
        lane,
        state,
    ) in FailureRecord.objects.values_list(
        "group_id",
        "occurred_at",
        "retryable",
        "contradictions",
        "source",
        "lane",
        "execution_state",
    ):
        key = keys[group_id]
        groups[key][0] += 1
        groups[key][1] += int(retryable)
        groups[key][2] += int(bool(contradictions))
        groups[key][3] += int(source == QUALITY_LAB_SOURCE)
        hour = occurred.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        buckets[(key, hour)] += 1
        days[(key, hour.replace(hour=0))] += 1
        for dimension, value in (("source", source), ("lane", lane), ("execution_state", state)):
            facets[(key, dimension, value)] += 1
    reason_hours: Counter[tuple[str, str, datetime]] = Counter()
    for ((_, stage, reason, _), hour), count in buckets.items():
        reason_hours[(stage, reason, hour)] += count
    return Counters(
        groups={key: (n, r, c, q) for key, (n, r, c, q) in groups.items()},
        buckets=dict(buckets),
        days=dict(days),
        facets=dict(facets),
        reason_hours=dict(reason_hours),
    )


def assert_exact() -> Counters:
    stored, expected = stored_counters(), recomputed_counters()
    assert stored.groups == expected.groups
    assert stored.buckets == expected.buckets
    assert stored.days == expected.days
    assert stored.reason_hours == expected.reason_hours
    assert stored.facets == expected.facets
    return stored


def prune(**options: Any) -> RetentionRun:
    arguments: dict[str, Any] = {"days": DAYS, "batch_size": 50, "channel": "cli", "now": NOW}
    arguments.update(options)
    return retention.records_prune(**arguments)


def old_record_count() -> int:
    return FailureRecord.objects.filter(occurred_at__lt=CUTOFF).count()


def orphaned_old_events() -> int:
    """Runner events older than the cutoff that no record newer than it still points at."""
    kept = FailureRecord.objects.filter(occurred_at__gte=CUTOFF, runner_event__isnull=False)
    return (
        RunnerEvent.objects.filter(occurred_at__lt=CUTOFF)
        .exclude(pk__in=kept.values("runner_event_id"))
        .count()
    )


def edge_group() -> FailureGroup:
    return FailureGroup.objects.get(tool="edgeTool")


def edge_key() -> tuple[str, ...]:
    edge = edge_group()
    return (edge.collection, edge.stage, edge.reason, edge.tool)


def archive_group() -> FailureGroup:
    return FailureGroup.objects.get(collection="archive")


@pytest.fixture
def loaded(db: Any) -> None:
    ingest_all(realistic_items())


def bucket_count(group: FailureGroup, hour: datetime) -> int:
    # Compared in Python: the stored hour's text on SQLite carries its offset.
    return sum(bucket.count for bucket in group.buckets.all() if bucket.hour == hour)


@contextmanager
def prune_lock_held_elsewhere() -> Iterator[None]:
    """Another prune holds the lock: a thread with its own connection (PostgreSQL's
    advisory lock is reentrant within one session) or its own open lock file."""
    held = threading.Event()
    release = threading.Event()
    problems: list[Any] = []

    def hold() -> None:
        try:
            with retention.prune_lock() as acquired:
                if not acquired:
                    problems.append("the lock was taken already")
                    return
                held.set()
                release.wait(timeout=120)
        except BaseException as exc:  # re-raised in the test's thread
            problems.append(exc)
        finally:
            held.set()
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(timeout=120)
    try:
        assert not problems, problems
        yield
    finally:
        release.set()
        thread.join()


# --- exactness -------------------------------------------------------------------------------


def test_counters_buckets_and_facets_equal_a_recount_of_the_remaining_records(
    loaded: None,
) -> None:
    before = assert_exact()  # ingest's own counters agree with the recount
    old = old_record_count()
    assert 0 < old < FailureRecord.objects.count()
    edge = edge_group()
    assert bucket_count(edge, CUTOFF_HOUR) == 4

    run = prune()

    assert run.status == RetentionStatus.DONE
    assert run.records_deleted == old
    after = assert_exact()
    assert old_record_count() == 0
    assert after.groups != before.groups
    # The hour the cutoff splits keeps the record at the cutoff and the one after it.
    assert bucket_count(edge, CUTOFF_HOUR) == 2
    # Hours and days wholly before the cutoff have no row left; the cutoff's day is partial.
    assert all(hour >= CUTOFF_HOUR for _, hour in after.buckets)
    assert all(day >= CUTOFF_HOUR.replace(hour=0) for _, day in after.days)
    assert after.days[(edge_key(), CUTOFF_HOUR.replace(hour=0))] >= 2
    assert not FailureGroupBucket.objects.filter(count=0).exists()
    assert not FailureGroupDay.objects.filter(count=0).exists()
    assert not FailureGroupFacet.objects.filter(count=0).exists()


def test_a_group_whose_records_are_all_pruned_stays_with_its_status_and_history(
    loaded: None,
) -> None:
    archive = archive_group()
    FailureGroup.objects.filter(pk=archive.pk).update(status=GroupStatus.RESOLVED)
    first_seen, last_seen = archive.first_seen, archive.last_seen
    assert archive.count == 5

    run = prune()

    archive.refresh_from_db()
    assert (archive.count, archive.retryable_count, archive.contradiction_count) == (0, 0, 0)
    assert archive.status == GroupStatus.RESOLVED
    assert (archive.first_seen, archive.last_seen) == (first_seen, last_seen)
    assert archive.pruned_count == 5
    assert archive.pruned_before == CUTOFF
    assert not archive.buckets.exists() and not archive.facets.exists()
    assert run.groups_emptied >= 1
    assert run.groups_emptied == FailureGroup.objects.filter(count=0, pruned_count__gt=0).count()


def test_pruned_count_adds_up_over_groups_to_what_was_removed(loaded: None) -> None:
    old = old_record_count()
    prune()
    assert sum(FailureGroup.objects.values_list("pruned_count", flat=True)) == old
    assert set(
        FailureGroup.objects.filter(pruned_count__gt=0).values_list("pruned_before", flat=True)
    ) == {CUTOFF}


def test_batch_sizes_from_one_record_up_give_the_same_result(loaded: None) -> None:
    old = old_record_count()
    events = orphaned_old_events()
    results: dict[int, Counters] = {}
    for size in (1, 7, 10_000):
        with transaction.atomic():
            run = prune(batch_size=size)
            assert run.status == RetentionStatus.DONE
            assert run.records_deleted == old
            assert run.runner_events_deleted == events
            assert run.batches == math.ceil(old / size) + math.ceil(events / size)
            results[size] = assert_exact()
            transaction.set_rollback(True)  # the next size starts from the same records
    assert results[1] == results[7] == results[10_000]


def test_runner_events_go_when_old_unless_a_remaining_record_points_at_one(
    loaded: None,
) -> None:
    kept = FailureRecord.objects.filter(occurred_at__gte=CUTOFF, runner_event__isnull=False).first()
    assert kept is not None and kept.runner_event_id is not None
    # An old event behind a record that stays (its record says it occurred later).
    RunnerEvent.objects.filter(pk=kept.runner_event_id).update(
        occurred_at=CUTOFF - timedelta(days=1)
    )
    new_events = RunnerEvent.objects.filter(occurred_at__gte=CUTOFF).count()
    expected = orphaned_old_events()
    assert expected > 0

    run = prune()

    assert run.runner_events_deleted == expected
    assert list(
        RunnerEvent.objects.filter(occurred_at__lt=CUTOFF).values_list("pk", flat=True)
    ) == [kept.runner_event_id]
    assert RunnerEvent.objects.filter(occurred_at__gte=CUTOFF).count() == new_events
    kept.refresh_from_db()
    assert kept.runner_event_id is not None


# --- the ledger -------------------------------------------------------------------------------


def test_a_run_leaves_a_ledger_row_with_what_it_removed(loaded: None) -> None:
    old = old_record_count()
    groups = FailureRecord.objects.filter(occurred_at__lt=CUTOFF).values("group_id").distinct()
    touched = groups.count()
    events = orphaned_old_events()

    run = prune(batch_size=40)

    stored = RetentionRun.objects.get()
    assert stored.pk == run.pk
    assert stored.status == RetentionStatus.DONE
    assert (stored.days, stored.cutoff, stored.batch_size, stored.channel) == (
        DAYS,
        CUTOFF,
        40,
        "cli",
    )
    assert stored.records_deleted == old
    assert stored.runner_events_deleted == events
    assert stored.batches == math.ceil(old / 40) + math.ceil(events / 40)
    assert stored.groups_touched == touched
    assert stored.finished_at is not None and stored.finished_at >= stored.started_at
    assert stored.error == ""


def test_a_second_run_removes_nothing_and_changes_nothing(loaded: None) -> None:
    prune()
    after_first = assert_exact()

    second = prune()

    assert second.status == RetentionStatus.DONE
    assert (second.records_deleted, second.runner_events_deleted, second.batches) == (0, 0, 0)
    assert second.groups_touched == 0
    assert stored_counters() == after_first
    assert RetentionRun.objects.count() == 2


def test_a_run_out_of_time_stops_between_batches_and_the_next_goes_on(loaded: None) -> None:
    old = old_record_count()
    first = prune(batch_size=10, max_seconds=0)
    assert first.status == RetentionStatus.PARTIAL
    assert (first.batches, first.records_deleted) == (1, 10)
    assert old_record_count() == old - 10
    assert_exact()

    second = prune(batch_size=10)
    assert second.status == RetentionStatus.DONE
    assert second.records_deleted == old - 10
    assert_exact()


def test_counters_that_had_drifted_stop_the_run_loudly_and_change_nothing(
    loaded: None,
) -> None:
    archive = archive_group()
    archive.facets.filter(dimension="source").delete()  # drift from outside retention
    old = old_record_count()
    groups_before = stored_counters().groups

    run = prune(batch_size=10_000)

    assert run.status == RetentionStatus.FAILED
    assert "missing" in run.error and str(archive.pk) in run.error
    assert run.records_deleted == 0
    assert old_record_count() == old
    assert stored_counters().groups == groups_before


def test_a_counter_that_would_go_below_zero_fails_the_run(loaded: None) -> None:
    edge = edge_group()
    # Its cutoff hour holds 4 records, 2 of them older than the cutoff; say it held 1.
    FailureGroupBucket.objects.filter(group=edge).update(count=1)
    old = old_record_count()

    run = prune(batch_size=10_000)

    assert run.status == RetentionStatus.FAILED
    assert "fewer records than it should" in run.error
    assert old_record_count() == old


def test_a_prune_while_another_holds_the_lock_is_skipped(loaded: None) -> None:
    old = old_record_count()
    with prune_lock_held_elsewhere():
        run = prune()
    assert run.status == RetentionStatus.SKIPPED
    assert run.records_deleted == 0 and run.finished_at is not None
    assert old_record_count() == old
    assert prune().records_deleted == old  # once the other one is done


def test_a_run_left_running_by_a_dead_process_is_marked_interrupted(loaded: None) -> None:
    dead = RetentionRun.objects.create(channel="beat", days=DAYS, cutoff=CUTOFF, batch_size=5)
    prune()
    dead.refresh_from_db()
    assert dead.status == RetentionStatus.INTERRUPTED
    assert "stopped" in dead.error


# --- beat task and command ------------------------------------------------------------------


def test_the_beat_schedule_runs_the_prune_task_every_hour() -> None:
    from config.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["prune-old-records"]
    name = str(entry["task"])
    app.loader.import_default_modules()
    assert name in app.tasks
    assert app.tasks[name].name == prune_old_records.name
    assert entry["schedule"] == 3600.0


@override_settings(TRIAGE_RETENTION_DAYS=DAYS, TRIAGE_RETENTION_BATCH_SIZE=25)
def test_the_task_prunes_with_the_settings(loaded: None) -> None:
    run_id = prune_old_records()
    assert run_id is not None
    run = RetentionRun.objects.get(pk=run_id)
    assert (run.channel, run.days, run.batch_size, run.status) == (
        "beat",
        DAYS,
        25,
        RetentionStatus.DONE,
    )
    assert run.records_deleted > 0
    assert not FailureRecord.objects.filter(occurred_at__lt=run.cutoff).exists()
    assert_exact()


@override_settings(TRIAGE_RETENTION_DAYS=0)
def test_the_task_does_nothing_when_retention_is_off(loaded: None) -> None:
    total = FailureRecord.objects.count()
    assert prune_old_records() is None
    assert FailureRecord.objects.count() == total
    assert not RetentionRun.objects.exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_command_dry_run_counts_and_changes_nothing(loaded: None) -> None:
    total = FailureRecord.objects.count()
    out = io.StringIO()
    call_command("prune_records", "--days", "30", "--dry-run", stdout=out)
    cutoff = timezone.now() - timedelta(days=30)
    expected = FailureRecord.objects.filter(occurred_at__lt=cutoff).count()
    assert f"Dry run: {expected} records in " in out.getvalue()
    assert "older than 30 days" in out.getvalue()
    assert FailureRecord.objects.count() == total
    assert not RetentionRun.objects.exists()


def test_the_command_prunes_shows_progress_on_a_terminal_and_sums_up(loaded: None) -> None:
    out = _Terminal()
    call_command("prune_records", "--days", "30", "--batch-size", "20", stdout=out)
    run = RetentionRun.objects.get()
    text = out.getvalue()
    assert "\rbatch 1: 20/" in text
    assert (
        f"Retention run {run.pk} done: removed {run.records_deleted} records and "
        f"{run.runner_events_deleted} runner events older than 30 days"
    ) in text
    assert run.channel == "cli" and run.records_deleted > 20
    assert_exact()


def test_the_command_is_quiet_but_for_the_summary_when_not_on_a_terminal(loaded: None) -> None:
    out = io.StringIO()
    call_command("prune_records", "--days", "30", "--batch-size", "20", stdout=out)
    assert "batch 1" not in out.getvalue()
    assert out.getvalue().count("\n") == 1


@override_settings(TRIAGE_RETENTION_DAYS=0)
def test_the_command_says_retention_is_off_unless_given_days(loaded: None) -> None:
    out = io.StringIO()
    call_command("prune_records", stdout=out)
    assert "Retention is off" in out.getvalue()
    assert not RetentionRun.objects.exists()
    with pytest.raises(CommandError, match="--days must be at least 1"):
        call_command("prune_records", "--days", "0", stdout=io.StringIO())


def test_the_command_fails_when_another_prune_runs(loaded: None) -> None:
    with prune_lock_held_elsewhere(), pytest.raises(CommandError, match="Another prune"):
        call_command("prune_records", "--days", "30", stdout=io.StringIO())


# --- pages ----------------------------------------------------------------------------------


def test_the_ingestion_page_shows_the_last_prune(loaded: None, client_as: Any) -> None:
    prune()
    run = RetentionRun.objects.get()
    response = client_as("viewer").get("/ingestion/")
    assert response.status_code == 200
    text = response.content.decode()
    assert "Last prune" in text
    assert f"<strong>{run.records_deleted}</strong> records older than {DAYS} days removed" in text
    assert f"#{run.pk}" in text


@override_settings(TRIAGE_RETENTION_DAYS=0)
def test_the_ingestion_page_says_when_retention_is_off(db: Any, client_as: Any) -> None:
    text = client_as("viewer").get("/ingestion/").content.decode()
    assert "TRIAGE_RETENTION_DAYS=0</code> keeps records forever" in text
    assert "No prune has run yet" in text


def test_a_group_with_every_record_pruned_renders_and_says_why(
    loaded: None, client_as: Any
) -> None:
    archive = archive_group()
    newest = archive.records.order_by("-occurred_at", "-id").first()
    assert newest is not None
    old_cursor = f"{newest.occurred_at.isoformat()}_{newest.pk}"
    prune()
    client = client_as("viewer")

    response = client.get(f"/triage/groups/{archive.pk}/")
    assert response.status_code == 200
    text = response.content.decode()
    assert "5 older records pruned by retention" in text
    assert "every record of this group" in text

    # A link kept from before, paging from a record that is gone.
    response = client.get(f"/triage/groups/{archive.pk}/", {"before": old_cursor})
    assert response.status_code == 200
    assert "pruned by retention" in response.content.decode()


def test_a_group_with_some_records_pruned_says_so_after_its_last_page(
    loaded: None, client_as: Any
) -> None:
    prune()
    edge = edge_group()
    text = client_as("viewer").get(f"/triage/groups/{edge.pk}/").content.decode()
    assert "2 older records pruned by retention" in text
    assert "Older records (before" in text


def test_the_read_api_lists_no_pruned_record_and_the_group_at_zero(
    loaded: None, client_as: Any
) -> None:
    prune()
    client = client_as("viewer")
    response = client.get("/api/v1/failures", {"collection": "archive"})
    assert response.status_code == 200
    assert response.json()["results"] == []
    response = client.get("/api/v1/groups", {"collection": "archive"})
    assert response.status_code == 200
    (group,) = response.json()["results"]
    assert (group["id"], group["count"]) == (archive_group().pk, 0)


@pytest.fixture
def lab_result(db: Any) -> CaseResult:
    """A failed Quality Lab result linked to a record older than the cutoff."""
    ingest_all(realistic_items())
    record = FailureRecord.objects.filter(collection="archive").first()
    assert record is not None
    # Ingest registered the collection it saw.
    collection, _ = Collection.objects.get_or_create(name="archive")
    version = CollectionVersion.objects.create(
        collection=collection, number=1, spec_source="{}", spec_sha256="0" * 64
    )
    case = QualityCase.objects.create(
        collection=collection, case_id="legacy-order", mode="execute", query="show order 42"
    )
    run = CaseRun.objects.create(
        collection=collection,
        version=version,
        status="done",
        total=1,
        done=1,
        failed=1,
        started_at=NOW,
        finished_at=NOW,
    )
    return CaseResult.objects.create(
        run=run,
        case=case,
        passed=False,
        failure_stage=record.stage,
        failure_reason=record.reason,
        sections={"failure": {"stage": record.stage, "reason": record.reason, "message": "503"}},
        failure_record=record,
    )


def test_a_quality_lab_result_whose_record_is_pruned_keeps_saying_which_failure_it_hit(
    lab_result: CaseResult, client_as: Any
) -> None:
    archive = archive_group()
    client = client_as("viewer")
    before = client.get(f"/qualitylab/results/{lab_result.pk}/").content.decode()
    assert f"/triage/groups/{archive.pk}/" in before
    assert "pruned by retention" not in before

    prune()

    lab_result.refresh_from_db()
    assert lab_result.failure_record_id is None
    assert lab_result.failure_record_pruned_at == NOW
    assert lab_result.failure_record_retention_days == DAYS
    assert lab_result.pruned_record_group_id == archive.pk
    for url in (f"/qualitylab/results/{lab_result.pk}/", f"/qualitylab/runs/{lab_result.run_id}/"):
        response = client.get(url)
        assert response.status_code == 200, url
        text = response.content.decode()
        assert f"record pruned by retention (older than {DAYS} days)" in text, url
        assert f"/triage/groups/{archive.pk}/" in text, url


# --- concurrency on PostgreSQL -----------------------------------------------------------------


@pytest.mark.services("postgres")
@pytest.mark.django_db(transaction=True)
def test_a_prune_during_ingest_of_the_same_groups_keeps_counters_exact() -> None:
    ingest_all(realistic_items(seed=11), owner="setup")
    initial = FailureRecord.objects.count()
    accepted: list[int] = []
    runs: list[RetentionRun] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def send(worker: int) -> None:
        try:
            barrier.wait()
            for batch in range(8):
                items = [
                    failure_item(
                        f"live-{worker}-{batch}-{number}",
                        tool=("getOrderDetail", "edgeTool")[number % 2],
                        collection="shop" if number % 2 == 0 else "",
                        # A third are older than the cutoff: the prune may or may not see them.
                        occurred_at=_stamp(
                            CUTOFF - timedelta(hours=number)
                            if number % 3 == 0
                            else NOW - timedelta(hours=number)
                        ),
                    )
                    for number in range(25)
                ]
                accepted.append(batch_ingest(owner=f"live-{worker}", items=items).count("accepted"))
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    def prune_now() -> None:
        try:
            barrier.wait()
            runs.append(prune(batch_size=5))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(n,)) for n in range(3)]
    threads.append(threading.Thread(target=prune_now))
    # Ingest would refuse the old third (older_than_retention, tested on its own): with the
    # refusal off they race the prune, the harder case for the counters.
    with override_settings(TRIAGE_RETENTION_DAYS=0):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert not errors, errors
    (run,) = runs
    assert run.status == RetentionStatus.DONE, run.error
    assert sum(accepted) == 3 * 8 * 25
    assert FailureRecord.objects.count() == initial + sum(accepted) - run.records_deleted
    assert_exact()


@pytest.mark.services("postgres")
@pytest.mark.django_db(transaction=True)
def test_two_prunes_at_once_remove_each_record_once() -> None:
    ingest_all(realistic_items(seed=13), owner="setup")
    old = old_record_count()
    runs: list[RetentionRun] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def prune_now() -> None:
        try:
            barrier.wait()
            runs.append(prune(batch_size=3))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=prune_now) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors, errors
    assert {run.status for run in runs} <= {RetentionStatus.DONE, RetentionStatus.SKIPPED}
    assert sum(run.records_deleted for run in runs) == old
    assert old_record_count() == 0
    assert_exact()


def test_a_reference_no_listener_handles_is_cleared_instead_of_failing_the_run(
    lab_result: CaseResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "_LISTENERS", [])
    run = prune()
    assert run.status == RetentionStatus.DONE, run.error
    lab_result.refresh_from_db()
    assert lab_result.failure_record_id is None
    assert lab_result.failure_record_pruned_at is None  # only the listener marks it


def _wait_until_waiting_for_a_lock(backend_pids: list[int]) -> None:
    """Polls pg_stat_activity until the prune's backend waits for a row lock (a deadline
    only guards against hanging; nothing is asserted about how long it took)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if backend_pids:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", backend_pids
                )
                row = cursor.fetchone()
            if row is not None and row[0] == "Lock":
                return
        time.sleep(0.02)
    pytest.fail("the prune never waited for the group lock held by the ingest")


@pytest.mark.services("postgres")
@pytest.mark.django_db(transaction=True)
def test_prune_locks_groups_in_ingest_order_so_the_two_queue_instead_of_deadlocking() -> None:
    """An ingest holds the lower group and then asks for the higher one, as ingest does (id
    order). A prune locking in the same order waits behind it without holding the higher
    group; in any other order PostgreSQL would find a deadlock and abort one of them."""
    ingest_all(realistic_items(seed=17), owner="setup")
    low, high = sorted(
        set(FailureRecord.objects.filter(occurred_at__lt=CUTOFF).values_list("group_id", flat=True))
    )[-2:]
    holding = threading.Event()
    go_on = threading.Event()
    prune_backend: list[int] = []
    runs: list[RetentionRun] = []
    errors: list[BaseException] = []

    def ingest_like() -> None:
        try:
            with transaction.atomic():
                list(FailureGroup.objects.select_for_update(no_key=True).filter(pk=low))
                holding.set()
                go_on.wait(timeout=120)
                list(FailureGroup.objects.select_for_update(no_key=True).filter(pk=high))
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)
        finally:
            holding.set()
            connection.close()

    def prune_now() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                prune_backend.append(cursor.fetchone()[0])
            runs.append(prune(batch_size=10_000))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    ingest_thread = threading.Thread(target=ingest_like)
    ingest_thread.start()
    holding.wait(timeout=120)
    prune_thread = threading.Thread(target=prune_now)
    prune_thread.start()
    try:
        _wait_until_waiting_for_a_lock(prune_backend)
    finally:
        go_on.set()
        ingest_thread.join()
        prune_thread.join()

    assert not errors, errors
    (run,) = runs
    assert run.status == RetentionStatus.DONE, run.error
    assert old_record_count() == 0
    assert_exact()


@pytest.mark.django_db
def test_a_group_whose_runtime_records_are_pruned_leaves_the_production_view() -> None:
    """The page's default source reads two counters of the group (records and Quality Lab's
    records): a prune that takes the runtime records out leaves Quality Lab's alone."""
    ingest_all(
        [
            failure_item(
                f"runtime-{n}", tool="mixedTool", occurred_at=_stamp(CUTOFF - timedelta(days=1))
            )
            for n in range(2)
        ]
        + [
            failure_item(
                f"lab-{n}",
                tool="mixedTool",
                source=QUALITY_LAB_SOURCE,
                occurred_at=_stamp(CUTOFF + timedelta(days=1)),
            )
            for n in range(3)
        ]
    )
    group = FailureGroup.objects.get(tool="mixedTool")
    assert (group.count, group.quality_lab_count) == (5, 3)
    assert FailureGroup.objects.filter(having_production_records(), pk=group.pk).exists()
    prune()
    group.refresh_from_db()
    assert (group.count, group.quality_lab_count) == (3, 3)
    assert not FailureGroup.objects.filter(having_production_records(), pk=group.pk).exists()
    assert_exact()


@pytest.mark.django_db
def test_the_migration_counts_each_groups_quality_lab_records_from_its_facets() -> None:
    from django.apps import apps

    backfill = importlib.import_module(
        "triage.migrations.0025_group_quality_lab_count"
    ).backfill_quality_lab_counts
    ingest_all(realistic_items())
    expected = assert_exact().groups
    assert any(q for *_, q in expected.values())
    FailureGroup.objects.update(quality_lab_count=0)
    backfill(apps, None)
    assert stored_counters().groups == expected
