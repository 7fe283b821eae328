"""The scan: reads each stored record, receipt, runner event, audit event and
reconciliation once, in id order, and turns them into what the contracts page reads (per-tool
daily counters, operations' trails of attempts, findings). The beat task runs it every
minute; `manage.py contracts scan` runs it to the end.

Rows are read a while after they arrive (SETTLE): ids come from sequences, so a transaction
that took a smaller id may commit after one that took a larger; waiting out the ingest
transactions' lifetime keeps a late commit from being skipped.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Coalesce
from django.utils import timezone

from contracts import rules
from contracts.models import (
    ContractFinding,
    OperationTrail,
    ScanMark,
    ToolDay,
)
from triage.models import (
    QUALITY_LAB_SOURCE,
    AuditEvent,
    FailureRecord,
    Receipt,
    Reconciliation,
    RunnerEvent,
    ToolPolicy,
)
from triage.receipts import outbound_calls
from triage.vocabulary.lanes import SUCCESS_EVENT

SETTLE = timedelta(seconds=60)
CHUNK = 5000
TRAIL_CAP = 100  # attempts kept per operation (the newest)
SOURCES = ("record", "receipt", "runner", "audit", "reconciliation")
# An operation nobody called for this long starts a new trail (a call a month later is no
# automatic retry); counters and findings older than the longest window are dropped.
TRAIL_IDLE = timedelta(days=30)
KEEP = timedelta(days=366)
PRUNE_BATCH = 5000

ToolKey = tuple[str, str]
OperationKey = tuple[str, str, str]


@dataclass
class ScanResult:
    rows: dict[str, int] = field(default_factory=dict)
    findings: int = 0  # judged in this scan, before the ones already stored are set aside
    done: bool = True  # nothing left to read below the settle line
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _utc_day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def _present(value: Any) -> bool:
    return value not in (None, "", [], {})


def _dig(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


class _Work:
    """What one scan pass gathers before it writes."""

    def __init__(self) -> None:
        self.days: dict[tuple[str, str, date], dict[str, int]] = defaultdict(
            lambda: defaultdict(int)
        )
        self.attempts: dict[OperationKey, list[rules.Attempt]] = defaultdict(list)
        self.rejudge: set[OperationKey] = set()
        self.findings: list[ContractFinding] = []

    def count(self, collection: str, tool: str, moment: datetime, **counters: int) -> None:
        row = self.days[(collection, tool, _utc_day(moment))]
        for name, amount in counters.items():
            if amount:
                row[name] += amount


# --- reading each source ----------------------------------------------------------------


def _records(work: _Work, mark: int, cutoff: datetime) -> list[int]:
    rows = list(
        FailureRecord.objects.filter(pk__gt=mark, received_at__lt=cutoff)
        .annotate(
            extra_next_action=KT("extra__next_action"),
            extra_evidence_ref=KT("extra__evidence_ref"),
            evidence_ref_inside=KT("evidence__evidence_ref"),
            envelope=KeyTransform("envelope", "extra"),
        )
        .order_by("pk")
        .values_list(
            "pk",
            "collection",
            "tool",
            "occurred_at",
            "lane",
            "reason",
            "execution_state",
            "sent_execution_state",
            "sent_side_effect",
            "sent_lane",
            "side_effect",
            "idempotency_key",
            "group_id",
            "extra_next_action",
            "extra_evidence_ref",
            "evidence_ref_inside",
            "envelope",
            "source",
        )[:CHUNK]
    )
    for row in rows:
        (
            pk,
            collection,
            tool,
            occurred,
            lane,
            reason,
            state,
            sent_state,
            sent_side,
            sent_lane,
            side_effect,
            key,
            group_id,
            next_action,
            evidence_ref,
            evidence_ref_inside,
            envelope,
            source,
        ) = row
        # Quality Lab's test runs say nothing of production: read past, never counted.
        if not tool or source == QUALITY_LAB_SOURCE:
            continue
        envelope = envelope if isinstance(envelope, dict) else None
        next_action = next_action or (_dig(envelope, "retry.next_action") if envelope else "")
        has_evidence = (
            _present(evidence_ref)
            or _present(evidence_ref_inside)
            or (envelope is not None and _present(envelope.get("evidence")))
        )
        counters = {
            "failures": 1,
            "uncertain": int(lane == "reconcile_first"),
            "sent_side_effect": int(bool(sent_side)),
            "sent_idempotency": int(bool(key)),
            "sent_execution_state": int(bool(sent_state)),
            "sent_next_action": int(_present(next_action)),
            "sent_evidence_ref": int(has_evidence),
        }
        if envelope is not None:
            counters["envelopes"] = 1
            for dotted in _ENVELOPE_COLUMNS:
                counters[_ENVELOPE_COLUMNS[dotted]] = int(_present(_dig(envelope, dotted)))
        work.count(collection, tool, occurred, **counters)
        if key:
            work.attempts[
                (collection, tool, operation_of(idempotency_key=key, tool_run_id=""))
            ].append(
                rules.Attempt(
                    at=occurred,
                    kind="record",
                    id=pk,
                    lane=lane,
                    reason=reason,
                    execution_state=state,
                    sent_lane=sent_lane,
                    next_action=str(next_action or ""),
                    side_effect=side_effect,
                    group_id=group_id,
                )
            )
    return [row[0] for row in rows]


_ENVELOPE_COLUMNS = {
    "status": "envelope_status",
    "code": "envelope_code",
    "retry.allowed": "envelope_retry_allowed",
    "retry.next_action": "envelope_retry_next_action",
    "execution.state": "envelope_execution_state",
    "execution.idempotency_key": "envelope_execution_idempotency_key",
    "evidence": "envelope_evidence",
    "user_safe_message": "envelope_user_safe_message",
}


def operation_of(*, idempotency_key: str, tool_run_id: str) -> str:
    return f"key:{idempotency_key}" if idempotency_key else f"run:{tool_run_id}"


def _receipts(work: _Work, mark: int, cutoff: datetime) -> list[int]:
    rows = list(
        Receipt.objects.filter(pk__gt=mark, received_at__lt=cutoff)
        .annotate(occurred=Coalesce("ended_at", "started_at", "received_at"))
        .order_by("pk")
        .values_list(
            "pk",
            "collection",
            "tool",
            "occurred",
            "result",
            "reason",
            "code",
            "execution_state",
            "lane",
            "sent_lane",
            "side_effect",
            "sent_side_effect",
            "idempotency_key",
            "tool_run_id",
            "next_action",
            "evidence_ref",
            "retry_count",
            "attempt",
        )[:CHUNK]
    )
    not_started: list[tuple[int, str, str, str, str, datetime]] = []
    for row in rows:
        (
            pk,
            collection,
            tool,
            occurred,
            result,
            reason,
            code,
            state,
            lane,
            sent_lane,
            side_effect,
            sent_side,
            key,
            run,
            next_action,
            evidence_ref,
            retry_count,
            attempt,
        ) = row
        lookup = rules.receipt_is_lookup(result)
        failed = rules.receipt_failed(result=result, execution_state=state)
        if not lookup:
            work.count(
                collection,
                tool,
                occurred,
                receipts=1,
                successes_receipts=int(not failed),
                uncertain=int(lane == "reconcile_first"),
                not_started_claims=int(state == "not_started"),
                sent_side_effect=int(bool(sent_side)),
                sent_idempotency=int(bool(key)),
                sent_execution_state=1,  # a receipt without one is refused at ingest
                sent_next_action=int(bool(next_action)),
                sent_evidence_ref=int(bool(evidence_ref)),
            )
        if state == "not_started":
            not_started.append((pk, collection, tool, run, key, occurred))
        work.attempts[
            (collection, tool, operation_of(idempotency_key=key, tool_run_id=run))
        ].append(
            rules.Attempt(
                at=occurred,
                kind="receipt",
                id=pk,
                lane=lane,
                failed=failed,
                lookup=lookup,
                reason=(reason or code or "").lower() if lookup else reason,
                execution_state=state,
                sent_lane=sent_lane,
                next_action=next_action,
                retry_count=retry_count,
                attempt=attempt,
                side_effect=side_effect,
                run=run,
            )
        )
    _contradicted_receipts(work, not_started)
    return [row[0] for row in rows]


def _contradicted_receipts(
    work: _Work, receipts: list[tuple[int, str, str, str, str, datetime]]
) -> None:
    """New not_started receipts that the runtime's own audit saw call out (by run, or by
    key when the audit event names no run: the receipts page's rule)."""
    if not receipts:
        return
    runs = {run for _, _, _, run, _, _ in receipts if run}
    keys = {key for _, _, _, _, key, _ in receipts if key}
    seen = (
        outbound_calls()
        .filter(Q(tool_run_id__in=runs) | Q(tool_run_id="", idempotency_key__in=keys))
        .values_list("pk", "tool_run_id", "idempotency_key")
    )
    by_run: dict[str, int] = {}
    by_key: dict[str, int] = {}
    for pk, run, key in seen:
        if run:
            by_run.setdefault(run, pk)
        elif key:
            by_key.setdefault(key, pk)
    for pk, collection, tool, run, key, occurred in receipts:
        audit = by_run.get(run) or (by_key.get(key) if key else None)
        if audit:
            _contradiction(work, pk, collection, tool, run, key, occurred, audit)


