from __future__ import annotations

from typing import Any

import pytest

from qualitylab import assertions
from qualitylab.assertions import CaseSpecError, parse_assertions
from qualitylab.engine import CaseOutcome, failure_record


def _outcome(**sections: Any) -> CaseOutcome:
    outcome = CaseOutcome(case_id="a-1", mode="execute")
    for name, value in sections.items():
        setattr(outcome, name, value)
    return outcome


EXECUTED = _outcome(
    search={"results": [{"name": "listOrders"}, {"name": "getOrderDetail"}]},
    target_selector={"selected_target": "getOrderDetail"},
    plan={"steps": [{"tool": "listOrders"}, {"tool": "getOrderDetail"}]},
    execute={
        "http_status": 200,
        "json_paths": {
            "$.orderNo": {"exists": True, "count": 1, "shape": "string"},
            "$.missing": {"exists": False, "count": 0, "shape": None},
        },
    },
)


def _evaluate(value: Any, outcome: CaseOutcome, mode: str = "execute") -> list[dict[str, Any]]:
    return assertions.evaluate(parse_assertions(value, mode=mode, expected_top_k=8), outcome)


# ---- the typed list --------------------------------------------------------------------


def test_typed_assertions_pass_on_a_matching_outcome() -> None:
    results = _evaluate(
        [
            {"type": "top_k_contains", "tool": "getOrderDetail", "k": 2},
            {"type": "selected_target", "equals": "getOrderDetail"},
            {"type": "plan_contains_tool", "tool": "listOrders"},
            {"type": "http_status", "in": [200, 204]},
            {"type": "json_path_exists", "path": "$.orderNo"},
        ],
        EXECUTED,
    )
    assert [(r["name"], r["passed"]) for r in results] == [
        ("top_k_contains", True),
        ("selected_target", True),
        ("plan_contains_tool", True),
        ("http_status", True),
        ("json_path_exists", True),
    ]
    assert results[0]["actual"] == {"rank": 2}
    assert results[3]["expected"] == [200, 204]


def test_typed_assertions_fail_with_the_actual_value() -> None:
    results = _evaluate(
        [
            {"type": "top_k_contains", "tool": "getOrderDetail", "k": 1},
            {"type": "selected_target", "equals": "listOrders"},
            {"type": "plan_contains_tool", "tool": "createRefund"},
            {"type": "http_status", "equals": 201},
            {"type": "json_path_exists", "path": "$.missing"},
        ],
        EXECUTED,
    )
    assert all(result["passed"] is False for result in results)
    assert results[1]["actual"] == "getOrderDetail"
    assert results[3]["actual"] == 200
    status, allowed = assertions.decide(
        parse_assertions([], mode="plan", expected_top_k=8), None, results
    )
    assert (status, allowed) == ("failed", False)


def test_top_k_contains_defaults_to_the_cases_top_k() -> None:
    parsed = parse_assertions(
        [{"type": "top_k_contains", "tool": "getOrderDetail"}], mode="search", expected_top_k=3
    )
    assert parsed.checks[0].k == 3


def test_assertions_on_stages_that_did_not_run_are_not_evaluated() -> None:
    stopped = _outcome(
        target_selector={"selected_target": "getMemberPoints"},
        plan={"steps": [{"tool": "getMemberPoints"}]},
        execute={"http_status": None, "json_paths": {"$.balance": {"exists": None}}},
    )
    results = _evaluate(
        [{"type": "http_status", "equals": 200}, {"type": "json_path_exists", "path": "$.balance"}],
        stopped,
    )
    assert [result["passed"] for result in results] == [None, None]
    assert "not evaluated" in results[0]["note"]


# ---- the object style and allowed failure reasons --------------------------------------

SEED_STYLE = {
    "selected_target": "getOrderDetail",
    "allowed_failure_reasons": ["auth_context_required", "auth_failed", "http_4xx"],
    "uncaught_server_error": False,
}


def test_an_allowed_failure_reason_passes_the_case() -> None:
    parsed = parse_assertions(SEED_STYLE, mode="execute", expected_top_k=8)
    failure = failure_record("execute", "auth_failed", "HTTP 401: Unauthorized")
    outcome = _outcome(target_selector={"selected_target": "getOrderDetail"}, failure=failure)
    results = assertions.evaluate(parsed, outcome)
    assert [(r["name"], r["passed"]) for r in results] == [
        ("selected_target", True),
        ("uncaught_server_error", True),
    ]
    assert assertions.decide(parsed, failure, results) == ("passed", True)


