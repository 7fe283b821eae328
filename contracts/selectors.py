"""Reads of the contracts page, the API and the CLI: seed 004's rollout plan per tool.

Everything is read from the scan's per-tool daily counters, findings and the tool
policies (plus reconciliations per tool, a small table): a handful of queries whatever the
number of records.

A page or an API answer reads the tools of the collections its reader sees
(organisation.access); ranks and the first batch are then counted among those tools, so they
tell nothing of another team's. Without a reader (the CLI, the triage pages' badge) they are
the whole desk's."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Sum
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext, gettext_lazy, ngettext

from contracts.models import (
    CONTRACT_FIELDS,
    ENVELOPE_FIELDS,
    RETRY_RULE_KINDS,
    ContractFinding,
    FindingKind,
    ScanMark,
    Standing,
    ToolDay,
)
from organisation.access import seen_by
from triage.badges import ToolBadge, ToolKey
from triage.models import FailureGroup, Receipt, Reconciliation, ToolPolicy
from triage.receipts import group_links, run_key

DEFAULT_DAYS = 30
MAX_DAYS = 365
WINDOW_CHOICES = (7, 30, 90)
FIRST_BATCH_SIZE = 5
# Seed 004's thresholds: a 30-day failure rate of 1% or more, or 10 retries a month.
FAILURE_RATE_THRESHOLD = 0.01
RETRIES_A_MONTH_THRESHOLD = 10
HIGH_STAKES_GRADES = ("external_write", "privileged")
# A tool "sends the contract" when each of the five fields is in this share of its items.
CONTRACTED_SHARE = 0.9
LIST_LIMIT = 100

# The seed's four criteria: a short name for the column, the seed's sentence on hover.
CRITERIA: dict[str, Any] = {
    "failing": gettext_lazy("fails or retried"),
    "stakes": gettext_lazy("side effect"),
    "manual_check": gettext_lazy("checked by hand"),
    "duplicates": gettext_lazy("ran twice"),
}
CRITERIA_MEANING: dict[str, Any] = {
    "failing": gettext_lazy("fails often or is retried often"),
    "stakes": gettext_lazy("external write, credential, cost or production change"),
    "manual_check": gettext_lazy("state checked by hand after a timeout"),
    "duplicates": gettext_lazy("a duplicate execution happened"),
}


@dataclass(frozen=True)
class Criterion:
    code: str
    met: bool
    figure: str

    @property
    def label(self) -> str:
        return str(CRITERIA[self.code])

    @property
    def meaning(self) -> str:
        return str(CRITERIA_MEANING[self.code])


@dataclass
class ToolContract:
    collection: str
    tool: str
    failures: int = 0
    successes_runner: int = 0
    successes_receipts: int = 0
    receipts: int = 0
    retries: int = 0
    uncertain: int = 0
    not_started_claims: int = 0
    sent: dict[str, int] = field(default_factory=dict)
    envelopes: int = 0
    envelope_sent: dict[str, int] = field(default_factory=dict)
    side_effect: str = ""  # the policy's grade; "" when no policy names the tool
    approval_required: bool = False
    reconciliations: int = 0
    findings: dict[str, int] = field(default_factory=dict)
    days: int = DEFAULT_DAYS
    rank: int = 0
    first_batch: bool = False

    @property
    def key(self) -> ToolKey:
        return (self.collection, self.tool)

    @property
    def successes(self) -> int:
        # Runner events and receipts may both report one run: the larger count, never both.
        return max(self.successes_runner, self.successes_receipts)

    @property
    def failed_calls(self) -> int:
        """Failure records and failed receipts may both report one call: the larger count."""
        return max(self.failures, self.receipts - self.successes_receipts)

    @property
    def failure_rate(self) -> float | None:
        """Failed calls over failed plus successful ones; None when no success reached the
        desk (never a made-up rate)."""
        if not self.successes:
            return None
        return self.failed_calls / (self.failed_calls + self.successes)

    @property
    def retries_a_month(self) -> float:
        return self.retries * 30 / self.days

    @property
    def items(self) -> int:
        return self.failures + self.receipts

    def share(self, name: str) -> float | None:
        return self.sent.get(name, 0) / self.items if self.items else None

    def envelope_share(self, name: str) -> float | None:
        return self.envelope_sent.get(name, 0) / self.envelopes if self.envelopes else None

    @property
    def shares(self) -> list[tuple[str, float | None]]:
        return [(name, self.share(name)) for name in CONTRACT_FIELDS]

    @property
    def envelope_shares(self) -> list[tuple[str, float | None]]:
        return [(name, self.envelope_share(name)) for name in ENVELOPE_FIELDS]

    @property
    def coverage(self) -> str:
        """ "all": every field in CONTRACTED_SHARE of the items; "none": no field at all."""
        if not self.items:
            return "none"
        if all(self.sent.get(name, 0) == 0 for name in CONTRACT_FIELDS):
            return "none"
        if all((self.share(name) or 0) >= CONTRACTED_SHARE for name in CONTRACT_FIELDS):
            return "all"
        return "some"

    @property
    def violations(self) -> int:
        return sum(self.findings.get(kind, 0) for kind in RETRY_RULE_KINDS)

    @property
    def rule_counts(self) -> list[tuple[str, str, int]]:
        return [
            (kind, str(FindingKind(kind).label), self.findings.get(kind, 0))
            for kind in RETRY_RULE_KINDS
        ]

    @property
    def contradicted(self) -> int:
        return self.findings.get(FindingKind.NOT_STARTED_CONTRADICTED, 0)

    @property
    def contradicted_share(self) -> float | None:
        if not self.not_started_claims:
            return None
        return min(1.0, self.contradicted / self.not_started_claims)

    @property
    def double_completions(self) -> int:
        return self.findings.get(FindingKind.DOUBLE_COMPLETION, 0)

    @property
    def meets(self) -> dict[str, bool]:
        """Which of the seed's criteria the tool meets (what the ranking reads)."""
        rate = self.failure_rate
        return {
            "failing": (rate is not None and rate >= FAILURE_RATE_THRESHOLD)
            or self.retries_a_month >= RETRIES_A_MONTH_THRESHOLD,
            "stakes": self.side_effect in HIGH_STAKES_GRADES or self.approval_required,
            "manual_check": self.reconciliations > 0 or self.uncertain > 0,
            "duplicates": self.double_completions > 0,
        }

    @property
    def met(self) -> list[str]:
        return [code for code, met in self.meets.items() if met]

    @functools.cached_property
    def criteria(self) -> list[Criterion]:
        """The criteria with their figures, in words (only for the rows a page shows)."""
        return _criteria(self)

    @property
    def state(self) -> str:
        """Where the tool stands: contracted and keeping it, contracted and breaking it,
        first in line without it, or neither."""
        if self.coverage == "all":
            return "violating" if self.violations else "keeping"
        if self.first_batch:
            return "first_in_line"
        return "partial" if self.coverage == "some" else "uncontracted"


