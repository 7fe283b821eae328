"""One way to write a time, mute ends where the list and the history show them, and the
shortcuts "a" and "r" on the triage page's group view: as an operator in Los Angeles or Seoul
sees them, in English and in Korean, at a desk (1280 px) and on a phone (390 px).

Screenshots go to var/test-artifacts/ (times-*, group-keys-*), for a person to look at."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from learning import services as learning_services
from learning.models import Suggestion
from tests.browser.conftest import ARTIFACTS
from tests.factories import failure_item
from tests.learning.conftest import attempt_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, GroupStatus

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

LOS_ANGELES = "America/Los_Angeles"
SEOUL = "Asia/Seoul"


def _ago(minutes: float) -> str:
    return (timezone.now() - timedelta(minutes=minutes)).isoformat()


def _traffic() -> None:
    """http_5xx in two tools (two groups of one reason) and a timeout: three groups."""
    batch_ingest(
        owner="browser-times",
        items=[
            *(failure_item(tool="getOrder", occurred_at=_ago(n)) for n in (2, 3, 4)),
            *(failure_item(tool="getDelivery", occurred_at=_ago(n)) for n in (5, 6)),
            failure_item(reason="timeout", tool="sendInvoice", occurred_at=_ago(7),
                         evidence={"http_method": "POST"}),
        ],
    )  # fmt: skip


def _shot(tab: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"{name}-{tab.width}.png"), full_page=True)


# --- the group view's shortcuts ------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "ko"])
@pytest.mark.parametrize("width", [1280, 390])
def test_a_and_r_act_on_the_focused_group_of_the_group_view(
    operator: Callable[..., Any], live_server: Any, width: int, language: str
) -> None:
    _traffic()
    tab = operator(width=width, zone=SEOUL, language=language)
    view = "/?view=groups&window=24h"
    tab.goto(f"{live_server.url}{view}")
    rows = tab.locator("#groups-view tr.group-row")
    expect(rows).to_have_count(3)
    # The rows are in count order: getOrder's http_5xx, getDelivery's, then the timeout.
    expect(rows.nth(1)).to_contain_text("getDelivery")
    questions: list[str] = []

    def answer(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.accept()

    # "a" on the second row acknowledges that group, not its reason's other group.
    tab.keyboard.press("j")
    tab.keyboard.press("j")
    expect(rows.nth(1)).to_have_class(re.compile("is-current"))
    tab.once("dialog", answer)
    tab.keyboard.press("a")
    expect(tab.locator(".msg-success")).to_be_visible()
    assert questions and "http_5xx · getDelivery · shop" in questions[0], questions
    statuses = dict(FailureGroup.objects.values_list("tool", "status"))
    assert statuses == {
        "getOrder": GroupStatus.OPEN,
        "getDelivery": GroupStatus.ACKNOWLEDGED,
        "sendInvoice": GroupStatus.OPEN,
    }
    # Back on the group view it left, with the undo offered there.
    expect(tab).to_have_url(re.compile(r"/\?window=24h&view=groups$"))  # not narrowed to the row
    expect(tab.locator("#groups-view")).to_be_visible()
    expect(tab.locator("form[action*='/undo'] button")).to_be_visible()
    _shot(tab, f"group-keys-acknowledged-{language}")

    # "r" on the timeout's row resolves that group (it leaves the default view, open ones).
    timeout_row = tab.locator("#groups-view tr.group-row:has-text('sendInvoice')")
    index = [text for text in rows.all_inner_texts()].index(timeout_row.inner_text())
    for _ in range(index + 1):
        tab.keyboard.press("j")
    expect(timeout_row).to_have_class(re.compile("is-current"))
    tab.once("dialog", answer)
    tab.keyboard.press("r")
    expect(tab.locator(".msg-success")).to_be_visible()
    assert FailureGroup.objects.get(tool="sendInvoice").status == GroupStatus.RESOLVED
    assert FailureGroup.objects.get(tool="getOrder").status == GroupStatus.OPEN
    expect(tab).to_have_url(re.compile(r"/\?window=24h&view=groups$"))

    # Dismissing the question changes nothing.
    tab.goto(f"{live_server.url}{view}")
    tab.keyboard.press("j")
    tab.once("dialog", lambda dialog: dialog.dismiss())
    tab.keyboard.press("a")
    tab.wait_for_timeout(300)
    assert FailureGroup.objects.get(tool="getOrder").status == GroupStatus.OPEN


# --- times: one way, the zone on hover, mutes that say when they end ------------------------


def _learning() -> int:
    """A suggestion from two attempts, one of them sent late (older than the first)."""

    def derive(*, kwargs: dict[str, Any], retry: bool) -> None:
        learning_services.suggestions_derive(**kwargs)

    with mock.patch("learning.tasks.derive_suggestions.apply_async", side_effect=derive):
        batch_ingest(owner="browser-times", items=[attempt_item("bt-a1", created_at=_ago(30))])
        batch_ingest(owner="browser-times", items=[attempt_item("bt-a2", created_at=_ago(300))])
    suggestion = Suggestion.objects.filter(type="target_preference").get()
    return suggestion.pk


@pytest.mark.parametrize("language", ["en", "ko"])
@pytest.mark.parametrize("width", [1280, 390])
def test_times_read_one_way_in_los_angeles_and_mutes_say_when_they_end(
    operator: Callable[..., Any], live_server: Any, width: int, language: str
) -> None:
    _traffic()
    suggestion = _learning()
    place = zoneinfo.ZoneInfo(LOS_ANGELES)
    tab = operator(width=width, zone=LOS_ANGELES, language=language)
    group = FailureGroup.objects.get(tool="sendInvoice")
    tab.goto(f"{live_server.url}/triage/groups/{group.pk}/")
    zone = "PDT" if timezone.now().astimezone(place).dst() else "PST"
    expect(tab.locator("#time-zone")).to_contain_text(zone)

    # Every time on the page is a <time> with the whole date, time and zone on hover.
    titles = tab.locator("main time").evaluate_all("all => all.map(t => t.title)")
    assert titles and all(title.endswith(f"{zone} (America/Los_Angeles)") for title in titles)
    first = tab.locator("main time").first
    moment = datetime.fromisoformat(first.get_attribute("datetime") or "")
    assert moment.utcoffset() == timezone.now().astimezone(place).utcoffset()
    first.hover()

    # Mute until 09:00 tomorrow, Los Angeles time.
    ends = (timezone.now().astimezone(place) + timedelta(days=1)).replace(
        hour=9, minute=0, second=0, microsecond=0
    )
    weekday = "월화수목금토일"[ends.weekday()]
    shown = (
        f"{ends.month}월 {ends.day}일 ({weekday}) 09:00"
        if language == "ko"
        else f"{ends:%a %b} {ends.day} 09:00"
    )
    act = tab.locator("form:has(input[name=action][value=mute])")
    act.locator("select[name=mute_for]").select_option("tomorrow")
    option = act.locator("select[name=mute_for] option[value=tomorrow]").inner_text()
    assert f"{shown} {zone}" in option, option
    act.locator("button").click()
    expect(tab.locator(".msg-success")).to_contain_text(shown)
    group.refresh_from_db()
    assert group.status == GroupStatus.MUTED and group.muted_until is not None
    assert group.muted_until.astimezone(place) == ends

    # The page's status and its history say when the mute ends.
    expect(tab.locator("dl.kv").first).to_contain_text(shown)
    history = tab.locator(".card:has(h3) li:has(.mute-end)").first
    expect(history.locator(".mute-end time")).to_have_text(shown)
    _shot(tab, f"times-group-{language}")

    # So does the list, in both views.
    for view in ("", "&view=groups"):
        tab.goto(f"{live_server.url}/?window=24h&status=all{view}")
        end = tab.locator(".mute-end time").first
        expect(end).to_have_text(shown)
        assert (end.get_attribute("title") or "").endswith(f"{zone} (America/Los_Angeles)")
        _shot(tab, f"times-list{view.replace('&view=', '-') or '-reasons'}-{language}")

    # Learning: absolute times beside relative ones, first seen before last seen.
    tab.goto(f"{live_server.url}/learning/suggestions/{suggestion}/")
    seen = tab.locator("dl.kv time")
    first_seen, last_seen = (
        datetime.fromisoformat(value or "")
        for value in seen.evaluate_all("all => all.slice(0, 2).map(t => t.dateTime)")
    )
    assert first_seen < last_seen
    ago = "시간 전" if language == "ko" else "hours ago"
    expect(seen.first).to_contain_text(re.compile(rf"\d\d:\d\d \(5\s?{ago}\)"))
    _shot(tab, f"times-learning-{language}")
