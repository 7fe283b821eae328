"""The vocabulary in triage.vocabulary.taxonomy against its sources: the two seeds and the engine.

The seeds are the contract, so a copy of each lives beside the tests (tests/seeds/) and is
always read: no test here skips. The same codes are also typed out below, and the
seed-parsing tests prove the typed lists have not drifted from the documents.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import graph_tool_call.graphify as graphify
import graph_tool_call.plan as plan
import pytest
from graph_tool_call.graphify import catalog
from graph_tool_call.plan import synthesizer

from triage.vocabulary import taxonomy
from triage.vocabulary.taxonomy import (
    EXECUTION_STATE_MEANING,
    EXECUTION_STATES,
    LANE_INFO,
    LANES,
    REASONS,
    SIDE_EFFECT_GRADES,
    SOURCES,
    STAGE_INFO,
    STAGES,
    TAXONOMY_VERSION,
    ReasonInfo,
    is_known_stage,
    reason_info,
    stage_index,
)

SEEDS_DIR = Path(__file__).resolve().parents[1] / "seeds"
SEED_000 = SEEDS_DIR / "000_b039676bea40a62e.txt"
SEED_004 = SEEDS_DIR / "004_2557126d07dc97d6.txt"

# Seed 000, "Failure Lifecycle" table: stage -> its representative reason codes.
SEED_000_LIFECYCLE: dict[str, tuple[str, ...]] = {
    "retrieve": ("no_candidates", "not_retrieved", "low_confidence"),
    "select_target": (
        "llm_target_mismatch",
        "llm_target_not_in_candidates",
        "ambiguous_target",
        "selector_mismatch",
    ),
    "synthesize": (
        "unknown_target",
        "unsatisfied_field",
        "enum_required",
        "dynamic_option_required",
        "cycle",
        "max_depth",
        "user_input_fallback",
    ),
    "bind_request": ("binding_failed", "argument_coercion_failed", "missing_required_argument"),
    "auth_preflight": (
        "auth_context_required",
        "auth_profile_missing",
        "auth_header_resolution_failed",
    ),
    "execute": ("auth_failed", "http_4xx", "http_5xx", "timeout", "network_error"),
    "cleanup": ("cleanup_failed", "cleanup_not_configured"),
    "learn": ("scrub_failed", "promotion_rejected", "insufficient_repeated_success"),
    "service": ("uncaught_server_error",),
}
SEED_000_STAGE_OF: dict[str, str] = {
    code: stage for stage, codes in SEED_000_LIFECYCLE.items() for code in codes
}

# Seed 000, "Auth and Execution" table: the "API 호출 여부" column.
SEED_000_API_CALLED: dict[str, str] = {
    "auth_context_required": "no",
    "auth_profile_missing": "no",
    "auth_header_resolution_failed": "no",
    "auth_failed": "yes",
    "http_4xx": "yes",
    "http_5xx": "yes",
    "timeout": "maybe",
    "network_error": "maybe",
}

# Which lifecycle stages each catalog table of seed 000 is allowed to cover.
CATALOG_SECTION_STAGES: dict[str, set[str]] = {
    "Search and Selection": {"retrieve", "select_target"},
    "Plan Synthesis": {"synthesize"},
    "Auth and Execution": {"auth_preflight", "execute"},
    "Quality Lab and Learning": {"cleanup", "learn"},
}

SEED_004_LANES = (
    "retry_safe",
    "reconcile_first",
    "input_stale",
    "policy_blocked",
    "manual_investigation",
)
SEED_004_EXECUTION_STATES = ("not_started", "started_unknown", "partially_completed", "completed")

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
BACKTICKED = re.compile(r"`([^`]+)`")


# --------------------------------------------------------------------------------------
# Seed parsing helpers
# --------------------------------------------------------------------------------------


def _read_seed(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def seed_000() -> str:
    return _read_seed(SEED_000)


@pytest.fixture(scope="module")
def seed_004() -> str:
    return _read_seed(SEED_004)


def _codes_in(cell: str) -> list[str]:
    # Only snake_case identifiers count as codes; examples like `field_name: "orderNo"`
    # in other tables of the seed are not.
    return [token for token in BACKTICKED.findall(cell) if SNAKE_CASE.match(token)]


def _table_after(lines: list[str], header_prefix: str, start: int) -> Iterator[list[str]]:
    """Yield the tab-separated rows of the first table whose header starts with the prefix."""
    index = start
    while index < len(lines) and not lines[index].startswith(header_prefix):
        index += 1
    assert index < len(lines), f"no table with header {header_prefix!r} after line {start}"
    for line in lines[index + 1 :]:
        if not line.strip():
            return
        yield line.split("\t")


def parse_lifecycle(text: str) -> dict[str, str]:
    """reason code -> stage, from the Failure Lifecycle table (reason column only)."""
    lines = text.splitlines()
    start = lines.index("Failure Lifecycle")
    stage_of: dict[str, str] = {}
    for cells in _table_after(lines, "Stage\t", start):
        (stage,) = _codes_in(cells[0])
        for code in _codes_in(cells[1]):
            stage_of[code] = stage
    return stage_of


def parse_catalog(text: str) -> dict[str, list[list[str]]]:
    """Catalog section title -> its rows; the first cell of each row holds the code."""
    lines = text.splitlines()
    start = lines.index("Reason Code Catalog")
    end = lines.index("Normalized Failure Record", start)
    sections: dict[str, list[list[str]]] = {}
    title = ""
    index = start + 1
    while index < end:
        line = lines[index]
        if line.startswith("Reason\t"):
            rows: list[list[str]] = []
            index += 1
            while index < end and lines[index].strip():
                rows.append(lines[index].split("\t"))
                index += 1
            sections[title] = rows
            continue
        if line.strip() and "\t" not in line:
            title = line.strip()
        index += 1
    return sections


def parse_json_block(text: str, after_heading: str) -> dict[str, Any]:
    """The first top-level {...} block after a heading line of the seed."""
    lines = text.splitlines()
    start = lines.index(after_heading)
    opening = next(i for i in range(start, len(lines)) if lines[i] == "{")
    closing = next(i for i in range(opening, len(lines)) if lines[i] == "}")
    parsed: dict[str, Any] = json.loads("\n".join(lines[opening : closing + 1]))
    return parsed


def parse_comma_list(text: str, korean_suffix: str) -> tuple[str, ...]:
    """A comma-separated code list that the seed ends with a fixed Korean phrase."""
    match = re.search(r"([a-z_]+(?:, [a-z_]+)+) " + re.escape(korean_suffix), text)
    assert match, f"no code list followed by {korean_suffix!r} in seed 004"
    return tuple(match.group(1).split(", "))


# --------------------------------------------------------------------------------------
# Seed 000: reasons
# --------------------------------------------------------------------------------------


def test_every_seed_reason_code_is_known_with_its_lifecycle_stage() -> None:
    for code, stage in SEED_000_STAGE_OF.items():
        info = reason_info(code)
        assert info is not None, f"seed reason {code} missing from REASONS"
        assert info.stage == stage, f"{code}: stage {info.stage}, seed says {stage}"
        assert info.origin == "catalog", f"{code} comes from the seed catalog"


def test_lifecycle_table_parsed_from_the_seed_matches_the_typed_list(seed_000: str) -> None:
    assert parse_lifecycle(seed_000) == SEED_000_STAGE_OF


def test_every_reason_in_the_seed_lifecycle_table_is_known_with_its_stage(
    seed_000: str,
) -> None:
    parsed = parse_lifecycle(seed_000)
    assert len(parsed) >= 30, "lifecycle table parsing found suspiciously few codes"
    for code, stage in parsed.items():
        info = reason_info(code)
        assert info is not None, f"seed reason {code} missing from REASONS"
        assert info.stage == stage


def test_every_reason_in_the_seed_catalog_tables_is_known_with_a_fitting_stage(
    seed_000: str,
) -> None:
    sections = parse_catalog(seed_000)
    assert set(sections) == set(CATALOG_SECTION_STAGES)
    lifecycle = parse_lifecycle(seed_000)
    for title, rows in sections.items():
        assert rows, f"catalog section {title} has no rows"
        for cells in rows:
            (code,) = _codes_in(cells[0])
            info = reason_info(code)
            assert info is not None, f"catalog reason {code} ({title}) missing from REASONS"
            assert info.stage in CATALOG_SECTION_STAGES[title], (code, info.stage)
            assert info.stage == lifecycle.get(code, info.stage)
            assert info.origin == "catalog"


def test_api_called_follows_the_seed_auth_and_execution_table() -> None:
    for code, api_called in SEED_000_API_CALLED.items():
        assert REASONS[code].api_called == api_called, code


def test_api_called_parsed_from_the_seed_auth_and_execution_table(seed_000: str) -> None:
    rows = parse_catalog(seed_000)["Auth and Execution"]
    parsed = {_codes_in(cells[0])[0]: cells[1].strip() for cells in rows}
    assert parsed == SEED_000_API_CALLED
    for code, api_called in parsed.items():
        assert REASONS[code].api_called == api_called, code


def test_seed_normalized_failure_record_example_agrees_with_the_catalog(seed_000: str) -> None:
    example = parse_json_block(seed_000, "Normalized Failure Record")
    info = REASONS[example["reason"]]
    assert info.stage == example["stage"]
    assert info.operator_action == example["operator_action"]
    assert info.retryable is example["retryable"]
    assert set(example["evidence"]) <= set(info.evidence_keys)


def test_seed_synthesis_envelope_example_keys_are_kept_as_evidence(seed_000: str) -> None:
    lines = seed_000.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("to_dict()는"))
    envelope = parse_json_block("\n".join(lines[heading:]), lines[heading])
    info = REASONS[envelope["reason"]]
    assert info.stage == envelope["stage"]
    details = set(envelope) - {"stage", "reason", "message"}
    assert details <= set(info.evidence_keys)


def test_seed_runner_event_example_reason_keeps_its_evidence(seed_000: str) -> None:
    event = parse_json_block(seed_000, "Runner Event Example")
    metadata = event["trace_metadata"]
    info = REASONS[metadata["failure_reason"]]
    assert info.stage == event["stage"]
    assert "http_status" in info.evidence_keys


def test_seed_quality_lab_allowed_failure_reasons_are_known(seed_000: str) -> None:
    example = parse_json_block(seed_000, "Quality Lab Assertions")
    for code in example["assertions"]["allowed_failure_reasons"]:
        assert code in REASONS
    assert "uncaught_server_error" in REASONS


def test_typed_seed_list_covers_every_catalog_origin_reason() -> None:
    catalog_codes = {code for code, info in REASONS.items() if info.origin == "catalog"}
    assert catalog_codes == set(SEED_000_STAGE_OF)


# --------------------------------------------------------------------------------------
# Seed 004: lanes and execution states
# --------------------------------------------------------------------------------------


def test_lanes_and_execution_states_are_spelled_as_in_the_seed() -> None:
    assert LANES == SEED_004_LANES
    assert EXECUTION_STATES == SEED_004_EXECUTION_STATES
    assert set(LANE_INFO) == set(LANES)
    assert set(EXECUTION_STATE_MEANING) == set(EXECUTION_STATES)
    for lane, info in LANE_INFO.items():
        assert info.code == lane
        assert info.default_action.strip()
        assert info.operator_needs.strip()
    assert all(meaning.strip() for meaning in EXECUTION_STATE_MEANING.values())


def test_lanes_parsed_from_seed_004_are_the_taxonomy_lanes(seed_004: str) -> None:
    parsed = parse_comma_list(seed_004, "중 하나로 분류")
    assert parsed == LANES
    # The lane table glues its cells together; every row must still start with a lane.
    lines = seed_004.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("lane"))
    rows = lines[header + 1 : header + 1 + len(LANES)]
    assert [next(lane for lane in LANES if row.startswith(lane)) for row in rows] == list(LANES)


def test_execution_states_parsed_from_seed_004_are_the_taxonomy_states(seed_004: str) -> None:
    assert parse_comma_list(seed_004, "중 어디인가") == EXECUTION_STATES


def test_side_effect_grades_and_sources_are_exact() -> None:
    assert SIDE_EFFECT_GRADES == ("read", "internal_write", "external_write", "privileged")
    # `otlp`: records that arrived as OpenTelemetry spans through POST /v1/traces.
    assert SOURCES == ("runtime", "quality_lab", "learning", "log", "otlp")


def test_side_effect_grades_named_in_seed_004_checklist(seed_004: str) -> None:
    # The seed words them as prose ("internal write"); the codes are their snake_case.
    for grade in SIDE_EFFECT_GRADES:
        assert grade.replace("_", " ") in seed_004


# --------------------------------------------------------------------------------------
# Every entry is well formed
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(REASONS))
def test_reason_entry_is_well_formed(code: str) -> None:
    info = REASONS[code]
    assert isinstance(info, ReasonInfo)
    assert info.code == code
    assert SNAKE_CASE.match(code)
    assert is_known_stage(info.stage), info.stage
    assert info.lane in LANES
    assert info.default_execution_state in EXECUTION_STATES
    assert info.api_called in {"no", "yes", "maybe"}
    assert info.origin in {"catalog", "engine", "adapter"}
    for text in (info.meaning, info.usual_action, info.usually_fixed_in, info.triage_advice):
        assert text.strip()
    assert SNAKE_CASE.match(info.operator_action), info.operator_action
    assert info.evidence_keys, "every reason keeps some evidence"
    assert len(set(info.evidence_keys)) == len(info.evidence_keys)
    for key in info.evidence_keys:
        assert SNAKE_CASE.match(key), key


def test_only_retry_safe_reasons_default_to_retryable() -> None:
    # DESIGN flags retryable=true outside retry_safe as a contradiction; the catalog
    # itself must never produce one.
    for info in REASONS.values():
        if info.retryable:
            assert info.lane == "retry_safe", info.code


def test_not_started_exactly_when_the_api_was_not_called() -> None:
    for info in REASONS.values():
        assert (info.api_called == "no") == (info.default_execution_state == "not_started"), (
            info.code
        )


def test_defaults_follow_the_design_for_execution_failures() -> None:
    expected = {
        "http_4xx": ("completed", False),
        "auth_failed": ("completed", False),
        "http_5xx": ("completed", True),
        "timeout": ("started_unknown", True),
        "network_error": ("started_unknown", True),
        "cleanup_failed": ("partially_completed", False),
        "cleanup_not_configured": ("not_started", False),
        "uncaught_server_error": ("started_unknown", False),
    }
    for code, (state, retryable) in expected.items():
        assert REASONS[code].default_execution_state == state, code
        assert REASONS[code].retryable is retryable, code
    for stage in ("retrieve", "select_target", "synthesize", "bind_request", "auth_preflight"):
        for info in REASONS.values():
            if info.stage == stage:
                assert info.default_execution_state == "not_started", info.code


def test_default_lanes_follow_the_design() -> None:
    by_lane = {
        "input_stale": (
            "unsatisfied_field",
            "enum_required",
            "dynamic_option_required",
            "user_input_fallback",
            "missing_required_argument",
        ),
        "policy_blocked": (
            "auth_context_required",
            "auth_profile_missing",
            "auth_header_resolution_failed",
            "auth_failed",
        ),
        "manual_investigation": ("cleanup_failed", "uncaught_server_error"),
        "retry_safe": ("http_5xx", "timeout", "network_error"),
    }
    for lane, codes in by_lane.items():
        for code in codes:
            assert REASONS[code].lane == lane, code


def test_not_retryable_without_a_product_action() -> None:
    # Seed 000: missing user input, missing auth profile, unsupported contracts.
    for code in ("unsatisfied_field", "auth_profile_missing", "unknown_target", "http_4xx"):
        assert REASONS[code].retryable is False


def test_stage_info_covers_every_stage_in_order() -> None:
    assert tuple(STAGE_INFO) == STAGES
    for stage, info in STAGE_INFO.items():
        assert info.code == stage
        assert info.title.strip()
        assert info.usually_fixed_in.strip()


def test_every_stage_has_at_least_one_reason() -> None:
    assert {info.stage for info in REASONS.values()} == set(STAGES)


def test_taxonomy_version_is_calendar_style() -> None:
    assert TAXONOMY_VERSION == "2026.12.1"
    assert re.fullmatch(r"\d{4}\.\d{1,2}\.\d+", TAXONOMY_VERSION)


def test_unknown_reason_is_unmapped_not_an_error() -> None:
    assert reason_info("adapter_specific_reason") is None
    assert reason_info("") is None


def test_module_does_not_import_django_or_the_engine() -> None:
    source = Path(taxonomy.__file__).read_text(encoding="utf-8")
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "dataclasses"}


# --------------------------------------------------------------------------------------
# Stage ordering
# --------------------------------------------------------------------------------------


def test_stage_index_follows_the_lifecycle() -> None:
    assert [stage_index(stage) for stage in STAGES] == list(range(len(STAGES)))
    assert stage_index("retrieve") < stage_index("synthesize") < stage_index("execute")
    assert stage_index("learn") < stage_index("service")


def test_unknown_stages_sort_after_every_known_stage() -> None:
    assert not is_known_stage("runner")
    assert not is_known_stage("")
    for stage in STAGES:
        assert is_known_stage(stage)
        assert stage_index("runner") > stage_index(stage)
    mixed = ["ui_stream", "execute", "retrieve", "runner", "service"]
    ordered = sorted(mixed, key=stage_index)
    assert ordered[:3] == ["retrieve", "execute", "service"]
    assert set(ordered[3:]) == {"ui_stream", "runner"}


# --------------------------------------------------------------------------------------
# Engine codes, introspected from the installed graph_tool_call
# --------------------------------------------------------------------------------------


def _string_constants(node: ast.AST) -> set[str]:
    found: set[str] = set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        found.add(node.value)
    elif isinstance(node, ast.IfExp):
        found |= _string_constants(node.body) | _string_constants(node.orelse)
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for element in node.elts:
            found |= _string_constants(element)
    return found


def _function_ast(function: Callable[..., Any]) -> ast.AST:
    return ast.parse(textwrap.dedent(inspect.getsource(function)))


def _codes_added_to_lists(function: Callable[..., Any], list_names: set[str]) -> set[str]:
    """String literals the function appends to its reason lists or returns as reason_codes."""
    codes: set[str] = set()
    for node in ast.walk(_function_ast(function)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"append", "extend"}
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in list_names
        ):
            for argument in node.args:
                codes |= _string_constants(argument)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "reason_codes":
                    codes |= _string_constants(value)
    return codes


def selector_reason_codes() -> set[str]:
    # select_target_candidate folds the override assessment's reasons into its own
    # reason_codes, so the assessment's codes are the selector's too; candidate admission
    # feeds the selector and reports through the same reason_codes field.
    codes = _codes_added_to_lists(catalog.select_target_candidate, {"reason_codes"})
    codes |= _codes_added_to_lists(catalog._risk_limited_override_assessment, {"reasons"})
    codes |= _codes_added_to_lists(catalog.admit_target_candidates, {"reason_codes"})
    return codes


def synthesis_reasons_with_details() -> dict[str, set[str]]:
    """reason -> the detail keys synthesizer.py sends with it (to_dict() and fallbacks)."""
    tree = ast.parse(inspect.getsource(synthesizer))
    details: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg}
            reason = keywords.get("reason")
            if isinstance(reason, ast.Constant) and isinstance(reason.value, str):
                keys = set(keywords) - {"reason", "stage"}
                details.setdefault(reason.value, set()).update(keys)
        elif isinstance(node, ast.Dict):
            pairs = {
                key.value: value
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            }
            reason = pairs.get("reason")
            if isinstance(reason, ast.Constant) and isinstance(reason.value, str):
                keys = set(pairs) - {"reason", "stage", "message"}
                details.setdefault(reason.value, set()).update(keys)
    default = inspect.signature(synthesizer.PlanSynthesisError.__init__).parameters["reason"]
    details.setdefault(default.default, set())
    return details


def test_selector_introspection_finds_the_documented_codes() -> None:
    codes = selector_reason_codes()
    # Guards against the AST walk silently finding nothing after an engine refactor.
    assert {"llm_target_overridden", "ambiguous_target", "no_candidates"} <= codes
    assert len(codes) >= 10


def test_every_target_selector_reason_code_is_in_the_taxonomy() -> None:
    for code in sorted(selector_reason_codes()):
        info = reason_info(code)
        assert info is not None, f"engine selector code {code} missing from REASONS"
        if code not in SEED_000_STAGE_OF:
            assert info.stage == "select_target", code
            assert info.origin == "engine", code


def test_selector_codes_seen_at_runtime_are_in_the_taxonomy() -> None:
    tools = {
        "getOrder": {"name": "getOrder", "description": "get order"},
        "getOrderCopy": {"name": "getOrderCopy", "description": "get order"},
    }
    results = [
        graphify.select_target_candidate("get order", [], {}),
        graphify.select_target_candidate("get order", list(tools), tools),
        graphify.select_target_candidate("get order", list(tools), tools, llm_target="nope"),
        graphify.admit_target_candidates("get order", list(tools), tools),
    ]
    seen = {code for result in results for code in result["reason_codes"]}
    assert "no_candidates" in seen
    assert seen <= set(REASONS), seen - set(REASONS)


def test_every_plan_synthesis_reason_is_in_the_taxonomy() -> None:
    reasons = synthesis_reasons_with_details()
    documented = {
        "unknown_target",
        "enum_required",
        "dynamic_option_required",
        "cycle",
        "max_depth",
        "user_input_fallback",
        "synthesis_error",
    }
    assert documented <= set(reasons), documented - set(reasons)
    for code, detail_keys in reasons.items():
        info = reason_info(code)
        assert info is not None, f"synthesis reason {code} missing from REASONS"
        assert info.stage == "synthesize", code
        # The engine's detail keys are evidence worth keeping for that reason.
        assert detail_keys <= set(info.evidence_keys), (code, detail_keys)


def test_plan_synthesis_errors_raised_at_runtime_are_in_the_taxonomy() -> None:
    graph = {
        "tools": {
            "createRefund": {
                "metadata": {
                    "consumes": [
                        {
                            "field_name": "reasonCode",
                            "semantic_tag": "refund_reason",
                            "required": True,
                        }
                    ]
                }
            }
        }
    }
    envelopes: list[dict[str, Any]] = [plan.PlanSynthesisError("generic").to_dict()]
    attempts: list[tuple[dict[str, Any], str]] = [
        ({}, "nope"),
        ({"enum_field_names": {"reasonCode"}}, "createRefund"),
        ({"max_depth": -1}, "createRefund"),
    ]
    for options, target in attempts:
        with pytest.raises(plan.PlanSynthesisError) as raised:
            plan.PathSynthesizer(graph, **options).synthesize(target=target)
        envelopes.append(raised.value.to_dict())
    envelopes.append(
        synthesizer.DynamicOptionRequired(
            "pick one",
            field_name="itmNo",
            semantic_tag="item_id",
            producer_name="getProductInfo",
            options_path="$.itmInfo[*].itmNo",
            label_field_hints=["itmNm"],
        ).to_dict()
    )
    built = plan.PathSynthesizer(graph).synthesize(target="createRefund")
    fallbacks = built.metadata["synthesis"]["fallbacks"]
    assert fallbacks, "expected a user_input_fallback for the unsatisfied field"

    reasons = {envelope["reason"] for envelope in envelopes} | {f["reason"] for f in fallbacks}
    assert {"synthesis_error", "unknown_target", "enum_required", "max_depth"} <= reasons
    assert {"dynamic_option_required", "user_input_fallback"} <= reasons
    for envelope in envelopes:
        info = REASONS[envelope["reason"]]
        assert info.stage == envelope["stage"] == "synthesize"
        assert set(envelope) - {"stage", "reason", "message"} <= set(info.evidence_keys)
    for fallback in fallbacks:
        assert set(fallback) - {"reason"} <= set(REASONS["user_input_fallback"].evidence_keys)


def test_plan_synthesis_error_subclasses_report_the_synthesize_stage() -> None:
    base = synthesizer.PlanSynthesisError
    pending = [base]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls is synthesizer.DynamicOptionRequired:
            continue  # needs its own keyword arguments; covered by the runtime test
        envelope = cls("probe").to_dict()
        assert envelope["stage"] == REASONS[envelope["reason"]].stage == "synthesize"


def test_adapter_reasons_are_the_desks_own_and_documented() -> None:
    from triage.vocabulary.taxonomy import ORIGINS, adapter_reasons

    assert ORIGINS == ("catalog", "engine", "adapter")
    concepts = (Path(__file__).resolve().parents[2] / "docs" / "concepts.md").read_text(
        encoding="utf-8"
    )
    codes = [info.code for info in adapter_reasons()]
    assert "base_url_not_configured" in codes
    for info in adapter_reasons():
        assert info.code not in SEED_000_STAGE_OF, "a seed code is never an adapter reason"
        assert f"`{info.code}`" in concepts, f"{info.code} is documented in docs/concepts.md"
    gap = REASONS["base_url_not_configured"]
    # Nothing was called, and a configuration gap is neither a bug nor worth a retry.
    assert (gap.stage, gap.lane, gap.retryable) == ("execute", "policy_blocked", False)
    assert (gap.api_called, gap.default_execution_state) == ("no", "not_started")
