"""A run's metrics, computed from its results' stage sections."""

from __future__ import annotations

from collections.abc import Iterable
from statistics import median
from typing import Any

from qualitylab.models import CaseResult

STAGES = ("search", "select", "plan", "execute", "cleanup")


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def run_metrics(results: Iterable[CaseResult]) -> dict[str, Any]:
    """hit@K, top-1, selector accuracy, plan hit rate, execute success, structured failure
    rate and latency by stage. A rate is None when no case measured it."""
    searched = top1 = hits = 0
    selected = selected_right = 0
    planned = planned_right = 0
    executed = executed_ok = 0
    failed = structured = 0
    latencies: dict[str, list[float]] = {stage: [] for stage in STAGES}
    total = passed = 0
    for result in results:
        total += 1
        passed += int(result.passed)
        sections = result.sections or {}
        search = sections.get("search") or {}
        if search.get("hit") is not None:
            searched += 1
            hits += int(bool(search.get("hit")))
            top1 += int(search.get("hit_rank") == 1)
        selector = sections.get("target_selector") or {}
        if selector.get("matches_expected") is not None:
            selected += 1
            selected_right += int(bool(selector["matches_expected"]))
        plan = sections.get("plan") or {}
        if plan and selector.get("expected_target"):
            planned += 1
            planned_right += int(
                bool(plan.get("steps")) and plan.get("target") == selector.get("expected_target")
            )
        execute = sections.get("execute") or {}
        if execute.get("calls") or execute.get("http_status") is not None:
            executed += 1
            executed_ok += int(not result.failure_reason or result.failure_stage == "cleanup")
        if not result.passed or result.failure_reason:
            failed += 1
            # Structured: a known stage and reason, not a crash of the desk or engine.
            structured += int(
                bool(result.failure_reason) and result.failure_reason != "uncaught_server_error"
            )
        for stage, value in (result.latency_ms or {}).items():
            if stage in latencies and value is not None:
                latencies[stage].append(float(value))
    return {
        "cases": total,
        "pass_rate": _rate(passed, total),
        "hit_at_k": _rate(hits, searched),
        "top_1": _rate(top1, searched),
        "selector_accuracy": _rate(selected_right, selected),
        "plan_hit_rate": _rate(planned_right, planned),
        "execute_success": _rate(executed_ok, executed),
        "structured_failure_rate": _rate(structured, failed),
        "latency_p50_ms": {
            stage: round(median(values), 1) if values else None
            for stage, values in latencies.items()
        },
    }