def test_a_failure_reason_that_is_not_allowed_fails_the_case() -> None:
    parsed = parse_assertions(SEED_STYLE, mode="execute", expected_top_k=8)
    failure = failure_record("execute", "http_5xx", "HTTP 500: Internal Server Error")
    results = assertions.evaluate(parsed, _outcome(failure=failure))
    assert assertions.decide(parsed, failure, results) == ("failed", False)


def test_an_uncaught_server_error_fails_the_uncaught_assertion() -> None:
    parsed = parse_assertions(
        {**SEED_STYLE, "allowed_failure_reasons": ["uncaught_server_error"]},
        mode="execute",
        expected_top_k=8,
    )
    failure = failure_record("service", "uncaught_server_error", "RuntimeError raised")
    results = assertions.evaluate(parsed, _outcome(failure=failure))
    uncaught = next(r for r in results if r["name"] == "uncaught_server_error")
    assert uncaught == {
        "name": "uncaught_server_error",
        "expected": False,
        "actual": True,
        "passed": False,
    }
    # allowed, yet the explicit assertion still fails the case
    assert assertions.decide(parsed, failure, results) == ("failed", True)


def test_a_case_without_assertions_passes_when_nothing_failed() -> None:
    parsed = parse_assertions(None, mode="search", expected_top_k=8)
    assert parsed.style == "none"
    assert assertions.decide(parsed, None, []) == ("passed", False)


# ---- validation at import time ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "mode", "field", "message"),
    [
        ([{"type": "fast_enough"}], "plan", "assertions[0].type", "unknown assertion type"),
        ([{"tool": "x"}], "plan", "assertions[0].type", "is required"),
        (["selected_target"], "plan", "assertions[0]", "must be an object"),
        ("selected_target", "plan", "assertions", "must be a list"),
        ([{"type": "http_status", "equals": 200}], "plan", "assertions[0].type", "execute"),
        ([{"type": "selected_target", "equals": "x"}], "search", "assertions[0].type", "plan"),
        ({"selected_target": "x"}, "search", "assertions.selected_target", "plan"),
        ([{"type": "http_status", "equals": 200, "in": [200]}], "execute", "assertions[0]", "one"),
        ([{"type": "http_status", "equals": 700}], "execute", "assertions[0].equals", "100"),
        ([{"type": "http_status", "in": []}], "execute", "assertions[0].in", "non-empty"),
        ([{"type": "json_path_exists", "path": "orderNo"}], "execute", "assertions[0].path", "$"),
        ([{"type": "json_path_exists", "path": "$..a"}], "execute", "assertions[0].path", "char"),
        ([{"type": "top_k_contains", "tool": "x", "k": 99}], "search", "assertions[0].k", "1"),
        ([{"type": "top_k_contains", "tool": "x", "n": 3}], "search", "assertions[0].n", "field"),
        (
            {"allowed_failure_reasons": ["auth_broken"]},
            "execute",
            "assertions.allowed_failure_reasons[0]",
            "taxonomy",
        ),
        (
            {"allowed_failure_reasons": "auth_failed"},
            "execute",
            "assertions.allowed_failure_reasons",
            "list",
        ),
        (
            {"uncaught_server_error": "no"},
            "execute",
            "assertions.uncaught_server_error",
            "true or false",
        ),
    ],
)
def test_bad_assertions_name_the_field(value: Any, mode: str, field: str, message: str) -> None:
    with pytest.raises(CaseSpecError) as caught:
        parse_assertions(value, mode=mode, expected_top_k=8)
    assert caught.value.field == field
    assert message in caught.value.message


# ---- JSON paths ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$", [{"a": [{"b": 1}, {"b": 2}], "c d": 3}]),
        ("$.a[0].b", [1]),
        ("$.a[*].b", [1, 2]),
        ("$['c d']", [3]),
        ("$.a[5].b", []),
        ("$.x.y", []),
    ],
)
def test_json_path_values(path: str, expected: list[Any]) -> None:
    document = {"a": [{"b": 1}, {"b": 2}], "c d": 3}
    assert assertions.json_path_values(document, path) == expected
