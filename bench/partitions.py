"""Retention by whole days at a million records in a day, and the migration that partitions
the records by day (triage/upkeep/partitions.py).

    .venv/bin/python bench/partitions.py [--day-records 1000000] [--month-records 100000]
        [--jobs 2] [--batch 1000] [--row-seconds 10] [--database-url URL] [--strict]

What one run does, on PostgreSQL (default database ``triage_partitions``):

1. Migrates the database to just before the partitioning (``triage 0019``, one table) and
   empties every triage table.
2. Loads through ``triage.intake.ingest.batch_ingest`` (the ingest API's write path: scrub,
   classification, claims, group counters, hourly buckets, daily rollups, facets), from
   ``--jobs`` processes: ``--month-records`` of the scale bench's month of traffic
   (bench/triage_scale.py), and ``--day-records`` of the same traffic moved into one UTC day
   32 days back, the oldest.
3. **The migration.** Times ``migrate triage 0020`` (one table to partitions by day, every
   record copied once, the indexes built after), against a baseline from the same run: a
   plain copy of the same table (``CREATE TABLE ... AS SELECT``, no index). Checked: the same
   records (count and sum of ids) before and after, every day with records has its partition
   and none is left in the default partition. Target: within 10x the plain copy (the
   conversion is a copy plus its indexes, linear in the records). The seconds are what the
   docs quote. Then the newest schema, untimed (the code's retention reads it).
4. **Retention.** First the baseline, the row-by-row path retention used before (and still
   uses for the default partition): batches of ``TRIAGE_RETENTION_BATCH_SIZE`` records of
   that day deleted with their counts for ``--row-seconds``, in a transaction rolled back,
   for its rate. Then ``records_prune`` drops the day. Checked: exactly the day's records
   are gone, the ledger says so, and every group counter, hourly bucket (of a group and of
   a reason), daily rollup and facet equals a recount of the records left (in SQL).
   Targets: the drop under 10 s, and at least 5x faster than the row path would be for the
   same records.

The database is changed by a run (migrated, a day dropped), so every run loads again.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest import app_env, empty_tables, ensure_database, manage  # noqa: E402
from bench.triage_scale import (  # noqa: E402
    NotStored,
    _setup_django,
    _traffic,
    load,
    vacuum_analyze,
)
from bench.verdict import Verdicts, add_strict_argument, ratio  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/triage_partitions"
DAY_BACK = 32
TARGET_DROP_SECONDS = 10.0
TARGET_AGAINST_ROWS = 5.0
TARGET_MIGRATION_AGAINST_COPY = 10.0


def _day_start(now: datetime) -> datetime:
    return datetime.combine(now.date() - timedelta(days=DAY_BACK), datetime.min.time(), UTC)


def _load_day_chunk(task: tuple[int, int, int, str]) -> int:
    """The scale bench's items, each moved into the one day (one second apart)."""
    start, count, batch, now_iso = task
    from triage.intake.ingest import batch_ingest

    now = datetime.fromisoformat(now_iso)
    day = _day_start(now)
    items = list(_traffic(now_iso).items(start, count, prefix="day"))
    for number, item in enumerate(items, start=start):
        item["body"]["occurred_at"] = (day + timedelta(seconds=number % 86_400)).isoformat()
        item["body"]["source"] = "runtime"
        # Its own span: the month's item of the same number carries the same one.
        item["body"]["trace_id"] = f"{0xDA7 << 64 | number:032x}"
        item["body"]["span_id"] = f"{number + 1:016x}"
    stored = 0
    for offset in range(0, len(items), batch):
        part = items[offset : offset + batch]
        accepted = batch_ingest(owner="day-bench", items=part).as_dict()["accepted"]
        if accepted != len(part):
            raise NotStored(f"day batch at {start + offset}: {accepted} of {len(part)} stored")
        stored += accepted
    return stored


def load_day(*, records: int, jobs: int, batch: int, now: datetime) -> float:
    chunk = 10 * batch
    tasks = [
        (offset, min(chunk, records - offset), batch, now.isoformat())
        for offset in range(0, records, chunk)
    ]
    started = time.perf_counter()
    done = 0
    with multiprocessing.get_context("spawn").Pool(jobs, initializer=_setup_django) as pool:
        for stored in pool.imap_unordered(_load_day_chunk, tasks):
            done += stored
            if done % 100_000 < chunk:
                rate = done / (time.perf_counter() - started)
                print(f"  loaded {done:>9,} / {records:,} of the day ({rate:,.0f} records/s)")
    return records / (time.perf_counter() - started)


def _scalar(sql: str, params: list[Any] | None = None) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]


def _fingerprint() -> tuple[int, int]:
    return (
        int(_scalar("SELECT count(*) FROM triage_failurerecord")),
        int(_scalar("SELECT coalesce(sum(id), 0) FROM triage_failurerecord")),
    )


