"""Reads of alerts: what each rule kind matches now, and what the alerts page shows.

Every match is read from what is already counted or bounded: groups and their facet and
hourly counters (new_group, regression, spike), uncertain receipts counted per tool in SQL
(reconcile_waiting), the receipts page's capped retry-budget scan (retry_budget), the newest
finished run of each suite (qualitylab_regression) and the promotable suggestions
(suggestion_waiting). No kind scans failure records.

Teams (organisation.access). A rule names one collection or none, and that decides whose it
is. A rule with a collection belongs to the team that owns the collection: every kind above
matches that collection's things only, so a team's rule never pages anyone about another
team's failures, and its team sees and edits it. A rule with no collection watches the whole
desk: it is seen like a thing of no collection (by admins and by the team named in
TRIAGE_UNOWNED_COLLECTIONS_TEAM), and a team member cannot make one. While no team exists,
everyone sees every rule, as before.

Channels carry no collection: they are the desk's shared infrastructure. Everyone who may read
alerts sees them (name, kind, masked address: a rule picks from them), each counting only the
rules its reader sees; managing them is for the roles people hold outside teams (alerts.views).
A delivery is seen with its rule; a channel's test delivery, which names no rule, with the
channel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, Max, Min, OuterRef, Prefetch, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext, ngettext

from alerts.models import (
    PRODUCTION_SOURCE,
    Channel,
    Delivery,
    Rule,
    RuleKind,
    RuleSubjectState,
)
from contracts.selectors import new_findings
from learning.models import Suggestion, SuggestionStatus
from organisation.access import visible_q
from qualitylab.models import CaseRun, RunStatus
from qualitylab.selectors import previous_finished_run, run_scope
from triage.models import (
    QUALITY_LAB_SOURCE,
    FailureGroup,
    FailureGroupBucket,
    FailureGroupFacet,
    GroupStatus,
)
from triage.receipts import operations_over_budget
from triage.selectors import awaiting_reconciliation, having_production_records
from triage.timebins import hour_floor

# A kind that matches more than this many subjects in one evaluation reads no further.
MATCH_LIMIT = 500


@dataclass(frozen=True)
class Match:
    """One subject a rule matched: what it is, the window it matched in, and its counts."""

    subject: str  # "group:12", "operation:shop/createRefund/key-1", "suite:3:smoke", ...
    window: str  # with rule and subject, the delivery's idempotency key
    group: dict[str, Any]  # the payload's "group": id, stage, reason, tool, collection, lane, url
    count: int
    window_start: datetime
    window_end: datetime
    first_seen: datetime | None
    summary: str  # one line for email, Slack and the delivery log
    # For a regression: the release whose records reopened the group ("" when none named).
    release: str = ""


def absolute_url(path: str) -> str:
    return settings.DESK_BASE_URL.rstrip("/") + path


def _group_payload(group: FailureGroup) -> dict[str, Any]:
    return {
        "id": group.pk,
        "stage": group.stage,
        "reason": group.reason,
        "tool": group.tool,
        "collection": group.collection,
        "lane": group.lane,
        "url": absolute_url(reverse("triage:group", args=[group.pk])),
    }


def _group_summary(group: FailureGroup) -> str:
    where = gettext("%(tool)s in %(collection)s") % {
        "tool": group.tool or "-",
        "collection": group.collection or gettext("no collection"),
    }
    return f"{group.stage}/{group.reason} · {where}"


def _facet(dimension: str, value: str) -> Exists:
    return Exists(
        FailureGroupFacet.objects.filter(
            group=OuterRef("pk"), dimension=dimension, value=value, count__gt=0
        )
    )


def groups_for_rule(
    rule: Rule, *, group_ids: Iterable[int] | None = None
) -> QuerySet[FailureGroup]:
    """Groups the rule's filters select, never a muted one (a muted group never alerts)."""
    groups = FailureGroup.objects.exclude(status=GroupStatus.MUTED)
    if group_ids is not None:
        groups = groups.filter(pk__in=list(group_ids))
    for name in ("collection", "stage", "reason", "tool", "lane"):
        value = getattr(rule, name)
        if value:
            groups = groups.filter(**{name: value})
    if rule.source == PRODUCTION_SOURCE:
        groups = groups.filter(having_production_records())
    elif rule.source:
        groups = groups.filter(_facet("source", rule.source))
    if rule.execution_state:
        groups = groups.filter(_facet("execution_state", rule.execution_state))
    return groups.only(*_GROUP_FIELDS)


