"""The group page's records and learning's tables on a phone (390 px): each row stacks into a
block whose cells say their column before their value, so the lane, the message and the
evidence stay on the screen instead of in a sideways scroll; at a desk (1280 px) they stay
tables.

Screenshots go to var/test-artifacts/ (phone-tables-*), for a person to look at."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from learning import services as learning_services
from learning.models import Suggestion
from qualitylab import services as lab
from qualitylab.models import LearningMode
from tests.browser.checks import PHONE, assert_stacked, check_table, fits
from tests.browser.conftest import ARTIFACTS, sign_in_tab
from tests.factories import demo_collection, failure_item
from tests.learning.conftest import attempt_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, FailureRecord

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

DESK = 1280
LONG_MESSAGE = (
    "POST /v2/invoices/INV-2026-000819/send accepted by the gateway, then the connection was "
    "reset before the mail service answered; whether the customer got the mail is unknown"
)
LONG_EVIDENCE = {
    "http_method": "POST",
    "endpoint": "https://mail.internal.example.com/v2/invoices/INV-2026-000819/send?notify=1",
    "upstream_request_id": "req_" + "9f3a" * 12,
    "timeout_ms": 30000,
}


def _records() -> int:
    """A reconcile_first group: timeouts after the call was sent, with long messages."""
    batch_ingest(
        owner="phone",
        items=[
            failure_item(
                reason="timeout", tool="sendInvoiceEmail", execution_state="started_unknown",
                message=LONG_MESSAGE, evidence=LONG_EVIDENCE,
                idempotency_key=f"notify:invoice-{n}-" + "k" * 40,
                plan_id="plan_invoice_mailing_0819", step_id="s3_send_invoice_mail",
            )
            for n in range(3)
        ],
    )  # fmt: skip
    group = FailureGroup.objects.get(tool="sendInvoiceEmail")
    assert set(FailureRecord.objects.filter(group=group).values_list("lane", flat=True)) == {
        "reconcile_first"
    }
    return group.pk


def _suggestions() -> int:
    """Suggestions with production and Quality Lab evidence, shadow cases and a decision;
    returns the one whose page has every table."""
    shop = demo_collection()
    shop.learning_mode = LearningMode.SHADOW
    shop.save()

    def derive(*, kwargs: dict[str, Any], retry: bool) -> None:
        learning_services.suggestions_derive(**kwargs)

    with (
        mock.patch("learning.tasks.derive_suggestions.apply_async", side_effect=derive),
        mock.patch("qualitylab.services._send"),
    ):
        batch_ingest(
            owner="phone",
            items=[
                attempt_item("ph-a1"), attempt_item("ph-a2"),
                attempt_item("ph-s1", collection_id="shop", query="show me the order detail",
                             selected_target="getOrderDetail", plan_tools=["getOrderDetail"]),
                attempt_item("ph-s2", collection_id="shop", query="show me the order detail",
                             selected_target="getOrderDetail", plan_tools=["getOrderDetail"],
                             success=False, failure_reason="timeout"),
            ],
        )  # fmt: skip
        for case_ids in (
            ["plan-order-detail-chain"],
            ["plan-order-detail-chain", "search-order-detail-en"],
        ):
            run = lab.run_start(collection=shop, case_ids=case_ids)
            lab.run_execute(run_id=run.pk)
    preference = Suggestion.objects.get(collection__name="shop", type="target_preference",
                                        target="getOrderDetail")  # fmt: skip
    reviewer = get_user_model().objects.create_user(username="decided-before")
    refundable = Suggestion.objects.get(collection__name="bo-dev", type="target_preference")
    learning_services.suggestion_approve(
        suggestion=refundable, reviewer=reviewer, reason="the refundable list wins every run"
    )
    learning_services.suggestion_approve(
        suggestion=preference, reviewer=reviewer,
        reason="getOrderDetail answers the order detail in every case and every session so far",
    )  # fmt: skip
    return preference.pk


@pytest.fixture
def desk(open_tab: Callable[..., Any], live_server: Any) -> Callable[..., Any]:
    def signed_in(*, width: int) -> Any:
        tab = open_tab(width=width)
        tab.set_viewport_size({"width": width, "height": 844 if width == PHONE else 900})
        sign_in_tab(tab, live_server, "admin", username=f"admin-{width}")
        return tab

    return signed_in


def _shot(tab: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"phone-tables-{name}.png"), full_page=True)


def _shot_of(element: Any, name: str) -> None:
    """The element alone, at the screen's scale: what a full page shrinks out of sight."""
    element.screenshot(path=str(ARTIFACTS / f"phone-tables-{name}.png"))