# Each counter against a recount of the records left: rows that differ, in SQL.
_DRIFT = {
    "group counters": """
        SELECT count(*) FROM triage_failuregroup g LEFT JOIN (
            SELECT group_id, count(*) AS n, count(*) FILTER (WHERE retryable) AS r,
                count(*) FILTER (WHERE source = 'quality_lab') AS q
            FROM triage_failurerecord GROUP BY group_id) c ON c.group_id = g.id
        WHERE g.count <> coalesce(c.n, 0) OR g.retryable_count <> coalesce(c.r, 0)
            OR g.quality_lab_count <> coalesce(c.q, 0)""",
    "hourly buckets": """
        SELECT count(*) FROM triage_failuregroupbucket b FULL JOIN (
            SELECT group_id, date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AS hour,
                count(*) AS n FROM triage_failurerecord GROUP BY 1, 2) c
            ON c.group_id = b.group_id AND c.hour = b.hour AT TIME ZONE 'UTC'
        WHERE b.count IS DISTINCT FROM c.n""",
    "daily rollups": """
        SELECT count(*) FROM triage_failuregroupday d FULL JOIN (
            SELECT group_id, date_trunc('day', occurred_at AT TIME ZONE 'UTC') AS day,
                count(*) AS n FROM triage_failurerecord GROUP BY 1, 2) c
            ON c.group_id = d.group_id AND c.day = d.day AT TIME ZONE 'UTC'
        WHERE d.count IS DISTINCT FROM c.n""",
    "facets": """
        SELECT count(*) FROM triage_failuregroupfacet f FULL JOIN (
            SELECT group_id, dimension, value, count(*) AS n FROM triage_failurerecord,
                LATERAL (VALUES ('source', source), ('lane', lane),
                    ('execution_state', execution_state), ('release', release))
                    AS v(dimension, value)
            WHERE dimension <> 'release' OR value <> '' GROUP BY 1, 2, 3) c
            ON c.group_id = f.group_id AND c.dimension = f.dimension AND c.value = f.value
        WHERE f.count IS DISTINCT FROM c.n""",
    "reason buckets": """
        SELECT count(*) FROM triage_failurereasonbucket b FULL JOIN (
            SELECT g.stage, g.reason, date_trunc('hour', r.occurred_at AT TIME ZONE 'UTC')
                AS hour, count(*) AS n FROM triage_failurerecord r
                INNER JOIN triage_failuregroup g ON g.id = r.group_id GROUP BY 1, 2, 3) c
            ON c.stage = b.stage AND c.reason = b.reason AND c.hour = b.hour AT TIME ZONE 'UTC'
        WHERE b.count IS DISTINCT FROM c.n""",
}


def later_counters(*, present: bool) -> None:
    """Ingest at this commit also counts per reason and each group's Quality Lab records,
    in a table and a column that triage 0024 and 0025 make (after the partitioning): the
    load at 0019 needs them, and they go before the migrations, which make them again from
    the group buckets and the source facets."""
    from django.db import connection

    from triage.models import FailureGroup, FailureReasonBucket

    quality_lab_count = FailureGroup._meta.get_field("quality_lab_count")
    with connection.schema_editor() as editor:
        if present:
            editor.create_model(FailureReasonBucket)
            editor.add_field(FailureGroup, quality_lab_count)
        else:
            editor.delete_model(FailureReasonBucket)
            editor.remove_field(FailureGroup, quality_lab_count)


def counter_drift() -> list[str]:
    return [
        f"{name}: {rows} rows differ from a recount"
        for name, query in _DRIFT.items()
        if (rows := int(_scalar(query)))
    ]


def migrate_partitioned() -> tuple[float, float, list[str]]:
    """(plain copy seconds, conversion seconds, problems)."""
    from django.core.management import call_command
    from django.db import connection

    from triage.upkeep import partitions

    before = _fingerprint()
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE bench_plain_copy AS SELECT * FROM triage_failurerecord")
    copy_seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_plain_copy")
        cursor.execute("CHECKPOINT")
    started = time.perf_counter()
    call_command("migrate", "triage", "0020", verbosity=0)
    seconds = time.perf_counter() - started
    # Then the newest schema, which retention at this commit reads and writes: triage 0024
    # and 0025 make the reason buckets and the groups' Quality Lab counts again.
    call_command("migrate", verbosity=0)
    problems = []
    if not partitions.partitioned():
        problems.append("the table is not partitioned after the migration")
    if (after := _fingerprint()) != before:
        problems.append(f"records (count, sum of ids) were {before}, are {after}")
    if waiting := partitions.default_count():
        problems.append(f"{waiting} records in the default partition")
    return copy_seconds, seconds, problems


def row_path_rate(day: date, *, seconds: float) -> tuple[float, int]:
    """Records per second of the row-by-row prune of the day, in a transaction rolled back."""
    from django.conf import settings
    from django.db import transaction

    from triage.upkeep import retention

    day_end = datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC)
    removed = 0
    with transaction.atomic():
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            with transaction.atomic():
                pruned = retention._prune_record_batch(
                    cutoff=day_end,
                    size=settings.TRIAGE_RETENTION_BATCH_SIZE,
                    days=30,
                    pruned_at=datetime.now(UTC),
                )
            if pruned is None:
                break
            removed += pruned[0]
        elapsed = time.perf_counter() - started
        transaction.set_rollback(True)
    return removed / elapsed, removed


