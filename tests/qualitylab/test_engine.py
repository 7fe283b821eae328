from __future__ import annotations

import copy
import json
import socket
import urllib.request
from collections import OrderedDict
from typing import Any

import pytest

from qualitylab import demo, engine
from qualitylab.engine import CaseSpec, CaseSpecError, SpecError
from qualitylab.engine import collection as engine_collection
from qualitylab.engine import plan as engine_plan
from qualitylab.engine import search as engine_search
from qualitylab.sandbox import SandboxServer
from tests.qualitylab.specs import LIST_PULLS_CASE, slash_spec
from triage.vocabulary import taxonomy

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _case(**fields: Any) -> CaseSpec:
    data: dict[str, Any] = {"id": "t-1", "mode": "plan", "query": "show me the order detail"}
    data.update(fields)
    return CaseSpec.from_json(data)


def _state(server: SandboxServer) -> dict[str, Any]:
    with urllib.request.urlopen(f"{server.base_url}/__state", timeout=5) as response:
        return json.loads(response.read())


def _context(server: SandboxServer, **overrides: Any) -> engine.ExecutionContext:
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "allowed_hosts": ("127.0.0.1",),
        "auth_headers": {"Authorization": "Bearer demo-token"},
        "auth_profile": engine.AuthProfile(("Authorization",)),
        "timeout_sec": 5.0,
        "allow_mutations": True,
        "private_allowed": ("127.0.0.1",),
    }
    settings.update(overrides)
    return engine.ExecutionContext(**settings)


POINTS = {
    "mode": "execute",
    "query": "회원 포인트 잔액 알려줘",
    "expected_target": "getMemberPoints",
    "provided_entities": {"memberNo": "M-100"},
}
REFUND = {
    "mode": "execute",
    "query": "환불 신청해줘",
    "expected_target": "createRefund",
    "provided_entities": {"orderNo": "ORD-1001", "reason": "wrong size"},
    "mutation_safety": "mutating",
    "cleanup": [{"tool": "cancelRefund", "args": {"refundId": "${createRefund.refundId}"}}],
}


# --------------------------------------------------------------------------------------
# specs
# --------------------------------------------------------------------------------------


def test_bad_yaml_names_the_line_and_column() -> None:
    with pytest.raises(SpecError) as caught:
        engine.parse_spec("openapi: 3.0.0\npaths:\n  /a: {get: {responses: {}}\n  bad: [\n")
    assert "invalid YAML at line" in str(caught.value)
    assert caught.value.line is not None and caught.value.column is not None


def test_bad_json_names_the_line_and_column() -> None:
    with pytest.raises(SpecError, match=r"invalid JSON at line 2, column \d+"):
        engine.parse_spec('{"openapi": "3.0.0",\n "paths": {,}}')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"title": "not an api"}', "not an OpenAPI 3.x or Swagger 2 document"),
        ("[1, 2, 3]", "the top level is a list"),
        ('{"openapi": "4.0.0", "paths": {"/a": {"get": {}}}}', "not 3.x"),
        ('{"swagger": "1.2", "paths": {"/a": {"get": {}}}}', "not 2.0"),
        ('{"openapi": "3.0.0", "paths": {}}', "has no 'paths'"),
        ('{"openapi": "3.0.0", "paths": {"/a": {"summary": "x"}}}', "no operations"),
        ("   \n", "the spec is empty"),
    ],
)
def test_documents_that_are_not_openapi_are_refused(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        engine.parse_spec(text)


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(SpecError, match="not UTF-8"):
        engine.parse_spec(b"openapi: 3.0.0\n\xff\xfe")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("9" * 5000, "invalid YAML: a number has more than 4,300 digits"),
        ("2020-13-45", "invalid YAML: a value cannot be read (month must be in 1..12)"),
        ("0000-01-01", "invalid YAML: a value cannot be read (year 0 is out of range)"),
        ("2001-12-14t21:59:43.10+25:00", "invalid YAML: a value cannot be read (offset must"),
    ],
)
def test_yaml_values_python_cannot_make_are_a_spec_error(value: str, said: str) -> None:
    """PyYAML raises ValueError for these while it builds the document (the upload page
    answered 500)."""
    text = f"openapi: 3.0.0\ninfo: {{title: t, version: {value}}}\npaths: {{}}\n"
    with pytest.raises(SpecError) as caught:
        engine.parse_spec(text)
    assert str(caught.value).startswith(said)


def test_yaml_alias_bombs_are_refused() -> None:
    lines = ["a: &a [x, x]"]
    lines += [f"a{i}: &a{i} [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]" for i in range(30)]
    with pytest.raises(SpecError, match="aliases"):
        engine.parse_spec("\n".join(lines))


_SPEC_HEAD = (
    "openapi: 3.0.0\ninfo: {title: t, version: '1'}\n"
    "paths: {/a: {get: {operationId: a, responses: {'200': {description: ok}}}}}\n"
)


