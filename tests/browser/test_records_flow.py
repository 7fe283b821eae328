"""Receipts, learning evidence and Quality Lab comparison as an on-call person clicks through
them in Seoul, on a desktop and on a phone."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, sign_in_tab
from tests.factories import failure_item, receipt_item
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, batch_ingest
from triage.models import FailureGroup

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


@pytest.fixture(params=[1280, 390], ids=["desktop", "phone"])
def width(request: Any) -> int:
    return int(request.param)


@pytest.fixture
def seoul(open_tab: Callable[..., Any], live_server: Any, width: int) -> Any:
    """A signed-in tab in Seoul; the user holds the roles a test names."""
    tab = open_tab(width=width)
    tab.sign_in = lambda *roles: sign_in_tab(tab, live_server, *roles, username="on-call")
    return tab


WIDER_THAN = """width => [...document.querySelectorAll("body *")]
    .filter(e => !e.querySelector("*") && e.getBoundingClientRect().right > width + 0.5)
    .slice(0, 5).map(e => e.tagName + " " + (e.textContent || "").slice(0, 40))"""


def _shot(page: Any, name: str, width: int) -> None:
    """Save the page for a reviewer; first check it does not scroll sideways."""
    # What sticks out, if anything: the innermost elements past the right edge.
    wide = page.evaluate(WIDER_THAN, width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, (name, wide)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)


def _within_screen(page: Any, locator: Any, width: int) -> None:
    """Scrolled to, the control sits inside the viewport: a person can reach it."""
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, box


# --- point 8: receipts ------------------------------------------------------------------------


def test_an_operator_confirms_a_finding_then_corrects_it(
    seoul: Any, live_server: Any, width: int
) -> None:
    batch_ingest(
        owner="browser-test",
        items=[
            failure_item(stage="execute", reason="timeout", tool="sendInvoiceEmail"),
            receipt_item(
                tool_run_id="tr_mail_819", tool="sendInvoiceEmail", side_effect="external_write",
                result="uncertain", code="REMOTE_TIMEOUT_AFTER_ACCEPT", reason="timeout",
                execution_state="started_unknown", next_action="query_by_idempotency_key",
                idempotency_key="notify:invoice-819", lane="retry_safe",
            ),
        ],
    )  # fmt: skip
    page = seoul
    page.sign_in("operator")
    page.goto(f"{live_server.url}/receipts/")
    row = page.locator("#queue tbody").first
    # One verdict: the runtime sent retry_safe; the row says only the cautious lane.
    expect(row.locator(".pill")).to_have_text("reconcile_first")
    expect(row).to_contain_text("No retry until reconciled.")

    row.locator("input[value=not_applied]").check()
    row.locator("textarea[name=note]").fill("GET /mails/by-key/notify:invoice-819 returned 404")
    record = row.locator("button", has_text="Record")
    _within_screen(page, record, width)
    record.click()
    confirm = page.locator("form.confirm-finding")
    expect(confirm).to_contain_text("Record that tr_mail_819 was not_applied?")
    expect(confirm).to_contain_text("a retry is now safe with the same idempotency key")
    _shot(page, "receipts-confirm", width)
    # Changing one's mind keeps what was typed.
    confirm.locator("button", has_text="Change it").click()
    expect(page.locator("#queue textarea[name=note]").first).to_have_value(
        "GET /mails/by-key/notify:invoice-819 returned 404"
    )
    page.locator("#queue button", has_text="Record").first.click()
    yes = page.locator("form.confirm-finding button", has_text="Yes, record not_applied")
    _within_screen(page, yes, width)
    yes.click()
    expect(page.locator("#queue .msg-success")).to_contain_text("tr_mail_819 reconciled")
    expect(page.locator("#count-queue")).to_have_text("0")

    # The mail log says otherwise: correct the finding; both stay.
    reconciled = page.locator("table.reconciled tbody").first
    reconciled.locator("summary", has_text="Correct this finding").click()
    reconciled.locator("input[value=applied]").check()
    reconciled.locator("textarea[name=note]").fill("the provider's log shows it was sent at 10:02")
    reconciled.locator("button", has_text="Correct").click()
    confirm = page.locator("form.confirm-finding")
    expect(confirm).to_contain_text("This corrects the finding not_applied recorded by on-call")
    confirm.locator("button", has_text="Yes, record applied").click()
    expect(page.locator("#queue .msg-success")).to_contain_text("finding corrected")
    reconciled = page.locator("table.reconciled tbody").first
    expect(reconciled.locator("tr").first).to_contain_text("Done remotely: do not retry")
    expect(reconciled.locator("tr.corrected-finding")).to_contain_text("not_applied")
    expect(reconciled.locator("tr.corrected-finding")).to_contain_text("returned 404")
    _shot(page, "receipts-corrected", width)

    # The run id opens its failure group.
    reconciled.locator("a", has_text="tr_mail_819").click()
    group = FailureGroup.objects.get(reason="timeout")
    expect(page).to_have_url(re.compile(rf"/triage/groups/{group.pk}/"))


# --- point 9: learning evidence ---------------------------------------------------------------


def _learning_attempt(**body: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "query": "find refund-ready orders",
        "collection_id": "bo-dev",
        "selected_target": "getRefundableOrders",
        "plan_tools": ["getRefundableOrders"],
        "success": True,
    }
    fields.update(body)
    return {"type": "learning_attempt", "id": f"la-{id(fields)}-{len(str(body))}", "body": fields}


def test_a_reviewer_sees_production_and_test_evidence_apart(
    seoul: Any, live_server: Any, width: int
) -> None:
    from learning import services as learning
    from learning.models import Suggestion
    from qualitylab.models import Collection

    items = [
        _learning_attempt(source="quality_lab", attempt_id=f"lab-{case}-{rep}",
                          quality_lab={"run": 1, "case": case, "repetition": rep})
        for case in ("refund-a", "refund-b") for rep in range(1, 8)
    ]  # fmt: skip
    for index, item in enumerate(items):
        item["id"] = f"lab-{index}"
    assert batch_ingest(owner=DESK_OWNER, channel=DESK_CHANNEL, items=items).all_stored
    learning.suggestions_derive(collection_id=Collection.objects.get(name="bo-dev").pk)
    preference = Suggestion.objects.get(type="target_preference")
    preference.shadow = {"cases": 2, "rank_delta": 0, "improved": 0, "worsened": 0,
                         "selected_target_changed": 0, "failure_reason_changed": 0}  # fmt: skip
    preference.save()

    page = seoul
    page.sign_in("reviewer")
    page.goto(f"{live_server.url}/learning/")
    expect(page.locator(".gate-rule")).to_contain_text("distinct evidence")
    expect(page.locator(".gate-rule")).to_contain_text("a Quality Lab case counts once")
    row = page.locator(f"#suggestion-{preference.pk}")
    expect(row.locator(".evidence-production")).to_contain_text("production: 0 sessions")
    expect(row.locator(".evidence-test")).to_contain_text("Quality Lab: 2 cases")
    expect(row.locator(".evidence-test")).to_contain_text("14 observations")
    expect(row).to_contain_text("promoting it changes nothing observed yet")
    _shot(page, "learning-queue", width)

    row.locator("a.target").first.click()
    expect(page).to_have_url(re.compile(rf"/learning/suggestions/{preference.pk}/"))
    expect(page.locator("#evidence-production")).to_contain_text("0 runtime sessions")
    expect(page.locator("#evidence-test")).to_contain_text("2 cases")
    expect(page.locator("#evidence-test")).to_contain_text("14 successful results")
    expect(page.locator("table.gate")).to_contain_text("2 distinct pieces of evidence")
    expect(page.locator("body")).to_contain_text("promoting it changes nothing observed yet")
    _shot(page, "learning-suggestion", width)


# --- point 10: Quality Lab comparison ---------------------------------------------------------


def test_the_run_page_compares_with_the_run_a_person_picks(
    seoul: Any, live_server: Any, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qualitylab import demo, services, tasks
    from qualitylab.models import CaseResult

    monkeypatch.setattr(tasks.build_collection_version, "apply_async", lambda **_: None)
    monkeypatch.setattr(tasks.execute_case_run, "apply_async", lambda **_: None)
    shop, version = services.collection_create(name="shop", spec_text=demo.SPEC_PATH.read_text())
    services.version_build(version_id=version.pk)
    shop.refresh_from_db()
    cases = [case for case in demo.load_case_data() if case["mode"] == "search"]
    services.cases_import(collection=shop, documents=cases)

    def run(**options: Any) -> Any:
        queued = services.run_start(collection=shop, **options)
        services.run_execute(run_id=queued.pk)
        queued.refresh_from_db()
        return queued

    first = run()
    CaseResult.objects.filter(run=first, case__case_id="search-coupons-en").update(passed=False)
    second = run()
    rerun = services.run_rerun_failed(run=first)
    services.run_execute(run_id=rerun.pk)

    page = seoul
    page.sign_in("viewer")
    page.goto(f"{live_server.url}/qualitylab/runs/{rerun.pk}/")
    card = page.locator(".run-summary .card").nth(2)
    expect(card.locator("h3")).to_contain_text(f"run #{first.pk}")
    expect(card).to_contain_text("the run whose failed cases this one ran again")
    expect(card.locator("select[name=compare]")).to_have_value(str(first.pk))
    _shot(page, "run-compare-default", width)

    card.locator("select[name=compare]").select_option(str(second.pk))
    button = card.locator("button", has_text="Compare")
    _within_screen(page, button, width)
    button.click()
    expect(page).to_have_url(re.compile(rf"compare={second.pk}"))
    card = page.locator(".run-summary .card").nth(2)
    expect(card.locator("h3")).to_contain_text(f"run #{second.pk}")
    expect(card).to_contain_text("the run you picked")
    expect(card.locator("select[name=compare]")).to_have_value(str(second.pk))
    page.reload()
    expect(page.locator(".run-summary .card").nth(2).locator("h3")).to_contain_text(
        f"run #{second.pk}"
    )
    page.locator("a", has_text="default comparison").click()
    expect(page.locator(".run-summary .card").nth(2).locator("h3")).to_contain_text(
        f"run #{first.pk}"
    )

    page.goto(f"{live_server.url}/qualitylab/shop/#metrics")
    counting = page.locator(".chart-counting")
    expect(counting).to_contain_text("counted by case")
    expect(counting).to_contain_text("Left out: 1 re-run of failed cases")
    counting.locator("a", has_text=f"#{rerun.pk}").click()
    expect(page).to_have_url(re.compile(rf"/qualitylab/runs/{rerun.pk}/"))
    _shot(page, "run-compare-collection", width)