def drop_the_day(day: date, expected: int) -> tuple[float, list[str]]:
    from triage.models import FailureRecord, RetentionStatus
    from triage.upkeep import partitions, retention

    day_end = datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC)
    # A clock at which only this day has ended an hour's grace before a 30-day cutoff.
    now = day_end + timedelta(days=30, hours=2)
    before = FailureRecord.objects.count()
    started = time.perf_counter()
    run = retention.records_prune(days=30, batch_size=2000, channel="cli", now=now)
    seconds = time.perf_counter() - started
    problems = []
    if run.status != RetentionStatus.DONE:
        problems.append(f"the prune ended {run.status}: {run.error}")
    if run.records_deleted != expected:
        problems.append(f"the ledger says {run.records_deleted} removed, the day held {expected}")
    if (after := FailureRecord.objects.count()) != before - expected:
        problems.append(f"{before - after} records went, the day held {expected}")
    if partitions.partition_name(day) in {name for name in _tables()}:
        problems.append("the day's partition is still there")
    problems += counter_drift()
    return seconds, problems


def _tables() -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname LIKE 'triage_failurerecord_%'")
        return [row[0] for row in cursor.fetchall()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--day-records", type=int, default=1_000_000)
    parser.add_argument("--month-records", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--row-seconds", type=float, default=10.0)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    add_strict_argument(parser)
    args = parser.parse_args(argv)

    env = app_env(args.database_url)
    os.environ.update(env)
    ensure_database(args.database_url)
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "migrate", "triage", "0019", "--noinput", "-v", "0")  # one table
    empty_tables(args.database_url, keep=frozenset())
    _setup_django()
    later_counters(present=True)
    now = datetime.now(UTC)
    day = _day_start(now).date()
    print(f"loading {args.month_records:,} records of a month ({args.jobs} processes)")
    load(start=0, end=args.month_records, jobs=args.jobs, batch=args.batch, now=now)
    print(f"loading {args.day_records:,} records into {day:%Y-%m-%d}")
    load_day(records=args.day_records, jobs=args.jobs, batch=args.batch, now=now)
    later_counters(present=False)
    vacuum_analyze(args.database_url)

    verdicts = Verdicts(bench="partitions")
    total = _fingerprint()[0]
    print(f"migrating {total:,} records to partitions by day")
    copy_seconds, migration_seconds, problems = migrate_partitioned()
    verdicts.check("migration", problems)
    print(
        f"  migration {migration_seconds:.1f} s ({total / migration_seconds:,.0f} records/s); "
        f"a plain copy of the table {copy_seconds:.1f} s"
    )
    verdicts.target(
        "migration / plain copy",
        needs=("migration",),
        judge=lambda: _judge_ratio(
            ratio(migration_seconds, copy_seconds),
            TARGET_MIGRATION_AGAINST_COPY,
            f"migration of {total:,} records {migration_seconds:.1f} s",
        ),
    )

    from triage.models import FailureRecord

    start = datetime.combine(day, datetime.min.time(), UTC)
    in_day = FailureRecord.objects.filter(
        occurred_at__gte=start, occurred_at__lt=start + timedelta(days=1)
    ).count()
    print(f"retention: the row-by-row path on {day:%Y-%m-%d} for {args.row_seconds:.0f} s")
    rows_per_second, sampled = row_path_rate(day, seconds=args.row_seconds)
    verdicts.check("row path", [] if sampled else ["removed nothing"])
    print(f"  {rows_per_second:,.0f} records/s over {sampled:,} records (rolled back)")
    print(f"retention: dropping {day:%Y-%m-%d} ({in_day:,} records)")
    drop_seconds, problems = drop_the_day(day, in_day)
    verdicts.check("drop", problems)
    print(f"  {drop_seconds:.2f} s; every counter equals a recount: {not problems}")
    verdicts.target(
        f"drop a day of {in_day:,} records < {TARGET_DROP_SECONDS:.0f} s",
        needs=("drop",),
        judge=lambda: (
            drop_seconds < TARGET_DROP_SECONDS,
            f"dropping a day of {in_day:,} records took {drop_seconds:.2f} s "
            f"(target < {TARGET_DROP_SECONDS:.0f} s)",
        ),
    )
    verdicts.target(
        "drop against the row path",
        needs=("drop", "row path"),
        judge=lambda: _judge_ratio(
            ratio(in_day / rows_per_second, drop_seconds),
            TARGET_AGAINST_ROWS,
            f"row by row ({in_day / rows_per_second:.0f} s at {rows_per_second:,.0f}/s) "
            f"against the drop",
            at_least=True,
        ),
    )
    return verdicts.exit_status(
        strict=args.strict, results_dir=args.results_dir, bench="partitions"
    )


def _judge_ratio(
    value: float | None, target: float, what: str, *, at_least: bool = False
) -> tuple[bool, str]:
    if value is None:
        return False, f"{what}: no baseline"
    met = value >= target if at_least else value <= target
    sign = ">=" if at_least else "<="
    return met, f"{what}: ratio {value:.2f}x (target {sign} {target:g}x)"


if __name__ == "__main__":
    sys.exit(main())
