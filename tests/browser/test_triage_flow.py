from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.factories import failure_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, GroupStatus

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _traffic() -> None:
    now = timezone.now()
    items = [
        failure_item(occurred_at=(now - timedelta(minutes=n)).isoformat(), tool="getDelivery",
                     collection="logistics")
        for n in range(1, 6)
    ] + [
        failure_item(stage="synthesize", reason="unsatisfied_field", tool="getOrderDetail",
                     collection="orders", occurred_at=(now - timedelta(minutes=3)).isoformat(),
                     evidence={"field_name": "orderNo", "semantic_tag": "order_id"})
    ]  # fmt: skip
    batch_ingest(owner="browser-test", items=items)


def test_operator_filters_opens_a_group_and_resolves_it(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any
) -> None:
    _traffic()
    sign_in("operator")
    screenshot("triage-operator")
    assert page.locator("tr.reason:has-text('unsatisfied_field')").is_visible()
    # The first screen showed the last 60 minutes (the traffic is recent): a filter change
    # keeps the window the person saw.
    expect(page.locator("#window-note")).to_contain_text("Showing the last 60 minutes")
    page.select_option("select[name=lane]", "input_stale")
    expect(page).to_have_url(
        re.compile(r"/\?window=1h&source=production&lane=input_stale&status=active&sort=count$")
    )
    assert page.locator("tr.reason:has-text('http_5xx')").count() == 0
    assert page.locator("tr.reason:has-text('unsatisfied_field')").is_visible()
    screenshot("triage-filtered")
    page.click("text=unsatisfied_field")
    page.wait_for_url("**/triage/groups/**")
    assert page.locator("text=orderNo").first.is_visible()
    screenshot("group-page")
    page.click("button:has-text('Resolve')")
    page.wait_for_load_state()
    assert page.locator("text=Resolve: done.").is_visible()
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    assert group.status == GroupStatus.RESOLVED
    page.goto(f"{live_server.url}/")
    # Resolved groups leave the default view.
    assert page.locator("tr.reason:has-text('unsatisfied_field')").count() == 0
    page.goto(f"{live_server.url}/?status=resolved")
    assert page.locator("tr.reason:has-text('unsatisfied_field')").is_visible()
    screenshot("triage-resolved")


def test_viewer_sees_no_action_buttons(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any
) -> None:
    _traffic()
    sign_in("viewer")
    assert page.locator("text=Apply to").count() == 0
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    page.goto(f"{live_server.url}/triage/groups/{group.pk}/")
    assert page.locator("button:has-text('Resolve')").count() == 0
    assert page.locator("button:has-text('Acknowledge')").count() == 0
    screenshot("group-viewer")


def test_operator_reconciles_an_uncertain_receipt(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any
) -> None:
    from tests.factories import receipt_item
    from triage.models import Reconciliation

    batch_ingest(
        owner="browser-test",
        items=[
            receipt_item(
                "uncertain",
                tool_run_id="tr_browser_1",
                tool="sendInvoiceEmail",
                result="uncertain",
                code="REMOTE_TIMEOUT_AFTER_ACCEPT",
                execution_state="started_unknown",
                side_effect="external_write",
                idempotency_key="notify:invoice-819",
            )
        ],
    )
    sign_in("operator")
    page.click("text=Receipts")
    page.wait_for_url("**/receipts/")
    assert page.locator("text=tr_browser_1").first.is_visible()
    assert page.locator("text=No retry until reconciled").first.is_visible()
    screenshot("receipts-before")
    page.check("input[name=finding][value=not_applied]")
    page.fill("textarea[name=note]", "mail log shows no send for invoice 819")
    page.click("button:has-text('Record')")
    # Nothing is recorded until the operator confirms what the finding will mean.
    expect(page.locator("form.confirm-finding")).to_contain_text("a retry is now safe")
    assert not Reconciliation.objects.exists()
    page.click("button:has-text('Yes, record not_applied')")
    expect(page.locator("text=Recently reconciled")).to_be_visible()
    expect(page.locator("text=mail log shows no send for invoice 819").first).to_be_visible()
    screenshot("receipts-after")
    reconciliation = Reconciliation.objects.get()
    assert reconciliation.actor is not None
    assert (reconciliation.finding, reconciliation.actor.username) == (
        "not_applied",
        "operator-browser",
    )


def test_ticked_rows_narrow_the_bulk_bar_and_nobody_to_assign_is_refused_first(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any
) -> None:
    _traffic()
    sign_in("operator")
    page.goto(f"{live_server.url}/?window=24h")
    asked: list[str] = []
    answer = {"accept": False}

    def on_dialog(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept() if answer["accept"] else dialog.dismiss()

    page.on("dialog", on_dialog)
    bar = page.locator("#bulk-form")
    # Assign with nobody chosen: refused at once, no question asked.
    bar.locator("select[name=action]").select_option("assign")
    bar.get_by_role("button", name=re.compile("^Apply to")).click()
    expect(bar.locator(".bulk-refused")).to_have_text("Choose whom to assign.")
    assert asked == []
    bar.locator("select[name=action]").select_option("acknowledge")
    # One row ticked: the bar speaks of its groups only, and so does the question.
    page.locator("input.choose-row[value='synthesize/unsatisfied_field']").check()
    expect(bar.locator(".bulk-chosen")).to_have_text("Chosen rows: 1, groups: 1.")
    expect(bar.locator(".bulk-scope")).to_be_hidden()
    screenshot("triage-chosen-rows")
    answer["accept"] = True
    bar.get_by_role("button", name="Apply to the chosen rows").click()
    expect(page.locator(".msg-success")).to_contain_text("1 group")
    assert asked == ["Apply acknowledge to the chosen rows (groups: 1)?"]
    acknowledged = FailureGroup.objects.filter(status=GroupStatus.ACKNOWLEDGED)
    assert list(acknowledged.values_list("reason", flat=True)) == ["unsatisfied_field"]
    # Unticked, the bar is back to every group shown.
    page.locator("input.choose-row[value='synthesize/unsatisfied_field']").check()
    page.locator("input.choose-row[value='synthesize/unsatisfied_field']").uncheck()
    expect(bar.locator(".bulk-scope")).to_be_visible()
    expect(bar.get_by_role("button", name=re.compile("^Apply to \\d+ group"))).to_be_visible()