def _alias_bomb(levels: int) -> str:
    """Nine aliases to the level below on each level: 9 ** levels nodes once expanded."""
    lines = ['l0: &l0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return _SPEC_HEAD + "\n".join(lines) + "\n"


def test_a_small_alias_bomb_under_the_alias_count_is_refused_before_it_expands() -> None:
    bomb = _alias_bomb(9)
    assert len(bomb) < 600 and bomb.count("*") < 200
    with pytest.raises(SpecError, match=r"aliases expand it by more than 1,000,000"):
        engine.parse_spec(bomb)  # expanded, it would be 387 million nodes


def test_a_yaml_alias_inside_the_node_it_names_is_refused() -> None:
    with pytest.raises(SpecError, match="alias inside the node it refers to"):
        engine.parse_spec(_SPEC_HEAD + "loop: &loop [1, *loop]\n")


def test_reused_yaml_blocks_are_accepted() -> None:
    spec = engine.parse_spec(
        _SPEC_HEAD + "shared: &p {name: page, in: query}\nlists: [*p, *p, *p]\n"
    )
    assert spec["lists"] == [{"name": "page", "in": "query"}] * 3


@pytest.mark.parametrize(
    "text",
    [
        _SPEC_HEAD + "deep: " + "[" * 500_000 + "]" * 500_000 + "\n",
        _SPEC_HEAD + "deep: " + "{a: " * 65 + "1" + "}" * 65 + "\n",
        _SPEC_HEAD + "deep:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 3_000)) + "  x\n",
        '{"openapi": "3.0.0", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["yaml-flow", "yaml-flow-at-65", "yaml-block", "json"],
)
def test_specs_nested_past_the_limit_are_refused_naming_it(text: str) -> None:
    with pytest.raises(SpecError, match="nested deeper than 64 levels"):
        engine.parse_spec(text)


def test_the_nesting_limit_is_a_parameter() -> None:
    text = _SPEC_HEAD + "deep: " + "[" * 10 + "]" * 10 + "\n"
    assert engine.parse_spec(text)["deep"] == [[[[[[[[[[]]]]]]]]]]
    with pytest.raises(SpecError, match="nested deeper than 9 levels"):
        engine.parse_spec(text, max_depth=9)


def test_swagger_2_builds_an_artifact() -> None:
    spec = engine.parse_spec(
        "swagger: '2.0'\n"
        "info: {title: Tiny, version: '1'}\n"
        "host: 127.0.0.1:9\n"
        "paths:\n"
        "  /orders/{orderNo}:\n"
        "    get:\n"
        "      operationId: getOrder\n"
        "      summary: Get an order\n"
        "      parameters: [{name: orderNo, in: path, required: true, type: string}]\n"
        "      responses: {'200': {description: ok, schema: {type: object}}}\n"
    )
    built = engine.build_artifact(spec)
    assert built.operation_count == 1
    assert "getOrder" in built.artifact["tools"]
    assert built.default_base_url == "https://127.0.0.1:9"


def test_yaml_dates_and_integer_keys_become_json() -> None:
    spec = engine.parse_spec(
        "openapi: 3.0.0\ninfo: {title: t, version: 2024-01-01}\n"
        "paths: {/a: {get: {responses: {200: {description: ok}}}}}\n"
    )
    assert spec["info"]["version"] == "2024-01-01"
    assert "200" in spec["paths"]["/a"]["get"]["responses"]


def test_build_reports_readiness_versions_and_progress() -> None:
    stages: list[tuple[str, float]] = []
    built = engine.build_artifact(
        demo.load_spec(), progress=lambda stage, done: stages.append((stage, done))
    )
    assert built.operation_count == 21
    assert built.graph_tool_call_version == "0.47.0"
    assert built.default_base_url == "http://127.0.0.1:8090"
    # six operations declare bearer auth in the spec
    assert built.readiness_summary["warning"]["auth_required"] == 6
    assert built.readiness["summary"]["operation_count"] == 21
    assert built.semantic_summary["tool_count"] == 21
    assert stages[0][0] == "validate" and stages[-1] == ("done", 1.0)


def test_artifact_hash_is_the_same_for_the_same_spec_and_engine_whenever_built(
    demo_built: engine.BuiltArtifact,
) -> None:
    again = engine.build_artifact(demo.load_spec())
    assert again.artifact["metadata"]["built_at"]  # the artifacts carry their build time
    assert again.artifact_hash == demo_built.artifact_hash
    assert len(again.artifact_hash) == 64


def test_artifact_hash_changes_with_the_spec() -> None:
    spec = demo.load_spec()
    before = engine.artifact_hash(spec, semantic_options=None)
    spec["paths"]["/orders"]["get"]["summary"] = "Search all orders"
    assert engine.artifact_hash(spec, semantic_options=None) != before
    assert engine.build_artifact(spec).artifact_hash == engine.artifact_hash(
        spec, semantic_options=None
    )


def test_artifact_hash_changes_with_the_engine_version_and_the_build_options() -> None:
    spec = demo.load_spec()
    current = engine.artifact_hash(spec, semantic_options=None)
    assert current == engine.artifact_hash(
        spec, semantic_options=None, engine_version=engine.GRAPH_TOOL_CALL_VERSION
    )
    assert current != engine.artifact_hash(spec, semantic_options=None, engine_version="0.47.1")
    assert current != engine.artifact_hash(spec, semantic_options={"enabled": False})


def test_artifact_hash_does_not_depend_on_key_order() -> None:
    spec = demo.load_spec()
    reordered = dict(reversed(list(spec.items())))
    reordered["paths"] = dict(reversed(list(spec["paths"].items())))
    assert engine.artifact_hash(reordered, semantic_options=None) == engine.artifact_hash(
        spec, semantic_options=None
    )


def test_artifact_hash_takes_text_no_utf_8_can_encode() -> None:
    spec = demo.load_spec()
    spec["info"]["title"] = "lone \udc80 surrogate"
    assert len(engine.artifact_hash(spec, semantic_options=None)) == 64


# --------------------------------------------------------------------------------------
# the engine cache
# --------------------------------------------------------------------------------------


def test_the_cache_returns_the_same_collection_for_the_same_hash(
    demo_built: engine.BuiltArtifact, demo_collection: engine.LoadedCollection
) -> None:
    again = engine.engine_for(demo_built.artifact, demo_built.artifact_hash)
    assert again is demo_collection
    assert len(demo_collection.tool_names) == 21


def test_the_cache_is_a_bounded_lru(
    demo_built: engine.BuiltArtifact, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_collection, "ENGINE_CACHE_SIZE", 2)
    # Leave the real cache alone.
    monkeypatch.setattr(engine_collection, "_engine_cache", OrderedDict())
    first = engine.engine_for(demo_built.artifact, "hash-a")
    engine.engine_for(demo_built.artifact, "hash-b")
    assert engine.engine_for(demo_built.artifact, "hash-a") is first  # a is now newest
    engine.engine_for(demo_built.artifact, "hash-c")  # evicts b
    assert engine.engine_for(demo_built.artifact, "hash-a") is first
    assert engine.engine_for(demo_built.artifact, "hash-b") is not first


# --------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"id": ""}, "id"),
        ({"mode": "benchmark"}, "mode"),
        ({"query": "  "}, "query"),
        ({"expected_top_k": 0}, "expected_top_k"),
        ({"expected_top_k": True}, "expected_top_k"),
        ({"provided_entities": ["orderNo"]}, "provided_entities"),
        ({"mutation_safety": "careful"}, "mutation_safety"),
        ({"timeout_sec": -1}, "timeout_sec"),
        ({"expected_target": "get\norder"}, "expected_target"),
        ({"expected_target": "x" * 201}, "expected_target"),
        ({"llm_target": " getOrder"}, "llm_target"),
        ({"auth_session": 3}, "auth_session"),
        ({"cleanup": [{"tool": "cancelRefund"}]}, "cleanup"),
        ({"mode": "execute", "cleanup": [{"args": {}}]}, "cleanup[0].tool"),
        ({"mode": "execute", "cleanup": [{"tool": "x", "when": "always"}]}, "cleanup[0].when"),
        ({"assertions": [{"type": "top_k_contains"}]}, "assertions[0].tool"),
        ({"assertions": [{"type": "is_fast"}]}, "assertions[0].type"),
        ({"assertions": {"selected_target": "x", "speed": 1}}, "assertions.speed"),
    ],
)
def test_malformed_cases_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(CaseSpecError) as caught:
        _case(**fields)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("case_id", "said"),
    [
        (None, "id: is required"),
        ("", "id: is required"),
        ("c" * 5000, "id: is 5000 characters long; the limit is 200"),
        ("n2\ud800", "id: must be letters, digits and '_.:-' only"),
        ("team a", "id: must be letters, digits and '_.:-' only"),
    ],
)
def test_a_case_id_is_refused_for_what_is_wrong_with_it(case_id: Any, said: str) -> None:
    """An over-long or ill-made id is not reported as missing (the ingest API's rule)."""
    with pytest.raises(CaseSpecError) as caught:
        _case(id=case_id)
    assert str(caught.value).startswith(said)