def _contradiction(
    work: _Work,
    pk: int,
    collection: str,
    tool: str,
    run: str,
    key: str,
    occurred: datetime,
    audit: int,
) -> None:
    work.findings.append(
        ContractFinding(
            kind="not_started_contradicted",
            collection=collection,
            tool=tool,
            operation=f"receipt:{pk}",
            occurred_at=occurred,
            example_type="receipt",
            example_id=pk,
            detail={"run": run, "idempotency_key": key, "audit_event": audit},
        )
    )


def _runner_events(work: _Work, mark: int, cutoff: datetime) -> list[int]:
    rows = list(
        RunnerEvent.objects.filter(pk__gt=mark)
        .filter(Q(batch__received_at__lt=cutoff))
        .order_by("pk")
        .values_list("pk", "collection", "tool", "event_type", "occurred_at")[:CHUNK]
    )
    for _pk, collection, tool, event_type, occurred in rows:
        if event_type == SUCCESS_EVENT and tool:
            work.count(collection, tool, occurred, successes_runner=1)
    return [row[0] for row in rows]


def _audit_events(work: _Work, mark: int, cutoff: datetime) -> list[int]:
    read = list(
        AuditEvent.objects.filter(pk__gt=mark)
        .filter(Q(batch__received_at__lt=cutoff) | Q(batch__isnull=True))
        .order_by("pk")
        .values_list("pk", "tool_run_id", "idempotency_key", "method", "host")[:CHUNK]
    )
    # Events that saw a request leave (outbound_calls' rule, read here with every id so the
    # mark moves past the others).
    rows = [(pk, run, key) for pk, run, key, method, host in read if method or host]
    runs = {run for _, run, _ in rows if run}
    keys = {key for _, run, key in rows if not run and key}
    if runs or keys:
        audit_by_run = {run: pk for pk, run, _ in rows if run}
        audit_by_key = {key: pk for pk, run, key in rows if not run and key}
        claims = (
            Receipt.objects.filter(execution_state="not_started")
            .filter(Q(tool_run_id__in=runs) | Q(idempotency_key__in=keys))
            .annotate(occurred=Coalesce("ended_at", "started_at", "received_at"))
            .values_list("pk", "collection", "tool", "tool_run_id", "idempotency_key", "occurred")
        )
        for pk, collection, tool, run, key, occurred in claims:
            audit = audit_by_run.get(run) or audit_by_key.get(key)
            if audit:
                _contradiction(work, pk, collection, tool, run, key, occurred, audit)
    return [row[0] for row in read]


