"""Derive the next action of a failure: lane, execution state, retryable and operator action.

Input is (reason, tool side-effect grade, execution state the runtime sent) plus the tool's
policy (seed 004). The runtime's own claims are kept next to the derivation; where they
contradict it, the record carries a contradiction and the safer of the two lanes wins, so a
runtime that is wrong about its own failure can never make the desk suggest a blind retry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from triage.vocabulary import taxonomy

# Reasons whose lane depends on whether the tool writes and whether the request was sent.
_TRANSIENT_REASONS = frozenset({"timeout", "network_error", "http_5xx"})
_WRITE_GRADES = frozenset({"internal_write", "external_write", "privileged"})
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The order in which lanes restrict automation: a later lane is always at least as safe.
_LANE_SAFETY = {
    "retry_safe": 0,
    "input_stale": 1,
    "reconcile_first": 2,
    "manual_investigation": 3,
    "policy_blocked": 4,
}
_LANE_ACTIONS = {
    "retry_safe": "retry_with_backoff",
    "reconcile_first": "query_by_idempotency_key",
    "input_stale": "refresh_inputs_and_replan",
    "policy_blocked": "stop_and_request_approval",
    "manual_investigation": "stop_automation_and_investigate",
}
UNMAPPED_OPERATOR_ACTION = "investigate_unmapped_reason"


def most_cautious_lane(*lanes: str) -> str:
    """Of several verdicts on one run, the one that restricts automation most ("" if none).

    A page shows one verdict per row: a retry_safe lane beside evidence that a retry may
    repeat the work would be two answers, and the reader would pick the wrong one."""
    known = [lane for lane in lanes if lane in _LANE_SAFETY]
    return max(known, key=_LANE_SAFETY.__getitem__) if known else ""


@dataclass(frozen=True)
class ToolFacts:
    """What the desk knows about the tool that failed (from its ToolPolicy, or defaults)."""

    side_effect: str = ""  # "" when nobody declared it
    timeout_before_send_lane: str = "retry_safe"
    timeout_after_send_lane: str = "reconcile_first"
    approval_required: bool = False


@dataclass(frozen=True)
class Sent:
    """The runtime's own claims, each None when it did not send one."""

    lane: str | None = None
    execution_state: str | None = None
    retryable: bool | None = None
    operator_action: str | None = None


@dataclass
class Classification:
    lane: str
    execution_state: str
    retryable: bool
    operator_action: str
    side_effect: str
    contradictions: list[dict[str, Any]] = field(default_factory=list)


def effective_side_effect(tool: ToolFacts, evidence: dict[str, Any]) -> str:
    """The declared grade, else one inferred from the HTTP method; "" when unknown."""
    if tool.side_effect:
        return tool.side_effect
    method = str(evidence.get("http_method") or evidence.get("method") or "").upper()
    if method in _READ_METHODS:
        return "read"
    if method:
        return "external_write"
    return ""


def _is_write(side_effect: str) -> bool:
    # An undeclared tool may write: assume it does, so nothing suggests a blind retry.
    return side_effect in _WRITE_GRADES or side_effect == ""


def _derived_state(reason: str, info: taxonomy.ReasonInfo | None, side_effect: str) -> str:
    if info is None:
        return "started_unknown"
    if reason == "http_5xx" and _is_write(side_effect):
        return "started_unknown"
    return info.default_execution_state


def _possible_states(info: taxonomy.ReasonInfo | None) -> frozenset[str]:
    if info is None or info.api_called == "maybe":
        return frozenset(taxonomy.EXECUTION_STATES)
    if info.api_called == "no":
        return frozenset({"not_started"})
    return frozenset({"started_unknown", "partially_completed", "completed"})


def _derived_lane(
    reason: str,
    info: taxonomy.ReasonInfo | None,
    state: str,
    side_effect: str,
    tool: ToolFacts,
    evidence: dict[str, Any],
) -> str:
    if info is None:
        return "manual_investigation"
    if state == "partially_completed":
        return "manual_investigation"
    rate_limited = reason == "http_4xx" and (
        evidence.get("http_status") == 429 or evidence.get("rate_limited") is True
    )
    if reason in _TRANSIENT_REASONS or rate_limited:
        if not _is_write(side_effect):
            return "retry_safe"
        if state == "not_started":
            return tool.timeout_before_send_lane
        return tool.timeout_after_send_lane
    return info.lane


