"""Reads of failures and groups, shared by the API and the pages."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from django.db.models import Count, Exists, OuterRef, QuerySet

from triage.models import FailureGroup, FailureGroupFacet, FailureRecord, IngestRejection


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
            groups = groups.filter(
                Exists(
                    FailureGroupFacet.objects.filter(
                        group=OuterRef("pk"),
                        dimension=dimension,
                        value=filters[dimension],
                        count__gt=0,
                    )
                )
            )
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
