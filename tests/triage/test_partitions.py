"""Records partitioned by day on PostgreSQL (triage/upkeep/partitions.py): retention drops
whole days with every counter exact, ingest refuses what is older than retention keeps, one
record per span across days, and the migration's two directions keep every row."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import failure_item
from tests.threads import run_together
from tests.triage.test_retention import _stamp, assert_exact, ingest_all
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, FailureRecord, RetentionStatus
from triage.tasks import keep_record_partitions
from triage.upkeep import partitions, retention

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db(transaction=True)]

DAYS = 30
TODAY = timezone.now().astimezone(UTC).date()
# The prunes' clock: midday, so that the cutoff's day and the hour's grace before it fall
# the same way whenever the tests run (records are all a day old or more).
NOW = datetime.combine(TODAY, datetime.min.time(), UTC) + timedelta(hours=12, minutes=30)
CUTOFF = NOW - timedelta(days=DAYS)
INGEST_URL = "/api/v1/ingest"
TOOLS = ("getOrderDetail", "createRefund", "sendInvoice")


def _items(prefix: str, days_back: range, *, per_day: int = 12) -> list[dict[str, Any]]:
    """Failures spread over whole UTC days (every other hour from midnight), in three tools
    and two collections; one in six from Quality Lab's runs."""
    items = []
    for back in days_back:
        midnight = datetime.combine(TODAY - timedelta(days=back), datetime.min.time(), UTC)
        for number in range(per_day):
            moment = midnight + timedelta(hours=2 * number, minutes=back % 60)
            items.append(
                failure_item(
                    f"{prefix}-{back}-{number}",
                    tool=TOOLS[number % 3],
                    collection=("shop", "billing")[number % 2],
                    retryable=number % 4 == 0,
                    source="quality_lab" if number % 6 == 5 else "runtime",
                    occurred_at=_stamp(moment),
                )
            )
    return items


def _table_names() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE %s", [f"{partitions.PARENT}_%"]
        )
        return {row[0] for row in cursor.fetchall()}


def _days(first_back: int, last_back: int) -> list[date]:
    return [TODAY - timedelta(days=back) for back in range(first_back, last_back + 1)]


def _prune(**options: Any) -> Any:
    arguments: dict[str, Any] = {"days": DAYS, "batch_size": 50, "channel": "cli", "now": NOW}
    arguments.update(options)
    return retention.records_prune(**arguments)


def _drop_days_but_the_migrations() -> None:
    """Partitions outlive a test's data (a flush truncates them): back to what the
    migration made, so that each test starts as a new database does."""
    kept = set(_days(-partitions.AHEAD_DAYS, 1))
    with connection.cursor() as cursor:
        for day in set(partitions.attached_days()) - kept:
            cursor.execute(f"DROP TABLE {partitions.partition_name(day)}")
        for name in _table_names():
            if name.startswith(f"{partitions.PARENT}_x"):
                cursor.execute(f"DROP TABLE {name}")


@pytest.fixture(autouse=True)
def migrated_days(transactional_db: Any) -> Any:
    _drop_days_but_the_migrations()
    yield
    _drop_days_but_the_migrations()


@pytest.fixture
def history() -> int:
    """Forty days of records, each day in its own partition (the beat made them after the
    records arrived: ensure_days moved them out of the default partition)."""
    ingest_all(_items("old", range(1, 41)))
    assert partitions.default_count() > 0
    before = FailureRecord.objects.count()
    partitions.ensure_days(_days(1, 40))
    assert partitions.default_count() == 0
    assert FailureRecord.objects.count() == before
    assert_exact()
    return before


def test_the_table_is_partitioned_by_day_with_a_default() -> None:
    assert partitions.partitioned()
    assert partitions.DEFAULT in _table_names()
    # The migration made yesterday, today and the days ahead.
    assert set(_days(-partitions.AHEAD_DAYS, 1)) <= set(partitions.attached_days())


def test_making_a_day_moves_its_records_out_of_the_default_partition(history: int) -> None:
    # Checked in the fixture: no record lost, none twice, the counters untouched. A record of
    # a day with a partition lands in it directly.
    ingest_all(_items("more", range(5, 6), per_day=3))
    assert partitions.default_count() == 0
    assert FailureRecord.objects.count() == history + 3


