"""Failure records partitioned by UTC day on PostgreSQL: the one module where the databases
differ (SQLite keeps one table, and every function here says so by doing nothing).

Why by day:
- the counters' bins are UTC hours and days (`triage.timebins`), so a day's partition is
  exactly one `FailureGroupDay` row per group and 24 bucket hours, and dropping it takes
  out whole rollup rows;
- retention is set in days;
- at ten million records a month a day is about 330,000 rows, which one aggregate reads in
  well under a second. Ninety days of retention make about 95 partitions, which PostgreSQL
  15 plans without effort, and a page's window (hours to 30 days) prunes to its own days.

The layout: `triage_failurerecord` is partitioned by range of `occurred_at`, with
`triage_failurerecord_pYYYYMMDD` for each day and `triage_failurerecord_pdefault` for a
record whose day has no partition yet (normally none: the beat keeps the days of the
retention window and the days ahead). The primary key is (id, occurred_at), as a
partitioned table requires; ids still come from one sequence, so they stay unique.

What a partitioned table cannot enforce, and who does:
- one record per call (`record_one_per_span` is a plain index on every database, since
  the same span ids a day apart are another call): ingest takes a transaction-level
  advisory lock per span before it looks for the span's record (`lock_spans`), so two
  batches carrying one span store it once;
- one record per runner event: ingest stores an event and its failure together, once.

Retention drops days (`drop_day`): in one short transaction, the apps whose rows point at
the day's records are told (as for a batch of rows) and the partition is detached and
renamed `..._xYYYYMMDD`; in a second one, what its records added to every group counter,
hourly bucket, daily rollup and facet is subtracted, checked against the rollups, and the
table is dropped. Nothing is deleted row by row. A run that stops between the two leaves
the detached table, which the next run counts out and drops (`drop_detached`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from triage.models import FailureGroup, FailureRecord
from triage.upkeep.counters import subtract_counts

PARENT = FailureRecord._meta.db_table
DEFAULT = f"{PARENT}_pdefault"
_ATTACHED = re.compile(rf"^{PARENT}_p(\d{{8}})$")
_DETACHED = re.compile(rf"^{PARENT}_x(\d{{8}})$")
# Days kept ready ahead of today: a runtime's clock may run an hour ahead, and the beat
# that creates them may miss a run or two.
AHEAD_DAYS = 3
# Any constant: the class of the advisory locks that serialise one span's writers.
_SPAN_LOCK_CLASS = 0x7472_6961


def partitioned() -> bool:
    """Whether the records table is partitioned (PostgreSQL after the migration)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [PARENT])
        row = cursor.fetchone()
    return bool(row) and row[0] == "p"


def partition_name(day: date) -> str:
    return f"{PARENT}_p{day:%Y%m%d}"


def _bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time(), tzinfo=UTC)
    return start, start + timedelta(days=1)


def _children(cursor: CursorWrapper) -> list[str]:
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%s)",
        [PARENT],
    )
    return [row[0] for row in cursor.fetchall()]


def attached_days() -> list[date]:
    """The days that have a partition, oldest first."""
    if not partitioned():
        return []
    with connection.cursor() as cursor:
        names = _children(cursor)
    return sorted(_day_of(match) for name in names if (match := _ATTACHED.match(name)))


def _day_of(match: re.Match[str]) -> date:
    return datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).date()


def default_count() -> int:
    """Records in the default partition: those whose day had no partition when they came."""
    if not partitioned():
        return 0
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {DEFAULT}")
        return int(cursor.fetchone()[0])


# --- the days ahead and behind -----------------------------------------------------------------


def ensure_days(days: list[date]) -> list[date]:
    """Give each of these days a partition; return those created. A day's records that the
    default partition holds move into it in the same transaction, so none is lost or seen
    twice, and ingest into other days goes on meanwhile."""
    if not partitioned():
        return []
    existing = set(attached_days())
    created: list[date] = []
    for day in sorted(set(days) - existing):
        with transaction.atomic(), connection.cursor() as cursor:
            _create_day(cursor, day)
        created.append(day)
    return created


