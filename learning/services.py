"""Writes of the learning review: derive suggestions, gate them, record decisions, and the
bridge from Quality Lab runs (attempts and shadow evidence).

Derivation uses graph-tool-call's ``derive_learning_suggestions`` and
``merge_learning_suggestions`` per collection, in a Celery task after the attempts commit.
The library's own recipe double-counts: ``derive_learning_suggestions(existing_suggestions=
current)`` already merges the current counts into what it returns, and merging that into
``current`` adds them a second time (1 -> 3 -> 7 ...). Here ``derive`` gets no existing
suggestions (every incoming one says ``observations: 1``) and only ``merge`` adds them to the
stored counts, once per attempt: ``derived_at`` marks an attempt merged, under a lock on the
collection row, so a redelivered or concurrent task never merges it again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop
from graph_tool_call.learning import (
    SUGGESTION_DATA_FLOW_EDGE,
    SUGGESTION_PLAN_PATH,
    SUGGESTION_TARGET_PREFERENCE,
    apply_learning_suggestions,
    derive_learning_suggestions,
    merge_learning_suggestions,
    normalize_query_family,
    stable_hash,
)
from kombu.exceptions import OperationalError as BrokerError

from learning.gate import GateFacts, GateVerdict, Thresholds, evaluate_gate
from learning.ingest import ITEM_TYPE, carries_scrub_marker
from learning.models import (
    AttemptSource,
    Decision,
    LearningAttempt,
    RejectionReason,
    Review,
    ShadowObservation,
    Suggestion,
    SuggestionAttempt,
    SuggestionStatus,
)
from organisation import audit
from qualitylab.engine import Rerank
from qualitylab.models import CaseResult, CaseRun, Collection, LearningMode

log = logging.getLogger(__name__)

POLICY = "policy"  # the actor label of decisions the collection policy took
# Attempts merged per task; the task queues itself again when more are waiting.
DERIVE_BATCH = 500
# How much of a query family's history the library sees (its prior failure count).
_HISTORY = 50
# Keys of the library dict that the desk adds per status; not stored in Suggestion.data.
_STATUS_KEYS = frozenset(
    {"promoted_by", "promoted_at", "promotion_reason", "rejection_reason", "shadow"}
)
_OPEN = (SuggestionStatus.SUGGESTED, SuggestionStatus.PROMOTABLE)
EVIDENCE_FIELDS = ("production_observations", "production_sessions", "test_observations",
                   "test_cases")  # fmt: skip


class DecisionError(ValueError):
    """A decision that cannot be taken (wrong status, missing reason); safe to show."""


# --- collections ------------------------------------------------------------------------


def collections_for_ids(*, names: Iterable[str]) -> dict[str, Collection]:
    """The collections named by runtimes; an unknown id is registered with the default
    policy (learning allowed, read-only, mode observe) for an operator to change later."""
    wanted = set(names)
    found = {c.name: c for c in Collection.objects.filter(name__in=wanted)}
    for name in sorted(wanted - set(found)):
        found[name], _ = Collection.objects.get_or_create(
            name=name,
            defaults={
                # Stored in English; the pages translate this title as they show it.
                "title": gettext_noop("registered by a runtime"),
                "learning_mode": LearningMode.OBSERVE,
                "learning_allowed": True,
                "mutations_allowed": False,
            },
        )
    return found


def collection_learning_policy_set(
    *,
    collection: Collection,
    actor: Any,
    learning_mode: str,
    learning_allowed: bool,
    write_capable: bool,
) -> list[str]:
    """Change a collection's learning policy; the gate then runs again on its suggestions
    (turning learning off demotes what is promoted, with a history row each)."""
    if learning_mode not in LearningMode.values:
        raise DecisionError(gettext("Unknown learning mode %(mode)r.") % {"mode": learning_mode})
    with transaction.atomic():
        locked = Collection.objects.select_for_update().get(pk=collection.pk)
        changes = []
        if locked.learning_mode != learning_mode:
            changes.append(
                gettext("mode %(before)s -> %(after)s")
                % {"before": locked.learning_mode, "after": learning_mode}
            )
        if locked.learning_allowed != learning_allowed:
            changes.append(
                gettext("learning allowed") if learning_allowed else gettext("learning not allowed")
            )
        if locked.mutations_allowed != write_capable:
            changes.append(gettext("write-capable") if write_capable else gettext("read-only"))
        if not changes:
            return []
        locked.learning_mode = learning_mode
        locked.learning_allowed = learning_allowed
        locked.mutations_allowed = write_capable
        locked.save(update_fields=["learning_mode", "learning_allowed", "mutations_allowed"])
        who = actor.get_username() if actor is not None else "someone"
        gate_refresh(collection=locked, why=f"{who} changed the policy: {', '.join(changes)}")
    collection.refresh_from_db()
    return changes


# --- derivation -------------------------------------------------------------------------


def derivation_enqueue(*, collection_id: int) -> None:
    """Queue the derivation task; with the broker down the attempts simply stay pending
    and the next derivation of the collection merges them."""
    from config.celery import publish
    from learning.tasks import derive_suggestions

    try:
        publish(derive_suggestions, collection_id=collection_id)
    except (BrokerError, OSError):
        log.warning("learning derivation for collection %s not queued: broker down", collection_id)


def suggestions_derive(*, collection_id: int, limit: int = DERIVE_BATCH) -> int:
    """Merge the collection's pending attempts into its suggestions, oldest first, each
    exactly once; returns how many were merged."""
    thresholds = Thresholds.from_settings()
    policy = {
        "min_success_observations": thresholds.min_success_observations,
        "max_recent_failure_ratio": thresholds.max_recent_failure_ratio,
        "max_attempts": _HISTORY,
        "max_suggestions": 10_000,
    }
    with transaction.atomic():
        # The lock serializes derivations of one collection: an attempt is merged once.
        collection = Collection.objects.select_for_update().filter(pk=collection_id).first()
        if collection is None:
            return 0
        pending = list(
            LearningAttempt.objects.filter(collection=collection, derived_at__isnull=True).order_by(
                "occurred_at", "id"
            )[: limit + 1]
        )
        more = len(pending) > limit
        pending = pending[:limit]
        families: set[str] = set()
        for attempt in pending:
            attempt.collection = collection
            _merge_attempt(collection=collection, attempt=attempt, policy=policy)
            families.add(attempt.query_fingerprint)
        if families:
            gate_refresh(collection=collection, fingerprints=families)
        if more:
            transaction.on_commit(
                lambda: derivation_enqueue(collection_id=collection_id), robust=True
            )
    return len(pending)


def _merge_attempt(
    *, collection: Collection, attempt: LearningAttempt, policy: dict[str, Any]
) -> None:
    now = timezone.now()
    record = attempt.as_record()
    history = [
        row.as_record()
        for row in LearningAttempt.objects.filter(
            collection=collection,
            query_fingerprint=attempt.query_fingerprint,
            derived_at__isnull=False,
        )
        .select_related("collection")
        .order_by("-occurred_at", "-id")[:_HISTORY]
    ]
    # No existing_suggestions: see the module docstring (the library would count twice).
    incoming = derive_learning_suggestions(record, history=history, promotion_policy=policy)
    if incoming:
        ids = [str(item["id"]) for item in incoming]
        rows = {
            row.suggestion_id: row
            for row in Suggestion.objects.filter(collection=collection, suggestion_id__in=ids)
        }
        for row in rows.values():
            row.collection = collection
        merged = merge_learning_suggestions(
            [row.as_library() for row in rows.values()],
            incoming,
            history=[*history, record],
            promotion_policy=policy,
        )
        for item in merged:
            if item.get("id") not in ids:
                continue
            row = rows.get(item["id"]) or Suggestion(
                collection=collection, suggestion_id=item["id"], created_at=now
            )
            row.type = str(item.get("type") or "")
            row.target = str(item.get("target") or "")
            row.query_family = str(item.get("query_family") or attempt.query_family)
            row.query_fingerprint = str(item.get("query_fingerprint") or attempt.query_fingerprint)
            row.observations = int(item.get("observations") or 1)
            row.prior_failure_count = int(item.get("prior_failure_count") or 0)
            row.data = {key: value for key, value in item.items() if key not in _STATUS_KEYS}
            row.sensitive_evidence = row.sensitive_evidence or attempt.carried_secret
            # An attempt may arrive after newer ones (a runtime's spool sent late): first seen
            # moves back, last seen only forward.
            if row.pk is None or attempt.occurred_at < row.first_seen_at:
                row.first_seen_at = attempt.occurred_at
            if row.pk is None or attempt.occurred_at > row.last_seen_at:
                row.last_seen_at = attempt.occurred_at
            row.updated_at = now
            row.save()
            SuggestionAttempt.objects.get_or_create(suggestion=row, attempt=attempt)
    LearningAttempt.objects.filter(pk=attempt.pk).update(derived_at=now)


def gate_refresh(
    *, collection: Collection, fingerprints: Iterable[str] | None = None, why: str = ""
) -> None:
    """Run the promotion gate on the collection's suggestions (of these query families):
    open ones become suggested or promotable (or promoted by policy); promoted ones lose
    the status when the collection no longer allows learning, or when policy promoted them
    and policy would not now."""
    suggestions = Suggestion.objects.filter(collection=collection).exclude(
        status=SuggestionStatus.REJECTED
    )
    if fingerprints is not None:
        suggestions = suggestions.filter(query_fingerprint__in=list(fingerprints))
    now = timezone.now()
    for row, facts, verdict in _verdicts(collection=collection, rows=list(suggestions)):
        _apply_verdict(row, facts=facts, verdict=verdict, now=now, why=why)


def _verdicts(
    *, collection: Collection, rows: list[Suggestion]
) -> list[tuple[Suggestion, GateFacts, GateVerdict]]:
    if not rows:
        return []
    thresholds = Thresholds.from_settings()
    ids = [row.pk for row in rows]
    recent = _recent_attempts(
        collection=collection, fingerprints={row.query_fingerprint for row in rows}
    )
    links = SuggestionAttempt.objects.filter(suggestion_id__in=ids)
    sensitive = set(
        links.filter(attempt__carried_secret=True).values_list("suggestion_id", flat=True)
    )
    foreign = set(
        links.exclude(attempt__collection=collection).values_list("suggestion_id", flat=True)
    )
    demoted = set(
        # A person undid a promotion or a rejection: from then on only a person promotes it.
        Review.objects.filter(
            suggestion_id__in=ids, decision__in=(Decision.DEMOTE, Decision.REOPEN)
        ).values_list("suggestion_id", flat=True)
    )
    evidence = evidence_counts(suggestion_ids=ids)
    verdicts = []
    for row in rows:
        row.collection = collection
        counts = evidence.get(row.pk, EvidenceCounts())
        row.production_observations = counts.production_observations
        row.production_sessions = counts.production_sessions
        row.test_observations = counts.test_observations
        row.test_cases = counts.test_cases
        facts = _facts(
            row,
            recent=recent.get(row.query_fingerprint, []),
            collection=collection,
            sensitive=row.pk in sensitive or carries_scrub_marker(row.data),
            foreign=row.pk in foreign,
            demoted_before=row.pk in demoted,
        )
        verdicts.append((row, facts, evaluate_gate(facts, thresholds)))
    return verdicts


@dataclass(frozen=True)
class EvidenceCounts:
    production_observations: int = 0
    production_sessions: int = 0
    test_observations: int = 0
    test_cases: int = 0


def _lab_case() -> KeyTextTransform:
    """The Quality Lab case an attempt came from (its `extra.quality_lab.case`)."""
    return KeyTextTransform("case", KeyTransform("quality_lab", "attempt__extra"))


def evidence_counts(*, suggestion_ids: list[int]) -> dict[int, EvidenceCounts]:
    """The successful attempts behind each suggestion, by source, and what makes them
    independent, in one query: distinct runtime sessions (attempts that carry no session id
    count as one session together: nothing says they are different people), distinct
    Quality Lab cases (five repetitions of a case, or a re-run, are one case)."""
    runtime = Q(attempt__source=AttemptSource.RUNTIME)
    lab = Q(attempt__source=AttemptSource.QUALITY_LAB)
    no_session = runtime & Q(attempt__session_id_hash="")
    rows = (
        SuggestionAttempt.objects.filter(suggestion_id__in=suggestion_ids)
        .values("suggestion_id")
        .annotate(
            production_observations=Count("pk", filter=runtime),
            sessions=Count("attempt__session_id_hash", distinct=True, filter=runtime & ~no_session),
            without_session=Count("pk", filter=no_session),
            test_observations=Count("pk", filter=lab),
            test_cases=Count(_lab_case(), distinct=True, filter=lab),
        )
        .order_by()
    )
    return {
        row["suggestion_id"]: EvidenceCounts(
            production_observations=row["production_observations"],
            production_sessions=row["sessions"] + (1 if row["without_session"] else 0),
            test_observations=row["test_observations"],
            test_cases=row["test_cases"],
        )
        for row in rows
    }


def _recent_attempts(
    *, collection: Collection, fingerprints: set[str]
) -> dict[str, list[LearningAttempt]]:
    window = settings.LEARNING_RECENT_ATTEMPTS
    return {
        fingerprint: list(
            LearningAttempt.objects.filter(
                collection=collection, query_fingerprint=fingerprint
            ).order_by("-occurred_at", "-id")[:window]
        )
        for fingerprint in fingerprints
    }


def _agrees(attempt: LearningAttempt, suggestion: Suggestion) -> bool | None:
    """Whether a successful attempt chose what the suggestion says; None when it says
    nothing about that kind of choice (a search-only attempt selects no target)."""
    if suggestion.type == SUGGESTION_TARGET_PREFERENCE:
        return None if not attempt.selected_target else attempt.selected_target == suggestion.target
    if suggestion.type == SUGGESTION_PLAN_PATH:
        if not attempt.plan_tools:
            return None
        return list(attempt.plan_tools) == list(suggestion.data.get("plan_tools") or [])
    if suggestion.type == SUGGESTION_DATA_FLOW_EDGE:
        if not attempt.trace_edges:
            return None
        edge = suggestion.data.get("edge") or {}
        return any(
            isinstance(seen, dict)
            and seen.get("source") == edge.get("source")
            and seen.get("target") == edge.get("target")
            for seen in attempt.trace_edges
        )
    if not attempt.selected_target and not attempt.plan_tools:
        return None
    return attempt.uses_target(suggestion.target)


def _facts(
    suggestion: Suggestion,
    *,
    recent: list[LearningAttempt],
    collection: Collection,
    sensitive: bool,
    foreign: bool,
    demoted_before: bool,
) -> GateFacts:
    used = [attempt for attempt in recent if attempt.uses_target(suggestion.target)]
    agreement = [_agrees(attempt, suggestion) for attempt in recent if attempt.success]
    claimed = str(suggestion.data.get("collection_id") or collection.name)
    return GateFacts(
        observations=suggestion.observations,
        production_sessions=suggestion.production_sessions,
        test_cases=suggestion.test_cases,
        recent_successes=sum(1 for attempt in used if attempt.success),
        recent_failures=sum(1 for attempt in used if not attempt.success),
        agreeing_successes=sum(1 for verdict in agreement if verdict is True),
        family_successes=sum(1 for verdict in agreement if verdict is not None),
        sensitive=sensitive,
        same_collection=not foreign and claimed == collection.name,
        learning_allowed=collection.learning_allowed,
        write_capable=collection.mutations_allowed,
        learning_mode=collection.learning_mode,
        demoted_before=demoted_before,
    )


def _apply_verdict(
    row: Suggestion, *, facts: GateFacts, verdict: GateVerdict, now: Any, why: str
) -> None:
    _record_gate(row, facts=facts, verdict=verdict)
    if row.status in _OPEN:
        if verdict.auto_promote:
            _promote(
                row,
                decision=Decision.AUTO_PROMOTE,
                actor=None,
                label=POLICY,
                reason="the gate passed in a read-only collection in promoted mode",
                now=now,
            )
            return
        row.status = verdict.status
    elif row.status == SuggestionStatus.PROMOTED:
        if not facts.learning_allowed:
            _demote(row, actor=None, label=POLICY, code="collection_policy_blocked",
                    note=why or "the collection's policy does not allow learning",
                    status=verdict.status, now=now)  # fmt: skip
            return
        if row.promoted_by_label == POLICY and not verdict.auto_promote:
            note = verdict.why_reviewer or "the gate no longer passes: " + ", ".join(
                verdict.blocked_by
            )
            code = "collection_policy_blocked" if verdict.promotable else ""
            _demote(row, actor=None, label=POLICY, code=code, note=note,
                    status=verdict.status, now=now)  # fmt: skip
            return
    row.save(update_fields=["gate", "recent_failures", "recent_attempts", "sensitive_evidence",
                            "status", *EVIDENCE_FIELDS])  # fmt: skip


def _record_gate(row: Suggestion, *, facts: GateFacts, verdict: GateVerdict) -> None:
    row.gate = [check.as_dict() for check in verdict.checks]
    row.recent_failures = facts.recent_failures
    row.recent_attempts = facts.recent_successes + facts.recent_failures
    row.sensitive_evidence = facts.sensitive


# --- decisions --------------------------------------------------------------------------


def suggestion_approve(*, suggestion: Suggestion, reviewer: Any, reason: str) -> Suggestion:
    """Promote a promotable suggestion; the reason becomes its promotion_reason."""
    reason = reason.strip()
    if not reason:
        raise DecisionError(gettext("Say why it should be promoted: the reason is kept with it."))
    with transaction.atomic():
        row = _locked(suggestion)
        if row.status != SuggestionStatus.PROMOTABLE:
            raise DecisionError(
                gettext("Only a promotable suggestion can be approved; this one is %(status)s.")
                % {"status": row.get_status_display()}
            )
        _promote(row, decision=Decision.APPROVE, actor=reviewer, label=reviewer.get_username(),
                 reason=reason, now=timezone.now())  # fmt: skip
    return row


def suggestion_reject(
    *, suggestion: Suggestion, reviewer: Any, reason: str, note: str
) -> Suggestion:
    """Reject a suggested or promotable suggestion with a coded reason and a note. It stays
    visible, is never exported as active, and new evidence no longer changes its status."""
    if reason not in RejectionReason.values:
        raise DecisionError(gettext("Choose one of the rejection reasons."))
    note = note.strip()
    if not note:
        raise DecisionError(gettext("Write a note: what made you reject it."))
    with transaction.atomic():
        row = _locked(suggestion)
        if row.status not in _OPEN:
            text = gettext("This suggestion is %(status)s; it cannot be rejected.") % {
                "status": row.get_status_display()
            }
            if row.status == SuggestionStatus.PROMOTED:
                text += " " + gettext("Demote it first.")
            raise DecisionError(text)
        before = row.status
        row.status = SuggestionStatus.REJECTED
        row.rejection_reason = reason
        row.rejection_note = note
        row.updated_at = timezone.now()
        row.save(update_fields=["status", "rejection_reason", "rejection_note", "updated_at"])
        _review(row, decision=Decision.REJECT, actor=reviewer, label=reviewer.get_username(),
                code=reason, note=note, before=before)  # fmt: skip
    return row


def suggestion_demote(*, suggestion: Suggestion, reviewer: Any, reason: str) -> Suggestion:
    """Undo a promotion: back to what the gate says now; policy will not promote it again."""
    reason = reason.strip()
    if not reason:
        raise DecisionError(gettext("Say why it is demoted: the reason is kept in the history."))
    with transaction.atomic():
        row = _locked(suggestion)
        if row.status != SuggestionStatus.PROMOTED:
            raise DecisionError(
                gettext("Only a promoted suggestion can be demoted; this one is %(status)s.")
                % {"status": row.get_status_display()}
            )
        [(_, facts, verdict)] = _verdicts(collection=row.collection, rows=[row])
        _record_gate(row, facts=facts, verdict=verdict)
        _demote(row, actor=reviewer, label=reviewer.get_username(), code="", note=reason,
                status=verdict.status, now=timezone.now())  # fmt: skip
    return row


def suggestion_reopen(*, suggestion: Suggestion, reviewer: Any, reason: str) -> Suggestion:
    """Undo a rejection: back to what the gate says now (suggested or promotable), the
    rejection kept in the history; policy will not promote it, a reviewer may."""
    reason = reason.strip()
    if not reason:
        raise DecisionError(gettext("Say why it is reopened: the reason is kept in the history."))
    with transaction.atomic():
        row = _locked(suggestion)
        if row.status != SuggestionStatus.REJECTED:
            raise DecisionError(
                gettext("Only a rejected suggestion can be reopened; this one is %(status)s.")
                % {"status": row.get_status_display()}
            )
        before = row.status
        [(_, facts, verdict)] = _verdicts(collection=row.collection, rows=[row])
        _record_gate(row, facts=facts, verdict=verdict)
        row.status = verdict.status
        row.rejection_reason = ""
        row.rejection_note = ""
        row.updated_at = timezone.now()
        row.save()
        _review(row, decision=Decision.REOPEN, actor=reviewer, label=reviewer.get_username(),
                code="", note=reason, before=before)  # fmt: skip
    return row


def _locked(suggestion: Suggestion) -> Suggestion:
    return Suggestion.objects.select_for_update().select_related("collection").get(pk=suggestion.pk)


def _promote(
    row: Suggestion, *, decision: str, actor: Any, label: str, reason: str, now: Any
) -> None:
    before = row.status
    row.status = SuggestionStatus.PROMOTED
    row.promoted_by = actor
    row.promoted_by_label = label
    row.promoted_at = now
    row.promotion_reason = reason
    row.updated_at = now
    row.save()
    _review(row, decision=decision, actor=actor, label=label, code="", note=reason, before=before)


def _demote(
    row: Suggestion, *, actor: Any, label: str, code: str, note: str, status: str, now: Any
) -> None:
    before = row.status
    row.status = status
    row.promoted_by = None
    row.promoted_by_label = ""
    row.promoted_at = None
    row.promotion_reason = ""
    row.updated_at = now
    row.save()
    _review(row, decision=Decision.DEMOTE, actor=actor, label=label, code=code, note=note,
            before=before)  # fmt: skip


def _review(
    row: Suggestion, *, decision: str, actor: Any, label: str, code: str, note: str, before: str
) -> Review:
    if actor is not None:  # the collection's policy deciding is no person's action
        audit.record(
            actor,
            "suggestion.reviewed",
            f"suggestion {row.pk}",
            collection=row.collection.name,
            detail={
                "decision": decision,
                "reason_code": code,
                "status_before": before,
                "status_after": row.status,
            },
        )
    return Review.objects.create(
        suggestion=row,
        actor=actor,
        actor_label=label,
        decision=decision,
        reason_code=code,
        note=note,
        status_before=before,
        status_after=row.status,
    )


# --- Quality Lab --------------------------------------------------------------------------


def shadow_reranker(*, collection: Collection) -> Rerank | None:
    """For a collection in shadow mode: the ranking with its suggestions applied
    (``apply_learning_suggestions(..., mode="shadow")``), best first. None otherwise."""
    if collection.learning_mode != LearningMode.SHADOW or not collection.learning_allowed:
        return None
    suggestions = [
        row.as_library()
        for row in Suggestion.objects.filter(collection=collection)
        .exclude(status=SuggestionStatus.REJECTED)
        .select_related("collection")
    ]

    def rerank(query: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        applied = apply_learning_suggestions(query, rows, suggestions, mode="shadow")
        # A stable sort: ties keep the current order, so only a boost moves a row.
        return sorted(applied["candidates"], key=lambda row: -float(row.get("score") or 0.0))

    return rerank


def quality_lab_attempt_items(*, run: CaseRun, results: list[CaseResult]) -> list[dict[str, Any]]:
    """One learning attempt per executed case, as ingest items (idempotent per run, case
    and repetition). The run's result writer ingests them with the failed cases' records,
    in the transaction that stores the results: a killed worker leaves neither, and the
    redelivered task runs those cases again. The results must have their ids. A failure to
    build them is logged and never fails the run."""
    try:
        return [_attempt_item(run, result) for result in results]
    except Exception:
        log.exception("learning attempts of Quality Lab run %s were not built", run.pk)
        return []


def quality_lab_run_learn(*, run: CaseRun) -> None:
    """After a run is marked done, so that whoever waits on the run does not wait on this:
    merge its attempts into the suggestions and, for a shadow run, record each
    suggestion's shadow evidence. Lost with a killed worker, the attempts stay pending and
    the collection's next derivation (or `manage.py learning_derive`) merges them."""
    try:
        # This is the run's Celery task: derive here rather than queue another task per run.
        while suggestions_derive(collection_id=run.collection_id) == DERIVE_BATCH:
            pass
        results = list(CaseResult.objects.filter(run=run).select_related("case").order_by("id"))
        if results:
            shadow_record(run=run, results=results)
    except Exception:
        log.exception("learning records of Quality Lab run %s failed", run.pk)