_GROUP_FIELDS = (
    "pk", "collection", "stage", "reason", "tool", "lane", "status", "count", "first_seen",
    "last_seen", "status_changed_at", "regressed_in_release",
)  # fmt: skip


# --- what ingest published ------------------------------------------------------------------


def ingest_matches(
    rules: Sequence[Rule],
    *,
    new_group_ids: Iterable[int],
    regressed_group_ids: Iterable[int],
    now: datetime,
) -> list[tuple[Rule, list[Match]]]:
    """What each new_group and regression rule matches among a batch's groups: the groups
    and their facets are read once, every rule's filters applied here (a batch costs the
    same few queries with one rule or twenty)."""
    new_ids, regressed_ids = set(new_group_ids), set(regressed_group_ids)
    if not rules or not (new_ids or regressed_ids):
        return []
    groups = list(
        FailureGroup.objects.filter(pk__in=list(new_ids | regressed_ids))
        .exclude(status=GroupStatus.MUTED)  # a muted group never alerts
        .order_by("pk")
        .only(*_GROUP_FIELDS)[: 2 * MATCH_LIMIT]
    )
    facets: dict[int, set[tuple[str, str]]] = {}
    if any(rule.source or rule.execution_state for rule in rules):
        for group_id, dimension, value in FailureGroupFacet.objects.filter(
            group_id__in=[group.pk for group in groups],
            dimension__in=("source", "execution_state"),
            count__gt=0,
        ).values_list("group_id", "dimension", "value"):
            facets.setdefault(group_id, set()).add((dimension, value))
    fired = []
    for rule in rules:
        if rule.kind == RuleKind.NEW_GROUP:
            chosen = [g for g in groups if g.pk in new_ids and _selects(rule, g, facets)]
            matches = [_new_group_match(group, now=now) for group in chosen[:MATCH_LIMIT]]
        elif rule.kind == RuleKind.REGRESSION:
            # Still regressed when evaluated (resolved again in between: nothing to say).
            chosen = [
                g for g in groups
                if g.pk in regressed_ids and g.status == GroupStatus.REGRESSED
                and _selects(rule, g, facets)
            ]  # fmt: skip
            matches = [_regression_match(group, now=now) for group in chosen[:MATCH_LIMIT]]
        else:
            continue
        if matches:
            fired.append((rule, matches))
    return fired


def _selects(rule: Rule, group: FailureGroup, facets: dict[int, set[tuple[str, str]]]) -> bool:
    """The rule's filters against one group, as `groups_for_rule` applies them in SQL."""
    for name in ("collection", "stage", "reason", "tool", "lane"):
        value = getattr(rule, name)
        if value and getattr(group, name) != value:
            return False
    mix = facets.get(group.pk, set())
    if rule.source == PRODUCTION_SOURCE:
        if not any(name == "source" and value != QUALITY_LAB_SOURCE for name, value in mix):
            return False
    elif rule.source and ("source", rule.source) not in mix:
        return False
    return not (rule.execution_state and ("execution_state", rule.execution_state) not in mix)


def _new_group_match(group: FailureGroup, *, now: datetime) -> Match:
    return Match(
        subject=f"group:{group.pk}",
        window="new",
        group=_group_payload(group),
        count=group.count,
        window_start=group.first_seen,
        window_end=now,
        first_seen=group.first_seen,
        summary=gettext("new group %(group)s") % {"group": _group_summary(group)},
    )


def _regression_match(group: FailureGroup, *, now: datetime) -> Match:
    since = group.status_changed_at or now
    return Match(
        subject=f"group:{group.pk}",
        window=f"regressed@{since:%Y%m%dT%H%M%S.%f}",
        group=_group_payload(group),
        count=group.count,
        window_start=since,
        window_end=now,
        first_seen=group.first_seen,
        summary=(
            gettext("regression %(group)s in release %(release)s")
            % {"group": _group_summary(group), "release": group.regressed_in_release}
            if group.regressed_in_release
            else gettext("regression %(group)s") % {"group": _group_summary(group)}
        ),
        release=group.regressed_in_release,
    )


# --- what the beat task reads ---------------------------------------------------------------