def test_retention_drops_whole_days_and_every_counter_stays_exact(history: int) -> None:
    run = _prune()
    assert run.status == RetentionStatus.DONE, run.error
    # The days that ended an hour before the cutoff are gone as tables, not row by row.
    gone = [day for day in _days(31, 40) if partitions.partition_name(day) not in _table_names()]
    assert gone == _days(31, 40)
    assert not any(name.startswith(f"{partitions.PARENT}_x") for name in _table_names())
    # The cutoff's own day stays whole until it has passed: nothing younger than the start
    # of the oldest day kept is gone, nothing older than it is left.
    kept_from = datetime.combine(TODAY - timedelta(days=30), datetime.min.time(), tzinfo=UTC)
    assert run.cutoff == kept_from
    assert not FailureRecord.objects.filter(occurred_at__lt=kept_from).exists()
    assert run.records_deleted == history - FailureRecord.objects.count()
    assert run.records_deleted == 12 * 10
    stored = assert_exact()
    assert sum(n for n, *_ in stored.groups.values()) == FailureRecord.objects.count()
    groups = FailureGroup.objects.filter(pruned_count__gt=0)
    assert sum(g.pruned_count for g in groups) == run.records_deleted
    assert {g.pruned_before for g in groups} == {kept_from}
    # A second run finds nothing more to do.
    again = _prune()
    assert (again.status, again.records_deleted) == (RetentionStatus.DONE, 0)


def _workers_now(cursor: Any) -> str:
    cursor.execute("SHOW max_parallel_workers_per_gather")
    return str(cursor.fetchone()[0])


@override_settings(DATABASE_UPKEEP_PARALLEL_WORKERS=3)
def test_a_drop_reads_its_day_with_the_upkeep_workers_and_pages_keep_none(history: int) -> None:
    """Each of the drop's reads of the day runs with DATABASE_UPKEEP_PARALLEL_WORKERS; the
    connection is back to none once the drop's transaction ends."""
    seen: list[str] = []

    def note_workers(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if " FROM triage_failurerecord_x" in sql:
            seen.append(_workers_now(context["cursor"]))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(note_workers):
        run = _prune()
    assert run.status == RetentionStatus.DONE, run.error
    assert seen == ["3"] * 3 * 10  # three reads a day, ten days dropped
    with connection.cursor() as cursor:
        assert _workers_now(cursor) == "0"


def test_a_prune_across_a_partition_boundary_drops_days_and_prunes_default_rows() -> None:
    # Records of days that have no partition wait in the default partition: the prune
    # removes those before the cutoff one by one, and drops the days that have one.
    ingest_all(_items("edge", range(28, 36)))
    partitions.ensure_days(_days(33, 36))
    assert partitions.default_count() == 12 * 5  # days 28-32
    run = _prune()
    assert run.status == RetentionStatus.DONE, run.error
    assert not FailureRecord.objects.filter(occurred_at__lt=CUTOFF).exists()
    assert FailureRecord.objects.count() == 12 * 8 - run.records_deleted
    assert run.cutoff == CUTOFF  # no partition near the cutoff: it prunes to the minute
    assert all(partitions.partition_name(day) not in _table_names() for day in _days(33, 36))
    assert_exact()


def test_a_day_detached_by_a_run_that_stopped_is_counted_out_by_the_next(history: int) -> None:
    day = TODAY - timedelta(days=40)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"ALTER TABLE {partitions.PARENT} DETACH PARTITION {partitions.partition_name(day)}"
        )
        cursor.execute(
            f"ALTER TABLE {partitions.partition_name(day)} RENAME TO {partitions.PARENT}_x"
            f"{day:%Y%m%d}"
        )
    run = _prune()
    assert run.status == RetentionStatus.DONE, run.error
    assert run.records_deleted == 12 * 10
    assert not any(name.startswith(f"{partitions.PARENT}_x") for name in _table_names())
    assert_exact()


def test_a_record_for_a_day_already_dropped_is_refused_with_its_code(
    history: int, ingest_client: APIClient
) -> None:
    with override_settings(TRIAGE_RETENTION_DAYS=DAYS):
        _prune(now=timezone.now())
        assert partitions.partition_name(TODAY - timedelta(days=35)) not in _table_names()
        old = timezone.now() - timedelta(days=35)
        response = ingest_client.post(
            INGEST_URL,
            {
                "items": [
                    failure_item("late-1", occurred_at=_stamp(old)),
                    failure_item("fresh-1", occurred_at=_stamp(timezone.now())),
                ]
            },
            format="json",
        )
    assert response.status_code == 207, response.content
    late, fresh = response.json()["items"]
    assert late["status"] == "rejected"
    assert late["error"]["code"] == "older_than_retention"
    assert late["error"]["field"] == "body.occurred_at"
    assert fresh["status"] == "accepted"
    assert not FailureRecord.objects.filter(client_id="late-1").exists()
    assert partitions.default_count() == 0
    assert_exact()


