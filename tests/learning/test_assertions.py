"""Learning assertions of Quality Lab cases: parsed in every documented style, evaluated
against the engine's shadow comparison and the stored outcome."""

from __future__ import annotations

from typing import Any

import pytest
from graph_tool_call.learning import (
    apply_learning_suggestions,
    normalize_query_family,
    stable_hash,
)

from qualitylab import engine
from qualitylab.assertions import CaseSpecError, parse_assertions
from qualitylab.engine import CaseSpec

TAX: dict[str, Any] = {
    "id": "tax-invoice",
    "mode": "search",
    "query": "tax invoice for order",
    "expected_target": "listInvoices",
    "expected_top_k": 8,
}


def _shadow(target: str, query: str, *, observations: int = 4, status: str = "suggested") -> Any:
    suggestions = [
        {
            "id": f"target_preference:{target}",
            "type": "target_preference",
            "target": target,
            "status": status,
            "observations": observations,
            "query_fingerprint": stable_hash(normalize_query_family(query)),
        }
    ]

    def rerank(query: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        applied = apply_learning_suggestions(query, rows, suggestions, mode="shadow")
        return sorted(applied["candidates"], key=lambda row: -float(row["score"]))

    return rerank


def _results(outcome: engine.CaseOutcome) -> dict[str, dict[str, Any]]:
    return {result["name"]: result for result in outcome.assertions}


def test_every_style_parses() -> None:
    listed = parse_assertions(
        [
            {"type": "shadow_rank_lte_current_rank"},
            {"type": "selected_target_changed", "equals": False},
            {"type": "raw_secret_present", "equals": False},
            {"type": "promotion_status", "in": ["suggested", "promotable"]},
        ],
        mode="plan",
        expected_top_k=8,
    )
    assert [(c.type, c.expected) for c in listed.checks] == [
        ("shadow_rank_lte_current_rank", True),
        ("selected_target_changed", False),
        ("raw_secret_present", False),
        ("promotion_status", ("suggested", "promotable")),
    ]
    as_object = parse_assertions(
        {"selected_target": "getOrderDetail", "promotion_status": "promoted",
         "raw_secret_present": False},
        mode="plan", expected_top_k=8,
    )  # fmt: skip
    assert {c.type for c in as_object.checks} == {
        "selected_target", "promotion_status", "raw_secret_present"}  # fmt: skip
    documented = CaseSpec.from_json(
        {**TAX, "learning": {"mode": "shadow", "expected_target": "listInvoices",
                             "assertions": {"shadow_rank_lte_current_rank": True,
                                            "raw_secret_present": False}}}
    )  # fmt: skip
    assert [c.type for c in documented.assertions.checks] == [
        "shadow_rank_lte_current_rank", "raw_secret_present"]  # fmt: skip
    assert documented.to_json()["learning"]["mode"] == "shadow"  # kept as written


@pytest.mark.parametrize(
    ("value", "mode", "field", "message"),
    [
        ([{"type": "selected_target_changed"}], "plan", "assertions[0].equals", "required"),
        ([{"type": "selected_target_changed", "equals": False}], "search",
         "assertions[0].type", "execute or plan"),
        ({"selected_target_changed": True}, "search", "assertions.selected_target_changed",
         "execute or plan"),
        ([{"type": "promotion_status", "in": ["active"]}], "plan", "assertions[0].in",
         "suggested, promotable"),
        ([{"type": "promotion_status"}], "plan", "assertions[0]", "exactly one"),
        ([{"type": "raw_secret_present", "equals": "no"}], "plan", "assertions[0].equals",
         "true or false"),
        ([{"type": "shadow_rank_lte_current_rank", "k": 1}], "plan", "assertions[0].k",
         "not a field"),
        ({"shadow_rank_lte_current_rank": "yes"}, "search",
         "assertions.shadow_rank_lte_current_rank", "true or false"),
    ],
)  # fmt: skip
def test_bad_learning_assertions_name_the_field(
    value: Any, mode: str, field: str, message: str
) -> None:
    with pytest.raises(CaseSpecError) as caught:
        parse_assertions(value, mode=mode, expected_top_k=8)
    assert caught.value.field == field
    assert message in caught.value.message


def test_a_bad_learning_block_names_the_field() -> None:
    with pytest.raises(CaseSpecError) as caught:
        CaseSpec.from_json({**TAX, "learning": {"assertions": {"top_k_contains": True}}})
    assert caught.value.field == "learning.assertions.top_k_contains"


def test_shadow_assertions_read_the_comparison(demo_collection: engine.LoadedCollection) -> None:
    case = CaseSpec.from_json({
        **TAX,
        "assertions": [
            {"type": "shadow_rank_lte_current_rank"},
            {"type": "raw_secret_present", "equals": False},
            {"type": "promotion_status", "in": ["suggested", "promotable"]},
        ],
    })  # fmt: skip
    outcome = engine.run_case(demo_collection, case, shadow=_shadow("listInvoices", TAX["query"]))
    learning = outcome.learning or {}
    assert (learning["current_rank"], learning["shadow_rank"], learning["rank_delta"]) == (4, 3, 1)
    assert learning["selected_target_changed"] is None  # a search case selects nothing
    results = _results(outcome)
    assert results["shadow_rank_lte_current_rank"]["passed"] is True
    assert results["shadow_rank_lte_current_rank"]["actual"] == {
        "current_rank": 4,
        "shadow_rank": 3,
    }
    assert results["raw_secret_present"]["passed"] is True
    assert results["promotion_status"] == {
        "name": "promotion_status", "expected": ["suggested", "promotable"],
        "actual": "suggested", "passed": True}  # fmt: skip


def test_a_suggestion_that_pushes_the_target_down_fails_the_rank_assertion(
    demo_collection: engine.LoadedCollection,
) -> None:
    query = "how many orders are there"  # countOrders 1.0, listOrders 0.974
    case = CaseSpec.from_json({"id": "count", "mode": "search", "query": query,
                               "expected_target": "countOrders",
                               "assertions": {"shadow_rank_lte_current_rank": True}})  # fmt: skip
    # Boosting the runner-up of a close pair overtakes the expected first row.
    outcome = engine.run_case(demo_collection, case, shadow=_shadow("listOrders", query))
    learning = outcome.learning or {}
    assert (learning["current_rank"], learning["shadow_rank"], learning["rank_delta"]) == (1, 2, -1)
    assert _results(outcome)["shadow_rank_lte_current_rank"]["passed"] is False
    assert outcome.status == "failed"


def test_selected_target_changed_is_compared_on_plan_cases(
    demo_collection: engine.LoadedCollection,
) -> None:
    case = CaseSpec.from_json({
        "id": "chain", "mode": "plan", "query": "show me the order detail",
        "expected_target": "getOrderDetail",
        "assertions": [{"type": "selected_target_changed", "equals": False}],
    })  # fmt: skip
    outcome = engine.run_case(
        demo_collection, case, shadow=_shadow("getOrderDetail", "show me the order detail")
    )
    learning = outcome.learning or {}
    assert learning["current_selected_target"] == learning["shadow_selected_target"]
    assert learning["failure_reason_changed"] is False
    assert _results(outcome)["selected_target_changed"]["passed"] is True


def test_without_a_shadow_run_learning_assertions_are_not_evaluated(
    demo_collection: engine.LoadedCollection,
) -> None:
    case = CaseSpec.from_json({**TAX, "expected_target": "getInvoice", "assertions": {
        "shadow_rank_lte_current_rank": True, "promotion_status": "promoted",
        "raw_secret_present": False}})  # fmt: skip
    outcome = engine.run_case(demo_collection, case)
    results = _results(outcome)
    assert results["shadow_rank_lte_current_rank"]["passed"] is None
    assert "shadow mode" in results["shadow_rank_lte_current_rank"]["note"]
    assert results["promotion_status"]["passed"] is None
    assert results["raw_secret_present"]["passed"] is True  # always evaluable
    assert outcome.status == "passed"


def test_raw_secret_present_finds_a_secret_without_repeating_it(
    demo_collection: engine.LoadedCollection,
) -> None:
    case = CaseSpec.from_json({**TAX, "expected_target": "getInvoice",
                               "assertions": {"raw_secret_present": False}})  # fmt: skip
    outcome = engine.run_case(demo_collection, case)
    outcome.failure = engine.failure_record(
        "execute", "http_4xx", "sent Authorization: Bearer sk-live-51HqLyjWDarjtT1zdp7dc"
    )
    from qualitylab.assertions import evaluate

    [result] = evaluate(case.assertions, outcome)
    assert result["passed"] is False
    assert result["actual"] == {"present": True, "paths": ["$.failure.message"]}
    assert "sk-live" not in str(result)


def test_a_failing_shadow_ranking_never_changes_the_case(
    demo_collection: engine.LoadedCollection,
) -> None:
    def broken(query: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise RuntimeError("suggestions unavailable")

    case = CaseSpec.from_json({**TAX, "expected_target": "getInvoice"})
    outcome = engine.run_case(demo_collection, case, shadow=broken)
    assert outcome.status == "passed" and outcome.failure is None
    assert outcome.learning == {
        "mode": "shadow",
        "error": "RuntimeError while comparing the shadow ranking",
    }