def test_a_case_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(CaseSpecError, match="case: must be a JSON object"):
        CaseSpec.from_json(["id", "mode"])


def test_cases_keep_unknown_keys_and_round_trip() -> None:
    raw = {
        "id": "rt-1",
        "mode": "execute",
        "query": "환불 신청해줘",
        "expected_target": "createRefund",
        "provided_entities": {"orderNo": "ORD-1001"},
        "mutation_safety": "mutating",
        "timeout_sec": 5,
        "assertions": [{"type": "http_status", "in": [200, 201]}],
        "cleanup": [{"tool": "cancelRefund", "args": {"refundId": "${createRefund.refundId}"}}],
        "owner": "team-refunds",
    }
    case = CaseSpec.from_json(raw)
    assert case.extra == {"owner": "team-refunds"}
    again = CaseSpec.from_json(case.to_json())
    assert again == case


def test_check_case_refuses_tools_the_collection_does_not_have(
    demo_collection: engine.LoadedCollection,
) -> None:
    demo_collection.check_case(_case(expected_target="getOrderDetail"))
    with pytest.raises(CaseSpecError) as caught:
        demo_collection.check_case(_case(expected_target="getOrderDetails"))
    assert caught.value.field == "expected_target"
    with pytest.raises(CaseSpecError) as caught:
        demo_collection.check_case(
            _case(mode="execute", cleanup=[{"tool": "undoRefund", "args": {}}])
        )
    assert caught.value.field == "cleanup[0].tool"


# --------------------------------------------------------------------------------------
# the demo suite
# --------------------------------------------------------------------------------------


DEMO_IDS = [item["id"] for item in demo.load_case_data()]


def test_the_demo_has_about_thirty_cases_in_every_mode() -> None:
    modes = [item["mode"] for item in demo.load_case_data()]
    assert 28 <= len(modes) <= 36
    assert {mode: modes.count(mode) for mode in ("search", "plan", "execute")} == {
        "search": 11,
        "plan": 11,
        "execute": 11,
    }