def test_ingest_during_a_drop_keeps_every_counter_exact(history: int) -> None:
    accepted: list[int] = []
    runs: list[Any] = []

    def send(worker: int) -> None:
        for batch in range(6):
            items = _items(f"live-{worker}-{batch}", range(1, 4), per_day=4)
            accepted.append(batch_ingest(owner=f"live-{worker}", items=items).count("accepted"))

    run_together(lambda: send(0), lambda: send(1), lambda: runs.append(_prune(batch_size=5)))
    (run,) = runs
    assert run.status == RetentionStatus.DONE, run.error
    assert sum(accepted) == 2 * 6 * 12
    assert FailureRecord.objects.count() == history + sum(accepted) - run.records_deleted
    assert run.records_deleted == 12 * 10
    assert_exact()


def test_one_record_per_span_across_days_and_concurrent_batches() -> None:
    partitions.ensure_days(_days(0, 3))
    span = {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}
    # Four reports of one call, 7 hours apart: they cross a midnight, so two days'
    # partitions hold their times; all within a day of the first (the same call).
    base = datetime.combine(TODAY - timedelta(days=2), datetime.min.time(), UTC) + timedelta(
        hours=14
    )

    def send(worker: int) -> None:
        item = failure_item(
            f"span-{worker}",
            occurred_at=_stamp(base + timedelta(hours=7 * worker)),
            evidence={f"seen_by_{worker}": True},
            **span,
        )
        batch_ingest(owner=f"worker-{worker}", items=[item])

    run_together(*(lambda worker=worker: send(worker) for worker in range(4)))
    (record,) = FailureRecord.objects.filter(**span)
    # Whichever came first keeps its classification; the others' evidence is added to it.
    assert {f"seen_by_{n}" for n in range(4)} <= set(record.evidence)
    # The same span ids three days later are another call (ids are the runtime's to reuse).
    late = failure_item("span-late", occurred_at=_stamp(base - timedelta(days=3)), **span)
    assert batch_ingest(owner="late", items=[late]).count("accepted") == 1
    assert FailureRecord.objects.filter(**span).count() == 2
    assert_exact()


def test_the_beat_task_keeps_the_retention_window_and_the_days_ahead() -> None:
    with override_settings(TRIAGE_RETENTION_DAYS=7):
        created = keep_record_partitions()
        assert keep_record_partitions() == 0
    window = set(partitions.window_days(now=timezone.now(), retention_days=7))
    assert window <= set(partitions.attached_days())
    assert created == len(window - set(_days(-partitions.AHEAD_DAYS, 1)))


def test_the_command_makes_the_window_and_says_what_is_there() -> None:
    ingest_all(_items("waiting", range(3, 4), per_day=2))
    out = io.StringIO()
    call_command("record_partitions", "--days", "5", stdout=out)
    text = out.getvalue()
    # Days 2-6 back (retention's 5 and one more); yesterday and the days ahead were there.
    assert "Created 5 day partitions" in text
    assert "Records waiting in the default partition: 0." in text
    assert set(_days(-partitions.AHEAD_DAYS, 6)) <= set(partitions.attached_days())
    out = io.StringIO()
    call_command("record_partitions", "--list-only", stdout=out)
    assert "Created 0 day partitions" in out.getvalue()


def test_the_migration_converts_both_ways_keeping_every_row_and_id(history: int) -> None:
    rows = list(FailureRecord.objects.order_by("pk").values_list("pk", "occurred_at", "group_id"))
    with transaction.atomic():
        with connection.cursor() as cursor:
            partitions.convert(cursor, to_partitioned=False, today=TODAY)
        assert not partitions.partitioned()
        assert (
            list(FailureRecord.objects.order_by("pk").values_list("pk", "occurred_at", "group_id"))
            == rows
        )
        with connection.cursor() as cursor:
            partitions.convert(cursor, to_partitioned=True, today=TODAY)
        assert partitions.partitioned()
        assert (
            list(FailureRecord.objects.order_by("pk").values_list("pk", "occurred_at", "group_id"))
            == rows
        )
        # Every day with records has its partition again, and ids go on from the last.
        assert {occurred.date() for _, occurred, _ in rows} <= set(partitions.attached_days())
        assert partitions.default_count() == 0
        ingest_all(_items("after", range(1, 2), per_day=1))
        newest = FailureRecord.objects.order_by("-pk").values_list("pk", flat=True)[0]
        assert newest > rows[-1][0]
        transaction.set_rollback(True)
    assert partitions.partitioned()