def _reconciliations(work: _Work, mark: int, cutoff: datetime) -> list[int]:
    rows = list(
        Reconciliation.objects.filter(pk__gt=mark, created_at__lt=cutoff)
        .order_by("pk")
        .values_list(
            "pk",
            "receipt__collection",
            "receipt__tool",
            "receipt__idempotency_key",
            "receipt__tool_run_id",
        )[:CHUNK]
    )
    for _pk, collection, tool, key, run in rows:
        work.rejudge.add((collection, tool, operation_of(idempotency_key=key, tool_run_id=run)))
    return [row[0] for row in rows]


READERS = {
    "record": _records,
    "receipt": _receipts,
    "runner": _runner_events,
    "audit": _audit_events,
    "reconciliation": _reconciliations,
}


# --- writing ------------------------------------------------------------------------------


def _limits() -> dict[ToolKey, rules.Limits]:
    return {
        (collection, tool): rules.Limits(
            retry_max_attempts=attempts,
            budget_failures=max(1, failures),
            budget_window_seconds=window,
        )
        for collection, tool, attempts, failures, window in ToolPolicy.objects.values_list(
            "collection",
            "tool",
            "retry_max_attempts",
            "retry_budget_failures",
            "retry_budget_window_seconds",
        )
    }


def _limits_for(limits: dict[ToolKey, rules.Limits], collection: str, tool: str) -> rules.Limits:
    return limits.get((collection, tool)) or limits.get(("", tool)) or rules.SEED_LIMITS