def spike_matches(rule: Rule, *, now: datetime) -> list[Match]:
    """Groups with at least N records in the last W hours (the hourly counters, the current
    hour included) and at least X times the count of the W hours before."""
    hours = rule.spike_window_hours or 1
    current_start = hour_floor(now) - timedelta(hours=hours - 1)
    previous_start = current_start - timedelta(hours=hours)
    groups = groups_for_rule(rule)
    counts = (
        FailureGroupBucket.objects.filter(hour__gte=previous_start, group__in=groups.values("pk"))
        .values("group_id")
        .annotate(
            current=Sum("count", filter=Q(hour__gte=current_start), default=0),
            previous=Sum("count", filter=Q(hour__lt=current_start), default=0),
        )
        .filter(current__gte=rule.spike_count or 1)
        .order_by("-current")[:MATCH_LIMIT]
    )
    factor = rule.spike_factor or 1.0
    spiking = {row["group_id"]: row for row in counts if row["current"] >= factor * row["previous"]}
    matches = []
    for group in groups.filter(pk__in=list(spiking)):
        row = spiking[group.pk]
        matches.append(
            Match(
                subject=f"group:{group.pk}",
                window=f"spike@{current_start:%Y%m%dT%H}",
                group=_group_payload(group),
                count=row["current"],
                window_start=current_start,
                window_end=now,
                first_seen=group.first_seen,
                summary=gettext(
                    "spike %(group)s: %(current)s in %(hours)s h, %(previous)s in the %(hours)s h "
                    "before"
                )
                % {
                    "group": _group_summary(group),
                    "current": row["current"],
                    "previous": row["previous"],
                    "hours": hours,
                },
            )
        )
    return matches


def _minute(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M}"


def reconcile_waiting_matches(rule: Rule, *, now: datetime) -> list[Match]:
    """Uncertain work nobody reconciled for T minutes, counted per (collection, tool)."""
    cutoff = now - timedelta(minutes=rule.wait_minutes or 1)
    receipts = awaiting_reconciliation().filter(received_at__lte=cutoff)
    for name in ("collection", "reason", "tool", "lane", "execution_state"):
        value = getattr(rule, name)
        if value:
            receipts = receipts.filter(**{name: value})
    rows = (
        receipts.values("collection", "tool")
        .annotate(waiting=Count("pk"), oldest=Min("received_at"), newest=Max("received_at"))
        .order_by("oldest")[:MATCH_LIMIT]
    )
    url = absolute_url(reverse("triage:receipts") + "#queue")
    return [
        Match(
            subject=f"reconcile:{row['collection']}/{row['tool']}",
            window=_minute(now),
            group={
                "id": None,
                "stage": "execute",
                "reason": "",
                "tool": row["tool"],
                "collection": row["collection"],
                "lane": "reconcile_first",
                "url": url,
            },
            count=row["waiting"],
            window_start=row["oldest"],
            window_end=cutoff,
            first_seen=row["oldest"],
            summary=ngettext(
                "%(count)d uncertain run of %(tool)s in %(collection)s waiting for reconciliation",
                "%(count)d uncertain runs of %(tool)s in %(collection)s waiting for reconciliation",
                row["waiting"],
            )
            % {
                "count": row["waiting"],
                "tool": row["tool"],
                "collection": row["collection"] or gettext("no collection"),
            },
        )
        for row in rows
    ]


def retry_budget_matches(rule: Rule, *, now: datetime) -> list[Match]:
    """Operations over their retry budget (the receipts page's capped, indexed scan)."""
    report = operations_over_budget(now=now)
    url = absolute_url(reverse("triage:receipts") + "#retry-budget")
    matches = []
    for operation in report.operations:
        if rule.collection and operation.collection != rule.collection:
            continue
        if rule.tool and operation.tool != rule.tool:
            continue
        name = operation.idempotency_key or operation.target_fingerprint
        matches.append(
            Match(
                subject=f"operation:{operation.collection}/{operation.tool}/{name}"[:300],
                window=f"peak@{operation.peak_start:%Y%m%dT%H%M%S}",
                group={
                    "id": None,
                    "stage": "execute",
                    "reason": operation.last_code,
                    "tool": operation.tool,
                    "collection": operation.collection,
                    "lane": "retry_safe",
                    "url": url,
                },
                count=operation.peak,
                window_start=operation.peak_start,
                window_end=operation.peak_end,
                first_seen=operation.peak_start,
                summary=gettext(
                    "%(tool)s (%(name)s) failed %(peak)s times in %(seconds)s s; its budget is "
                    "%(budget)s"
                )
                % {
                    "tool": operation.tool,
                    "name": name,
                    "peak": operation.peak,
                    "seconds": operation.budget.window_seconds,
                    "budget": operation.budget.failures,
                },
            )
        )
    return matches[:MATCH_LIMIT]


