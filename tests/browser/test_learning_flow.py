"""A reviewer approves one suggestion and rejects another; a viewer only reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from playwright.sync_api import expect

from learning import services
from learning.models import Review, Suggestion, SuggestionStatus
from tests.learning.conftest import attempt_item
from triage.intake.ingest import batch_ingest

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


@pytest.fixture
def evidence() -> Iterator[None]:
    """Attempts through the real ingest path; derivation runs here instead of in a worker."""

    def run_task(*, kwargs: dict[str, Any], retry: bool) -> None:
        services.suggestions_derive(**kwargs)

    with mock.patch("learning.tasks.derive_suggestions.apply_async", side_effect=run_task):
        batch_ingest(owner="browser-test", items=[attempt_item(), attempt_item()])
        batch_ingest(
            owner="browser-test",
            items=[
                attempt_item(query="list coupons of a member", selected_target="listMemberCoupons",
                             plan_tools=["listMemberCoupons"]),
                attempt_item(query="track my delivery", selected_target="trackDelivery",
                             plan_tools=["getOrderDetail", "trackDelivery"], success=False,
                             failure_reason="timeout"),
            ],
        )  # fmt: skip
        yield


def _block(page: Any, suggestion: Suggestion) -> Any:
    return page.locator(f"#suggestion-{suggestion.pk}")


def test_reviewer_approves_one_rejects_another_and_sees_both_in_history(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any, evidence: None
) -> None:
    preference = Suggestion.objects.get(type="target_preference", target="getRefundableOrders")
    path = Suggestion.objects.get(type="plan_path", target="getRefundableOrders")
    assert preference.status == path.status == SuggestionStatus.PROMOTABLE
    sign_in("reviewer")
    page.goto(f"{live_server.url}/learning/")
    expect(page.locator("h1")).to_have_text("Learning review")
    screenshot("learning-reviewer")

    block = _block(page, preference)
    block.locator("input[name=reason]").fill("the refundable list wins every run")
    block.locator("button:has-text('Approve')").click()
    expect(page.locator(".msg-success")).to_contain_text("Promoted target_preference")

    block = _block(page, path)
    block.locator("select[name=reason]").select_option("operator_rejected")
    block.locator("input[name=note]").fill("searchOrders first is an accident of the test data")
    block.locator("button:has-text('Reject')").click()
    expect(page.locator(".msg-success")).to_contain_text("Rejected plan_path")

    history = page.locator("#history")
    expect(history).to_contain_text("the refundable list wins every run")
    expect(history).to_contain_text("operator_rejected")
    expect(history.locator("tbody tr")).to_have_count(2)
    preference.refresh_from_db()
    path.refresh_from_db()
    assert preference.status == SuggestionStatus.PROMOTED
    assert preference.promoted_by_label == "reviewer-browser"
    assert path.status == SuggestionStatus.REJECTED
    assert Review.objects.count() == 2
    # Rejected suggestions stay visible, and can be reopened with a reason.
    expect(_block(page, path)).to_contain_text("Rejected as operator_rejected")
    screenshot("learning-after-decisions")
    block = _block(page, path)
    block.locator("input[name=reason]").fill("the test data is fixed now")
    block.locator("button:has-text('Reopen')").click()
    expect(page.locator(".msg-success")).to_contain_text("Reopened plan_path")
    expect(page.locator("#history")).to_contain_text("the test data is fixed now")
    path.refresh_from_db()
    assert path.status == SuggestionStatus.PROMOTABLE

    page.click(f"#suggestion-{preference.pk} a.target")
    page.wait_for_url(f"**/learning/suggestions/{preference.pk}/")
    expect(page.locator("#history")).to_contain_text("reviewer-browser")
    screenshot("learning-suggestion")


def test_viewer_sees_no_decision_buttons(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any, evidence: None
) -> None:
    sign_in("viewer")
    page.goto(f"{live_server.url}/learning/")
    expect(page.locator("table.learning-queue")).to_be_visible()
    for label in ("Approve", "Reject", "Demote", "Reopen"):
        assert page.locator(f"button:has-text('{label}')").count() == 0
    assert page.locator("form.decision").count() == 0
    expect(page.locator("#queue")).to_contain_text("Reviewers approve, reject, demote and reopen")
    screenshot("learning-viewer")
