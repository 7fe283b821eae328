"""Reads of the teams and audit pages (and the audit API)."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.db.models import Count, Prefetch, QuerySet
from django.utils import timezone

from organisation.models import ActivityEntry, Membership, Team


def teams_list() -> QuerySet[Team]:
    """Every team with how many members and collections it has (one query)."""
    return Team.objects.annotate(
        member_count=Count("memberships", distinct=True),
        collection_count=Count("collections", distinct=True),
    ).order_by("name")


def team_detail(*, team_id: int) -> Team | None:
    members = Membership.objects.select_related("person").order_by("person__username")
    return (
        Team.objects.prefetch_related(Prefetch("memberships", queryset=members), "collections")
        .filter(pk=team_id)
        .first()
    )


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def audit_entries(
    *,
    person: str = "",
    action: str = "",
    since: date | None = None,
    until: date | None = None,
) -> QuerySet[ActivityEntry]:
    """Entries newest first; ``person`` is the name the entry kept (it outlives accounts),
    ``since`` and ``until`` whole days in the reader's time zone, both included."""
    entries = ActivityEntry.objects.order_by("-at", "-id")
    if person:
        entries = entries.filter(actor_name=person)
    if action:
        entries = entries.filter(action=action)
    if since:
        entries = entries.filter(at__gte=_day_start(since))
    if until:
        entries = entries.filter(at__lt=_day_start(until + timedelta(days=1)))
    return entries