def qualitylab_regression_matches(
    rule: Rule, *, now: datetime, lookback: timedelta = timedelta(days=1)
) -> list[Match]:
    """The newest finished run of each suite and mode: cases that passed in the suite's run
    before and fail now, or a pass rate under R. A re-run of a run's failed cases is never
    judged (its pass rate says nothing of the suite, and its cases are compared with the run
    they came from on the run's page). A run already judged for this rule is skipped before
    its results are read."""
    runs = (
        CaseRun.objects.filter(
            status=RunStatus.DONE, finished_at__gte=now - lookback, rerun_of__isnull=True
        )
        .select_related("collection", "suite")
        .order_by("collection_id", "suite_id", "mode", "-finished_at", "-pk")
    )
    if rule.collection:
        runs = runs.filter(collection__name=rule.collection)
    newest: dict[tuple[int, int | None, str], CaseRun] = {}
    for run in runs[:MATCH_LIMIT]:
        newest.setdefault((run.collection_id, run.suite_id, run.mode), run)
    judged = dict(RuleSubjectState.objects.filter(rule=rule).values_list("subject", "last_window"))
    matches = []
    for (collection_id, suite_id, mode), run in newest.items():
        subject = f"suite:{collection_id}:{suite_id or 'all'}" + (f":{mode}" if mode else "")
        window = f"run{run.pk}"
        if judged.get(subject) == window:
            continue
        regressed = _regressed_cases(run)
        rate = run.passed / run.done if run.done else None
        below = (
            rule.pass_rate_floor is not None and rate is not None and rate < rule.pass_rate_floor
        )
        if not regressed and not below:
            continue
        suite = run_scope(run)
        what = []
        if regressed:
            what.append(
                ngettext(
                    "%(count)d case passed before and fails now: %(cases)s",
                    "%(count)d cases passed before and fail now: %(cases)s",
                    len(regressed),
                )
                % {"count": len(regressed), "cases": ", ".join(regressed[:5])}
            )
        if below and rate is not None:
            what.append(
                gettext("pass rate %(rate)s under %(floor)s")
                % {"rate": f"{rate:.0%}", "floor": f"{rule.pass_rate_floor:.0%}"}
            )
        matches.append(
            Match(
                subject=subject,
                window=window,
                group={
                    "id": None,
                    "stage": "quality_lab",
                    "reason": "case_regressed" if regressed else "pass_rate_below",
                    "tool": "",
                    "collection": run.collection.name,
                    "lane": "",
                    "url": absolute_url(reverse("qualitylab:run", args=[run.pk])),
                },
                count=len(regressed) or run.failed,
                window_start=run.started_at or run.created_at,
                window_end=run.finished_at or now,
                first_seen=None,
                summary=gettext("Quality Lab run %(run)s of %(collection)s (%(suite)s): %(what)s")
                % {
                    "run": run.pk,
                    "collection": run.collection.name,
                    "suite": suite,
                    "what": "; ".join(what),
                },
            )
        )
    return matches


def _regressed_cases(run: CaseRun) -> list[str]:
    previous = previous_finished_run(run=run)
    if previous is None:
        return []
    before: dict[str, bool] = {}
    for case_id, passed in previous.results.values_list("case__case_id", "passed"):
        before[case_id] = before.get(case_id, True) and passed
    now_failing: dict[str, bool] = {}
    for case_id, passed in run.results.filter(allowed_failure=False).values_list(
        "case__case_id", "passed"
    ):
        now_failing[case_id] = now_failing.get(case_id, False) or not passed
    return sorted(case for case, failing in now_failing.items() if failing and before.get(case))


def suggestion_waiting_matches(rule: Rule, *, now: datetime) -> list[Match]:
    """Promotable suggestions nobody decided for T minutes (since they last changed)."""
    cutoff = now - timedelta(minutes=rule.wait_minutes or 1)
    suggestions = Suggestion.objects.filter(
        status=SuggestionStatus.PROMOTABLE, updated_at__lte=cutoff
    ).select_related("collection")
    if rule.collection:
        suggestions = suggestions.filter(collection__name=rule.collection)
    return [
        Match(
            subject=f"suggestion:{suggestion.pk}",
            window=_minute(now),
            group={
                "id": None,
                "stage": "learn",
                "reason": suggestion.type,
                "tool": suggestion.target,
                "collection": suggestion.collection.name,
                "lane": "",
                "url": absolute_url(reverse("learning:suggestion", args=[suggestion.pk])),
            },
            count=suggestion.observations,
            window_start=suggestion.updated_at,
            window_end=cutoff,
            first_seen=suggestion.created_at,
            summary=gettext(
                "promotable %(type)s suggestion for %(target)s in %(collection)s waits for a "
                "reviewer"
            )
            % {
                "type": suggestion.type,
                "target": suggestion.target or "-",
                "collection": suggestion.collection.name,
            },
        )
        for suggestion in suggestions.order_by("updated_at", "pk")[:MATCH_LIMIT]
    ]