def _judge_operations(work: _Work, now: datetime) -> None:
    keys = set(work.attempts) | work.rejudge
    if not keys:
        return
    trails = {
        (trail.collection, trail.tool, trail.operation): trail
        for trail in OperationTrail.objects.filter(
            operation__in={operation for _, _, operation in keys}
        )
        if (trail.collection, trail.tool, trail.operation) in keys
    }
    merged: dict[OperationKey, list[rules.Attempt]] = {}
    for key in keys:
        trail = trails.get(key)
        old = [rules.Attempt.from_json(item) for item in trail.attempts] if trail else []
        known = {(attempt.kind, attempt.id) for attempt in old}
        new = [a for a in work.attempts.get(key, []) if (a.kind, a.id) not in known]
        if not old and not new:
            continue
        merged[key] = rules.ordered([*old, *new])[-TRAIL_CAP:]
    receipt_ids = {
        attempt.id: key
        for key, attempts in merged.items()
        for attempt in attempts
        if attempt.kind == "receipt"
    }
    findings_at: dict[OperationKey, list[datetime]] = defaultdict(list)
    for receipt_id, found_at in Reconciliation.objects.filter(
        receipt_id__in=list(receipt_ids)
    ).values_list("receipt_id", "created_at"):
        findings_at[receipt_ids[receipt_id]].append(found_at)

    limits = _limits()
    changed: list[OperationTrail] = []
    created: list[OperationTrail] = []
    for key, attempts in merged.items():
        collection, tool, operation = key
        retries = rules.retries(attempts)
        trail = trails.get(key)
        counted = trail.retries_counted if trail else 0
        if retries > counted:
            work.count(collection, tool, attempts[-1].at, retries=retries - counted)
        for broken in rules.judge(
            attempts,
            limits=_limits_for(limits, collection, tool),
            findings_at=findings_at.get(key, ()),
        ):
            example = broken.attempt
            work.findings.append(
                ContractFinding(
                    kind=broken.kind,
                    collection=collection,
                    tool=tool,
                    operation=operation,
                    occurred_at=example.at,
                    example_type=example.kind,
                    example_id=example.id,
                    group_id=example.group_id,
                    detail={
                        "run": example.run,
                        "operation": operation,
                        **broken.detail,
                    },
                )
            )
        stored = [attempt.as_json() for attempt in attempts]
        if trail is None:
            created.append(
                OperationTrail(
                    collection=collection,
                    tool=tool,
                    operation=operation,
                    attempts=stored,
                    retries_counted=max(retries, counted),
                    updated_at=now,
                )
            )
        else:
            trail.attempts = stored
            trail.retries_counted = max(retries, counted)
            trail.updated_at = now
            changed.append(trail)
    OperationTrail.objects.bulk_create(created, batch_size=500)
    OperationTrail.objects.bulk_update(
        changed, ["attempts", "retries_counted", "updated_at"], batch_size=500
    )