@pytest.mark.parametrize("case_id", DEMO_IDS)
def test_demo_case_shows_what_it_says(
    case_id: str,
    demo_cases: dict[str, CaseSpec],
    demo_outcomes: dict[str, engine.CaseOutcome],
    demo_collection: engine.LoadedCollection,
) -> None:
    case, outcome = demo_cases[case_id], demo_outcomes[case_id]
    demo_collection.check_case(case)
    expectation = case.extra["demo_expectation"]
    assert outcome.status == expectation["status"], outcome.failure
    if "reason" in expectation:
        assert outcome.failure is not None
        assert (outcome.failure["stage"], outcome.failure["reason"]) == (
            expectation["stage"],
            expectation["reason"],
        )
    else:
        assert outcome.failure is None
    json.dumps(outcome.to_dict())  # every outcome is JSON


def test_every_main_reason_is_visible_in_the_demo(
    demo_outcomes: dict[str, engine.CaseOutcome],
) -> None:
    reasons = {o.failure["reason"] for o in demo_outcomes.values() if o.failure}
    assert reasons >= {
        "no_candidates",
        "not_retrieved",
        "low_confidence",
        "llm_target_mismatch",
        "ambiguous_target",
        "selector_mismatch",
        "unsatisfied_field",
        "auth_context_required",
        "auth_failed",
        "http_4xx",
        "http_5xx",
        "timeout",
        "cleanup_not_configured",
    }


def test_failures_use_taxonomy_codes_and_their_stages(
    demo_outcomes: dict[str, engine.CaseOutcome],
) -> None:
    for outcome in demo_outcomes.values():
        if outcome.failure is None:
            continue
        info = taxonomy.reason_info(outcome.failure["reason"])
        assert info is not None, outcome.failure["reason"]
        assert outcome.failure["stage"] == info.stage
        assert outcome.failure["operator_action"] == info.operator_action
        assert set(outcome.failure) >= {
            "stage",
            "reason",
            "message",
            "tool",
            "plan_id",
            "step_id",
            "retryable",
            "operator_action",
            "evidence",
        }


def test_no_secret_or_response_body_reaches_an_outcome(
    demo_outcomes: dict[str, engine.CaseOutcome],
    demo_collection: engine.LoadedCollection,
    sandbox: SandboxServer,
) -> None:
    profile = engine.run_case(
        demo_collection,
        CaseSpec.from_json(
            {
                **POINTS,
                "id": "profile",
                "query": "회원 프로필",
                "expected_target": "getMemberProfile",
            }
        ),
        execution=_context(sandbox),
    )
    assert profile.status == "passed"
    text = json.dumps([o.to_dict() for o in [*demo_outcomes.values(), profile]])
    for secret in ("demo-token", demo.EXPIRED_TOKEN, "Bearer", "minji@example.test", "Kim Minji"):
        assert secret not in text


# --------------------------------------------------------------------------------------
# result shapes
# --------------------------------------------------------------------------------------


SECTIONS = {
    "case_id",
    "mode",
    "status",
    "failure",
    "failure_allowed",
    "search",
    "target_selector",
    "plan",
    "execute",
    "auth_readiness",
    "learning",
    "assertions",
    "latency_ms",
    "graph_tool_call_version",
    "taxonomy_version",
}


def test_search_result_shape(demo_outcomes: dict[str, engine.CaseOutcome]) -> None:
    result = demo_outcomes["search-order-detail-ko"].to_dict()
    assert set(result) == SECTIONS
    search = result["search"]
    assert search["hit"] is True and search["hit_rank"] == 1
    top = search["results"][0]
    assert top["name"] == "getOrderDetail" and top["rank"] == 1
    assert {"seed", "graph", "action_match", "resource_match", "shape_match"} <= set(
        top["score_breakdown"]
    )
    assert search["score_distribution"]["count"] == len(search["results"])
    assert result["target_selector"] is None and result["plan"] is None
    assert set(result["latency_ms"]) == {"search", "select", "plan", "execute", "cleanup"}
    assert result["latency_ms"]["search"] > 0 and result["latency_ms"]["select"] is None
    assert result["assertions"] == [
        {
            "name": "top_k_contains",
            "expected": {"tool": "getOrderDetail", "k": 1},
            "actual": {"rank": 1},
            "passed": True,
        }
    ]


def test_plan_result_shape(demo_outcomes: dict[str, engine.CaseOutcome]) -> None:
    result = demo_outcomes["plan-llm-overridden"].to_dict()
    selector = result["target_selector"]
    assert selector["selected_target"] == "getOrderDetail"
    assert selector["llm_target"] == "listOrders"
    assert selector["overrode_llm"] is True and selector["ambiguous"] is False
    assert "llm_target_overridden" in selector["reason_codes"]
    assert {"name", "selector_score", "selected", "llm_target"} <= set(selector["rank_signals"][0])
    plan = result["plan"]
    assert plan["tools"] == ["getOrderDetail"]
    assert plan["steps"][0]["args"] == {"orderNo": "<provided>"}
    assert plan["user_input_slots"] == []