@pytest.mark.parametrize("width", [PHONE, DESK])
def test_a_records_lane_message_and_evidence_stay_whole_on_a_phone(
    desk: Any, live_server: Any, width: int
) -> None:
    """The on-call review's case: a reconcile_first lane cut to "recon…" in a table that
    scrolled inside itself. On a phone the records stack; at a desk they stay a table."""
    group = _records()
    tab = desk(width=width)
    tab.goto(f"{live_server.url}/triage/groups/{group}/")
    records = tab.locator("#records table")
    expect(records.locator(":scope > tbody > tr")).to_have_count(3)
    _shot(tab, f"group-{width}")
    _shot_of(records, f"group-records-{width}")

    lane = records.locator(".pill.lane-reconcile_first").first
    lane.scroll_into_view_if_needed()
    expect(lane).to_have_text("reconcile_first")
    expect(lane).to_be_visible()
    assert lane.evaluate("e => e.scrollWidth <= e.clientWidth"), "the lane's text is cut"
    box = lane.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    row = records.locator(":scope > tbody > tr").first
    expect(row).to_contain_text(LONG_MESSAGE[:60])
    expect(row.locator("pre.evidence")).to_contain_text("upstream_request_id")
    check_table(records, width)
    fits(tab)
    if width == PHONE:
        # The evidence shows every line: no box scrolling inside the page under a thumb.
        assert row.locator("pre.evidence").evaluate("e => e.scrollHeight <= e.clientHeight + 1")
        # The first label is the header as the page writes it, with the reader's time zone.
        assert records.locator("td").first.get_attribute("data-label") == "when (KST)"


@pytest.mark.parametrize("width", [PHONE, DESK])
def test_learning_evidence_stays_on_a_phone_screen(desk: Any, live_server: Any, width: int) -> None:
    """The queue's distinct evidence, a suggestion's attempts and shadow cases, and the
    decisions: stacked and labelled on a phone, tables at a desk."""
    preference = _suggestions()
    tab = desk(width=width)
    tab.goto(f"{live_server.url}/learning/")
    for details in tab.locator("#queue details").all():
        details.evaluate("e => { e.open = true; }")
    _shot(tab, f"learning-{width}")
    queue = tab.locator("#queue table.learning-queue")
    _shot_of(tab.locator("#queue"), f"learning-queue-{width}")
    block = tab.locator(f"#suggestion-{preference}")
    evidence = block.locator(".evidence-split")
    evidence.scroll_into_view_if_needed()
    expect(evidence.locator(".evidence-production")).to_contain_text("production: 1 session")
    expect(evidence.locator(".evidence-test")).to_contain_text("Quality Lab: 1 case")
    box = evidence.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    check_table(queue, width)
    if width == PHONE:  # a suggestion's latest attempts, a table without a header
        assert_stacked(block.locator("table.attempts"))
    check_table(tab.locator("#history table.history"), width)
    fits(tab)

    tab.goto(f"{live_server.url}/learning/suggestions/{preference}/")
    _shot(tab, f"suggestion-{width}")
    tables = {
        "shadow-cases": tab.locator("table.shadow-cases"),
        "attempts": tab.locator("table.attempts").first,
        "failures": tab.locator("table.attempts").nth(1),
        "history": tab.locator("#history table.history"),
    }
    for name, table in tables.items():
        _shot_of(table, f"suggestion-{name}-{width}")
        check_table(table, width)
    expect(tables["shadow-cases"]).to_contain_text("search-order-detail-en")
    expect(tables["failures"]).to_contain_text("timeout")
    expect(tables["history"]).to_contain_text("in every case and every session so far")
    fits(tab)


@pytest.mark.parametrize("width", [PHONE, DESK])
def test_the_triage_group_view_stacks_on_a_phone(desk: Any, live_server: Any, width: int) -> None:
    _records()
    tab = desk(width=width)
    tab.goto(f"{live_server.url}/?window=24h&view=groups")
    table = tab.locator("#groups-view")
    expect(table.locator("tr.group-row")).to_have_count(1)
    expect(table.locator(".pill.lane-reconcile_first")).to_have_text("reconcile_first")
    _shot(tab, f"triage-groups-{width}")
    check_table(table, width)
    fits(tab)
