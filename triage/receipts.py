"""Reads of the receipts page (seed 004).

Four questions, each answered with a bounded number of queries whatever the table size:
which uncertain work still waits for someone to reconcile it, which receipts contradict
other evidence, which operations burned through their retry budget, and what policy
blocked. Every list is capped; its total is counted separately when the cap is reached.
Each row shows one verdict (the most cautious lane that applies) and links its run to the
failure group it belongs to, resolved for the whole page in one query.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import Coalesce, Lower
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.timesince import timesince
from django.utils.translation import gettext, gettext_lazy, ngettext

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

# One definition of "completed-like", shared with how ingest gives receipts their lane.
from triage.models import (
    AuditEvent,
    FailureGroup,
    Receipt,
    Reconciliation,
    ReconciliationFinding,
    ToolPolicy,
)
from triage.selectors import awaiting_reconciliation, seen_by
from triage.timezones import moment_text
from triage.vocabulary.lanes import SUCCESS_RESULTS, most_cautious_lane

COMPLETED_RESULTS = tuple(sorted(SUCCESS_RESULTS))
LIST_LIMIT = 50
RECENT_RECONCILIATIONS = 20
# The retry-budget scan reads failed receipts of the last 24 hours, at most this many rows,
# worst operations first; the page says so when the limit cut the scan short.
BUDGET_LOOKBACK = timedelta(hours=24)
BUDGET_SCAN_LIMIT = 5000

Row = TypeVar("Row")


def _occurred() -> Coalesce:
    """When the run happened: its end, else its start, else when the desk received it."""
    return Coalesce("ended_at", "started_at", "received_at")


def _capped(queryset: QuerySet[Any, Row], limit: int) -> tuple[list[Row], int]:
    """Up to `limit` rows and the total; the count query runs only when the cap is hit."""
    rows = list(queryset[: limit + 1])
    if len(rows) <= limit:
        return rows, len(rows)
    return rows[:limit], queryset.count()


def _receipt_rows(queryset: QuerySet[Receipt]) -> QuerySet[Receipt]:
    return queryset.defer("extra").annotate(occurred=_occurred())


def _completed_like() -> Q:
    """Needs the `result_lower` alias; results are codes the runtimes spell as they like."""
    return Q(execution_state="completed", result_lower__in=COMPLETED_RESULTS)


# --- links from a run to its failure group -------------------------------------------------

# Groups read to resolve the links of one page (newest first); a page shows at most a few
# hundred runs, of far fewer tools.
GROUP_LINK_SCAN = 2000


@dataclass(frozen=True)
class GroupLink:
    url: str
    title: str  # what the link opens, for its tooltip


# A run as the links know it: (collection, tool, the codes that may name its group's reason).
RunKey = tuple[str, str, tuple[str, ...]]


def run_key(receipt: Any) -> RunKey:
    codes = tuple(code for code in (receipt.reason, receipt.code) if code)
    return (receipt.collection, receipt.tool, codes)


def group_links(keys: Iterable[RunKey]) -> dict[RunKey, GroupLink]:
    """Where each run's failures are triaged, in one query for the whole page.

    Receipts carry no group: a run's group is the one of its collection and tool whose
    reason is the receipt's reason or code, else the tool's only group there. When the tool
    has several groups and none matches, the link opens the triage page filtered to the
    tool, over 30 days, every status and source, where those groups are listed.
    """
    wanted = set(keys)
    if not wanted:
        return {}
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    rows = (
        FailureGroup.objects.filter(
            collection__in={key[0] for key in wanted}, tool__in={key[1] for key in wanted}
        )
        .order_by("-last_seen", "-pk")
        .values_list("pk", "collection", "tool", "reason")[:GROUP_LINK_SCAN]
    )
    for pk, collection, tool, reason in rows:
        groups.setdefault((collection, tool), []).append((pk, reason))
    links = {}
    for key in wanted:
        collection, tool, codes = key
        candidates = groups.get((collection, tool), [])
        matching = [pk for pk, reason in candidates if reason in codes]
        if not matching and len(candidates) == 1:
            matching = [candidates[0][0]]
        if matching:
            links[key] = GroupLink(
                url=reverse("triage:group", args=[matching[0]]),
                title=gettext("the failure group of %(tool)s") % {"tool": tool},
            )
            continue
        query = {"tool": tool, "window": "30d", "status": "all", "source": "any"}
        if collection:
            query["collection"] = collection
        links[key] = GroupLink(
            url=f"{reverse('triage:home')}?{urlencode(query)}",
            title=gettext("the failure groups of %(tool)s (no single group matches this run)")
            % {"tool": tool},
        )
    return links


def _linked(rows: Iterable[Any], links: dict[RunKey, GroupLink]) -> None:
    """Attach `group_link` to rows that carry a receipt (in place)."""
    for row in rows:
        row.group_link = links.get(run_key(row))


# --- tool policies ------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryBudget:
    failures: int
    window_seconds: int
    source: str  # "collection/tool", "*/tool" or "default"

    @property
    def window(self) -> timedelta:
        return timedelta(seconds=self.window_seconds)


DEFAULT_RETRY_BUDGET = RetryBudget(failures=3, window_seconds=300, source="default")


@dataclass(frozen=True)
class ToolPolicies:
    """Every tool policy, loaded once per page (one row per tool, a small table)."""

    by_tool: dict[tuple[str, str], ToolPolicy]

    def policy_for(self, *, collection: str, tool: str) -> ToolPolicy | None:
        return self.by_tool.get((collection, tool)) or self.by_tool.get(("", tool))

    def retry_budget(self, *, collection: str, tool: str) -> RetryBudget:
        policy = self.policy_for(collection=collection, tool=tool)
        if policy is None:
            return DEFAULT_RETRY_BUDGET
        return RetryBudget(
            # A budget of 0 failures would flag operations that never failed.
            failures=max(1, policy.retry_budget_failures),
            window_seconds=policy.retry_budget_window_seconds,
            source=f"{policy.collection or '*'}/{policy.tool}",
        )

    def smallest_failure_budget(self) -> int:
        budgets = [max(1, policy.retry_budget_failures) for policy in self.by_tool.values()]
        return min([DEFAULT_RETRY_BUDGET.failures, *budgets])


def tool_policies() -> ToolPolicies:
    policies = ToolPolicy.objects.only(
        "collection",
        "tool",
        "idempotency_lookup",
        "retry_budget_failures",
        "retry_budget_window_seconds",
    )
    return ToolPolicies({(policy.collection, policy.tool): policy for policy in policies})


# --- 1. uncertain work awaiting reconciliation --------------------------------------------


def receipt_awaits_reconciliation(*, receipt: Receipt) -> bool:
    return awaiting_reconciliation().filter(pk=receipt.pk).exists()


@dataclass(frozen=True)
class QueueItem:
    receipt: Any  # a Receipt annotated with `occurred` and `group_link`
    lookup: str  # how the tool's policy says to find the operation by its key, if it says
    waited: str  # "2 hours": one unit is enough to see what is old

    @property
    def waiting_since(self) -> datetime:
        return self.receipt.occurred

    @property
    def verdict(self) -> str:
        """At least reconcile_first unless the tool only reads (Receipt.verdict)."""
        return str(self.receipt.verdict)

    @property
    def blocks_retry(self) -> bool:
        """reconcile_first work is never retried before someone knows what happened."""
        return self.verdict in ("reconcile_first", "manual_investigation")


# What a finding means for the next run, as the page says it.
FINDING_CONSEQUENCES: dict[str, Any] = {
    ReconciliationFinding.APPLIED: gettext_lazy(
        "Done remotely: do not retry; treat the run as completed."
    ),
    ReconciliationFinding.NOT_APPLIED: gettext_lazy(
        "Nothing happened remotely: a retry is now safe with the same idempotency key."
    ),
    ReconciliationFinding.PARTIALLY_APPLIED: gettext_lazy(
        "Partly done: do not retry; finish or undo the rest by hand."
    ),
}
NOT_APPLIED_WITHOUT_KEY = gettext_lazy(
    "Nothing happened remotely: a retry is safe, but give it an idempotency key."
)


def finding_consequence(*, finding: str, receipt: Any) -> str:
    if finding == ReconciliationFinding.NOT_APPLIED and not receipt.idempotency_key:
        return str(NOT_APPLIED_WITHOUT_KEY)
    return str(FINDING_CONSEQUENCES.get(finding, ""))


@dataclass(frozen=True)
class ReconciledRun:
    """A reconciled run: its current finding and the earlier ones it corrected, newest first."""

    current: Reconciliation
    earlier: list[Reconciliation]

    @property
    def receipt(self) -> Any:
        return self.current.receipt

    @property
    def consequence(self) -> str:
        return finding_consequence(finding=self.current.finding, receipt=self.receipt)


@dataclass(frozen=True)
class ReconciliationQueue:
    items: list[QueueItem]
    total: int
    recent: list[ReconciledRun]


def recently_reconciled(
    *, limit: int = RECENT_RECONCILIATIONS, user: Any = None
) -> list[ReconciledRun]:
    """The runs reconciled most recently, each by its current finding (the one nobody
    corrected), with every earlier finding of the run kept beneath it."""
    current = list(
        Reconciliation.objects.filter(
            seen_by(user, "receipt__collection"), corrected_by__isnull=True
        )
        .select_related("actor", "receipt")
        .defer("receipt__extra")
        .order_by("-created_at", "-pk")[:limit]
    )
    earlier: dict[int, list[Reconciliation]] = {}
    if current:
        history = (
            Reconciliation.objects.filter(receipt_id__in=[row.receipt_id for row in current])
            .exclude(pk__in=[row.pk for row in current])
            .select_related("actor")
            .order_by("-created_at", "-pk")[: limit * 10]
        )
        for row in history:
            earlier.setdefault(row.receipt_id, []).append(row)
    runs = [ReconciledRun(current=row, earlier=earlier.get(row.receipt_id, [])) for row in current]
    return runs


def reconciliation_queue(
    *, now: datetime, policies: ToolPolicies | None = None, user: Any = None
) -> ReconciliationQueue:
    """Uncertain work, oldest first, and the reconciliations recorded most recently (of the
    collections ``user`` may see; None: all of them)."""
    policies = policies or tool_policies()
    receipts: list[Any]  # annotated with `occurred`
    receipts, total = _capped(
        _receipt_rows(awaiting_reconciliation(user=user)).order_by("occurred", "pk"), LIST_LIMIT
    )
    items = []
    for receipt in receipts:
        policy = policies.policy_for(collection=receipt.collection, tool=receipt.tool)
        lookup = policy.idempotency_lookup if policy is not None else ""
        if lookup and receipt.idempotency_key:
            lookup = lookup.replace("{key}", receipt.idempotency_key)
        waited = timesince(receipt.occurred, now, depth=1)
        items.append(QueueItem(receipt=receipt, lookup=lookup, waited=waited))
    recent = recently_reconciled(user=user)
    reconciled = [run.receipt for run in recent]
    links = group_links(run_key(receipt) for receipt in [*receipts, *reconciled])
    _linked([*receipts, *reconciled], links)
    return ReconciliationQueue(items=items, total=total, recent=recent)


# --- 2. contradictions --------------------------------------------------------------------


@dataclass
class ContradictionRow:
    when: datetime | None
    tool_run_id: str  # or "N runs" for rules about several receipts
    tool: str
    collection: str
    idempotency_key: str
    lane: str  # the lane the receipt carries ("" for rules about several receipts)
    claim: str  # what the receipt says
    evidence: str  # what says otherwise
    reason: str = ""
    code: str = ""
    verdict: str = ""  # the one lane the row shows: the most cautious (set by the rule)
    group_link: GroupLink | None = None


@dataclass(frozen=True)
class ContradictionRule:
    key: str
    title: StrOrPromise
    why: StrOrPromise  # why it matters, in one line
    # (limit, user): the rows of the collections the user may see (None: all), and the total.
    rows: Callable[[int, Any], tuple[list[ContradictionRow], int]]
    # The least cautious lane a run breaking this rule can have: the row's verdict is this
    # or the receipt's own lane, whichever restricts automation more.
    floor: str = "reconcile_first"


@dataclass(frozen=True)
class ContradictionFindings:
    rule: ContradictionRule
    rows: list[ContradictionRow]
    total: int


def outbound_calls() -> QuerySet[AuditEvent]:
    """Audit events that saw a request leave, whether or not a status came back."""
    return AuditEvent.objects.exclude(method="", host="")


def receipts_not_started_but_called() -> QuerySet[Receipt]:
    """Rule (a): the receipt says not_started, the runtime's own audit saw the call.

    An audit event matches by tool_run_id, or by idempotency key when the event names no
    run: a retry reuses the key, so a call made by another run of the same key says nothing
    about this one.
    """
    calls = outbound_calls()
    by_run = calls.filter(tool_run_id=OuterRef("tool_run_id")).exclude(tool_run_id="")
    by_key = calls.filter(idempotency_key=OuterRef("idempotency_key"), tool_run_id="").exclude(
        idempotency_key=""
    )
    return (
        Receipt.objects.filter(execution_state="not_started")
        .filter(Exists(by_run) | Exists(by_key))
        .annotate(
            audit_id=Coalesce(
                Subquery(by_run.order_by("occurred_at", "pk").values("pk")[:1]),
                Subquery(by_key.order_by("occurred_at", "pk").values("pk")[:1]),
            )
        )
    )


def conflicting_completions(*, user: Any = None) -> QuerySet[Receipt, dict[str, Any]]:
    """Rule (b): one idempotency key completed more than once for different targets or payloads
    (among the receipts of the collections ``user`` may see; None: all of them).

    Blank fingerprints and hashes are missing evidence, not a difference.
    """
    has_target = ~Q(target_fingerprint="")
    has_payload = ~Q(payload_hash="")
    return (
        Receipt.objects.filter(seen_by(user))
        .exclude(idempotency_key="")
        .alias(result_lower=Lower("result"))
        .filter(_completed_like())
        .values("idempotency_key")
        .annotate(
            runs=Count("pk"),
            targets=Count("target_fingerprint", distinct=True, filter=has_target),
            payloads=Count("payload_hash", distinct=True, filter=has_payload),
            target_low=Min("target_fingerprint", filter=has_target),
            target_high=Max("target_fingerprint", filter=has_target),
            payload_low=Min("payload_hash", filter=has_payload),
            payload_high=Max("payload_hash", filter=has_payload),
            tool_low=Min("tool"),
            tool_high=Max("tool"),
            collection_low=Min("collection"),
            last_at=Max(_occurred()),
        )
        .filter(Q(targets__gt=1) | Q(payloads__gt=1))
        .order_by("-last_at", "idempotency_key")
    )


def external_writes_without_key() -> QuerySet[Receipt]:
    """Rule (c): an external write with no idempotency key (ingest stores the code too)."""
    return Receipt.objects.filter(
        Q(side_effect="external_write", idempotency_key="")
        | Q(contradictions__icontains='"external_write_without_idempotency_key"')
    )


def retryable_while_policy_blocked() -> QuerySet[Receipt]:
    """Rule (d): a runtime marked as retryable what policy blocked (ingest stores the code too)."""
    return Receipt.objects.filter(
        Q(retryable=True, lane="policy_blocked")
        | Q(contradictions__icontains='"retryable_in_policy_blocked"')
    )


def _not_started_rows(limit: int, user: Any) -> tuple[list[ContradictionRow], int]:
    receipts: list[Any]  # annotated with `occurred` and `audit_id`
    receipts, total = _capped(
        _receipt_rows(receipts_not_started_but_called().filter(seen_by(user))).order_by(
            "-occurred", "-pk"
        ),
        limit,
    )
    calls = AuditEvent.objects.in_bulk([receipt.audit_id for receipt in receipts])
    rows = []
    for receipt in receipts:
        call = calls.get(receipt.audit_id)
        seen = gettext("an outbound call")
        if call is not None:
            target = f"{call.method} {call.host}{call.path}".strip()
            status = f" → {call.status}" if call.status else gettext(" (no status)")
            when = moment_text(call.occurred_at, "seconds", zone=True)
            # Whole sentences, not a glued "matched by" + name: each language orders its own.
            if call.tool_run_id:
                seen = gettext("audit saw %(call)s at %(when)s (matched by run id)")
            else:
                seen = gettext("audit saw %(call)s at %(when)s (matched by idempotency key)")
            seen %= {"call": f"{target}{status}", "when": when}
        said = " ".join(part for part in (receipt.result, receipt.code) if part)
        rows.append(_row(receipt, claim=f"not_started ({said})", evidence=seen))
    return rows, total


def _conflicting_completion_rows(limit: int, user: Any) -> tuple[list[ContradictionRow], int]:
    groups, total = _capped(conflicting_completions(user=user), limit)
    rows = []
    for group in groups:
        differences = []
        if group["targets"] > 1:
            low, high = _short(group["target_low"]), _short(group["target_high"])
            differences.append(
                ngettext(
                    "%(count)d target (%(low)s ≠ %(high)s)",
                    "%(count)d targets (%(low)s ≠ %(high)s)",
                    group["targets"],
                )
                % {"count": group["targets"], "low": low, "high": high}
            )
        if group["payloads"] > 1:
            low, high = _short(group["payload_low"]), _short(group["payload_high"])
            differences.append(
                ngettext(
                    "%(count)d payload (%(low)s ≠ %(high)s)",
                    "%(count)d payloads (%(low)s ≠ %(high)s)",
                    group["payloads"],
                )
                % {"count": group["payloads"], "low": low, "high": high}
            )
        tools = group["tool_low"]
        if group["tool_high"] != tools:
            tools = f"{tools}, {group['tool_high']}"
        rows.append(
            ContradictionRow(
                when=group["last_at"],
                tool_run_id=f"{group['runs']} runs",
                tool=tools,
                collection=group["collection_low"],
                idempotency_key=group["idempotency_key"],
                lane="",
                claim=ngettext(
                    "completed %(count)d time", "completed %(count)d times", group["runs"]
                )
                % {"count": group["runs"]},
                evidence="; ".join(differences),
            )
        )
    return rows, total


def _short(value: str) -> str:
    """Hashes are long; their start and end are enough to tell two apart on screen."""
    return value if len(value) <= 32 else f"{value[:18]}…{value[-8:]}"


def _external_write_rows(limit: int, user: Any) -> tuple[list[ContradictionRow], int]:
    receipts, total = _capped(
        _receipt_rows(external_writes_without_key().filter(seen_by(user))).order_by(
            "-occurred", "-pk"
        ),
        limit,
    )
    return [
        _row(
            receipt,
            claim=f"external_write, {receipt.execution_state}",
            evidence=gettext(
                "no idempotency key: nothing to look the write up by, a retry may repeat it"
            ),
        )
        for receipt in receipts
    ], total


def _retryable_blocked_rows(limit: int, user: Any) -> tuple[list[ContradictionRow], int]:
    receipts, total = _capped(
        _receipt_rows(retryable_while_policy_blocked().filter(seen_by(user))).order_by(
            "-occurred", "-pk"
        ),
        limit,
    )
    return [
        _row(
            receipt,
            claim="retryable: true",
            evidence=f"lane {receipt.lane or 'policy_blocked'} ({receipt.code or receipt.result})",
        )
        for receipt in receipts
    ], total


def _row(receipt: Any, *, claim: str, evidence: str) -> ContradictionRow:
    return ContradictionRow(
        when=receipt.occurred,
        tool_run_id=receipt.tool_run_id,
        tool=receipt.tool,
        collection=receipt.collection,
        idempotency_key=receipt.idempotency_key,
        lane=receipt.lane,
        claim=claim,
        evidence=evidence,
        reason=receipt.reason,
        code=receipt.code,
    )


CONTRADICTION_RULES = (
    ContradictionRule(
        key="not-started-but-called",
        title=gettext_lazy("Claims not_started, but the audit saw the call"),
        why=gettext_lazy(
            "A tool's report is a claim: if the call left, a retry may do the work twice."
        ),
        rows=_not_started_rows,
        floor="reconcile_first",
    ),
    ContradictionRule(
        key="conflicting-completions",
        title=gettext_lazy("One idempotency key, different completed operations"),
        why=gettext_lazy(
            "A key must name one operation; a lookup by this key may return the wrong one."
        ),
        rows=_conflicting_completion_rows,
        floor="manual_investigation",
    ),
    ContradictionRule(
        key="external-write-without-key",
        title=gettext_lazy("External write without an idempotency key"),
        why=gettext_lazy("Uncertain work without a key cannot be reconciled, only guessed at."),
        rows=_external_write_rows,
        floor="manual_investigation",
    ),
    ContradictionRule(
        key="retryable-policy-blocked",
        title=gettext_lazy("Retryable although policy blocked it"),
        why=gettext_lazy(
            "policy_blocked means stop; a runtime that retries it is working around the policy."
        ),
        rows=_retryable_blocked_rows,
        floor="policy_blocked",
    ),
)


def contradictions(*, limit: int = LIST_LIMIT, user: Any = None) -> list[ContradictionFindings]:
    findings = []
    for rule in CONTRADICTION_RULES:
        rows, total = rule.rows(limit, user)
        for row in rows:
            row.verdict = most_cautious_lane(row.lane, rule.floor)
        findings.append(ContradictionFindings(rule=rule, rows=rows, total=total))
    every_row = [row for finding in findings for row in finding.rows]
    _linked(every_row, group_links(run_key(row) for row in every_row))
    return findings


# --- 3. operations over their retry budget ------------------------------------------------


@dataclass(frozen=True)
class OverBudget:
    collection: str
    tool: str
    idempotency_key: str
    target_fingerprint: str  # names the operation when there is no key
    budget: RetryBudget
    peak: int  # most failures inside one budget window
    peak_start: datetime
    peak_end: datetime
    failures: int  # failures in the whole lookback
    last_at: datetime
    last_run: str
    last_result: str
    last_code: str
    group_link: GroupLink | None = None


@dataclass(frozen=True)
class RetryBudgetReport:
    operations: list[OverBudget]
    since: datetime
    scanned: int
    truncated: bool  # the scan limit cut some operations short


def _peak(times: list[datetime], window: timedelta) -> tuple[int, datetime, datetime]:
    """Most events within any span of `window` (times sorted), and where that span is."""
    best, best_start, best_end = 0, times[0], times[0]
    start = 0
    for end, moment in enumerate(times):
        while moment - times[start] > window:
            start += 1
        if end - start + 1 > best:
            best, best_start, best_end = end - start + 1, times[start], moment
    return best, best_start, best_end


def operations_over_budget(
    *, now: datetime, policies: ToolPolicies | None = None, user: Any = None
) -> RetryBudgetReport:
    """Operations with at least N failures within W seconds, N and W from the tool's policy.

    An operation is (collection, tool, idempotency key), or (collection, tool, target
    fingerprint) when the run had no key; a receipt with neither names no operation and is
    left out. SQL keeps only operations that failed at least as often as the smallest budget
    in the lookback; the sliding window runs here over at most BUDGET_SCAN_LIMIT rows.
    """
    policies = policies or tool_policies()
    since = now - BUDGET_LOOKBACK
    operation = [F("collection"), F("tool"), F("idempotency_key"), F("operation_target")]
    failed = (
        Receipt.objects.filter(seen_by(user), received_at__gte=since)
        .exclude(idempotency_key="", target_fingerprint="")
        .alias(result_lower=Lower("result"))
        .exclude(_completed_like())
        .annotate(
            occurred=_occurred(),
            operation_target=Case(
                When(idempotency_key="", then=F("target_fingerprint")), default=Value("")
            ),
        )
        .filter(occurred__gte=since, occurred__lte=now)
        .annotate(operation_failures=Window(Count("pk"), partition_by=operation))
        .filter(operation_failures__gte=policies.smallest_failure_budget())
        .order_by("-operation_failures", *operation, "occurred", "pk")
        .values_list(
            "collection",
            "tool",
            "idempotency_key",
            "operation_target",
            "occurred",
            "tool_run_id",
            "result",
            "code",
        )
    )
    rows = list(failed[: BUDGET_SCAN_LIMIT + 1])
    truncated = len(rows) > BUDGET_SCAN_LIMIT
    rows = rows[:BUDGET_SCAN_LIMIT]

    by_operation: dict[tuple[str, str, str, str], list[tuple[Any, ...]]] = {}
    for row in rows:
        by_operation.setdefault(row[:4], []).append(row)
    over = []
    for (collection, tool, key, target), runs in by_operation.items():
        budget = policies.retry_budget(collection=collection, tool=tool)
        if len(runs) < budget.failures:
            continue
        peak, peak_start, peak_end = _peak([run[4] for run in runs], budget.window)
        if peak < budget.failures:
            continue
        last = runs[-1]
        over.append(
            OverBudget(
                collection=collection,
                tool=tool,
                idempotency_key=key,
                target_fingerprint=target,
                budget=budget,
                peak=peak,
                peak_start=peak_start,
                peak_end=peak_end,
                failures=len(runs),
                last_at=last[4],
                last_run=last[5],
                last_result=last[6],
                last_code=last[7],
            )
        )
    over.sort(key=lambda operation: operation.last_at, reverse=True)
    keys: list[RunKey] = [(op.collection, op.tool, (op.last_code,)) for op in over]
    links = group_links(keys)
    over = [
        dataclasses.replace(op, group_link=links.get(key))
        for op, key in zip(over, keys, strict=True)
    ]
    return RetryBudgetReport(operations=over, since=since, scanned=len(rows), truncated=truncated)


# --- 4. policy blocks ---------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyBlocks:
    receipts: list[Any]  # Receipts annotated with `occurred`
    total: int


def policy_blocks(*, user: Any = None) -> PolicyBlocks:
    receipts, total = _capped(
        _receipt_rows(Receipt.objects.filter(seen_by(user), lane="policy_blocked")).order_by(
            "-occurred", "-pk"
        ),
        LIST_LIMIT,
    )
    _linked(receipts, group_links(run_key(receipt) for receipt in receipts))
    return PolicyBlocks(receipts=receipts, total=total)


# --- the page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceiptsOverview:
    queue: ReconciliationQueue
    contradictions: list[ContradictionFindings]
    retry_budget: RetryBudgetReport
    policy_blocks: PolicyBlocks

    @property
    def contradiction_total(self) -> int:
        return sum(findings.total for findings in self.contradictions)


def receipts_overview(*, now: datetime, user: Any = None) -> ReceiptsOverview:
    """The page's four lists, of the collections ``user`` may see (None: all of them)."""
    policies = tool_policies()
    return ReceiptsOverview(
        queue=reconciliation_queue(now=now, policies=policies, user=user),
        contradictions=contradictions(user=user),
        retry_budget=operations_over_budget(now=now, policies=policies, user=user),
        policy_blocks=policy_blocks(user=user),
    )