def _create_day(cursor: CursorWrapper, day: date) -> None:
    name = partition_name(day)
    start, end = _bounds(day)
    # Writers into the default partition wait for the few statements below; writers into
    # the other days do not (ATTACH takes only a SHARE UPDATE EXCLUSIVE lock on the parent).
    cursor.execute(f"LOCK TABLE {DEFAULT} IN SHARE ROW EXCLUSIVE MODE")
    cursor.execute(f"CREATE TABLE {name} (LIKE {PARENT} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
    in_range = "occurred_at >= %s AND occurred_at < %s"
    cursor.execute(f"INSERT INTO {name} SELECT * FROM {DEFAULT} WHERE {in_range}", [start, end])
    cursor.execute(f"DELETE FROM {DEFAULT} WHERE {in_range}", [start, end])
    # A CHECK that matches the bound lets ATTACH skip scanning the new table.
    cursor.execute(
        f"ALTER TABLE {name} ADD CONSTRAINT {name}_bound CHECK ({in_range})", [start, end]
    )
    cursor.execute(
        f"ALTER TABLE {PARENT} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)",
        [start, end],
    )
    cursor.execute(f"ALTER TABLE {name} DROP CONSTRAINT {name}_bound")


def window_days(*, now: datetime, retention_days: int) -> list[date]:
    """The days that should have a partition now: those retention keeps, and the days
    ahead."""
    today = now.astimezone(UTC).date()
    behind = retention_days + 1 if retention_days else 1
    return [today + timedelta(days=offset) for offset in range(-behind, AHEAD_DAYS + 1)]


# --- one record per span -----------------------------------------------------------------------


def lock_spans(spans: list[tuple[str, str]]) -> None:
    """Serialise the writers of these spans until the transaction ends (PostgreSQL; SQLite
    writes one transaction at a time): the span index is not unique (a partitioned table's
    could not span its partitions), so a second batch carrying a span waits here for the
    first to commit, then finds its record. Sorted, so two
    batches never wait on each other in a cycle."""
    if connection.vendor != "postgresql" or not spans:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(%s, k)) FROM ("
            "SELECT DISTINCT hashtext(t || ':' || s) AS k "
            "FROM unnest(%s::text[], %s::text[]) AS u(t, s) ORDER BY 1) AS keys",
            [_SPAN_LOCK_CLASS, [t for t, _ in spans], [s for _, s in spans]],
        )


# --- retention by whole days -------------------------------------------------------------------


@dataclass(frozen=True)
class DroppedDay:
    day: date
    records: int
    groups: set[int]


# How long after a day has passed the retention cutoff its partition waits to be dropped:
# an ingest that began this long before the prune may still be storing a record it found
# just inside the window.
INGEST_GRACE = timedelta(hours=1)


def droppable_days(cutoff: datetime) -> list[date]:
    """The attached days that ended an ingest's grace before the retention cutoff."""
    return [day for day in attached_days() if _bounds(day)[1] <= cutoff - INGEST_GRACE]


def kept_from(cutoff: datetime) -> datetime:
    """Records before this moment are pruned: the retention cutoff, or the start of the
    oldest attached day that is not droppable yet when earlier (rows in the default
    partition are pruned one by one up to it, never rows of a day that will go whole)."""
    kept = [
        start
        for day in attached_days()
        if (start := _bounds(day)[0]) < cutoff and _bounds(day)[1] > cutoff - INGEST_GRACE
    ]
    return min([cutoff, *kept])


def drop_day(
    day: date,
    *,
    before_detach: Callable[[datetime, datetime], None],
    cutoff: datetime,
) -> DroppedDay:
    """Detach a day's partition, count it out of the counters and drop it.

    `before_detach(start, end)` runs in the detaching transaction while the records are
    still readable (retention tells the apps whose rows point at them)."""
    name = partition_name(day)
    start, end = _bounds(day)
    with transaction.atomic():
        before_detach(start, end)
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {PARENT} DETACH PARTITION {name}")
            cursor.execute(f"ALTER TABLE {name} RENAME TO {_detached_name(day)}")
    return _count_out_and_drop(day, cutoff=cutoff)


def drop_detached(*, cutoff: datetime) -> list[DroppedDay]:
    """Finish the days an earlier run detached but did not drop."""
    if not partitioned():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE %s",
            [f"{PARENT}_x%"],
        )
        names = [row[0] for row in cursor.fetchall()]
    days = sorted(_day_of(match) for name in names if (match := _DETACHED.match(name)))
    return [_count_out_and_drop(day, cutoff=cutoff) for day in days]


def _detached_name(day: date) -> str:
    return f"{PARENT}_x{day:%Y%m%d}"


# Python's bool() of a JSON value, as ingest counts a record's contradictions.
_HAS_CONTRADICTIONS = (
    "contradictions NOT IN ('[]'::jsonb, '{}'::jsonb, 'null'::jsonb, '\"\"'::jsonb, "
    "'false'::jsonb, '0'::jsonb)"
)