def _attempt_item(run: CaseRun, result: CaseResult) -> dict[str, Any]:
    case = result.case
    sections = result.sections or {}
    selector = sections.get("target_selector") or {}
    plan = sections.get("plan") or {}
    failure = sections.get("failure") or {}
    success = bool(result.passed and not failure)
    latency = sum(float(value) for value in (result.latency_ms or {}).values() if value)
    client_id = result.ingest_id
    body: dict[str, Any] = {
        "query": case.query,
        "collection": run.collection.name,
        "attempt_id": client_id,
        "source": "quality_lab",
        "selected_target": selector.get("selected_target") or "",
        "llm_target": selector.get("llm_target") or case.llm_target or "",
        "plan_tools": [str(tool) for tool in plan.get("tools") or [] if tool],
        "success": success,
        "failure_reason": failure.get("reason") or None,
        "latency_ms": int(latency),
        "target_selector": {
            key: selector.get(key)
            for key in ("selected_target", "overrode_llm", "ambiguous", "reason_codes", "decision")
            if key in selector
        },
        "trace_edges": _executed_edges(plan) if success and case.mode == "execute" else [],
        "occurred_at": result.created_at.isoformat(),
        "quality_lab": {
            "run": run.pk,
            "case": case.case_id,
            "repetition": result.repetition,
            "result_id": result.pk,  # not "result": the scrubber takes that for a raw body
            "mode": case.mode,
        },
    }
    return {"type": ITEM_TYPE, "id": client_id, "body": body}


