"""Running a case: :func:`run_case` drives the stages of the case's mode, compares a shadow
ranking when there is one, evaluates the assertions, and never raises (the module docstring
of :mod:`qualitylab.engine` describes each mode)."""

from __future__ import annotations

from collections.abc import Mapping

from graph_tool_call.graphify import select_target_candidate

from qualitylab import assertions as case_assertions
from qualitylab.engine.cases import CaseSpec, ExecutionContext
from qualitylab.engine.collection import LoadedCollection
from qualitylab.engine.execute import ExecuteStage
from qualitylab.engine.outcome import CaseOutcome, Rerank, Stop
from qualitylab.engine.plan import PlanStage


def run_case(
    collection: LoadedCollection,
    case: CaseSpec,
    *,
    execution: ExecutionContext | None = None,
    rerank: Rerank | None = None,
    shadow: Rerank | None = None,
) -> CaseOutcome:
    """Run one case through its mode's stages. Never raises (see the module docstring)."""
    run = _CaseRun(collection, case, execution, rerank, shadow)
    try:
        run.run()
    except Exception as exc:  # a case must never crash its run
        if _must_propagate(exc):
            raise
        run.fail_uncaught(exc)
    try:
        run.compare_shadow()
    except Exception as exc:  # the shadow comparison never decides a case either
        if _must_propagate(exc):
            raise
        run.outcome.learning = {
            **(run.outcome.learning or {}),
            "mode": "shadow",
            "error": f"{type(exc).__name__} while comparing the shadow ranking",
        }
    try:
        run.finish()
    except Exception as exc:  # the same promise for assertion evaluation
        if _must_propagate(exc):
            raise
        run.fail_uncaught(exc)
        run.outcome.status = "failed"
    return run.outcome


# A worker's time limits arrive as Exception subclasses (Celery's SoftTimeLimitExceeded);
# turning them into a case failure would keep a task running past its limit.
_PROPAGATED_EXCEPTIONS = frozenset({"SoftTimeLimitExceeded", "TimeLimitExceeded", "Terminated"})


def _must_propagate(exc: BaseException) -> bool:
    return any(cls.__name__ in _PROPAGATED_EXCEPTIONS for cls in type(exc).__mro__)


class _CaseRun(PlanStage, ExecuteStage):
    def finish(self) -> None:
        results = case_assertions.evaluate(self.case.assertions, self.outcome)
        self.outcome.assertions = results
        status, allowed = case_assertions.decide(
            self.case.assertions, self.outcome.failure, results
        )
        self.outcome.status = status
        self.outcome.failure_allowed = allowed

    # -- pipeline --------------------------------------------------------------------

    def run(self) -> None:
        try:
            rows = self.search()
            if self.case.mode == "search":
                self.check_search(rows)
                return
            selection = self.select(rows)
            selection_failure = self.selection_failure(rows, selection)
            plan = self.synthesize(selection, stop=selection_failure is None)
            if selection_failure is not None:
                self.fail(selection_failure)
            if plan is None:  # synthesize() has recorded the failure already
                return
            self.check_slots(plan)
            if self.case.mode == "execute":
                self.execute(plan)
        except Stop:
            return

    # -- learning: the shadow comparison ---------------------------------------------

    def compare_shadow(self) -> None:
        """Record what the shadow ranking would change (see "Extension points"). Runs after
        the case, so a failing shadow callable can never change the case's own outcome."""
        if self.shadow is None or self.current_rows is None:
            return
        case, outcome = self.case, self.outcome
        # Copies: the shadow ranking must not touch the rows the case ran on.
        shadow_rows = list(self.shadow(case.query, [dict(row) for row in self.current_rows]))[
            : case.expected_top_k
        ]
        expected = _learning_expected_target(case)
        current_names = [str(row.get("name")) for row in self.current_rows]
        shadow_names = [str(row.get("name")) for row in shadow_rows]
        current_rank = current_names.index(expected) + 1 if expected in current_names else None
        shadow_rank = shadow_names.index(expected) + 1 if expected in shadow_names else None
        current_reason = (outcome.failure or {}).get("reason")
        current_selected: str | None = None
        shadow_selected: str | None = None
        target_changed: bool | None = None
        if case.mode == "search":
            shadow_reason = self.search_failure_reason(shadow_rows)
            if current_reason not in (None, "no_candidates", "not_retrieved", "low_confidence"):
                shadow_reason = current_reason
        else:
            current_selected = (outcome.target_selector or {}).get("selected_target")
            selection = select_target_candidate(
                case.query,
                shadow_names,
                self.collection.tools,
                retrieval_results=shadow_rows,
                llm_target=case.llm_target,
            )
            shadow_selected = str(selection.get("selected_target") or "") or None
            target_changed = shadow_selected != current_selected
            failure = self.selection_failure(shadow_rows, selection)
            if failure is not None:
                shadow_reason = failure["reason"]
            elif not target_changed:
                shadow_reason = current_reason  # the same target: the same later stages
            else:
                shadow_reason = None  # another target: what would follow is unknown
        outcome.learning = {
            **(outcome.learning or {}),
            "mode": "shadow",
            "expected_target": expected,
            "current_rank": current_rank,
            "shadow_rank": shadow_rank,
            "rank_delta": current_rank - shadow_rank if current_rank and shadow_rank else None,
            "current_selected_target": current_selected,
            "shadow_selected_target": shadow_selected,
            "selected_target_changed": target_changed,
            "current_failure_reason": current_reason,
            "shadow_failure_reason": shadow_reason,
            "failure_reason_changed": shadow_reason != current_reason,
            "shadow_top": shadow_names[:5],
            "signals": [
                {
                    key: row["learning"].get(key)
                    for key in ("suggestion_id", "suggestion_type", "target", "status", "score")
                }
                for row in shadow_rows
                if isinstance(row.get("learning"), Mapping)
            ],
        }


def _learning_expected_target(case: CaseSpec) -> str | None:
    """The target a shadow comparison ranks: the case's documented ``learning`` block may
    name its own (graph-tool-call's Quality Lab docs), else the case's expected target."""
    block = case.extra.get("learning")
    if isinstance(block, Mapping) and isinstance(block.get("expected_target"), str):
        return str(block["expected_target"]) or case.expected_target
    return case.expected_target