def _count_out_and_drop(day: date, *, cutoff: datetime) -> DroppedDay:
    table = _detached_name(day)
    start, _ = _bounds(day)
    with transaction.atomic(), connection.cursor() as cursor:
        # The counts below read the whole day three times: workers beside the backend read
        # it sooner (on two cores, the three statements over a day of a million records
        # 3.2 s alone and 2.1-2.4 s with two workers), and the groups' rows are locked for
        # less time. The desk's connections start none (config/postgresql/base.py).
        workers = int(settings.DATABASE_UPKEEP_PARALLEL_WORKERS)
        cursor.execute(f"SET LOCAL max_parallel_workers_per_gather = {workers}")
        cursor.execute(
            f"SELECT group_id, count(*), count(*) FILTER (WHERE retryable), "
            f"count(*) FILTER (WHERE {_HAS_CONTRADICTIONS}) FROM {table} GROUP BY group_id "
            "ORDER BY group_id"
        )
        per_group = {row[0]: [row[1], row[2], row[3]] for row in cursor.fetchall()}
        group_ids = sorted(per_group)
        # Ingest's order: group rows in id order, before any bucket or facet row.
        list(
            FailureGroup.objects.select_for_update(no_key=True)
            .filter(pk__in=group_ids)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        cursor.execute(
            f"SELECT group_id, date_trunc('hour', occurred_at AT TIME ZONE 'UTC') "
            f"AT TIME ZONE 'UTC', count(*) FROM {table} GROUP BY 1, 2"
        )
        hours = Counter({(row[0], row[1]): row[2] for row in cursor.fetchall()})
        cursor.execute(
            f"SELECT group_id, dimension, value, count(*) FROM {table}, LATERAL (VALUES "
            "('source', source), ('lane', lane), ('execution_state', execution_state), "
            "('release', release)) AS f(dimension, value) "
            "WHERE dimension <> 'release' OR value <> '' GROUP BY 1, 2, 3"
        )
        facets = Counter({(row[0], row[1], row[2]): row[3] for row in cursor.fetchall()})
        days = Counter({(group_id, start): totals[0] for group_id, totals in per_group.items()})
        subtract_counts(per_group=per_group, hours=hours, days=days, facets=facets, cutoff=cutoff)
        cursor.execute(f"DROP TABLE {table}")
    return DroppedDay(day, sum(t[0] for t in per_group.values()), set(group_ids))


# --- the migration -----------------------------------------------------------------------------


def convert(cursor: CursorWrapper, *, to_partitioned: bool, today: date) -> None:
    """Rebuild the records table partitioned by day, or back as one table (the migration's
    two directions). Copies every row once; indexes are built after the copy. The table has
    no foreign key of its own (the model says why) and none may point at it."""
    old = f"{PARENT}_before"
    cursor.execute(f"ALTER TABLE {PARENT} RENAME TO {old}")
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname <> %s",
        [old, f"{PARENT}_pkey"],
    )
    indexes = cursor.fetchall()
    partitioning = " PARTITION BY RANGE (occurred_at)" if to_partitioned else ""
    cursor.execute(
        f"CREATE TABLE {PARENT} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS){partitioning}"
    )
    cursor.execute(f"ALTER TABLE {PARENT} ALTER COLUMN id DROP DEFAULT")
    if to_partitioned:
        cursor.execute(
            f"SELECT DISTINCT (date_trunc('day', occurred_at AT TIME ZONE 'UTC'))::date FROM {old}"
        )
        days = {row[0] for row in cursor.fetchall()}
        days |= {today + timedelta(days=offset) for offset in range(-1, AHEAD_DAYS + 1)}
        for day in sorted(days):
            start, end = _bounds(day)
            cursor.execute(
                f"CREATE TABLE {partition_name(day)} PARTITION OF {PARENT} "
                "FOR VALUES FROM (%s) TO (%s)",
                [start, end],
            )
        cursor.execute(f"CREATE TABLE {DEFAULT} PARTITION OF {PARENT} DEFAULT")
    cursor.execute(f"INSERT INTO {PARENT} SELECT * FROM {old}")
    cursor.execute(f"SELECT coalesce(max(id), 0) FROM {old}")
    next_id = cursor.fetchone()[0] + 1
    cursor.execute(f"DROP TABLE {old}")  # its identity sequence goes with it
    if to_partitioned:
        # PostgreSQL 15 has no identity columns on partitioned tables: a sequence it owns.
        cursor.execute(f"CREATE SEQUENCE {PARENT}_id_seq OWNED BY {PARENT}.id")
        cursor.execute(f"SELECT setval('{PARENT}_id_seq', %s, false)", [next_id])
        cursor.execute(
            f"ALTER TABLE {PARENT} ALTER COLUMN id SET DEFAULT nextval('{PARENT}_id_seq')"
        )
        cursor.execute(
            f"ALTER TABLE {PARENT} ADD CONSTRAINT {PARENT}_pkey PRIMARY KEY (id, occurred_at)"
        )
    else:
        cursor.execute(f"ALTER TABLE {PARENT} ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY")
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{PARENT}', 'id'), %s, false)", [next_id]
        )
        cursor.execute(f"ALTER TABLE {PARENT} ADD CONSTRAINT {PARENT}_pkey PRIMARY KEY (id)")
    for name, definition in indexes:
        cursor.execute(_index_sql(name, definition, old=old, to_partitioned=to_partitioned))


# The one table's unique constraint: a plain index of the same name when partitioned (one
# failure per runner event is kept by ingest, see the module's docstring).
_UNIQUE_CONSTRAINT = f"{PARENT}_runner_event_id_key"


def _index_sql(name: str, definition: str, *, old: str, to_partitioned: bool) -> str:
    target = re.sub(rf" ON (ONLY )?(public\.)?{old} ", f" ON {PARENT} ", definition, count=1)
    if to_partitioned:
        return target.replace("CREATE UNIQUE INDEX", "CREATE INDEX", 1)
    if name == _UNIQUE_CONSTRAINT:
        return f"ALTER TABLE {PARENT} ADD CONSTRAINT {name} UNIQUE (runner_event_id)"
    return target
