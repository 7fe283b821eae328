"""A reconcile_first group asks for a status lookup: its page links the runs that wait for
one to the receipts page's reconcile form, or says plainly that the runtime sends no
receipts and what it should send."""

from __future__ import annotations

from typing import Any

from tests.factories import failure_item, receipt_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, Receipt

WRITE_TIMEOUT: dict[str, Any] = {
    "stage": "execute",
    "reason": "timeout",
    "tool": "sendInvoice",
    "collection": "billing",
    "execution_state": "started_unknown",
    "idempotency_key": "inv-7",
    "evidence": {"http_method": "POST", "timeout_ms": 30000},
}


def _group_page(client_as: Any) -> str:
    group = FailureGroup.objects.get(tool="sendInvoice")
    assert group.lane == "reconcile_first"
    response = client_as("viewer").get(f"/triage/groups/{group.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_without_receipts_the_page_says_what_the_runtime_should_send(
    db: Any, client_as: Any
) -> None:
    batch_ingest(owner="billing", items=[failure_item(**WRITE_TIMEOUT)])
    page = _group_page(client_as)
    assert 'id="reconcile-lookup"' in page
    assert "the runtime sends no tool-run receipts for" in page
    assert "<code>idempotency_key</code> the lookup uses" in page


def test_runs_waiting_for_a_lookup_link_to_the_reconcile_form(db: Any, client_as: Any) -> None:
    batch_ingest(
        owner="billing",
        items=[
            failure_item(**WRITE_TIMEOUT),
            receipt_item(
                tool_run_id="tr_wait",
                tool="sendInvoice",
                collection="billing",
                result="timeout",
                code="REMOTE_TIMEOUT_AFTER_ACCEPT",
                execution_state="started_unknown",
                next_action="query_by_idempotency_key",
                idempotency_key="inv-7",
            ),
        ],
    )
    page = _group_page(client_as)
    assert "Look up the status first: 1 run waits for it." in page
    receipt = Receipt.objects.get(tool_run_id="tr_wait")
    assert f'href="/receipts/#receipt-{receipt.pk}">tr_wait</a>' in page
    receipts_page = client_as("operator").get("/receipts/").content.decode()
    assert f'id="receipt-{receipt.pk}"' in receipts_page  # the anchor the link lands on


def test_other_lanes_show_no_lookup_block(db: Any, client_as: Any) -> None:
    batch_ingest(owner="billing", items=[failure_item(tool="getOrder")])
    group = FailureGroup.objects.get(tool="getOrder")
    assert group.lane != "reconcile_first"
    page = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    assert 'id="reconcile-lookup"' not in page
