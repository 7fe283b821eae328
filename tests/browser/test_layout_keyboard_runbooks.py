"""Layout that holds, keyboard shortcuts and runbooks, as an operator in Seoul sees them at a
desk (1280 px) and on a phone (390 px), in light and dark mode.

Screenshots go to var/test-artifacts/ (layout-*, keyboard-*, runbook-*), for a person to
look at."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from learning import services as learning_services
from learning.models import Suggestion
from qualitylab import services as lab
from qualitylab.models import CaseResult
from tests.browser.conftest import ARTIFACTS, sign_in_tab
from tests.factories import demo_collection, failure_item, receipt_item
from tests.learning.conftest import attempt_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, GroupStatus, Receipt, ToolPolicy

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

# 84 characters, as in the report that widened the page to 2,160 px.
LONG_TOOL = "getCustomerSubscriptionBillingHistoryWithInvoiceLineItemsAndTaxBreakdownForRegionV20"
assert len(LONG_TOOL) == 84


def _traffic() -> None:
    now = timezone.now()

    def ago(minutes: int) -> str:
        return (now - timedelta(minutes=minutes)).isoformat()

    batch_ingest(
        owner="layout",
        items=[
            *(failure_item(tool=LONG_TOOL, collection="billing-and-subscriptions-eu-west",
                           occurred_at=ago(n)) for n in range(1, 9)),
            *(failure_item(reason="timeout", tool="sendInvoice", occurred_at=ago(n),
                           evidence={"http_method": "POST"}) for n in range(2, 5)),
            failure_item(stage="synthesize", reason="unsatisfied_field", tool="getOrderDetail",
                         occurred_at=ago(3), evidence={"field_name": "orderNo"}),
            receipt_item(tool=LONG_TOOL, result="uncertain", execution_state="started_unknown",
                         idempotency_key="idem-" + "k" * 60),
        ],
    )  # fmt: skip


def _world() -> dict[str, int]:
    """Something behind every page: a built collection with a finished run, a suggestion,
    a tool policy for the long tool, traffic and an uncertain receipt."""
    collection = demo_collection()
    _traffic()
    with mock.patch("qualitylab.services._send"):
        run = lab.run_start(collection=collection)
        lab.run_execute(run_id=run.pk)
    result = CaseResult.objects.filter(run_id=run.pk).first()
    assert result is not None

    def derive(*, kwargs: dict[str, Any], retry: bool) -> None:
        learning_services.suggestions_derive(**kwargs)

    with mock.patch("learning.tasks.derive_suggestions.apply_async", side_effect=derive):
        batch_ingest(owner="layout", items=[attempt_item("lay-a1"), attempt_item("lay-a2")])
    policy = ToolPolicy.objects.create(collection="shop", tool=LONG_TOOL)
    return {
        "group": FailureGroup.objects.get(tool=LONG_TOOL).pk,
        "run": run.pk,
        "result": result.pk,
        "suggestion": Suggestion.objects.filter(type="target_preference").first().pk,  # type: ignore[union-attr]
        "policy": policy.pk,
    }


@pytest.fixture
def desk(open_tab: Callable[..., Any], live_server: Any) -> Callable[..., Any]:
    """A signed-in tab in Seoul's time zone at the given width and colour scheme."""

    def signed_in(*, width: int, role: str = "admin", scheme: str = "light") -> Any:
        tab = open_tab(width=width, scheme=scheme)
        sign_in_tab(tab, live_server, role, username=f"{role}-{width}-{scheme}")
        return tab

    return signed_in


# Every button a person can see lies within the screen's width, the page scrolled only up
# and down (a table scrolled sideways to find it does not count).
OFF_SCREEN_BUTTONS = """width => Array.from(document.querySelectorAll("button, a.button"))
  .filter(b => b.offsetParent !== null && !b.closest("dialog, details:not([open])"))
  .map(b => [b.textContent.trim(), b.getBoundingClientRect()])
  .filter(([, r]) => r.width > 0 && (r.left < 0 || r.right > width + 0.5))
  .map(([text, r]) => `${text} @${Math.round(r.left)}-${Math.round(r.right)}`)"""


