"""The promotion gate as a table: evidence and collection policy in, status out."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from graph_tool_call.learning import build_trace_learning_record, merge_learning_suggestions

from learning.gate import GateFacts, Thresholds, evaluate_gate

CLEAN = GateFacts(
    observations=2,
    recent_successes=2,
    recent_failures=0,
    agreeing_successes=2,
    family_successes=2,
    sensitive=False,
    same_collection=True,
    learning_allowed=True,
    write_capable=False,
    learning_mode="observe",
)
DEFAULT = Thresholds()


@pytest.mark.parametrize(
    ("change", "status", "blocked"),
    [
        ({}, "promotable", []),
        ({"observations": 1, "recent_successes": 1}, "suggested", ["repeated_success"]),
        ({"observations": 5, "recent_successes": 5, "agreeing_successes": 5,
          "family_successes": 5}, "promotable", []),
        # The library ignores failures: 2 successes and 3 failures must stay suggested.
        ({"recent_failures": 3}, "suggested", ["failure_ratio"]),
        ({"recent_failures": 2}, "promotable", []),  # 50%: at most 0.5 passes
        ({"agreeing_successes": 1}, "suggested", ["stable_target"]),  # 1 of 2 chose it
        ({"agreeing_successes": 4, "family_successes": 5}, "promotable", []),  # 80%
        ({"agreeing_successes": 0, "family_successes": 0}, "suggested", ["stable_target"]),
        ({"sensitive": True}, "suggested", ["scrubbed_evidence"]),
        ({"same_collection": False}, "suggested", ["same_collection"]),
        ({"learning_allowed": False}, "suggested", ["collection_allows_learning"]),
        ({"write_capable": True}, "promotable", []),
        ({"recent_failures": 3, "sensitive": True, "learning_allowed": False}, "suggested",
         ["failure_ratio", "scrubbed_evidence", "collection_allows_learning"]),
    ],
)  # fmt: skip
def test_gate_status(change: dict[str, Any], status: str, blocked: list[str]) -> None:
    verdict = evaluate_gate(replace(CLEAN, **change), DEFAULT)
    assert verdict.status == status
    assert verdict.blocked_by == blocked


@pytest.mark.parametrize(
    ("change", "auto_promote"),
    [
        ({}, False),  # observe mode: a reviewer promotes
        ({"learning_mode": "shadow"}, False),
        ({"learning_mode": "promoted"}, True),  # read-only, promoted mode: policy may
        ({"learning_mode": "promoted", "write_capable": True}, False),  # never without a human
        ({"learning_mode": "promoted", "demoted_before": True}, False),
        ({"learning_mode": "promoted", "recent_failures": 3}, False),  # not promotable
        ({"learning_mode": "promoted", "learning_allowed": False}, False),
    ],
)
def test_policy_promotes_only_read_only_collections_in_promoted_mode(
    change: dict[str, Any], auto_promote: bool
) -> None:
    verdict = evaluate_gate(replace(CLEAN, **change), DEFAULT)
    assert verdict.auto_promote is auto_promote
    if verdict.promotable:
        assert (verdict.why_reviewer == "") is auto_promote


def test_thresholds_are_settings(settings: Any) -> None:
    settings.LEARNING_MIN_SUCCESS_OBSERVATIONS = 3
    settings.LEARNING_MAX_RECENT_FAILURE_RATIO = 0.2
    settings.LEARNING_MIN_TARGET_AGREEMENT = 1.0
    settings.LEARNING_AUTO_PROMOTE = False
    strict = Thresholds.from_settings()
    assert strict == Thresholds(3, 0.2, 1.0, False)
    assert evaluate_gate(CLEAN, strict).blocked_by == ["repeated_success"]
    facts = replace(CLEAN, observations=5, recent_successes=4, recent_failures=1,
                    agreeing_successes=4, family_successes=5, learning_mode="promoted")  # fmt: skip
    assert evaluate_gate(facts, strict).blocked_by == ["stable_target"]
    assert not evaluate_gate(replace(facts, agreeing_successes=5), strict).auto_promote


def test_the_library_alone_would_promote_two_successes_despite_three_failures() -> None:
    """Why the desk has its own gate: graph-tool-call promotes on observations alone."""
    records = [
        build_trace_learning_record(query="q", collection_id="c", selected_target="t",
                                    success=success, created_at=f"2026-01-0{n}T00:00:00Z")
        for n, success in enumerate([True, True, False, False, False], start=1)
    ]  # fmt: skip
    suggestion = {
        "id": "target_preference:x",
        "type": "target_preference",
        "target": "t",
        "query_fingerprint": records[0]["query_fingerprint"],
        "observations": 1,
    }
    merged = merge_learning_suggestions([suggestion], [suggestion], history=records)
    assert merged[0]["status"] == "promotable"
    facts = replace(CLEAN, recent_successes=2, recent_failures=3)
    assert evaluate_gate(facts, DEFAULT).status == "suggested"