def percent_text(value: float | None) -> str:
    """A share as a percent, with one decimal under 10% (1.0% and 0.9% differ to the seed);
    a dash when there was nothing to share."""
    if value is None:
        return "\u2013"
    if value == 0:
        return "0%"
    percent = value * 100
    return f"{percent:.1f}%" if percent < 10 else f"{percent:.0f}%"


def _criteria(tool: ToolContract) -> list[Criterion]:
    rate = tool.failure_rate
    rate_text = (
        gettext("no success data")
        if rate is None
        else gettext("failure rate %(rate)s") % {"rate": percent_text(rate)}
    )
    retries_text = ngettext(
        "%(count)s retry a month", "%(count)s retries a month", round(tool.retries_a_month)
    ) % {"count": f"{tool.retries_a_month:.0f}"}
    grade = tool.side_effect or gettext("no policy")
    checked = ngettext(
        "%(findings)s finding recorded", "%(findings)s findings recorded", tool.reconciliations
    ) % {"findings": tool.reconciliations}
    uncertain = ngettext("%(count)s uncertain run", "%(count)s uncertain runs", tool.uncertain) % {
        "count": tool.uncertain
    }
    doubles = ngettext(
        "%(count)s double completion", "%(count)s double completions", tool.double_completions
    ) % {"count": tool.double_completions}
    figures = {
        "failing": f"{rate_text}; {retries_text}",
        "stakes": grade
        + (" \u00b7 " + gettext("approval required") if tool.approval_required else ""),
        "manual_check": f"{checked}; {uncertain}",
        "duplicates": doubles,
    }
    return [Criterion(code, met, figures[code]) for code, met in tool.meets.items()]


_GRADE_WEIGHT = {"privileged": 3, "external_write": 2, "internal_write": 1}


def _rank_key(tool: ToolContract) -> tuple[Any, ...]:
    return (
        -len(tool.met),
        -_GRADE_WEIGHT.get(tool.side_effect, 0),
        -(tool.failed_calls + tool.retries),
        tool.collection,
        tool.tool,
    )


@dataclass(frozen=True)
class ContractsFilters:
    days: int = DEFAULT_DAYS
    collection: str | None = None
    tool: str | None = None