def _shot(tab: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _right_edge(tab: Any, selector: str) -> float:
    box = tab.locator(selector).first.bounding_box()
    assert box is not None, selector
    return float(box["x"] + box["width"])


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_fits_the_screen_and_the_retry_answer_stays_on_it(
    desk: Any, live_server: Any, width: int
) -> None:
    ids = _world()
    for scheme in ("light", "dark"):
        tab = desk(width=width, scheme=scheme)
        pages = {
            "triage": "/",
            "group": f"/triage/groups/{ids['group']}/",
            "receipts": "/receipts/",
            "ingestion": "/ingestion/",
            "policies": "/policies/",
            "policy-edit": f"/policies/{ids['policy']}/edit",
            "policy-new": "/policies/new",
            "qualitylab": "/qualitylab/",
            "collection": "/qualitylab/shop/",
            "collection-settings": "/qualitylab/shop/settings",
            "collection-spec": "/qualitylab/shop/spec",
            "case-new": "/qualitylab/shop/cases/new",
            "cases-import": "/qualitylab/shop/cases/import",
            "suite-new": "/qualitylab/shop/suites/new",
            "run": f"/qualitylab/runs/{ids['run']}/",
            "result": f"/qualitylab/results/{ids['result']}/",
            "learning": "/learning/",
            "suggestion": f"/learning/suggestions/{ids['suggestion']}/",
        }
        too_wide, buttons_off = {}, {}
        for name, path in pages.items():
            tab.goto(f"{live_server.url}{path}")
            if scheme == "light" or name in ("triage", "group", "receipts"):
                _shot(tab, f"layout-{name}-{width}-{scheme}")
            page_width = tab.evaluate("document.documentElement.scrollWidth")
            if page_width > width:
                too_wide[name] = page_width
            off_screen = tab.evaluate(OFF_SCREEN_BUTTONS, width)
            if off_screen:
                buttons_off[name] = off_screen
        assert not too_wide, (scheme, too_wide)
        assert not buttons_off, (
            scheme,
            {k: (len(v), sorted(set(v))[:4]) for k, v in buttons_off.items()},
        )

        # The triage row of the long tool: lane, execution and retryable on screen, the
        # tool cut with its whole name on hover.
        tab.goto(f"{live_server.url}/")
        row = tab.locator("tr.reason", has=tab.locator(f"[title='{LONG_TOOL}']"))
        expect(row).to_have_count(1)
        for cell in (".pill[class*=lane-]", "td.execution", "td.retryable"):
            box = row.locator(cell).first.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (
                cell,
                box,
            )
        tool = row.locator(f"[title='{LONG_TOOL}']")
        assert tool.evaluate("e => e.scrollWidth > e.clientWidth")  # cut, not wrapped
        # The group page names the tool whole in the link's title and the records show their
        # lane beside each one.
        tab.goto(f"{live_server.url}/triage/groups/{ids['group']}/")
        assert _right_edge(tab, "h1") <= width
        expect(tab.locator("h1 [title]")).to_have_attribute("title", LONG_TOOL)

        # Receipts: the Record button is on screen once the page is scrolled down to it,
        # without scrolling its table sideways.
        tab.goto(f"{live_server.url}/receipts/")
        record = tab.get_by_role("button", name=re.compile("Record", re.I)).first
        record.evaluate(
            "e => window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 200)"
        )
        box = record.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box


def test_dark_mode_follows_the_system(desk: Any, live_server: Any) -> None:
    _traffic()
    light = desk(width=1280, scheme="light", role="viewer")
    dark = desk(width=1280, scheme="dark", role="operator")
    background = "getComputedStyle(document.body).backgroundColor"
    assert light.evaluate(background) == "rgb(255, 255, 255)"
    assert dark.evaluate(background) == "rgb(18, 22, 29)"
    field = "getComputedStyle(document.querySelector('input[name=q]')).backgroundColor"
    assert dark.evaluate(field) != "rgb(255, 255, 255)"
    _shot(dark, "layout-triage-dark-desk")


@pytest.mark.parametrize("width", [1280, 390])
def test_keyboard_moves_opens_and_acts_without_firing_while_typing(
    desk: Any, live_server: Any, width: int
) -> None:
    _traffic()
    tab = desk(width=width, role="operator")
    tab.goto(f"{live_server.url}/")
    # The skip link is the first stop of the keyboard and lands on the content.
    tab.keyboard.press("Tab")
    expect(tab.locator(".skip-link")).to_be_focused()
    tab.keyboard.press("Enter")
    expect(tab.locator("main")).to_be_focused()

    tab.keyboard.press("j")
    rows = tab.locator("tr.reason")
    expect(rows.nth(0)).to_have_class(re.compile("is-current"))
    tab.keyboard.press("j")
    expect(rows.nth(1)).to_have_class(re.compile("is-current"))
    tab.keyboard.press("k")
    expect(rows.nth(0)).to_have_class(re.compile("is-current"))

    tab.keyboard.press("?")
    expect(tab.locator("dialog#shortcuts")).to_be_visible()
    expect(tab.locator("dialog#shortcuts")).to_contain_text("acknowledge")
    _shot(tab, f"keyboard-help-{width}")
    tab.keyboard.press("Escape")
    expect(tab.locator("dialog#shortcuts")).to_be_hidden()

    # "/" puts the cursor in the search; letters typed there stay letters.
    tab.keyboard.press("/")
    search = tab.locator("input[name=q]")
    expect(search).to_be_focused()
    tab.keyboard.type("jar")
    expect(search).to_have_value("jar")
    expect(tab.locator("dialog#shortcuts")).to_be_hidden()
    assert FailureGroup.objects.filter(status=GroupStatus.OPEN).count() == 3
    tab.goto(f"{live_server.url}/")

    # "a" on the first row (the long tool's, the largest): a confirmation that names the
    # count, then the row's groups are acknowledged and the list comes back.
    tab.keyboard.press("j")
    expect(rows.nth(0)).to_contain_text("http_5xx")
    questions: list[str] = []

    def answer(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.accept()

    tab.once("dialog", answer)
    tab.keyboard.press("a")
    expect(tab.locator(".msg-success")).to_contain_text("Acknowledge")
    assert questions and "1 group(s) of http_5xx" in questions[0], questions
    assert set(FailureGroup.objects.filter(reason="http_5xx").values_list("status", flat=True)) == {
        GroupStatus.ACKNOWLEDGED
    }
    expect(tab).to_have_url(f"{live_server.url}/")  # the whole list it left, not the row

    # On the group page, "r" resolves it; "/" goes to the triage page's search.
    group = FailureGroup.objects.get(reason="timeout")
    tab.goto(f"{live_server.url}/triage/groups/{group.pk}/")
    tab.keyboard.press("j")
    expect(tab.locator("#records tr[data-shortcut-row]").first).to_have_class(
        re.compile("is-current")
    )
    tab.keyboard.press("r")
    expect(tab.locator(".msg-success")).to_contain_text("Resolve")
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED
    tab.keyboard.press("/")
    expect(tab.locator("input[name=q]")).to_be_focused()


@pytest.mark.parametrize("width", [1280, 390])
def test_an_operator_keeps_a_runbook_beside_the_advice(
    desk: Any, live_server: Any, width: int
) -> None:
    _traffic()
    group = FailureGroup.objects.get(tool=LONG_TOOL)
    tab = desk(width=width, role="operator")
    tab.goto(f"{live_server.url}/triage/groups/{group.pk}/")
    tab.get_by_text("Edit the reason's runbook").click()
    form = tab.locator("#runbook-reason")
    form.locator("input[name=url]").fill("javascript:alert(1)")
    form.locator("textarea[name=note]").fill("Page the payments on-call first.")
    # The browser's own check of a URL field would stop this before the desk sees it; the
    # desk's refusal is what matters for every client, so skip the browser's.
    form.evaluate("f => f.noValidate = true")
    form.get_by_role("button", name="Save runbook").click()
    errors = tab.locator("#runbook-reason .form-errors")
    expect(errors).to_contain_text("Runbook link: Enter a full web address")
    expect(form.locator("textarea[name=note]")).to_have_value("Page the payments on-call first.")
    form.locator("input[name=url]").fill("https://wiki.example.com/runbooks/http-5xx")
    form.get_by_role("button", name="Save runbook").click()
    link = tab.locator("#runbooks a[href='https://wiki.example.com/runbooks/http-5xx']")
    expect(link).to_be_visible()
    # The confirmation is where the page lands (#runbooks), not above the fold.
    saved = tab.locator("#runbooks .msg-success")
    expect(saved).to_contain_text("Runbook saved.")
    expect(saved).to_be_in_viewport()
    expect(tab.locator("ul.messages .msg-success")).to_have_count(0)
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(tab.locator("#runbooks")).to_contain_text("Page the payments on-call first.")

    tab.get_by_text("Edit the tool's runbook").click()
    tool_form = tab.locator("#runbook-tool")
    tool_form.locator("select[name=scope]").select_option("every")
    tool_form.locator("input[name=url]").fill("https://wiki.example.com/tools/billing")
    tool_form.get_by_role("button", name="Save runbook").click()
    expect(tab.locator("#runbooks")).to_contain_text("in every collection")
    tab.locator(".runbook-history summary").click()
    expect(tab.locator(".runbook-history")).to_contain_text(
        "https://wiki.example.com/tools/billing"
    )
    assert _right_edge(tab, "#runbooks") <= width
    assert tab.evaluate("document.documentElement.scrollWidth") <= width
    _shot(tab, f"runbook-group-{width}")


def test_an_uncertain_receipt_is_recorded_on_a_phone(desk: Any, live_server: Any) -> None:
    _traffic()
    tab = desk(width=390, role="operator")
    tab.goto(f"{live_server.url}/receipts/")
    receipt = Receipt.objects.get()
    form = tab.locator("form.reconcile").first
    form.get_by_label(re.compile("not applied", re.I)).check()
    form.locator("textarea[name=note]").fill("Checked the billing log: nothing was sent.")
    form.get_by_role("button", name=re.compile("Record", re.I)).click()
    # Nothing is recorded until the operator confirms what the finding will mean; the
    # confirmation's button is on the phone's screen too.
    yes = tab.locator("form.confirm-finding button", has_text="Yes, record not_applied")
    expect(yes).to_be_visible()
    assert not receipt.reconciliations.exists()
    box = yes.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    yes.click()
    expect(tab.locator("#queue .msg-success")).to_be_visible()
    assert receipt.reconciliations.exists()