def test_a_chained_plan_binds_the_producer(demo_outcomes: dict[str, engine.CaseOutcome]) -> None:
    plan = demo_outcomes["plan-order-detail-chain"].to_dict()["plan"]
    assert plan["tools"] == ["listOrders", "getOrderDetail"]
    assert plan["steps"][1]["args"]["orderNo"].startswith("${s1.")
    assert plan["selected_producers"][0]["producer"] == "listOrders"


def test_execute_result_shape(demo_outcomes: dict[str, engine.CaseOutcome]) -> None:
    result = demo_outcomes["exec-order-detail-ko-chain"].to_dict()
    execute = result["execute"]
    assert execute["status"] == "completed" and execute["http_status"] == 200
    assert [call["tool"] for call in execute["calls"]] == ["listOrders", "getOrderDetail"]
    types = [event["type"] for event in execute["events"]]
    assert types[0] == "plan.started" and types[-1] == "plan.completed"
    assert types.count("step.completed") == 2
    started = next(e for e in execute["events"] if e["type"] == "step.started")
    assert set(started["args_resolved"].values()) <= {"[omitted]"}
    assert execute["json_paths"]["$.itemCount"] == {"exists": True, "count": 1, "shape": "number"}
    assert result["auth_readiness"]["required"] is False
    assert result["latency_ms"]["execute"] > 0


# --------------------------------------------------------------------------------------
# modes and failures beyond the demo
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["show me the order detail", "주문 상세를 보여줘"])
def test_order_detail_queries_pick_get_order_detail(
    query: str, demo_collection: engine.LoadedCollection
) -> None:
    outcome = engine.run_case(demo_collection, _case(query=query))
    assert outcome.target_selector is not None
    assert outcome.target_selector["selected_target"] == "getOrderDetail"


def test_not_retrieved_in_plan_mode_blames_retrieval(
    demo_collection: engine.LoadedCollection,
) -> None:
    outcome = engine.run_case(
        demo_collection, _case(query="give me a receipt", expected_target="getInvoice")
    )
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == ("retrieve", "not_retrieved")
    assert "getInvoice" not in outcome.failure["evidence"]["returned_tool_names"]


def test_an_llm_target_outside_the_catalog_is_reported(
    demo_collection: engine.LoadedCollection,
) -> None:
    outcome = engine.run_case(
        demo_collection,
        _case(
            query="show me the order detail",
            expected_target="getOrderDetail",
            expected_top_k=3,
            llm_target="getInvoice",
        ),
    )
    assert outcome.target_selector is not None
    if outcome.target_selector["selected_target"] == "getInvoice":
        assert outcome.failure is not None
        assert outcome.failure["reason"] == "llm_target_not_in_candidates"
    else:  # the selector overrode the outside pick: nothing to report
        assert outcome.failure is None


