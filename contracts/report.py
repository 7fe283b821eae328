"""The contracts overview as JSON: one shape for the API and the CLI."""

from __future__ import annotations

from typing import Any

from contracts.models import CONTRACT_FIELDS, RETRY_RULE_KINDS
from contracts.selectors import ContractsOverview, ToolContract


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def tool_document(tool: ToolContract) -> dict[str, Any]:
    return {
        "collection": tool.collection,
        "tool": tool.tool,
        "rank": tool.rank,
        "first_batch": tool.first_batch,
        "state": tool.state,
        "criteria": {
            criterion.code: {"met": criterion.met, "figure": criterion.figure}
            for criterion in tool.criteria
        },
        "failures": tool.failures,
        "failed_calls": tool.failed_calls,
        "successes": tool.successes,
        "failure_rate": _round(tool.failure_rate),
        "retries": tool.retries,
        "retries_a_month": round(tool.retries_a_month, 2),
        "side_effect": tool.side_effect or None,
        "approval_required": tool.approval_required,
        "uncertain_runs": tool.uncertain,
        "reconcile_findings": tool.reconciliations,
        "double_completions": tool.double_completions,
        "fields_sent": {
            "items": tool.items,
            **{name: _round(tool.share(name)) for name in CONTRACT_FIELDS},
        },
        "envelope_fields_sent": (
            {
                "envelopes": tool.envelopes,
                **{name: _round(share) for name, share in tool.envelope_shares},
            }
            if tool.envelopes
            else None
        ),
        "retry_rules_broken": {kind: tool.findings.get(kind, 0) for kind in RETRY_RULE_KINDS},
        "self_report": {
            "not_started_claims": tool.not_started_claims,
            "contradicted_by_audit": tool.contradicted,
            "contradicted_share": _round(tool.contradicted_share),
        },
    }


def overview_document(overview: ContractsOverview) -> dict[str, Any]:
    return {
        "days": overview.filters.days,
        "since": overview.since.isoformat(),
        "scanned_at": overview.scanned_at.isoformat() if overview.scanned_at else None,
        "filters": {"collection": overview.filters.collection, "tool": overview.filters.tool},
        "first_batch": [tool.tool for tool in overview.first_batch],
        "tools": [tool_document(tool) for tool in overview.tools],
    }
