"""The demo's contracts: tools in every state the contracts page tells apart.

- getInvoice (billing, a read): sends the five fields and keeps the retry rules;
- sendInvoice (billing, an external write): sends the five fields, but retried a send whose
  outcome was unknown before anyone looked it up (reconcile_first broken);
- the shop's tools (the demo's failures) send none of the five fields: the ones that write
  or fail often head the ranking, first in line for a contract.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from contracts.scan import contracts_scan_all
from triage.models import ToolPolicy

OWNER = "demo-contracts"
COLLECTION = "billing"
POLICIES = (
    ("getInvoice", "read", ""),
    ("sendInvoice", "external_write", "GET /invoices/by-key/{key}"),
    ("requestRefund", "external_write", "GET /refunds/by-key/{key}"),
    ("cancelOrder", "external_write", ""),
)


def _receipt(number: int, tool: str, at: datetime, **fields: Any) -> dict[str, Any]:
    side_effect = "read" if tool == "getInvoice" else "external_write"
    body = {
        "tool_run_id": f"tr_contract_{number:04d}",
        "tool": tool,
        "collection": COLLECTION,
        "side_effect": side_effect,
        "attempt": 1,
        "result": "ok",
        "execution_state": "completed",
        "next_action": "none",
        "evidence_ref": f"req_contract_{number:04d}",
        "started_at": at.isoformat(),
        "ended_at": (at + timedelta(milliseconds=180)).isoformat(),
        **fields,
    }
    return {"type": "receipt", "id": f"demo-contract-{number}", "body": body}


def demo_items(*, now: datetime) -> Iterator[dict[str, Any]]:
    number = 0
    # getInvoice: 60 runs over two days, two of them retried once (within the rules).
    for index in range(60):
        at = now - timedelta(hours=47) + timedelta(minutes=47 * index)
        key = f"invoice-read:{index:03d}"
        if index % 30 == 7:
            number += 1
            yield _receipt(
                number, "getInvoice", at, idempotency_key=key, result="failed",
                reason="http_5xx", next_action="retry_with_backoff",
            )  # fmt: skip
            at += timedelta(seconds=4)
        number += 1
        yield _receipt(number, "getInvoice", at, idempotency_key=key)
    # sendInvoice: 40 sends; one timed out after the send and was sent again a minute later
    # without a lookup (the rule it breaks), one was looked up first (as the seed asks).
    for index in range(40):
        at = now - timedelta(hours=40) + timedelta(minutes=55 * index)
        key = f"notify:invoice-{900 + index}"
        if index in (11, 27):
            number += 1
            yield _receipt(
                number, "sendInvoice", at, idempotency_key=key, result="uncertain",
                reason="timeout", execution_state="started_unknown",
                next_action="query_by_idempotency_key",
            )  # fmt: skip
            at += timedelta(minutes=1)
            if index == 27:
                number += 1
                yield _receipt(number, "sendInvoice", at, idempotency_key=key, result="lookup")
                at += timedelta(seconds=10)
        number += 1
        yield _receipt(number, "sendInvoice", at, idempotency_key=key, attempt=1)


def install(*, now: datetime, ingest: Any) -> int:
    """The demo's tool policies and contract traffic, counted at once (nothing else writes
    while the demo loads, so nothing has to settle). Returns the items sent."""
    for tool, grade, lookup in POLICIES:
        collection = COLLECTION if tool in ("getInvoice", "sendInvoice") else ""
        ToolPolicy.objects.update_or_create(
            collection=collection,
            tool=tool,
            defaults={
                "side_effect": grade,
                "idempotency_required": grade != "read",
                "idempotency_lookup": lookup,
            },
        )
    items = list(demo_items(now=now))
    ingest(items)
    for _ in contracts_scan_all(settle=timedelta(0)):
        pass
    return len(items)