def test_synthesis_errors_are_reported_from_to_dict(
    demo_collection: engine.LoadedCollection, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph_tool_call.plan import DynamicOptionRequired

    def refuse(**_: Any) -> Any:
        raise DynamicOptionRequired(
            "pick a coupon",
            field_name="couponCode",
            semantic_tag="coupon_code",
            producer_name="listMemberCoupons",
            options_path="$.coupons[*].couponCode",
            label_field_hints=["discountRate"],
        )

    monkeypatch.setattr(demo_collection, "synthesize", refuse)
    outcome = engine.run_case(demo_collection, _case(query="쿠폰 상세 조회"))
    assert outcome.failure is not None
    assert outcome.failure["stage"] == "synthesize"
    assert outcome.failure["reason"] == "dynamic_option_required"
    assert outcome.failure["evidence"]["producer_name"] == "listMemberCoupons"
    assert outcome.plan is not None and outcome.plan["diagnostics"]["field_name"] == "couponCode"


def test_an_exception_inside_a_case_is_an_uncaught_server_error(
    demo_collection: engine.LoadedCollection, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_: Any, **__: Any) -> Any:
        raise RuntimeError("token=sk-live-should-never-be-shown")

    monkeypatch.setattr(engine_plan, "select_target_candidate", explode)
    outcome = engine.run_case(demo_collection, _case())
    assert outcome.status == "failed"
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == (
        "service",
        "uncaught_server_error",
    )
    assert outcome.failure["evidence"] == {
        "exception_type": "RuntimeError",
        "during_stage": "select",
    }
    assert "sk-live" not in json.dumps(outcome.to_dict())


def test_an_execute_case_without_a_context_is_a_configuration_gap_not_a_bug(
    demo_collection: engine.LoadedCollection,
) -> None:
    outcome = engine.run_case(demo_collection, CaseSpec.from_json({**POINTS, "id": "no-ctx"}))
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == (
        "execute",
        "base_url_not_configured",
    )
    assert outcome.failure["evidence"]["execution_context"] is False


def test_the_rerank_hook_runs_between_retrieval_and_selection(
    demo_collection: engine.LoadedCollection,
) -> None:
    seen: list[str] = []

    def reverse(query: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen.append(query)
        return list(reversed(rows))

    case = _case(mode="search", expected_target="getOrderDetail", expected_top_k=3)
    outcome = engine.run_case(demo_collection, case, rerank=reverse)
    assert seen == ["show me the order detail"]
    assert outcome.learning == {"rerank_applied": True}
    assert outcome.search is not None and outcome.search["hit_rank"] == 3


# ---- execute: preflight ----------------------------------------------------------------


def test_auth_profile_missing_stops_before_the_api(
    demo_collection: engine.LoadedCollection, sandbox: SandboxServer
) -> None:
    before = _state(sandbox)["request_count"]
    outcome = engine.run_case(
        demo_collection,
        CaseSpec.from_json({**POINTS, "id": "no-profile"}),
        execution=_context(sandbox, auth_profile=None),
    )
    assert outcome.failure is not None
    assert outcome.failure["reason"] == "auth_profile_missing"
    assert outcome.failure["execution_state"] == "not_started"
    assert outcome.auth_readiness is not None
    assert outcome.auth_readiness["auth_profile_id_present"] is False
    assert _state(sandbox)["request_count"] == before + 1  # only our /__state call


@pytest.mark.parametrize(
    ("profile_headers", "session"),
    [
        (("X-Session-Key",), {"Authorization": "Bearer demo-token"}),
        (("Authorization",), {"Authorization": "Token demo-token"}),  # not a bearer header
    ],
)
def test_auth_header_resolution_failed_when_the_session_lacks_the_headers(
    profile_headers: tuple[str, ...],
    session: dict[str, str],
    demo_collection: engine.LoadedCollection,
    sandbox: SandboxServer,
) -> None:
    outcome = engine.run_case(
        demo_collection,
        CaseSpec.from_json({**POINTS, "id": "bad-headers"}),
        execution=_context(
            sandbox, auth_headers=session, auth_profile=engine.AuthProfile(profile_headers)
        ),
    )
    assert outcome.failure is not None
    assert outcome.failure["reason"] == "auth_header_resolution_failed"
    assert outcome.auth_readiness is not None
    assert outcome.auth_readiness["failure_reason"] == "auth_header_resolution_failed"
    assert outcome.auth_readiness["session_station_header_names"] == ["Authorization"]


def test_a_base_url_outside_the_allowed_hosts_is_never_called(
    demo_collection: engine.LoadedCollection, sandbox: SandboxServer
) -> None:
    before = _state(sandbox)["request_count"]
    outcome = engine.run_case(
        demo_collection,
        CaseSpec.from_json({**POINTS, "id": "host"}),
        execution=_context(sandbox, allowed_hosts=("api.example.test",)),
    )
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == ("execute", "network_error")
    assert outcome.failure["evidence"]["request_sent"] is False
    assert outcome.failure["evidence"]["blocked_by"] == "allowed_hosts"
    assert _state(sandbox)["request_count"] == before + 1


def test_a_refused_connection_is_a_network_error(
    demo_collection: engine.LoadedCollection,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = engine.run_case(
        demo_collection,
        CaseSpec.from_json({**POINTS, "id": "refused"}),
        execution=engine.ExecutionContext(
            base_url=f"http://127.0.0.1:{port}",
            allowed_hosts=("127.0.0.1",),
            auth_headers={"Authorization": "Bearer demo-token"},
            auth_profile=engine.AuthProfile(),
            timeout_sec=2,
            private_allowed=("127.0.0.1",),
        ),
    )
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == ("execute", "network_error")


@pytest.mark.parametrize(
    ("fields", "allow", "problem"),
    [
        ({"mutation_safety": "read_only"}, True, "declares read_only"),
        ({"cleanup": []}, True, "no cleanup steps"),
        ({}, False, "does not allow mutating cases"),
    ],
)
def test_mutations_need_safety_cleanup_and_permission(
    fields: dict[str, Any],
    allow: bool,
    problem: str,
    demo_collection: engine.LoadedCollection,
    sandbox: SandboxServer,
) -> None:
    before = _state(sandbox)
    outcome = engine.run_case(
        demo_collection,
        CaseSpec.from_json({**REFUND, "id": "guard", **fields}),
        execution=_context(sandbox, allow_mutations=allow),
    )
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == (
        "cleanup",
        "cleanup_not_configured",
    )
    assert problem in outcome.failure["message"]
    assert _state(sandbox)["created_refund_count"] == before["created_refund_count"]


# ---- execute: running and cleaning up --------------------------------------------------


def test_execute_failures_carry_their_evidence(
    demo_outcomes: dict[str, engine.CaseOutcome],
) -> None:
    auth = demo_outcomes["exec-member-points-expired-token"].failure
    assert auth is not None and auth["evidence"]["http_status"] == 401
    assert auth["execution_state"] == "completed"
    server_error = demo_outcomes["exec-order-server-error"].failure
    assert server_error is not None and server_error["evidence"]["http_status"] == 500
    assert server_error["execution_state"] == "completed"  # a read
    timeout = demo_outcomes["exec-track-delivery-timeout"].failure
    assert timeout is not None and timeout["evidence"]["timeout_ms"] == 1000
    assert timeout["execution_state"] == "started_unknown"
    assert demo_outcomes["exec-order-not-found"].to_dict()["execute"]["http_status"] == 404


def test_allowed_failure_reasons_let_a_known_failure_pass(
    demo_outcomes: dict[str, engine.CaseOutcome],
) -> None:
    outcome = demo_outcomes["exec-member-profile-anonymous-allowed"]
    assert outcome.status == "passed" and outcome.failure_allowed is True
    assert outcome.failure is not None and outcome.failure["reason"] == "auth_context_required"
    assert outcome.execute is not None and outcome.execute["calls"] == []


def test_a_mutating_case_cleans_up_after_itself(
    demo_collection: engine.LoadedCollection, sandbox: SandboxServer
) -> None:
    before = _state(sandbox)
    outcome = engine.run_case(
        demo_collection,
        CaseSpec.from_json({**REFUND, "id": "refund-clean"}),
        execution=_context(sandbox),
    )
    assert outcome.status == "passed", outcome.failure
    after = _state(sandbox)
    assert after["created_refund_count"] == before["created_refund_count"] + 1
    assert after["refund_ids"] == before["refund_ids"]
    assert outcome.execute is not None
    cleanup = outcome.execute["cleanup"]
    assert cleanup["status"] == "passed"
    assert [call["tool"] for call in cleanup["calls"]] == ["cancelRefund"]
    assert outcome.latency_ms["cleanup"] is not None


def test_a_broken_cleanup_is_cleanup_failed(
    demo_collection: engine.LoadedCollection, sandbox: SandboxServer
) -> None:
    before = _state(sandbox)
    broken = copy.deepcopy(REFUND)
    broken["cleanup"] = [{"tool": "cancelRefund", "args": {"refundId": "REF-NOPE"}}]
    outcome = engine.run_case(
        demo_collection,
        CaseSpec.from_json({**broken, "id": "refund-dirty"}),
        execution=_context(sandbox),
    )
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == ("cleanup", "cleanup_failed")
    assert outcome.failure["evidence"]["http_status"] == 404
    assert outcome.failure["evidence"]["affected_targets"] == ["createRefund"]
    left_over = sorted(set(_state(sandbox)["refund_ids"]) - set(before["refund_ids"]))
    assert len(left_over) == 1  # the refund the broken cleanup could not undo
    urllib.request.urlopen(
        urllib.request.Request(
            f"{sandbox.base_url}/refunds/{left_over[0]}",
            method="DELETE",
            headers={"Authorization": "Bearer demo-token"},
        ),
        timeout=5,
    ).close()


def test_cleanup_is_skipped_when_the_mutation_never_completed(
    demo_collection: engine.LoadedCollection, sandbox: SandboxServer
) -> None:
    outcome = engine.run_case(
        demo_collection,
        CaseSpec.from_json(
            {
                **REFUND,
                "id": "refund-no-order",
                "provided_entities": {"orderNo": "ORD-9", "reason": "x"},
            }
        ),
        execution=_context(sandbox),
    )
    assert outcome.failure is not None and outcome.failure["reason"] == "http_4xx"
    assert outcome.execute is not None
    assert outcome.execute["cleanup"]["status"] == "skipped"


def test_deeply_nested_json_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="nested deeper than 64 levels"):
        engine.parse_spec("[" * 100_000)


def test_a_worker_time_limit_is_not_swallowed(
    demo_collection: engine.LoadedCollection, monkeypatch: pytest.MonkeyPatch
) -> None:
    class SoftTimeLimitExceeded(Exception):  # the name Celery uses
        pass

    def too_slow(*_: Any, **__: Any) -> Any:
        raise SoftTimeLimitExceeded

    monkeypatch.setattr(engine_search, "retrieve_graphify", too_slow)
    with pytest.raises(SoftTimeLimitExceeded):
        engine.run_case(demo_collection, _case())


@pytest.mark.parametrize(
    "text",
    [
        '{"openapi": "3.0.0", "paths": {"/a": {"get": {"summary": "x\\u0000"}}}}',
        '{"openapi": "3.0.0", "paths": {"/a\\ud800": {"get": {"responses": {}}}}}',
        'openapi: 3.0.0\npaths:\n  /a:\n    get: {summary: "x\\0y"}\n',
    ],
    ids=["json-nul", "json-surrogate-key", "yaml-nul-escape"],
)
def test_a_spec_holding_text_the_database_cannot_store_is_refused_naming_where(
    text: str,
) -> None:
    with pytest.raises(SpecError, match="the database cannot store it") as raised:
        engine.parse_spec(text)
    assert "spec.paths./a" in str(raised.value)


def test_a_spec_with_a_nul_byte_is_refused() -> None:
    with pytest.raises(SpecError):
        engine.parse_spec("openapi: 3.0.0\npaths:\n  /a:\n    get: {summary: x\x00}\n")


# --------------------------------------------------------------------------------------
# configuration gaps: a collection without a base URL
# --------------------------------------------------------------------------------------


def _no_base_url(**overrides: Any) -> engine.ExecutionContext:
    settings: dict[str, Any] = {"base_url": "", "allowed_hosts": (), "allow_mutations": True}
    settings.update(overrides)
    return engine.ExecutionContext(**settings)


def test_an_execute_case_without_a_base_url_fails_with_a_reason_an_operator_can_act_on(
    demo_collection: engine.LoadedCollection,
) -> None:
    outcome = engine.run_case(
        demo_collection, CaseSpec.from_json({**POINTS, "id": "no-url"}), execution=_no_base_url()
    )
    failure = outcome.failure
    assert failure is not None
    assert (failure["stage"], failure["reason"]) == ("execute", "base_url_not_configured")
    assert failure["reason"] != "uncaught_server_error"
    assert failure["operator_action"] == "configure_collection_base_url"
    assert failure["execution_state"] == "not_started" and failure["retryable"] is False
    assert failure["evidence"] == {
        "base_url_present": False,
        "spec_server_url": "http://127.0.0.1:8090",  # the spec's variable default
        "request_sent": False,
        "execution_context": True,
    }
    assert "no base URL" in failure["message"] and "--base-url" in failure["message"]
    assert outcome.execute is not None and outcome.execute["calls"] == []
    assert outcome.execute["status"] == "not_run"
    # The plan before it still ran: only the call needs the base URL.
    assert outcome.plan is not None and outcome.plan["target"] == "getMemberPoints"


@pytest.mark.parametrize("execution", [None, _no_base_url()], ids=["no-context", "empty-url"])
def test_mutation_safety_is_judged_before_the_missing_base_url(
    demo_collection: engine.LoadedCollection, execution: engine.ExecutionContext | None
) -> None:
    no_cleanup = {key: value for key, value in REFUND.items() if key != "cleanup"}
    outcome = engine.run_case(
        demo_collection, CaseSpec.from_json({**no_cleanup, "id": "refund"}), execution=execution
    )
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == (
        "cleanup",
        "cleanup_not_configured",
    )
    assert "has no cleanup steps" in outcome.failure["message"]
    # A mutating case that is safe to run still stops at the missing base URL.
    safe = engine.run_case(
        demo_collection, CaseSpec.from_json({**REFUND, "id": "refund-ok"}), execution=execution
    )
    assert safe.failure is not None and safe.failure["reason"] == "base_url_not_configured"


def test_a_relative_spec_server_is_named_as_the_reason_there_is_no_base_url() -> None:
    built = engine.build_artifact(slash_spec())
    assert built.default_base_url is None
    loaded = engine.engine_for(built.artifact, built.artifact_hash)
    case = CaseSpec.from_json(LIST_PULLS_CASE)
    outcome = engine.run_case(loaded, case, execution=_no_base_url())
    assert outcome.failure is not None, outcome.to_dict()
    assert outcome.failure["reason"] == "base_url_not_configured", outcome.failure
    assert outcome.failure["evidence"]["spec_server_url"] == "/api/v3"
    assert "'/api/v3' is relative" in outcome.failure["message"]


# --------------------------------------------------------------------------------------
# real-world specs: size limit, operationIds with "/"
# --------------------------------------------------------------------------------------


def test_the_spec_size_limit_is_the_callers() -> None:
    text = json.dumps(slash_spec())
    assert engine.parse_spec(text, max_bytes=len(text))["openapi"] == "3.0.3"
    with pytest.raises(SpecError, match=r"larger than the 1 KiB limit"):
        engine.parse_spec(text + " " * 1024, max_bytes=1024)
    assert engine.DEFAULT_MAX_SPEC_BYTES == 64 * 1024 * 1024
    assert engine.format_size(64 * 1024 * 1024) == "64 MiB"
    assert engine.format_size(13_001_822) == "12.4 MiB"


def test_operation_ids_with_a_slash_are_tool_names_the_collection_has() -> None:
    built = engine.build_artifact(slash_spec())
    assert built.tool_names == ("issues/list-for-repo", "pulls/create", "pulls/list")
    case = CaseSpec.from_json(
        {
            "id": "gh-pulls",
            "mode": "execute",
            "query": "create a pull request",
            "expected_target": "pulls/create",
            "llm_target": "pulls/list",
            "mutation_safety": "mutating",
            "cleanup": [{"tool": "pulls/list", "args": {}}],
            "assertions": [
                {"type": "top_k_contains", "tool": "pulls/create", "k": 3},
                {"type": "selected_target", "equals": "pulls/create"},
                {"type": "plan_contains_tool", "tool": "pulls/create"},
            ],
            "learning": {"expected_target": "pulls/create"},
        }
    )
    engine.check_case_tools(case, built.tool_names)
    assert [where for where, _ in case.tool_references()] == [
        "expected_target",
        "llm_target",
        "cleanup[0].tool",
        "assertions[0].tool",
        "assertions[1].equals",
        "assertions[2].tool",
        "learning.expected_target",
    ]


@pytest.mark.parametrize(
    ("fields", "field", "closest"),
    [
        ({"expected_target": "pull/list"}, "expected_target", "pulls/list"),
        ({"llm_target": "pulls/lists"}, "llm_target", "pulls/list"),
        (
            {"mode": "execute", "cleanup": [{"tool": "pulls/creat", "args": {}}]},
            "cleanup[0].tool",
            "pulls/create",
        ),
        (
            {"assertions": [{"type": "plan_contains_tool", "tool": "issues/list"}]},
            "assertions[0].tool",
            "issues/list-for-repo",
        ),
        (
            {"assertions": {"selected_target": "pulls/Create"}},
            "assertions.selected_target",
            "pulls/create",
        ),
    ],
)
def test_an_unknown_tool_is_an_error_naming_the_closest_tools(
    fields: dict[str, Any], field: str, closest: str
) -> None:
    case = _case(**fields)
    with pytest.raises(CaseSpecError) as caught:
        engine.check_case_tools(case, ("issues/list-for-repo", "pulls/create", "pulls/list"))
    assert caught.value.field == field
    assert "is not an operation of this collection; the closest: " in caught.value.message
    assert closest in caught.value.message.split("the closest: ")[1].split(", ")


def test_an_unknown_tool_with_no_similar_name_says_so() -> None:
    with pytest.raises(CaseSpecError, match="none of its 2 operations has a similar name"):
        engine.check_case_tools(_case(expected_target="zzzz"), ("pulls/list", "pulls/get"))
