"""Target selection (``select_target_candidate``) and plan synthesis
(``PathSynthesizer``): the stages a plan case adds to search, and their failures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graph_tool_call.graphify import select_target_candidate
from graph_tool_call.plan import Plan, PlanSynthesisError

from qualitylab.engine.cases import CaseSpec
from qualitylab.engine.outcome import failure_record
from qualitylab.engine.search import SearchStage


class PlanStage(SearchStage):
    """Search, then target selection and plan synthesis."""

    # -- target selection ------------------------------------------------------------

    def select(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        case = self.case
        with self.timed("select"):
            selection = select_target_candidate(
                case.query,
                [str(row.get("name")) for row in rows],
                self.collection.tools,
                retrieval_results=rows,
                llm_target=case.llm_target,
            )
        self.outcome.target_selector = _compact_selection(selection, case)
        return selection

    def selection_failure(
        self, rows: list[dict[str, Any]], selection: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        case = self.case
        selected = str(selection.get("selected_target") or "")
        names = [str(row.get("name")) for row in rows]
        if not selected or selected not in self.collection.tools:
            return self.no_candidates() if not names else self.not_retrieved(names)
        expected = case.expected_target
        if expected is None or selected == expected:
            return None
        if expected not in names:
            return self.not_retrieved(names)
        llm = case.llm_target
        overrode = bool(selection.get("overrode_llm"))
        evidence: dict[str, Any] = {
            "expected_target": expected,
            "selected_target": selected,
            "llm_target": llm,
            "reason_codes": list(selection.get("reason_codes") or []),
        }
        if llm and selected == llm and not overrode:
            if llm not in names:
                return failure_record(
                    "select_target",
                    "llm_target_not_in_candidates",
                    f"the LLM target {llm} is outside the retrieved Top-{case.expected_top_k}",
                    tool=selected,
                    evidence={**evidence, "candidate_names": names},
                )
            return failure_record(
                "select_target",
                "llm_target_mismatch",
                f"the selector kept the LLM target {llm}; the case expects {expected}",
                tool=selected,
                evidence={**evidence, "llm_margin": selection.get("llm_margin")},
            )
        if selection.get("ambiguous"):
            return failure_record(
                "select_target",
                "ambiguous_target",
                f"{selected} and {expected} have similar evidence; the case expects {expected}",
                tool=selected,
                evidence={
                    **evidence,
                    "margin": selection.get("margin"),
                    "ambiguity_set": list(selection.get("ambiguity_set") or []),
                },
            )
        return failure_record(
            "select_target",
            "selector_mismatch",
            f"the selector chose {selected}; the case expects {expected}",
            tool=selected,
            evidence={
                **evidence,
                "override_flag": overrode,
                "rank_signals": (self.outcome.target_selector or {}).get("rank_signals", [])[:5],
            },
        )

    # -- plan synthesis --------------------------------------------------------------

    def synthesize(self, selection: Mapping[str, Any], *, stop: bool) -> Plan | None:
        target = str(selection.get("selected_target") or "")
        if not target or target not in self.collection.tools:
            if stop:
                self.fail(self.no_candidates())
            return None
        with self.timed("plan"):
            try:
                plan = self.collection.synthesize(
                    target=target, entities=self.case.provided_entities, goal=self.case.query
                )
            except PlanSynthesisError as exc:
                diagnostic = exc.to_dict()
                self.outcome.plan = {"target": target, "steps": None, "diagnostics": diagnostic}
                if stop:
                    self.fail(_synthesis_failure(diagnostic, target))
                return None
        self.outcome.plan = _compact_plan(plan, self.case.provided_entities)
        return plan

    def check_slots(self, plan: Plan) -> None:
        slots = [
            slot
            for slot in plan.metadata.get("user_input_slots") or []
            if isinstance(slot, Mapping) and slot.get("required", True)
        ]
        if not slots:
            return
        first = slots[0]
        field_name = str(first.get("field_name") or "")
        self.fail(
            failure_record(
                "synthesize",
                "unsatisfied_field",
                f"Required field {field_name} cannot be supplied: no producer and no "
                "provided entity",
                tool=str(first.get("tool") or "") or None,
                plan_id=plan.id,
                step_id=str(first.get("step_id") or "") or None,
                evidence={
                    "field_name": field_name,
                    "semantic_tag": first.get("semantic_tag"),
                    "target_tool": first.get("tool"),
                    "location": first.get("location"),
                    "cause": first.get("cause") or first.get("reason"),
                    "missing_fields": [str(slot.get("field_name")) for slot in slots],
                },
            )
        )


def _compact_selection(selection: Mapping[str, Any], case: CaseSpec) -> dict[str, Any]:
    signals = []
    for row in selection.get("rank_signals") or []:
        if not isinstance(row, Mapping):
            continue
        signals.append(
            {
                "name": row.get("name"),
                "selector_score": row.get("selector_score"),
                "retrieval_rank": row.get("original_rank"),
                "canonical_action": row.get("canonical_action"),
                "result_shape": row.get("result_shape"),
                "strong_evidence": bool(row.get("strong_evidence")),
                "evidence_sources": [
                    str(item.get("source"))
                    for item in row.get("evidence") or []
                    if isinstance(item, Mapping)
                ],
                "selected": bool(row.get("selected")),
                "llm_target": bool(row.get("llm_target")),
            }
        )
    selected = selection.get("selected_target") or None
    return {
        "selected_target": selected,
        "llm_target": selection.get("llm_target"),
        "expected_target": case.expected_target,
        "matches_expected": None
        if case.expected_target is None
        else selected == case.expected_target,
        "overrode_llm": bool(selection.get("overrode_llm")),
        "ambiguous": bool(selection.get("ambiguous")),
        "reason_codes": list(selection.get("reason_codes") or []),
        "confidence": selection.get("confidence"),
        "margin": selection.get("margin"),
        "llm_margin": selection.get("llm_margin"),
        "decision": selection.get("decision"),
        "ambiguity_set": list(selection.get("ambiguity_set") or []),
        "needs_expansion": bool(selection.get("needs_expansion")),
        "policy": selection.get("policy"),
        "policy_revision": selection.get("policy_revision"),
        "rank_signals": signals,
    }


def _compact_plan(plan: Plan, entities: Mapping[str, Any]) -> dict[str, Any]:
    synthesis = plan.metadata.get("synthesis") or {}
    steps = []
    for step in plan.steps:
        args = {
            name: value if isinstance(value, str) and "${" in value else "<provided>"
            for name, value in (step.args or {}).items()
        }
        steps.append(
            {
                "id": step.id,
                "tool": step.tool,
                "args": args,
                "depends_on": list(getattr(step, "depends_on", []) or []),
            }
        )
    return {
        "plan_id": plan.id,
        "target": plan.metadata.get("target"),
        "steps": steps,
        "tools": [step.tool for step in plan.steps],
        "user_input_slots": [dict(slot) for slot in plan.metadata.get("user_input_slots") or []],
        "selected_producers": list(synthesis.get("selected_producers") or []),
        "fallbacks": list(synthesis.get("fallbacks") or []),
        "entity_names": sorted(entities),
        "diagnostics": None,
    }


def _synthesis_failure(diagnostic: Mapping[str, Any], target: str) -> dict[str, Any]:
    reason = str(diagnostic.get("reason") or "synthesis_error")
    stage = str(diagnostic.get("stage") or "synthesize")
    evidence = {
        key: value for key, value in diagnostic.items() if key not in ("stage", "reason", "message")
    }
    evidence.setdefault("target_tool", target)
    return failure_record(
        stage,
        reason,
        str(diagnostic.get("message") or reason),
        tool=str(diagnostic.get("tool") or diagnostic.get("target_tool") or target),
        evidence=evidence,
        execution_state="not_started",
    )
