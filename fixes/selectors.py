"""What the fixes page, the API and the other pages' panels read: stored fixes, one row each.

A reader sees the fixes of the collections they see (organisation.access, on the fix's
collection), and every count and tally is of those; without a reader, of the whole desk."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet

from fixes import efficacy
from fixes.models import SPANS, Fix, Verdict
from organisation.access import visible_q
from triage.models import Runbook

LIST_LIMIT = 100
VERDICTS = [verdict for verdict in Verdict.values]


@dataclass(frozen=True)
class Filters:
    days: int = 90
    kind: str = ""
    verdict: str = ""
    runbook: int | None = None
    person: str = ""
    collection: str = ""
    tool: str = ""
    group: int | None = None

    def as_query(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if value not in ("", None)}


@dataclass
class Tally:
    """How many fixes of one runbook, kind or person held, and so on."""

    key: Any
    counts: dict[str, int] = field(default_factory=dict)
    runbook: Runbook | None = None  # the runbook a tally per runbook is of

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def judged(self) -> int:
        return sum(
            self.counts.get(verdict, 0)
            for verdict in (Verdict.HELD, Verdict.PARTLY_HELD, Verdict.NOT_HELD)
        )


def visible_fixes(*, user: Any) -> QuerySet[Fix]:
    """The fixes ``user`` sees; every fix without a reader (the CLI)."""
    return Fix.objects.all() if user is None else Fix.objects.filter(visible_q(user, "collection"))


def fixes_filtered(filters: Filters, *, now: datetime, user: Any = None) -> QuerySet[Fix]:
    rows = visible_fixes(user=user).filter(fixed_at__gte=now - timedelta(days=filters.days))
    if filters.kind:
        rows = rows.filter(kind=filters.kind)
    if filters.verdict:
        rows = rows.filter(verdict=filters.verdict)
    if filters.runbook is not None:
        rows = rows.filter(runbook_id=filters.runbook)
    if filters.person:
        rows = rows.filter(actor_label=filters.person)
    if filters.collection:
        rows = rows.filter(collection=filters.collection)
    if filters.tool:
        rows = rows.filter(tool=filters.tool)
    if filters.group is not None:
        rows = rows.filter(group_id=filters.group)
    return rows


def _verdict_counts() -> dict[str, Count]:
    return {verdict: Count("pk", filter=Q(verdict=verdict)) for verdict in VERDICTS}


def tallies(rows: QuerySet[Fix], by: str) -> list[Tally]:
    """Verdict counts per value of `by` (runbook, kind or actor_label), most fixes first."""
    keyed = rows.values(by).annotate(**_verdict_counts(), fixes=Count("pk")).order_by("-fixes", by)
    return [Tally(row[by], {verdict: row[verdict] for verdict in VERDICTS}) for row in keyed]


@dataclass(frozen=True)
class Overview:
    filters: Filters
    rows: list[Fix]
    total: int
    by_runbook: list[Tally]
    by_kind: list[Tally]
    by_person: list[Tally]


def fixes_overview(*, filters: Filters, now: datetime, user: Any = None) -> Overview:
    rows = fixes_filtered(filters, now=now, user=user)
    listed = list(
        rows.select_related("group", "runbook", "verification_run", "suggestion").order_by(
            "-fixed_at", "-id"
        )[:LIST_LIMIT]
    )
    by_runbook = [tally for tally in tallies(rows, "runbook") if tally.key is not None]
    runbooks = {fix.runbook_id: fix.runbook for fix in listed if fix.runbook is not None}
    missing = [tally.key for tally in by_runbook if tally.key not in runbooks]
    if missing:
        runbooks.update(Runbook.objects.in_bulk(missing))
    for tally in by_runbook:
        tally.runbook = runbooks.get(tally.key)
    return Overview(
        filters=filters,
        rows=listed,
        total=rows.count(),
        by_runbook=by_runbook,
        by_kind=tallies(rows, "kind"),
        by_person=tallies(rows, "actor_label"),
    )


def readings(fix: Fix) -> dict[str, efficacy.Reading]:
    """Each span's reading, as far as it goes (an open span reads its counts so far)."""
    return {span: efficacy.read(**fix.figures(span)) for span in SPANS}


def runbook_tallies(runbook_ids: list[int], *, user: Any = None) -> dict[int, Tally]:
    """Verdict counts per runbook (every fix that used it, of the collections ``user`` sees),
    for the runbook cards."""
    if not runbook_ids:
        return {}
    rows = visible_fixes(user=user).filter(runbook_id__in=runbook_ids)
    return {tally.key: tally for tally in tallies(rows, "runbook")}