def classify(
    *,
    reason: str,
    tool: ToolFacts,
    sent: Sent,
    evidence: dict[str, Any],
) -> Classification:
    info = taxonomy.reason_info(reason)
    side_effect = effective_side_effect(tool, evidence)
    contradictions: list[dict[str, Any]] = []

    state = _derived_state(reason, info, side_effect)
    if sent.execution_state is not None:
        if sent.execution_state in _possible_states(info):
            state = sent.execution_state
        else:
            contradictions.append(
                _contradiction("execution_state", sent.execution_state, state, reason)
            )

    lane = _derived_lane(reason, info, state, side_effect, tool, evidence)
    if tool.approval_required and info is not None and info.stage == "auth_preflight":
        lane = "policy_blocked"
    if sent.lane is not None and sent.lane != lane:
        contradictions.append(_contradiction("lane", sent.lane, lane, reason))
        if _LANE_SAFETY[sent.lane] > _LANE_SAFETY[lane]:
            lane = sent.lane

    retryable = lane == "retry_safe"
    if sent.retryable is True and not retryable:
        contradictions.append(_contradiction("retryable", True, False, reason, lane=lane))

    if sent.operator_action:
        operator_action = sent.operator_action
    elif info is not None and lane == info.lane:
        operator_action = info.operator_action
    elif info is None:
        operator_action = UNMAPPED_OPERATOR_ACTION
    else:
        operator_action = _LANE_ACTIONS[lane]
    return Classification(
        lane=lane,
        execution_state=state,
        retryable=retryable,
        operator_action=operator_action,
        side_effect=side_effect,
        contradictions=contradictions,
    )


def _contradiction(
    field_name: str, sent: Any, derived: Any, reason: str, *, lane: str | None = None
) -> dict[str, Any]:
    code = f"{field_name}_in_{lane}" if lane else f"{field_name}_contradicts_{reason}"
    return {"code": code, "field": field_name, "sent": sent, "derived": derived}


_RECEIPT_STATE_LANES = {
    "started_unknown": "reconcile_first",
    "partially_completed": "manual_investigation",
}
# Receipt results that mean the tool run finished as intended.
SUCCESS_RESULTS = frozenset({"ok", "success", "succeeded", "completed", "done"})
# The runner event that says a step succeeded (what success rates count).
SUCCESS_EVENT = "step.completed"


def classify_receipt(
    *,
    result: str,
    reason: str,
    execution_state: str,
    retryable: bool | None,
    idempotency_key: str,
    sent_lane: str | None,
    tool: ToolFacts,
) -> tuple[str, list[dict[str, Any]]]:
    """The lane of a tool-run receipt ("" for a plain success) and its own contradictions.

    Contradictions that need other rows (audit events, other receipts) are found when the
    receipts page reads them.
    """
    contradictions: list[dict[str, Any]] = []
    side_effect = tool.side_effect
    if reason:
        derived = classify(
            reason=reason,
            tool=tool,
            sent=Sent(lane=sent_lane, execution_state=execution_state),
            evidence={},
        )
        lane = derived.lane
        contradictions.extend(derived.contradictions)
    elif result.lower() == "blocked":
        lane = "policy_blocked"
    elif result.lower() in SUCCESS_RESULTS and execution_state == "completed":
        lane = ""
    else:
        lane = _RECEIPT_STATE_LANES.get(execution_state, "")
        if not lane:
            lane = "retry_safe" if execution_state == "not_started" else "manual_investigation"
        if sent_lane is not None and sent_lane != lane:
            contradictions.append(_contradiction("lane", sent_lane, lane, result))
            if _LANE_SAFETY[sent_lane] > _LANE_SAFETY[lane]:
                lane = sent_lane
    if lane == "" and sent_lane is not None:
        lane = sent_lane
    if retryable is True and lane in ("policy_blocked", "reconcile_first", "manual_investigation"):
        contradictions.append(_contradiction("retryable", True, False, result, lane=lane))
    if side_effect == "external_write" and not idempotency_key:
        contradictions.append(
            {
                "code": "external_write_without_idempotency_key",
                "field": "idempotency_key",
                "sent": None,
                "derived": "required",
            }
        )
    return lane, contradictions