@dataclass(frozen=True)
class ContractsOverview:
    tools: list[ToolContract]
    filters: ContractsFilters
    since: datetime
    scanned_at: datetime | None

    limit: int | None = LIST_LIMIT  # rows each section shows (None: all)

    def _shown(self, tools: list[ToolContract]) -> list[ToolContract]:
        return tools if self.limit is None else tools[: self.limit]

    @property
    def first_batch(self) -> list[ToolContract]:
        return [tool for tool in self.tools if tool.first_batch]

    @property
    def ranked(self) -> list[ToolContract]:
        return self._shown(self.tools)

    @property
    def sending(self) -> list[ToolContract]:
        return self._shown([tool for tool in self.tools if tool.items])

    @property
    def keeping_rules(self) -> list[ToolContract]:
        return self._shown(
            [tool for tool in self.tools if tool.violations or tool.receipts or tool.retries]
        )

    @property
    def self_reports(self) -> list[ToolContract]:
        return self._shown(
            [tool for tool in self.tools if tool.not_started_claims or tool.contradicted]
        )

    @property
    def since_day(self) -> date:
        """The window's first day, a UTC day (the counters' days are UTC days)."""
        return self.since.date()

    @property
    def has_envelopes(self) -> bool:
        return any(tool.envelopes for tool in self.tools)

    @property
    def cut(self) -> bool:
        """Some section shows fewer tools than it has."""
        return self.limit is not None and len(self.tools) > self.limit


def _since(now: datetime, days: int) -> datetime:
    return (
        (now - timedelta(days=days - 1))
        .astimezone(UTC)
        .replace(hour=0, minute=0, second=0, microsecond=0)
    )


def _filtered(queryset: Any, filters: ContractsFilters, prefix: str = "") -> Any:
    if filters.collection is not None:
        queryset = queryset.filter(**{f"{prefix}collection": filters.collection})
    if filters.tool is not None:
        queryset = queryset.filter(**{f"{prefix}tool": filters.tool})
    return queryset


def contracts_overview(
    *,
    now: datetime,
    filters: ContractsFilters,
    limit: int | None = LIST_LIMIT,
    user: Any = None,
) -> ContractsOverview:
    """Every tool with counters in the window that ``user`` sees, ranked by the seed's
    criteria; the first FIRST_BATCH_SIZE that meet any criterion are the seed's first batch.
    Ranks are counted before the filters, so a filter shows a tool at the place it holds
    among all the tools its reader sees."""
    since = _since(now, filters.days)
    tools: dict[ToolKey, ToolContract] = {}
    sums = {name: Sum(name) for name in ToolDay.COUNTERS}
    for row in (
        ToolDay.objects.filter(seen_by(user), day__gte=since.date())
        .values("collection", "tool")
        .annotate(**sums)
    ):
        tool = ToolContract(collection=row["collection"], tool=row["tool"], days=filters.days)
        tool.failures = row["failures"] or 0
        tool.successes_runner = row["successes_runner"] or 0
        tool.successes_receipts = row["successes_receipts"] or 0
        tool.receipts = row["receipts"] or 0
        tool.retries = row["retries"] or 0
        tool.uncertain = row["uncertain"] or 0
        tool.not_started_claims = row["not_started_claims"] or 0
        tool.sent = {name: row[f"sent_{name}"] or 0 for name in CONTRACT_FIELDS}
        tool.envelopes = row["envelopes"] or 0
        tool.envelope_sent = {
            name: row["envelope_" + name.replace(".", "_")] or 0 for name in ENVELOPE_FIELDS
        }
        tools[tool.key] = tool
    for kind_row in (
        ContractFinding.objects.filter(seen_by(user), occurred_at__gte=since)
        .values("collection", "tool", "kind")
        .annotate(count=Count("pk"))
    ):
        key = (kind_row["collection"], kind_row["tool"])
        tool = tools.setdefault(key, ToolContract(*key, days=filters.days))
        tool.findings[kind_row["kind"]] = kind_row["count"]
    for reconciled in (
        Reconciliation.objects.filter(
            seen_by(user, "receipt__collection"), created_at__gte=since, corrects__isnull=True
        )
        .values("receipt__collection", "receipt__tool")
        .annotate(count=Count("pk"))
    ):
        key = (reconciled["receipt__collection"], reconciled["receipt__tool"])
        if key in tools:
            tools[key].reconciliations = reconciled["count"]
    policies = {
        (collection, tool): (grade, approval)
        for collection, tool, grade, approval in ToolPolicy.objects.values_list(
            "collection", "tool", "side_effect", "approval_required"
        )
    }
    for tool in tools.values():
        grade, approval = policies.get(tool.key) or policies.get(("", tool.tool)) or ("", False)
        tool.side_effect, tool.approval_required = grade, approval
    ranked = sorted(tools.values(), key=_rank_key)
    batch = 0
    for position, tool in enumerate(ranked, start=1):
        tool.rank = position
        if tool.met and batch < FIRST_BATCH_SIZE:
            tool.first_batch = True
            batch += 1
    shown = [
        tool
        for tool in ranked
        if (filters.collection is None or tool.collection == filters.collection)
        and (filters.tool is None or tool.tool == filters.tool)
    ]
    scanned = ScanMark.objects.aggregate(at=Max("scanned_at"))["at"]
    return ContractsOverview(
        tools=shown, filters=filters, since=since, scanned_at=scanned, limit=limit
    )


