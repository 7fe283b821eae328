from __future__ import annotations

import pytest

from triage.vocabulary.lanes import Sent, ToolFacts, classify, classify_receipt

READ = ToolFacts(side_effect="read")
WRITE = ToolFacts(side_effect="external_write")
UNDECLARED = ToolFacts()


@pytest.mark.parametrize(
    ("reason", "tool", "sent", "evidence", "lane", "state", "retryable"),
    [
        # reads that fail transiently are retried with backoff
        ("http_5xx", READ, Sent(), {}, "retry_safe", "completed", True),
        ("timeout", READ, Sent(), {}, "retry_safe", "started_unknown", True),
        ("network_error", READ, Sent(), {}, "retry_safe", "started_unknown", True),
        ("http_4xx", READ, Sent(), {"http_status": 429}, "retry_safe", "completed", True),
        # a write that may have happened is looked up, never blindly retried
        ("timeout", WRITE, Sent(), {}, "reconcile_first", "started_unknown", False),
        ("http_5xx", WRITE, Sent(), {}, "reconcile_first", "started_unknown", False),
        (
            "timeout",
            WRITE,
            Sent(execution_state="not_started"),
            {},
            "retry_safe",
            "not_started",
            True,
        ),
        # an undeclared tool is assumed to write, unless its HTTP method says it reads
        ("timeout", UNDECLARED, Sent(), {}, "reconcile_first", "started_unknown", False),
        (
            "timeout",
            UNDECLARED,
            Sent(),
            {"http_method": "GET"},
            "retry_safe",
            "started_unknown",
            True,
        ),
        # missing input and policy problems
        ("enum_required", READ, Sent(), {}, "input_stale", "not_started", False),
        ("unsatisfied_field", READ, Sent(), {}, "input_stale", "not_started", False),
        ("auth_profile_missing", READ, Sent(), {}, "policy_blocked", "not_started", False),
        ("auth_failed", READ, Sent(), {}, "policy_blocked", "completed", False),
        ("http_4xx", READ, Sent(), {"http_status": 400}, "input_stale", "completed", False),
        # things a person must look at
        ("cleanup_failed", WRITE, Sent(), {}, "manual_investigation", "partially_completed", False),
        (
            "uncaught_server_error",
            READ,
            Sent(),
            {},
            "manual_investigation",
            "started_unknown",
            False,
        ),
        (
            "http_5xx",
            WRITE,
            Sent(execution_state="partially_completed"),
            {},
            "manual_investigation",
            "partially_completed",
            False,
        ),
        ("made_up_reason", READ, Sent(), {}, "manual_investigation", "started_unknown", False),
    ],
)
def test_lane_state_and_retryable_follow_reason_grade_and_state(
    reason: str, tool: ToolFacts, sent: Sent, evidence: dict, lane: str, state: str, retryable: bool
) -> None:
    result = classify(reason=reason, tool=tool, sent=sent, evidence=evidence)
    assert (result.lane, result.execution_state, result.retryable) == (lane, state, retryable)


def test_a_policy_can_route_timeouts_after_send_elsewhere() -> None:
    tool = ToolFacts(side_effect="internal_write", timeout_after_send_lane="manual_investigation")
    assert (
        classify(reason="timeout", tool=tool, sent=Sent(), evidence={}).lane
        == "manual_investigation"
    )


def test_retryable_true_in_policy_blocked_is_a_contradiction() -> None:
    result = classify(
        reason="auth_context_required", tool=READ, sent=Sent(retryable=True), evidence={}
    )
    assert result.retryable is False
    assert result.contradictions == [
        {
            "code": "retryable_in_policy_blocked",
            "field": "retryable",
            "sent": True,
            "derived": False,
        }
    ]


def test_an_impossible_sent_state_is_flagged_and_replaced() -> None:
    result = classify(
        reason="http_5xx", tool=READ, sent=Sent(execution_state="not_started"), evidence={}
    )
    assert result.execution_state == "completed"
    assert result.contradictions[0]["code"] == "execution_state_contradicts_http_5xx"


def test_a_possible_sent_state_is_trusted() -> None:
    result = classify(
        reason="timeout", tool=READ, sent=Sent(execution_state="not_started"), evidence={}
    )
    assert (result.execution_state, result.contradictions) == ("not_started", [])


def test_of_two_lanes_the_more_cautious_wins_and_the_difference_is_flagged() -> None:
    riskier = classify(reason="timeout", tool=WRITE, sent=Sent(lane="retry_safe"), evidence={})
    assert riskier.lane == "reconcile_first"
    assert riskier.contradictions[0]["code"] == "lane_contradicts_timeout"
    safer = classify(
        reason="http_5xx", tool=READ, sent=Sent(lane="manual_investigation"), evidence={}
    )
    assert (safer.lane, safer.retryable) == ("manual_investigation", False)
    assert safer.operator_action == "stop_automation_and_investigate"


def test_a_sent_operator_action_is_kept() -> None:
    result = classify(
        reason="http_5xx", tool=READ, sent=Sent(operator_action="page_oncall"), evidence={}
    )
    assert result.operator_action == "page_oncall"


@pytest.mark.parametrize(
    ("result", "reason", "state", "lane"),
    [
        ("ok", "", "completed", ""),
        ("blocked", "", "not_started", "policy_blocked"),
        ("uncertain", "", "started_unknown", "reconcile_first"),
        ("failed", "", "partially_completed", "manual_investigation"),
        ("failed", "", "not_started", "retry_safe"),
        ("failed", "http_5xx", "started_unknown", "reconcile_first"),
    ],
)
def test_receipt_lanes(result: str, reason: str, state: str, lane: str) -> None:
    derived, _ = classify_receipt(
        result=result,
        reason=reason,
        execution_state=state,
        retryable=None,
        idempotency_key="k",
        sent_lane=None,
        tool=WRITE,
    )
    assert derived == lane


def test_an_external_write_receipt_without_idempotency_key_is_flagged() -> None:
    _, contradictions = classify_receipt(
        result="ok",
        reason="",
        execution_state="completed",
        retryable=None,
        idempotency_key="",
        sent_lane=None,
        tool=WRITE,
    )
    assert [c["code"] for c in contradictions] == ["external_write_without_idempotency_key"]
