"""Taking removed records out of the counters: group totals, hourly buckets (per group and
per reason), daily rollups and facets, exactly what the records added (retention's batches
of rows and its dropped days share it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, models
from django.db.models import Q

from core.sql import row_sources
from triage.models import (
    QUALITY_LAB_SOURCE,
    FailureGroup,
    FailureGroupBucket,
    FailureGroupDay,
    FailureGroupFacet,
    FailureReasonBucket,
)

# Ids per IN (...) list: far below SQLite's limit on query parameters.
ID_CHUNK = 500


class RetentionDriftError(Exception):
    """A counter did not hold the records being removed: it was wrong before this prune."""


def subtract_counts(
    *,
    per_group: dict[int, list[int]],
    hours: Counter[tuple[int, datetime]],
    days: Counter[tuple[int, datetime]],
    facets: Counter[tuple[int, str, str]],
    cutoff: datetime,
) -> None:
    """Take removed records out of their groups (records, retryable, with contradictions,
    and Quality Lab's, which their source facets count), hourly buckets, daily rollups and
    facets, in the caller's transaction, which holds the groups' rows. A row left at zero
    goes, as if it had never been counted."""
    if not per_group:  # an empty day's partition
        return
    group_ids = sorted(per_group)
    try:
        _subtract_from_groups(per_group, facets)
        empty_buckets = _subtract(
            FailureGroupBucket._meta.db_table,
            ("group_id", "hour"),
            ("bigint", "timestamptz"),
            hours,
        )
        empty_days = _subtract(
            FailureGroupDay._meta.db_table,
            ("group_id", "day"),
            ("bigint", "timestamptz"),
            days,
        )
        empty_lines = _subtract(
            FailureReasonBucket._meta.db_table,
            ("stage", "reason", "hour"),
            ("text", "text", "timestamptz"),
            _per_reason(hours, group_ids),
            shared=True,
        )
        empty_facets = _subtract(
            FailureGroupFacet._meta.db_table,
            ("group_id", "dimension", "value"),
            ("bigint", "text", "text"),
            facets,
        )
    except IntegrityError as exc:  # a CHECK (count >= 0) refused the subtraction
        raise RetentionDriftError(
            f"a counter of groups {group_ids[:10]} holds fewer records than it should ({exc})"
        ) from exc
    delete_ids(FailureGroupBucket, empty_buckets)
    delete_ids(FailureGroupDay, empty_days)
    delete_ids(FailureReasonBucket, empty_lines)
    delete_ids(FailureGroupFacet, empty_facets)
    for start in range(0, len(group_ids), ID_CHUNK):
        FailureGroup.objects.filter(pk__in=group_ids[start : start + ID_CHUNK]).filter(
            Q(pruned_before__isnull=True) | Q(pruned_before__lt=cutoff)
        ).update(pruned_before=cutoff)


def _per_reason(
    hours: Counter[tuple[int, datetime]], group_ids: list[int]
) -> Counter[tuple[str, str, datetime]]:
    """The groups' hourly amounts per (stage, reason) and hour: what the reason buckets hold
    of them (a group's stage and reason never change)."""
    lines: dict[int, tuple[str, str]] = {}
    for start in range(0, len(group_ids), ID_CHUNK):
        chunk = group_ids[start : start + ID_CHUNK]
        for pk, stage, reason in FailureGroup.objects.filter(pk__in=chunk).values_list(
            "pk", "stage", "reason"
        ):
            lines[pk] = (stage, reason)
    amounts: Counter[tuple[str, str, datetime]] = Counter()
    for (group_id, hour), amount in hours.items():
        amounts[(*lines[group_id], hour)] += amount
    return amounts


def delete_ids(model: type[models.Model], ids: Sequence[int], *, extra_condition: str = "") -> int:
    """A plain DELETE by primary key: Django's delete() would load every row first to
    process the SET_NULL relations, which retention has already handled."""
    if not ids:
        return 0
    table = connection.ops.quote_name(model._meta.db_table)
    deleted = 0
    with connection.cursor() as cursor:
        for start in range(0, len(ids), ID_CHUNK):
            chunk = list(ids[start : start + ID_CHUNK])
            condition = f" AND {extra_condition}" if extra_condition else ""
            cursor.execute(
                f"DELETE FROM {table} WHERE id IN ({', '.join(['%s'] * len(chunk))}){condition}",
                chunk,
            )
            deleted += cursor.rowcount
    return deleted


def _subtract_from_groups(
    per_group: dict[int, list[int]], facets: Counter[tuple[int, str, str]]
) -> None:
    table = FailureGroup._meta.db_table
    rows = [
        (group_id, *per_group[group_id], facets[(group_id, "source", QUALITY_LAB_SOURCE)])
        for group_id in sorted(per_group)
    ]
    changed = 0
    with connection.cursor() as cursor:
        for source, params in row_sources(("bigint",) * 5, rows):
            cursor.execute(
                f"WITH d(group_id, n, r, c, q) AS ({source}) "
                f"UPDATE {table} SET count = {table}.count - d.n, "
                f"retryable_count = {table}.retryable_count - d.r, "
                f"contradiction_count = {table}.contradiction_count - d.c, "
                f"quality_lab_count = {table}.quality_lab_count - d.q, "
                f"pruned_count = {table}.pruned_count + d.n "
                f"FROM d WHERE {table}.id = d.group_id RETURNING id",
                params,
            )
            changed += len(cursor.fetchall())
    if changed != len(rows):
        raise RetentionDriftError(f"{len(rows) - changed} of the records' groups are missing")


def _subtract(
    table: str,
    key_columns: tuple[str, ...],
    pg_types: tuple[str, ...],
    amounts: Counter[Any],
    *,
    shared: bool = False,
) -> list[int]:
    """Subtract each amount from the row with its key (the same key values ingest wrote);
    return the ids of rows now at zero. Every key must match a row.

    ``shared``: rows of several groups (the reason buckets), which the caller's group locks
    do not keep apart from ingest (at the hour the retention cutoff falls in, both write
    them). They are locked first in ingest's order, its keys sorted in Python (byte order,
    "C", for text), since an UPDATE ... FROM locks in the table's order: two transactions
    could each hold a row the other waits for. SQLite has one writer at a time."""
    rows = sorted((*key, amount) for key, amount in amounts.items())
    match = " AND ".join(f"{table}.{column} = d.{column}" for column in key_columns)
    in_key_order = ", ".join(
        f'{table}.{column} COLLATE "C"' if kind == "text" else f"{table}.{column}"
        for column, kind in zip(key_columns, pg_types, strict=True)
    )
    lock = shared and connection.features.has_select_for_update
    changed: list[tuple[int, int]] = []
    with connection.cursor() as cursor:
        for source, params in row_sources((*pg_types, "bigint"), rows):
            if lock:
                cursor.execute(
                    f"WITH d({', '.join(key_columns)}, n) AS ({source}) SELECT {table}.id "
                    f"FROM {table} INNER JOIN d ON {match} ORDER BY {in_key_order} "
                    f"FOR NO KEY UPDATE OF {table}",
                    params,
                )
            cursor.execute(
                f"WITH d({', '.join(key_columns)}, n) AS ({source}) "
                f"UPDATE {table} SET count = {table}.count - d.n "
                f"FROM d WHERE {match} RETURNING id, count",
                params,
            )
            changed.extend(cursor.fetchall())
    if len(changed) != len(rows):
        firsts = sorted({row[0] for row in rows})[:10]
        raise RetentionDriftError(
            f"{table}: {len(rows) - len(changed)} of the {len(rows)} rows these records were "
            f"counted in are missing ({key_columns[0]} {firsts})"
        )
    return [row_id for row_id, count in changed if count == 0]