def _executed_edges(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Data flow a successful execution proved: a step argument bound to an earlier step's
    output (``${s1.orderNo}``) is an edge from that step's tool to this one."""
    steps = [step for step in plan.get("steps") or [] if isinstance(step, dict)]
    tool_of = {str(step.get("id")): str(step.get("tool")) for step in steps}
    edges = []
    for step in steps:
        for field, value in (step.get("args") or {}).items():
            if not isinstance(value, str) or not value.startswith("${"):
                continue
            source_id = value[2:].split(".", 1)[0].split("[", 1)[0]
            if source_id in tool_of and source_id != step.get("id"):
                edges.append(
                    {
                        "source": tool_of[source_id],
                        "target": str(step.get("tool")),
                        "data_flow": {"to_field": str(field)},
                    }
                )
    return edges


def shadow_record(*, run: CaseRun, results: list[CaseResult]) -> None:
    """Each suggestion's shadow evidence from a run's shadow comparisons: for every case of
    its query family, the expected target's rank now and with this suggestion applied."""
    shadowed = [
        result
        for result in results
        if ((result.sections or {}).get("learning") or {}).get("mode") == "shadow"
    ]
    if not shadowed:
        return
    by_family: dict[str, list[Suggestion]] = defaultdict(list)
    for row in (
        Suggestion.objects.filter(collection=run.collection)
        .exclude(status=SuggestionStatus.REJECTED)
        .select_related("collection")
    ):
        by_family[row.query_fingerprint].append(row)
    touched: dict[int, Suggestion] = {}
    for result in shadowed:
        fingerprint = stable_hash(normalize_query_family(result.case.query))
        for suggestion in by_family.get(fingerprint, []):
            _shadow_observe(suggestion=suggestion, result=result)
            touched[suggestion.pk] = suggestion
    for suggestion in touched.values():
        shadow_summary_refresh(suggestion=suggestion)


def _shadow_observe(*, suggestion: Suggestion, result: CaseResult) -> None:
    sections = result.sections or {}
    learning = sections.get("learning") or {}
    rows = [
        {"name": str(row.get("name")), "score": float(row.get("score") or 0.0)}
        for row in (sections.get("search") or {}).get("results") or []
        if isinstance(row, dict)
    ]
    expected = learning.get("expected_target") or result.case.expected_target or ""
    current = _rank(rows, expected)
    applied = apply_learning_suggestions(
        result.case.query, rows, [suggestion.as_library()], mode="shadow"
    )
    shadow_rows = sorted(applied["candidates"], key=lambda row: -float(row.get("score") or 0.0))
    shadow = _rank(shadow_rows, expected)
    ShadowObservation.objects.update_or_create(
        suggestion=suggestion,
        result=result,
        defaults={
            "case_id": result.case.case_id,
            "expected_target": expected,
            "current_rank": current,
            "shadow_rank": shadow,
            "rank_delta": current - shadow if current and shadow else None,
            "selected_target_changed": learning.get("selected_target_changed"),
            "failure_reason_changed": learning.get("failure_reason_changed"),
        },
    )


def _rank(rows: list[dict[str, Any]], name: str) -> int | None:
    names = [str(row.get("name")) for row in rows]
    return names.index(name) + 1 if name and name in names else None


def shadow_summary_refresh(*, suggestion: Suggestion) -> None:
    """Sum the latest observation of each case into Suggestion.shadow (what the queue shows)."""
    latest: dict[str, ShadowObservation] = {}
    for observation in suggestion.shadow_observations.order_by("-created_at", "-id"):
        latest.setdefault(observation.case_id, observation)
    deltas = [o.rank_delta for o in latest.values() if o.rank_delta is not None]
    suggestion.shadow = {
        "cases": len(latest),
        "rank_delta": sum(deltas),
        "improved": sum(1 for delta in deltas if delta > 0),
        "worsened": sum(1 for delta in deltas if delta < 0),
        "selected_target_changed": sum(1 for o in latest.values() if o.selected_target_changed),
        "failure_reason_changed": sum(1 for o in latest.values() if o.failure_reason_changed),
        "updated_at": timezone.now().isoformat(),
    }
    Suggestion.objects.filter(pk=suggestion.pk).update(shadow=suggestion.shadow)
