"""What a case run builds and the state every stage shares: the outcome
(:class:`CaseOutcome`), the seed's normalized failure record (:func:`failure_record`) and
:class:`CaseRunState` (the case, its collection and settings, stage timing, and
:class:`Stop`, which ends the pipeline once a stage has recorded the case's failure)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

from qualitylab.engine.cases import CaseSpec, ExecutionContext
from qualitylab.engine.collection import LoadedCollection
from qualitylab.engine.spec import GRAPH_TOOL_CALL_VERSION
from triage.vocabulary import taxonomy

Rerank = Callable[[str, list[dict[str, Any]]], list[dict[str, Any]]]

_STAGES_TIMED = ("search", "select", "plan", "execute", "cleanup")


@dataclass
class CaseOutcome:
    """The result of one case; ``to_dict()`` is what a CaseResult row stores."""

    case_id: str
    mode: str
    status: str = "failed"
    failure: dict[str, Any] | None = None
    failure_allowed: bool = False
    search: dict[str, Any] | None = None
    target_selector: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    execute: dict[str, Any] | None = None
    auth_readiness: dict[str, Any] | None = None
    learning: dict[str, Any] | None = None
    assertions: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: dict[str, float | None] = field(
        default_factory=lambda: dict.fromkeys(_STAGES_TIMED)
    )
    graph_tool_call_version: str = GRAPH_TOOL_CALL_VERSION
    taxonomy_version: str = taxonomy.TAXONOMY_VERSION

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return cast(dict[str, Any], json_safe_outcome(dataclasses.asdict(self)))


def json_safe_outcome(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def failure_record(
    stage: str,
    reason: str,
    message: str,
    *,
    tool: str | None = None,
    plan_id: str | None = None,
    step_id: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    execution_state: str | None = None,
) -> dict[str, Any]:
    """The seed's normalized failure record, with retryable/operator action from taxonomy."""
    info = taxonomy.reason_info(reason)
    return {
        "stage": stage,
        "reason": reason,
        "message": message[:500],
        "tool": tool,
        "plan_id": plan_id,
        "step_id": step_id,
        "retryable": info.retryable if info else False,
        "operator_action": info.operator_action if info else None,
        "execution_state": execution_state or (info.default_execution_state if info else None),
        "evidence": dict(evidence or {}),
    }


class Stop(Exception):
    """Ends the pipeline after a stage recorded the case's failure."""


class CaseRunState:
    """A case run's state and bookkeeping, shared by its stages (search, plan, execute)."""

    def __init__(
        self,
        collection: LoadedCollection,
        case: CaseSpec,
        execution: ExecutionContext | None,
        rerank: Rerank | None,
        shadow: Rerank | None = None,
    ) -> None:
        self.collection = collection
        self.case = case
        self.execution = execution
        self.rerank = rerank
        self.shadow = shadow
        self.current_rows: list[dict[str, Any]] | None = None
        self.outcome = CaseOutcome(case_id=case.id, mode=case.mode)
        self.stage = "search"

    # -- bookkeeping -----------------------------------------------------------------

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        self.stage = stage
        started = time.perf_counter()
        try:
            yield
        finally:
            self.outcome.latency_ms[stage] = round((time.perf_counter() - started) * 1000, 3)

    def fail(self, failure: dict[str, Any]) -> NoReturn:
        if self.outcome.failure is None:
            self.outcome.failure = failure
        raise Stop

    def fail_uncaught(self, exc: BaseException) -> None:
        if isinstance(exc, Stop):
            return
        # The message of an arbitrary exception may quote a header, a body or a token.
        self.outcome.failure = failure_record(
            "service",
            "uncaught_server_error",
            f"{type(exc).__name__} raised during the {self.stage} stage",
            evidence={"exception_type": type(exc).__name__, "during_stage": self.stage},
        )