def _add_days(days: dict[tuple[str, str, date], dict[str, int]]) -> None:
    """Add each day's counts to its row, one statement per 500 rows (PostgreSQL and SQLite
    both take ON CONFLICT ... DO UPDATE)."""
    if not days:
        return
    table = connection.ops.quote_name(ToolDay._meta.db_table)
    columns = ToolDay.COUNTERS
    names = ", ".join(
        connection.ops.quote_name(name) for name in ("collection", "tool", "day", *columns)
    )
    updates = ", ".join(
        f"{connection.ops.quote_name(name)} = {table}.{connection.ops.quote_name(name)} "
        f"+ excluded.{connection.ops.quote_name(name)}"
        for name in columns
    )
    rows = [
        (collection, tool, day, *(counters.get(name, 0) for name in columns))
        for (collection, tool, day), counters in days.items()
    ]
    width = 3 + len(columns)
    placeholder = "(" + ", ".join(["%s"] * width) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 500):
            part = rows[start : start + 500]
            params: list[Any] = [value for row in part for value in row]
            cursor.execute(
                f"INSERT INTO {table} ({names}) VALUES {', '.join([placeholder] * len(part))} "
                f"ON CONFLICT (collection, tool, day) DO UPDATE SET {updates}",
                params,
            )


def contracts_scan(
    *, now: datetime | None = None, max_rows: int = 50_000, settle: timedelta = SETTLE
) -> ScanResult:
    """Read what arrived since the last scan (at most about `max_rows` rows of each source)
    and write its counters, trails and findings in one transaction. `settle` may be 0 only
    where nothing else writes meanwhile (the demo, a test)."""
    started = time.monotonic()
    now = now or timezone.now()
    cutoff = now - settle
    result = ScanResult()
    with transaction.atomic():
        for source in SOURCES:
            ScanMark.objects.get_or_create(source=source)
        marks = {
            mark.source: mark for mark in ScanMark.objects.select_for_update().order_by("source")
        }
        work = _Work()
        for source in SOURCES:
            mark = marks[source]
            read = 0
            while read < max_rows:
                ids = READERS[source](work, mark.last_id, cutoff)
                if not ids:
                    break
                read += len(ids)
                mark.last_id = ids[-1]
                if len(ids) < CHUNK:
                    break
            else:
                result.done = False
            result.rows[source] = read
            mark.scanned_at = now
        _judge_operations(work, now)
        _add_days(work.days)
        # A finding already stored (the same rule of the same operation) stays the one counted.
        ContractFinding.objects.bulk_create(work.findings, batch_size=500, ignore_conflicts=True)
        result.findings = len(work.findings)
        ScanMark.objects.bulk_update(marks.values(), ["last_id", "scanned_at"])
    _prune(now)
    if result.total:
        from contracts.selectors import standing_refresh

        standing_refresh(now=now)
    result.seconds = time.monotonic() - started
    return result


def _prune(now: datetime) -> None:
    """Drop idle trails and counters past every window, a bounded batch per scan."""
    for queryset in (
        OperationTrail.objects.filter(updated_at__lt=now - TRAIL_IDLE),
        ToolDay.objects.filter(day__lt=(now - KEEP).date()),
        ContractFinding.objects.filter(occurred_at__lt=now - KEEP),
    ):
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[:PRUNE_BATCH])
        if ids:
            queryset.model.objects.filter(pk__in=ids).delete()


def contracts_scan_all(
    *, now: datetime | None = None, settle: timedelta = SETTLE
) -> Iterable[ScanResult]:
    """Scan until nothing is left below the settle line, one transaction per pass."""
    while True:
        result = contracts_scan(now=now, settle=settle)
        yield result
        if result.done:
            return
