"""Times in the person's zone, the live triage table and history, as an on-call operator in
Seoul sees them, on a desktop and on a phone."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, sign_in_tab
from tests.factories import failure_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, GroupStatus

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

SEOUL = zoneinfo.ZoneInfo("Asia/Seoul")


def _ago(minutes: float) -> str:
    return (timezone.now() - timedelta(minutes=minutes)).isoformat()


def _traffic() -> None:
    batch_ingest(
        owner="browser-test",
        items=[
            failure_item(occurred_at=_ago(59), tool="getOrder"),
            failure_item(occurred_at=_ago(61), tool="getOrder"),
            failure_item(occurred_at=_ago(3), tool="getDelivery"),
            failure_item(
                stage="synthesize",
                reason="unsatisfied_field",
                tool="getOrderDetail",
                occurred_at=_ago(5),
                evidence={"field_name": "orderNo"},
            ),
        ],
    )


@pytest.fixture(params=[1280, 390], ids=["desktop", "phone"])
def seoul(request: Any, open_tab: Callable[..., Any], live_server: Any) -> Any:
    """A signed-in operator whose browser is in Seoul, at the given width."""
    tab = open_tab(width=request.param)
    sign_in_tab(tab, live_server, "operator", username="operator-seoul")
    return tab


def _screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-{page.width}.png"), full_page=True)


def test_times_windows_and_mutes_are_in_the_browsers_zone(seoul: Any, live_server: Any) -> None:
    _traffic()
    page = seoul
    page.goto(f"{live_server.url}/?window=1h&sort=stage")
    # The sign-in page sent the browser's zone: the first page is already in it.
    expect(page.locator("#time-zone")).to_have_text("times in KST")
    summary = page.locator("p.summary")
    expect(summary).to_contain_text("failures in the last 60 minutes")
    span = summary.locator(".window-span").inner_text()
    now = timezone.now().astimezone(SEOUL)
    # "14:05-15:05 KST", or across midnight in Seoul "Dec 5 23:33 - Dec 6 00:33 KST".
    match = re.search(r"(\d\d):(\d\d)(?:-| - [A-Z][a-z]{2} \d{1,2} )(\d\d):(\d\d) KST$", span)
    assert match, span
    end = now.replace(hour=int(match[3]), minute=int(match[4]))
    assert abs((now - end).total_seconds()) < 120  # the window ends now, in Seoul time
    # Exactly the last 60 minutes: 59 minutes ago counts, 61 does not.
    row = page.locator("tr.reason:has-text('http_5xx')")
    expect(row.locator("td.num").first).to_have_text("2")
    expect(page.locator("#as-of")).to_contain_text("KST")
    _screenshot(page, "time-triage-1h")

    group = FailureGroup.objects.get(tool="getOrder")
    page.goto(f"{live_server.url}/triage/groups/{group.pk}/")
    mute = page.locator("form:has(input[name=muted_until])")
    presets = mute.locator("select[name=mute_for] option")
    expect(presets.filter(has_text="until next week")).to_contain_text("09:00 KST")
    tomorrow = (now + timedelta(days=1)).date()
    mute.locator("input[name=muted_until]").fill(f"{tomorrow.isoformat()}T19:03")
    mute.locator("button:has-text('Mute')").click()
    expect(page.locator(".msg-success")).to_contain_text("19:03 KST")
    group.refresh_from_db()
    assert group.status == GroupStatus.MUTED
    # 19:03 typed in Seoul is 19:03 in Seoul (10:03 UTC), not 19:03 UTC.
    assert group.muted_until == datetime(
        tomorrow.year, tomorrow.month, tomorrow.day, 19, 3, tzinfo=SEOUL
    )
    assert group.muted_until.astimezone(UTC).hour == 10
    expect(page.locator("dd:has-text('until')").first).to_contain_text("19:03")
    _screenshot(page, "time-group-muted")


def test_a_chosen_zone_replaces_the_browsers_on_every_page(seoul: Any, live_server: Any) -> None:
    _traffic()
    page = seoul
    page.goto(f"{live_server.url}/")
    page.locator("#time-zone").click()
    page.wait_for_url("**/preferences/")
    expect(page.locator("#preferences")).to_contain_text("Your browser says Asia/Seoul.")
    page.select_option("select[name=time_zone]", "America/New_York")
    page.click("#preferences button")
    expect(page.locator(".msg-success")).to_contain_text("America/New_York")
    expect(page.locator("#time-zone")).to_have_text(re.compile(r"times in E[SD]T"))
    _screenshot(page, "time-preferences")
    page.goto(f"{live_server.url}/")
    expect(page.locator("#as-of")).to_contain_text(re.compile(r"E[SD]T"))
    # Blank follows the browser again.
    page.goto(f"{live_server.url}/preferences/")
    page.select_option("select[name=time_zone]", "")
    page.click("#preferences button")
    expect(page.locator("#time-zone")).to_have_text("times in KST")


def test_auto_refresh_shows_new_failures_and_waits_while_the_person_types(
    seoul: Any, live_server: Any
) -> None:
    _traffic()
    page = seoul
    page.clock.install()  # the refresh timer runs when the test says
    page.goto(f"{live_server.url}/")
    page.select_option("select[name=refresh]", "10s")
    expect(page).to_have_url(re.compile(r"refresh=10s"))
    expect(page.locator("#refresh-state")).to_have_text("refreshes every 10 seconds")
    entries = page.evaluate("history.length")
    stamp = page.locator("#as-of").inner_text()

    batch_ingest(
        owner="browser-test",
        items=[failure_item(stage="execute", reason="timeout", tool="sendInvoice",
                            occurred_at=_ago(0.1))],
    )  # fmt: skip
    assert page.locator("tr.reason:has-text('timeout')").count() == 0
    page.clock.run_for(10_500)
    expect(page.locator("tr.reason:has-text('timeout')")).to_be_visible()
    assert page.evaluate("history.length") == entries  # a refresh adds no history entry
    expect(page).to_have_url(re.compile(r"refresh=10s"))
    expect(page.locator("select[name=refresh]")).to_have_value("10s")

    # Typing a search that is not sent yet: the table waits, and says so.
    page.locator("input[name=q]").click()
    page.keyboard.type("getOr")
    batch_ingest(
        owner="browser-test",
        items=[failure_item(stage="execute", reason="network_error", tool="getStock",
                            occurred_at=_ago(0.1))],
    )  # fmt: skip
    stamp = page.locator("#as-of").inner_text()
    page.clock.run_for(10_500)
    expect(page.locator("#refresh-state")).to_have_text("paused while you select or type")
    assert page.locator("tr.reason:has-text('network_error')").count() == 0
    assert page.locator("#as-of").inner_text() == stamp
    _screenshot(page, "live-paused")

    # A bulk bar being filled holds it too, even without focus.
    page.locator("input[name=q]").fill("")
    page.locator("form.bulkbar select[name=mute_for]").select_option("4h")
    expect(page.locator("form.bulkbar select[name=action]")).to_have_value("mute")
    page.locator("form.bulkbar select[name=mute_for]").select_option("")
    page.locator("form.bulkbar select[name=action]").select_option("resolve")
    page.locator("p.summary").click()
    page.clock.run_for(10_500)
    assert page.locator("tr.reason:has-text('network_error')").count() == 0
    page.locator("form.bulkbar select[name=action]").select_option("acknowledge")
    page.locator("p.summary").click()
    page.clock.run_for(10_500)
    expect(page.locator("tr.reason:has-text('network_error')")).to_be_visible()
    expect(page.locator("#refresh-state")).to_have_text("refreshes every 10 seconds")
    _screenshot(page, "live-refreshed")


def test_back_restores_inputs_results_and_bulk_bar_together(seoul: Any, live_server: Any) -> None:
    _traffic()
    page = seoul
    page.goto(f"{live_server.url}/")
    start = page.evaluate("history.length")
    bulk = page.locator("form.bulkbar button[type=submit]").first
    expect(bulk).to_have_text("Apply to 3 groups")

    page.select_option("select[name=lane]", "retry_safe")
    expect(page).to_have_url(re.compile(r"lane=retry_safe"))
    expect(bulk).to_have_text("Apply to 2 groups")
    assert page.evaluate("history.length") == start + 1

    # Enter in the search field fires "search", "change" and "submit": one entry.
    page.locator("input[name=tool]").fill("getOrder")
    page.locator("input[name=tool]").press("Enter")
    expect(page).to_have_url(re.compile(r"tool=getOrder"))
    expect(bulk).to_have_text("Apply to 1 group")
    page.wait_for_timeout(300)  # any second request would have pushed by now
    assert page.evaluate("history.length") == start + 2
    _screenshot(page, "history-filtered")

    page.go_back()
    expect(page).not_to_have_url(re.compile(r"tool="))
    expect(page.locator("input[name=tool]")).to_have_value("")
    expect(page.locator("select[name=lane]")).to_have_value("retry_safe")
    expect(bulk).to_have_text("Apply to 2 groups")
    expect(page.locator("tr.reason")).to_have_count(1)
    assert page.locator("tr.reason:has-text('unsatisfied_field')").count() == 0

    page.go_back()
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.locator("select[name=lane]")).to_have_value("")
    expect(bulk).to_have_text("Apply to 3 groups")
    expect(page.locator("tr.reason:has-text('unsatisfied_field')")).to_be_visible()

    page.go_forward()
    expect(page).to_have_url(re.compile(r"lane=retry_safe"))
    expect(page.locator("select[name=lane]")).to_have_value("retry_safe")
    expect(page.locator("input[name=tool]")).to_have_value("")
    page.go_forward()
    expect(page.locator("input[name=tool]")).to_have_value("getOrder")
    expect(bulk).to_have_text("Apply to 1 group")
    _screenshot(page, "history-forward")