# --- the triage pages' badge --------------------------------------------------------------


def standing_refresh(*, now: datetime) -> None:
    overview = contracts_overview(now=now, filters=ContractsFilters())
    batch = [
        {"collection": tool.collection, "tool": tool.tool, "sends_none": tool.coverage == "none"}
        for tool in overview.first_batch
    ]
    Standing.objects.update_or_create(
        pk=1, defaults={"first_batch": batch, "window_days": DEFAULT_DAYS, "computed_at": now}
    )


_MEMO: dict[str, Any] = {"at": 0.0, "value": None}
MEMO_SECONDS = 30.0


def _uncontracted() -> frozenset[ToolKey]:
    """First-batch tools whose runtimes send none of the five fields, read at most every
    MEMO_SECONDS per process (the scan refreshes it once a minute)."""
    if _MEMO["value"] is None or time.monotonic() - _MEMO["at"] > MEMO_SECONDS:
        standing = Standing.objects.filter(pk=1).values_list("first_batch", flat=True).first()
        _MEMO["value"] = frozenset(
            (entry["collection"], entry["tool"])
            for entry in (standing or [])
            if entry.get("sends_none")
        )
        _MEMO["at"] = time.monotonic()
    return _MEMO["value"]


def forget_memo() -> None:
    _MEMO["value"] = None


def settle_memo(value: frozenset[ToolKey] = frozenset()) -> None:
    """As after a read a moment ago (tests measure the pages' steady state with it)."""
    _MEMO["value"] = value
    _MEMO["at"] = time.monotonic()


def uncontracted_first_batch(keys: Iterable[ToolKey]) -> dict[ToolKey, ToolBadge]:
    wanted = _uncontracted()
    badges = {}
    for key in keys:
        if key in wanted:
            collection, tool = key
            query = {"tool": tool} | ({"collection": collection} if collection else {})
            badges[key] = ToolBadge(
                label=gettext("no contract"),
                title=gettext(
                    "%(tool)s is in the first batch to put under a next-action contract, and "
                    "its runtimes send none of the five fields"
                )
                % {"tool": tool},
                url=f"{reverse('contracts:home')}?{urlencode(query)}",
            )
    return badges


# --- a tool's findings, with their examples -----------------------------------------------


@dataclass(frozen=True)
class FindingRow:
    finding: ContractFinding
    url: str  # where its example is triaged
    title: str


def findings_list(
    *,
    now: datetime,
    filters: ContractsFilters,
    kind: str | None = None,
    limit: int = LIST_LIMIT,
    user: Any = None,
) -> tuple[list[FindingRow], int]:
    since = _since(now, filters.days)
    queryset = _filtered(
        ContractFinding.objects.filter(seen_by(user), occurred_at__gte=since), filters
    )
    if kind:
        queryset = queryset.filter(kind=kind)
    total = queryset.count()
    findings = list(queryset.order_by("-occurred_at", "-pk")[:limit])
    receipts = {
        receipt.pk: receipt
        for receipt in Receipt.objects.filter(
            pk__in=[f.example_id for f in findings if f.example_type == "receipt"]
        ).only("pk", "collection", "tool", "reason", "code")
    }
    links = group_links(run_key(receipt) for receipt in receipts.values())
    groups = set(
        FailureGroup.objects.filter(
            pk__in=[f.group_id for f in findings if f.group_id]
        ).values_list("pk", flat=True)
    )
    rows = []
    for finding in findings:
        url, title = "", ""
        if finding.example_type == "record" and finding.group_id in groups:
            url = reverse("triage:group", args=[finding.group_id])
            title = gettext("the failure group of %(tool)s") % {"tool": finding.tool}
        elif finding.example_type == "receipt" and finding.example_id in receipts:
            link = links.get(run_key(receipts[finding.example_id]))
            if link is not None:
                url, title = link.url, link.title
        rows.append(FindingRow(finding=finding, url=url, title=title))
    return rows, total


def new_findings(*, since: datetime, kinds: Iterable[str] = RETRY_RULE_KINDS) -> Any:
    """Findings the scan stored since a moment, oldest first (the alert kind reads these)."""
    return ContractFinding.objects.filter(created_at__gte=since, kind__in=list(kinds)).order_by(
        "created_at", "pk"
    )
