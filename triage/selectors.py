"""Reads of failures and groups, shared by the API and the pages."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from triage import taxonomy
from triage.models import (
    FailureGroup,
    FailureGroupBucket,
    FailureGroupFacet,
    FailureRecord,
    IngestRejection,
    Receipt,
    Reconciliation,
)


class FailureFilters(TypedDict, total=False):
    collection: str
    stage: str
    reason: str
    tool: str
    lane: str
    execution_state: str
    source: str
    status: str
    group: int
    since: datetime
    until: datetime


def failures_list(*, filters: FailureFilters) -> QuerySet[FailureRecord]:
    records = FailureRecord.objects.all()
    for name in ("collection", "stage", "reason", "tool", "lane", "execution_state", "source"):
        if name in filters:
            records = records.filter(**{name: filters[name]})
    if "group" in filters:
        records = records.filter(group_id=filters["group"])
    if "status" in filters:
        records = records.filter(group__status=filters["status"])
    if "since" in filters:
        records = records.filter(occurred_at__gte=filters["since"])
    if "until" in filters:
        records = records.filter(occurred_at__lt=filters["until"])
    return records.order_by("-occurred_at", "-id")


def groups_list(*, filters: FailureFilters) -> QuerySet[FailureGroup]:
    groups = FailureGroup.objects.all()
    for name in ("collection", "stage", "reason", "tool", "lane", "status"):
        if name in filters:
            groups = groups.filter(**{name: filters[name]})
    for dimension in ("source", "execution_state"):
        if dimension in filters:
            groups = groups.filter(_having_facet(dimension, filters[dimension]))
    if "since" in filters:
        groups = groups.filter(last_seen__gte=filters["since"])
    if "until" in filters:
        groups = groups.filter(first_seen__lt=filters["until"])
    return groups.order_by("-last_seen", "-id")


def unmapped_reasons() -> list[dict[str, Any]]:
    """Reasons the taxonomy does not know yet, with how often they were seen."""
    return list(
        FailureGroup.objects.filter(reason_mapped=False)
        .values("stage", "reason")
        .annotate(groups=Count("id"))
        .order_by("stage", "reason")
    )


def rejections_by_code() -> list[dict[str, Any]]:
    return list(
        IngestRejection.objects.values("code").annotate(items=Count("id")).order_by("-items")
    )


# --- the triage page ------------------------------------------------------------------------

_STATUS_URGENCY = ["regressed", "open", "acknowledged", "muted", "resolved"]
UNCERTAIN_STATES = ("started_unknown", "partially_completed")


@dataclass
class GroupRow:
    group: FailureGroup
    window_count: int


@dataclass
class ReasonRow:
    stage: str
    reason: str
    info: taxonomy.ReasonInfo | None
    groups: list[GroupRow] = field(default_factory=list)
    spark: list[int] = field(default_factory=list)
    state_mix: dict[str, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(row.window_count for row in self.groups)

    @property
    def tools(self) -> list[str]:
        by_count: Counter[str] = Counter()
        for row in self.groups:
            by_count[row.group.tool or "(no tool)"] += row.window_count
        return [tool for tool, _ in by_count.most_common()]

    @property
    def collections(self) -> list[str]:
        return sorted({row.group.collection or "(none)" for row in self.groups})

    @property
    def lanes(self) -> list[str]:
        by_count: Counter[str] = Counter()
        for row in self.groups:
            by_count[row.group.lane] += row.window_count
        return [lane for lane, _ in by_count.most_common()]

    @property
    def status(self) -> str:
        statuses = {row.group.status for row in self.groups}
        return next(status for status in _STATUS_URGENCY if status in statuses)

    @property
    def statuses(self) -> Counter[str]:
        return Counter(row.group.status for row in self.groups)

    @property
    def retryable_share(self) -> float:
        total = sum(row.group.count for row in self.groups)
        return sum(row.group.retryable_count for row in self.groups) / total if total else 0.0

    @property
    def assignees(self) -> list[str]:
        return sorted(
            {row.group.assignee.get_username() for row in self.groups if row.group.assignee}
        )

    @property
    def top_group(self) -> FailureGroup:
        return max(self.groups, key=lambda row: row.window_count).group


@dataclass
class StageSection:
    stage: str
    title: str
    known: bool
    rows: list[ReasonRow]

    @property
    def count(self) -> int:
        return sum(row.count for row in self.rows)


@dataclass
class TriageOverview:
    sections: list[StageSection]
    group_ids: list[int]
    total: int
    open_groups: int
    regressed_groups: int
    uncertain_waiting: int
    spark_bins: int
    spark_hours: int


def awaiting_reconciliation() -> QuerySet[Receipt]:
    """Receipts whose outcome nobody knows yet: maybe done, maybe partly, maybe not at all."""
    return Receipt.objects.filter(execution_state__in=UNCERTAIN_STATES).exclude(
        Exists(Reconciliation.objects.filter(receipt=OuterRef("pk")))
    )


def _having_facet(dimension: str, value: str) -> Exists:
    """Groups with records of this source or execution state (from ingest's facet rows)."""
    return Exists(
        FailureGroupFacet.objects.filter(
            group=OuterRef("pk"), dimension=dimension, value=value, count__gt=0
        )
    )


def _triage_groups(*, filters: dict[str, str]) -> QuerySet[FailureGroup]:
    groups = FailureGroup.objects.all()
    status = filters.get("status", "active")
    if status == "active":
        groups = groups.filter(status__in=["open", "acknowledged", "regressed"])
    elif status != "all":
        groups = groups.filter(status=status)
    for name in ("collection", "tool", "lane"):
        if filters.get(name):
            groups = groups.filter(**{name: filters[name]})
    for dimension in ("source", "execution_state"):
        if filters.get(dimension):
            groups = groups.filter(_having_facet(dimension, filters[dimension]))
    if filters.get("q"):
        text = filters["q"]
        groups = groups.filter(
            Q(reason__icontains=text)
            | Q(tool__icontains=text)
            | Q(collection__icontains=text)
            | Q(stage__icontains=text)
        )
    return groups


def triage_groups_in_window(
    *, start: datetime, end: datetime, filters: dict[str, str]
) -> QuerySet[FailureGroup]:
    """The groups the triage page shows: matching the filters, with records in the window."""
    in_window = Q(buckets__hour__gte=_hour_floor(start), buckets__hour__lt=end)
    return (
        _triage_groups(filters=filters)
        .annotate(window_count=Sum("buckets__count", filter=in_window))
        .filter(window_count__gt=0)
    )


def _hour_floor(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def triage_overview(*, start: datetime, end: datetime, filters: dict[str, str]) -> TriageOverview:
    """Everything the triage page shows, in a fixed number of queries.

    Counts come from the hourly buckets kept by ingest, never from the raw records, so the
    page costs the same at a thousand records and at millions. Windows are aligned to whole
    hours (a "1h" window counts from the start of the previous hour).
    """
    groups = list(
        triage_groups_in_window(start=start, end=end, filters=filters)
        .select_related("assignee")
        .order_by("-window_count", "-last_seen")
    )
    spark_hours = max(24, int((end - start).total_seconds() // 3600) + 1)
    spark_bins = 24 if spark_hours <= 24 else 28 if spark_hours <= 7 * 24 else 30
    spark_start = _hour_floor(end) - timedelta(hours=spark_hours - 1)
    ids = [group.pk for group in groups]
    by_key: dict[tuple[str, str], ReasonRow] = {}
    for group in groups:
        key = (group.stage, group.reason)
        if key not in by_key:
            by_key[key] = ReasonRow(
                group.stage,
                group.reason,
                taxonomy.reason_info(group.reason),
                spark=[0] * spark_bins,
            )
        by_key[key].groups.append(GroupRow(group, group.window_count))  # type: ignore[attr-defined]
    group_key = {group.pk: (group.stage, group.reason) for group in groups}
    bin_hours = spark_hours / spark_bins
    for group_id, hour, count in (
        FailureGroupBucket.objects.filter(group_id__in=ids, hour__gte=spark_start)
        .values_list("group_id", "hour", "count")
        .iterator()
    ):
        index = min(spark_bins - 1, int(((hour - spark_start).total_seconds() / 3600) / bin_hours))
        by_key[group_key[group_id]].spark[index] += count
    for group_id, value, count in FailureGroupFacet.objects.filter(
        group_id__in=ids, dimension="execution_state"
    ).values_list("group_id", "value", "count"):
        mix = by_key[group_key[group_id]].state_mix
        mix[value] = mix.get(value, 0) + count

    sections: dict[str, StageSection] = {}
    for row in sorted(by_key.values(), key=lambda r: (taxonomy.stage_index(r.stage), -r.count)):
        if row.stage not in sections:
            info = taxonomy.STAGE_INFO.get(row.stage)
            sections[row.stage] = StageSection(
                row.stage, info.title if info else row.stage, info is not None, []
            )
        sections[row.stage].rows.append(row)
    uncertain = awaiting_reconciliation().count()
    return TriageOverview(
        sections=list(sections.values()),
        group_ids=ids,
        total=sum(row.count for row in by_key.values()),
        open_groups=sum(1 for g in groups if g.status in ("open", "regressed")),
        regressed_groups=sum(1 for g in groups if g.status == "regressed"),
        uncertain_waiting=uncertain,
        spark_bins=spark_bins,
        spark_hours=spark_hours,
    )


# --- the group page -------------------------------------------------------------------------


@dataclass
class RecordPage:
    records: list[FailureRecord]
    older_cursor: str | None
    newer_cursor: str | None


def group_records(*, group: FailureGroup, before: str | None, size: int = 25) -> RecordPage:
    """Newest first, by keyset (occurred_at, id): every page is as fast as the first."""
    records = FailureRecord.objects.filter(group=group).order_by("-occurred_at", "-id")
    if before:
        stamp, _, record_id = before.partition("_")
        moment = datetime.fromisoformat(stamp)
        records = records.filter(
            Q(occurred_at__lt=moment) | Q(occurred_at=moment, id__lt=int(record_id))
        )
    page = list(records[: size + 1])
    older = None
    if len(page) > size:
        page = page[:size]
        last = page[-1]
        older = f"{last.occurred_at.isoformat()}_{last.pk}"
    return RecordPage(records=page, older_cursor=older, newer_cursor=before)


def group_timeline(*, group: FailureGroup, days: int = 14) -> tuple[list[int], datetime]:
    """Records per hour over the last `days` days, for the group page's timeline."""
    end = _hour_floor(timezone.now())
    start = end - timedelta(hours=days * 24 - 1)
    values = [0] * (days * 24)
    for hour, count in group.buckets.filter(hour__gte=start).values_list("hour", "count"):
        values[int((hour - start).total_seconds() // 3600)] += count
    return values, start


def group_siblings(*, group: FailureGroup) -> list[FailureGroup]:
    """The same stage and reason in other tools and collections."""
    return list(
        FailureGroup.objects.filter(stage=group.stage, reason=group.reason)
        .exclude(pk=group.pk)
        .order_by("-last_seen")[:20]
    )


def group_related_receipts(*, group: FailureGroup, keys: list[str]) -> list[Receipt]:
    related = Q(tool=group.tool, collection=group.collection) if group.tool else Q(pk__in=[])
    if keys:
        related |= Q(idempotency_key__in=keys)
    return list(Receipt.objects.filter(related).order_by("-received_at")[:20])