# New contract findings are looked for this far back (the beat runs every minute; a rule
# made later never fires for what happened before it).
CONTRACT_LOOKBACK = timedelta(hours=1)


def contract_violation_matches(rule: Rule, *, now: datetime) -> list[Match]:
    """Tools with retry rules broken since the last look, one subject per tool: a new
    finding moves the window (its newest id), so each fires once, throttled per tool."""
    since = max(now - CONTRACT_LOOKBACK, rule.created_at)
    findings = new_findings(since=since)
    if rule.collection:
        findings = findings.filter(collection=rule.collection)
    if rule.tool:
        findings = findings.filter(tool=rule.tool)
    rows = (
        findings.order_by()
        .values("collection", "tool")
        .annotate(
            broken=Count("pk"),
            newest=Max("pk"),
            first=Min("occurred_at"),
            last=Max("occurred_at"),
            kinds=Count("kind", distinct=True),
            kind=Max("kind"),
        )
        .order_by("collection", "tool")[:MATCH_LIMIT]
    )
    matches = []
    for row in rows:
        query = {"tool": row["tool"], "days": 1} | (
            {"collection": row["collection"]} if row["collection"] else {}
        )
        url = absolute_url(reverse("contracts:findings") + "?" + urlencode(query))
        matches.append(
            Match(
                subject=f"contract:{row['collection']}/{row['tool']}"[:300],
                window=f"finding:{row['newest']}",
                group={
                    "id": None,
                    "stage": "execute",
                    "reason": row["kind"],
                    "tool": row["tool"],
                    "collection": row["collection"],
                    "lane": "",
                    "url": url,
                },
                count=row["broken"],
                window_start=row["first"],
                window_end=row["last"],
                first_seen=row["first"],
                summary=ngettext(
                    "%(tool)s in %(collection)s broke a retry rule of its contract "
                    "(%(count)d operation)",
                    "%(tool)s in %(collection)s broke retry rules of its contract "
                    "(%(count)d operations)",
                    row["broken"],
                )
                % {
                    "tool": row["tool"],
                    "collection": row["collection"] or gettext("no collection"),
                    "count": row["broken"],
                },
            )
        )
    return matches


BEAT_MATCHERS: dict[str, Callable[..., list[Match]]] = {
    RuleKind.SPIKE: spike_matches,
    RuleKind.RECONCILE_WAITING: reconcile_waiting_matches,
    RuleKind.RETRY_BUDGET: retry_budget_matches,
    RuleKind.QUALITYLAB_REGRESSION: qualitylab_regression_matches,
    RuleKind.SUGGESTION_WAITING: suggestion_waiting_matches,
    RuleKind.CONTRACT_VIOLATION: contract_violation_matches,
}


# --- the page -------------------------------------------------------------------------------

LOG_PAGE_SIZE = 50


@dataclass(frozen=True)
class LogCursor:
    """A place in the delivery log, newest first: a delivery's (created_at, id)."""

    created_at: datetime
    delivery_id: int

    def __str__(self) -> str:
        return f"{self.created_at.isoformat()}_{self.delivery_id}"

    @classmethod
    def of(cls, delivery: Delivery) -> LogCursor:
        return cls(created_at=delivery.created_at, delivery_id=delivery.pk)

    @classmethod
    def parse(cls, raw: str) -> LogCursor | None:
        """The cursor the log's own links wrote, or None for anything else."""
        stamp, _, delivery_id = raw.partition("_")
        if not (delivery_id.isascii() and delivery_id.isdigit()) or len(delivery_id) > 18:
            return None
        try:
            moment = datetime.fromisoformat(stamp)
            moment.astimezone(UTC)
        except (ValueError, OverflowError):
            return None
        if moment.tzinfo is None:
            return None
        return cls(created_at=moment, delivery_id=int(delivery_id))


@dataclass(frozen=True)
class DeliveryLogPage:
    """One page of the log: its deliveries (each with `about_group_id`, the group it is about
    when that group still exists, else None) and the cursors of the pages either side."""

    deliveries: list[Delivery]
    older: LogCursor | None
    newer: LogCursor | None


def visible_rules(*, user: Any) -> QuerySet[Rule]:
    """The rules ``user`` sees: those of the collections they see (see the docstring)."""
    return Rule.objects.filter(visible_q(user, "collection"))


def delivery_log(
    *,
    user: Any,
    rule_id: int | None = None,
    before: LogCursor | None = None,
    after: LogCursor | None = None,
    size: int = LOG_PAGE_SIZE,
) -> DeliveryLogPage:
    """Newest first, by keyset (created_at, id): every page is as fast as the first. A page
    newer than `after` that would not be full is the newest page."""
    log = (
        Delivery.objects.filter(Q(rule__isnull=True) | visible_q(user, "rule__collection"))
        .select_related("rule", "channel")
        .defer("payload")
        .annotate(payload_group_id=KT("payload__group__id"))
    )
    if rule_id is not None:
        log = log.filter(rule_id=rule_id)
    if after is not None:
        # "After (moment, id)" as a range plus an exclusion, as the group page's records.
        newer = list(
            log.filter(created_at__gte=after.created_at)
            .exclude(created_at=after.created_at, pk__lte=after.delivery_id)
            .order_by("created_at", "pk")[: size + 1]
        )
        if len(newer) > size:
            page = newer[:size][::-1]
            return _log_page(page, older=LogCursor.of(page[-1]), newer=LogCursor.of(page[0]))
        before = None  # less than a page is newer: the newest page
    if before is not None:
        log = log.filter(created_at__lte=before.created_at).exclude(
            created_at=before.created_at, pk__gte=before.delivery_id
        )
    rows = list(log.order_by("-created_at", "-pk")[: size + 1])
    page = rows[:size]
    older = LogCursor.of(page[-1]) if len(rows) > size else None
    # Past the last delivery (or every one deleted since): back from where the link pointed.
    newer_cursor = None if before is None else LogCursor.of(page[0]) if page else before
    return _log_page(page, older=older, newer=newer_cursor)


def _log_page(
    deliveries: Sequence[Delivery], *, older: LogCursor | None, newer: LogCursor | None
) -> DeliveryLogPage:
    """Link a delivery to the group it is about (its payload's group id) while it exists:
    retention may have deleted it since."""
    wanted = {
        delivery.pk: int(raw)
        for delivery in deliveries
        # Text on PostgreSQL, a number on SQLite (its ->> keeps JSON's type).
        if (raw := str(getattr(delivery, "payload_group_id", None) or "")).isdigit()
    }
    existing = (
        set(FailureGroup.objects.filter(pk__in=set(wanted.values())).values_list("pk", flat=True))
        if wanted
        else set()
    )
    for delivery in deliveries:
        group_id = wanted.get(delivery.pk)
        delivery.about_group_id = group_id if group_id in existing else None  # type: ignore[attr-defined]
    return DeliveryLogPage(deliveries=list(deliveries), older=older, newer=newer)


@dataclass(frozen=True)
class AlertsOverview:
    rules: list[Rule]  # each with `last_delivery` (or None)
    channels: list[Channel]
    log: DeliveryLogPage


def alerts_overview(
    *,
    user: Any,
    rule_id: int | None = None,
    before: LogCursor | None = None,
    after: LogCursor | None = None,
) -> AlertsOverview:
    """What the alerts page shows ``user``: their rules, every channel with the count of
    their rules on it, and the deliveries of their rules."""
    rules = list(visible_rules(user=user).prefetch_related(Prefetch("channels")).order_by("name"))
    last = {delivery.rule_id: delivery for delivery in _last_per_rule(rules)}
    for rule in rules:
        rule.last_delivery = last.get(rule.pk)  # type: ignore[attr-defined]
    return AlertsOverview(
        rules=rules,
        channels=list(
            Channel.objects.annotate(
                rule_count=Count("rules", filter=visible_q(user, "rules__collection"))
            )
        ),
        log=delivery_log(user=user, rule_id=rule_id, before=before, after=after),
    )


def _last_per_rule(rules: Sequence[Rule]) -> list[Delivery]:
    newest = (
        Delivery.objects.filter(rule_id__in=[rule.pk for rule in rules])
        .values("rule_id")
        .annotate(last=Max("pk"))
    )
    return list(Delivery.objects.filter(pk__in=[row["last"] for row in newest]))
