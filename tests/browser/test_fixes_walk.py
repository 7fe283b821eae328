"""Issue 29's browser walk: resolving a group from its page in a release and with the fix
behind it, and the fixes list with its tallies, at a desk (1280 px) and on a phone (390 px),
in English and in Korean (a person who prefers Korean: their stored choice).

The data comes through the ingest API (the groups, the release); the fixes list's fixes are
stored with their figures and verdicts set, as the measuring task leaves them. On every page:
no sideways scroll, the controls a person needs on the screen, and on a Korean page no
English left outside codes and names. Screenshots go to var/test-artifacts/ (fixes-*)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone, translation
from django.utils.translation import gettext, ngettext
from playwright.sync_api import expect
from rest_framework.test import APIClient

from fixes.models import Fix, FixKind, Verdict
from tests.browser.checks import PHONE, check_table, english_left, fits
from tests.browser.conftest import shot
from tests.factories import failure_item
from triage.models import FailureGroup, GroupStatus, Runbook
from triage.services import runbook_set

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

DESK = 1280
SEOUL = "Asia/Seoul"
RELEASE = "1.4"
PULL_REQUEST = "https://git.example.com/shop/pull/812"
# What people type (notes) is written in their language: it is data, not interface.
NOTES = {
    "en": {"resolve": "retry budget 2 → 1", "runbook": "restarted the invoice worker",
           "policy": "budget 2 → 1"},
    "ko": {"resolve": "재시도 예산 2 → 1", "runbook": "인보이스 워커를 다시 시작함",
           "policy": "예산 2 → 1"},
}  # fmt: skip

WIDTHS_AND_LANGUAGES = [
    pytest.param(DESK, "en", id="1280-en"),
    pytest.param(PHONE, "en", id="390-en"),
    pytest.param(DESK, "ko", id="1280-ko"),
    pytest.param(PHONE, "ko", id="390-ko"),
]


def _t(language: str, message: str, **values: Any) -> str:
    with translation.override(language):
        text = gettext(message)
    return text % values if values else text


def _label(language: str, choice: Any) -> str:
    """A model choice's label, as the page shows it in `language`."""
    with translation.override(language):
        return str(choice.label)


@dataclass
class Walk:
    tab: Any
    base: str
    language: str
    width: int
    english: dict[str, list[str]]

    def go(self, path: str, status: int = 200) -> None:
        response = self.tab.goto(f"{self.base}{path}")
        assert response is not None and response.status == status, (
            path,
            response and response.status,
        )

    def t(self, message: str, **values: Any) -> str:
        return _t(self.language, message, **values)

    def page_done(self, name: str) -> None:
        """No sideways scroll; a screenshot; on a Korean page, the English left."""
        fits(self.tab)
        shot(self.tab, f"fixes-{name}-{self.width}-{self.language}")
        if self.language == "ko":
            self.english[name] = english_left(self.tab)

    def finish(self) -> None:
        left = {name: words for name, words in self.english.items() if words}
        assert not left, "\n".join(f"{name}: {words}" for name, words in left.items())


@pytest.fixture
def walk(operator: Callable[..., Any], live_server: Any) -> Callable[..., Walk]:
    def start(*, width: int, language: str, roles: tuple[str, ...]) -> Walk:
        tab = operator(width=width, zone=SEOUL, language=language, roles=roles)
        tab.set_viewport_size({"width": width, "height": 844 if width == PHONE else 900})
        assert tab.locator("html").get_attribute("lang") == language
        return Walk(tab, live_server.url, language, width, english={})

    return start


def _ingest(client: APIClient, *items: dict[str, Any]) -> None:
    response = client.post(
        "/api/v1/ingest", data=json.dumps({"items": list(items)}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["rejected"] == 0, response.content


def _on_screen(walk: Walk, element: Any) -> None:
    """Visible, and whole inside the screen's width once scrolled to (not cut at its edge)."""
    element.scroll_into_view_if_needed()
    expect(element).to_be_visible()
    box = element.bounding_box()
    assert box is not None, element
    assert box["x"] >= 0 and box["x"] + box["width"] <= walk.width + 0.5, (element, box)


# --- resolving with a release and a fix --------------------------------------------------------


def _resolve_form(walk: Walk) -> tuple[Any, Any]:
    """The resolve form and its "With the fix" section, opened; every field reachable."""
    form = walk.tab.locator("#resolve-form")
    section = form.locator("#resolve-fix")
    summary = section.locator("summary")
    expect(summary).to_have_text(walk.t("With the fix"))
    _on_screen(walk, summary)
    if section.get_attribute("open") is None:
        summary.click()
    expect(section).to_have_attribute("open", "")
    for field in ("#fix-kind", "input[name=fix_url]", "textarea[name=note]"):
        _on_screen(walk, section.locator(field))
    _on_screen(walk, form.locator("#resolve-in"))
    _on_screen(walk, form.locator("button.primary"))
    fits(walk.tab)  # opened, it stays inside the page
    return form, section


def _messages(walk: Walk, level: str) -> Any:
    return walk.tab.locator(f"ul.messages .msg-{level}")


@pytest.mark.parametrize(("width", "language"), WIDTHS_AND_LANGUAGES)
def test_a_group_is_resolved_in_a_release_with_its_fix_from_its_page(
    walk: Callable[..., Walk], ingest_client: APIClient, width: int, language: str
) -> None:
    _ingest(ingest_client, failure_item(), failure_item())
    group = FailureGroup.objects.get()
    declared = ingest_client.post(
        "/api/v1/releases",
        data=json.dumps({"collection": "shop", "version": RELEASE,
                         "deployed_at": timezone.now().isoformat()}),
        content_type="application/json",
    )  # fmt: skip
    assert declared.status_code == 201, declared.content
    person = walk(width=width, language=language, roles=("operator",))
    tab = person.tab
    person.go(f"/triage/groups/{group.pk}/")
    expect(tab.locator("#fixes")).to_have_count(0)

    # A code change without its link is refused: the message says why, nothing changed.
    form, section = _resolve_form(person)
    section.locator("#fix-kind").select_option(FixKind.CODE_CHANGE.value)
    section.locator("textarea[name=note]").fill(NOTES[language]["resolve"])
    form.locator("#resolve-in").select_option(
        label=person.t("in release %(release)s", release=RELEASE)
    )
    form.scroll_into_view_if_needed()
    shot(tab, f"fixes-resolve-filled-{width}-{language}", full_page=False)
    form.locator("button.primary").click()
    refused = _messages(person, "error")
    expect(refused).to_have_text(
        person.t("A code change needs its link (the commit or pull request).")
    )
    _on_screen(person, refused)
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN and not Fix.objects.exists()
    expect(tab.locator("#fixes")).to_have_count(0)
    # What was typed comes back, the section open: only the link is left to give.
    section = tab.locator("#resolve-fix")
    expect(section).to_have_attribute("open", "")
    expect(section.locator("#fix-kind")).to_have_value(FixKind.CODE_CHANGE.value)
    expect(section.locator("textarea[name=note]")).to_have_value(NOTES[language]["resolve"])
    expect(section.locator("input[name=fix_url]")).to_have_value("")
    person.page_done("resolve-refused")

    # With its link, in release 1.4: resolved in that release, the fix measured from now.
    form, section = _resolve_form(person)
    section.locator("input[name=fix_url]").fill(PULL_REQUEST)
    form.locator("#resolve-in").select_option(
        label=person.t("in release %(release)s", release=RELEASE)
    )
    form.locator("button.primary").click()
    said = _messages(person, "success")
    expect(said).to_have_text(
        person.t("Resolved, with the fix: the desk measures whether it holds.")
    )
    _on_screen(person, said)

    group.refresh_from_db()
    assert (group.status, group.resolved_in_release) == (GroupStatus.RESOLVED, RELEASE)
    fix = Fix.objects.get()
    assert (fix.group_id, fix.kind, fix.url, fix.resolved_in_release, fix.verdict) == (
        group.pk, FixKind.CODE_CHANGE, PULL_REQUEST, RELEASE, Verdict.MEASURING,
    )  # fmt: skip
    assert fix.resolution is not None and fix.actor_label == f"op-{width}-{language}"

    expect(tab.locator("#resolve-form")).to_have_count(0)
    resolved_in = tab.locator(".resolved-in")
    expect(resolved_in).to_contain_text(RELEASE)
    expect(resolved_in.locator(".code")).to_have_text(RELEASE)
    card = tab.locator("#fixes")
    item = card.locator(f"#fix-{fix.pk}")
    expect(item.locator("strong")).to_have_text(_label(language, FixKind.CODE_CHANGE))
    pill = item.locator(".pill.verdict.verdict-measuring")
    expect(pill).to_have_text(_label(language, Verdict.MEASURING))
    expect(pill).to_have_attribute("title", person.t("The day after the fix has not ended yet."))
    link = item.locator(f"a[href='{PULL_REQUEST}']")
    expect(link).to_have_text(PULL_REQUEST)
    expect(item).to_contain_text(NOTES[language]["resolve"])
    for element in (pill, link):
        _on_screen(person, element)
    fits(tab)
    card.scroll_into_view_if_needed()
    shot(tab, f"fixes-card-{width}-{language}", full_page=False)
    person.page_done("resolved")
    person.finish()


# --- the fixes list ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    held: Fix  # a code change by minji: held
    not_held: Fix  # a runbook step by jisoo: did not hold
    measuring: Fix  # a runbook step by minji: measuring
    unmeasurable: Fix  # a tool policy change by jisoo: cannot tell
    runbook: Runbook


def _fixes(ingest_client: APIClient, language: str) -> Listed:
    _ingest(
        ingest_client,
        failure_item(tool="getOrderDetail"),
        failure_item(tool="createInvoice", evidence={"http_status": 502, "http_method": "POST"}),
        failure_item(reason="timeout", tool="getStock"),
    )
    groups = {group.tool: group for group in FailureGroup.objects.all()}
    runbook = runbook_set(
        subject="reason", reason="http_5xx", tool="", collection="",
        url="https://wiki.example.com/runbooks/http-5xx", note="", actor=None,
    )  # fmt: skip
    people = {
        name: get_user_model().objects.create_user(username=name) for name in ("minji", "jisoo")
    }
    now = timezone.now()

    def fix(group: str, person: str, days: float, **fields: Any) -> Fix:
        return Fix.objects.create(
            group=groups[group], collection="shop", tool=group, actor=people[person],
            actor_label=person, fixed_at=now - timedelta(days=days), **fields,
        )  # fmt: skip

    held = fix(
        "getOrderDetail", "minji", 9, kind=FixKind.CODE_CHANGE, url=PULL_REQUEST,
        failures_before_day=6, successes_before_day=54, failures_after_day=0,
        successes_after_day=60, failures_before_week=40, successes_before_week=360,
        failures_after_week=1, successes_after_week=399, verdict=Verdict.HELD,
        verdict_span="week", settled=True, measured_at=now,
    )  # fmt: skip
    not_held = fix(
        "createInvoice", "jisoo", 3, kind=FixKind.RUNBOOK_STEP, runbook=runbook,
        note=NOTES[language]["runbook"], failures_before_day=10, failures_after_day=12,
        failures_before_week=10, failures_after_week=14, verdict=Verdict.NOT_HELD,
        verdict_span="day", measured_at=now,
    )  # fmt: skip
    measuring = fix(
        "getStock", "minji", 0.1, kind=FixKind.RUNBOOK_STEP, runbook=runbook,
        failures_before_day=3, failures_before_week=3,
    )  # fmt: skip
    unmeasurable = fix(
        "getOrderDetail", "jisoo", 20, kind=FixKind.TOOL_POLICY, note=NOTES[language]["policy"],
        failures_before_week=0, failures_after_week=2, verdict=Verdict.UNMEASURABLE,
        verdict_span="week", settled=True, measured_at=now,
    )  # fmt: skip
    return Listed(held, not_held, measuring, unmeasurable, runbook)


def _tally(card: Any, name: str) -> Any:
    """A tally's row, by the name its link shows."""
    return card.locator("tr", has=card.page.locator("td:first-child a", has_text=name))


def _counts(row: Any) -> list[str]:
    return [text.strip() for text in row.locator("td.num").all_inner_texts()]


def _whole(walk: Walk, table: Any) -> None:
    """Every column of a table on the screen: nothing scrolled out of its box."""
    assert table.evaluate("e => e.scrollWidth <= e.parentElement.clientWidth + 0.5"), table
    for cell in table.locator("tr").first.locator("th").all():
        _on_screen(walk, cell)


def _listed(walk: Walk, *fixes: Fix) -> None:
    """The table lists these fixes, newest first, and stacks on a phone."""
    rows = walk.tab.locator("table.fixes-table > tbody > tr")
    expect(rows).to_have_count(len(fixes))
    ordered = sorted(fixes, key=lambda fix: fix.fixed_at, reverse=True)
    for index, fix in enumerate(ordered):
        expect(rows.nth(index)).to_have_attribute("id", f"fix-{fix.pk}")
    check_table(walk.tab.locator("table.fixes-table"), walk.width)


@pytest.mark.parametrize(("width", "language"), WIDTHS_AND_LANGUAGES)
def test_the_fixes_list_tallies_per_runbook_kind_and_person_and_filters(
    walk: Callable[..., Walk], ingest_client: APIClient, width: int, language: str
) -> None:
    listed = _fixes(ingest_client, language)
    person = walk(width=width, language=language, roles=("viewer",))
    tab = person.tab
    tab.locator(".mainnav").get_by_role("link", name=person.t("Fixes")).click()
    expect(tab).to_have_url(f"{person.base}/fixes/")
    expect(tab.locator("h1")).to_contain_text(person.t("Fixes"))
    with translation.override(language):
        total = ngettext("%(total)s fix", "%(total)s fixes", 4) % {"total": 4}
    expect(tab.locator("h2")).to_contain_text(total)

    # The tallies: fixes, held, partly held, did not hold, measuring, cannot tell.
    by_runbook = tab.locator("#by-runbook")
    runbook_row = by_runbook.locator("tr", has=tab.locator("td a"))
    expect(runbook_row).to_have_count(1)
    expect(runbook_row.locator("td a .code")).to_have_text("http_5xx")
    assert _counts(runbook_row) == ["2", "0", "0", "1", "1", "0"]
    by_kind = tab.locator("#by-kind")
    assert _counts(_tally(by_kind, _label(language, FixKind.RUNBOOK_STEP))) == [
        "2", "0", "0", "1", "1", "0",
    ]  # fmt: skip
    assert _counts(_tally(by_kind, _label(language, FixKind.CODE_CHANGE))) == [
        "1", "1", "0", "0", "0", "0",
    ]  # fmt: skip
    assert _counts(_tally(by_kind, _label(language, FixKind.TOOL_POLICY))) == [
        "1", "0", "0", "0", "0", "1",
    ]  # fmt: skip
    by_person = tab.locator("#by-person")
    assert _counts(_tally(by_person, "minji")) == ["2", "1", "0", "0", "1", "0"]
    assert _counts(_tally(by_person, "jisoo")) == ["2", "0", "0", "1", "0", "1"]
    for card in (by_runbook, by_kind, by_person):
        _on_screen(person, card)
        _whole(person, card.locator("table.tally"))

    # The table: each fix with its kind, link or runbook, verdict and figures.
    everything = (listed.held, listed.not_held, listed.measuring, listed.unmeasurable)
    _listed(person, *everything)
    for fix in everything:
        row = tab.locator(f"#fix-{fix.pk}")
        verdict = Verdict(fix.verdict)
        expect(row.locator(f".pill.verdict-{verdict}")).to_have_text(_label(language, verdict))
        expect(row).to_contain_text(_label(language, FixKind(fix.kind)))
        expect(row.locator("td").first).to_contain_text(fix.actor_label)
        assert fix.group is not None
        expect(row.locator(f"a[href='/triage/groups/{fix.group_id}/']")).to_have_text(
            fix.group.reason
        )
    held = tab.locator(f"#fix-{listed.held.pk}")
    expect(held.locator(f"a[href='{PULL_REQUEST}']")).to_be_visible()
    # 40 of 400 calls failed the week before, 1 of 400 after: 10.0% → 0.2% (97.5% fewer).
    week = held.locator(".fix-readings dd").nth(1)
    expect(week).to_contain_text("10.0% → 0.2%")
    expect(week).to_contain_text(person.t("%(drop)s fewer", drop="97.5%"))
    # 10 failures the week before, 14 after, no success seen: 40% more, not "-40% fewer".
    not_held = tab.locator(f"#fix-{listed.not_held.pk}")
    week = not_held.locator(".fix-readings dd").nth(1)
    expect(week).to_contain_text(person.t("%(rise)s more", rise="40.0%"))
    expect(week).not_to_contain_text("-")
    expect(not_held).to_contain_text(NOTES[language]["runbook"])
    expect(not_held.locator(".code", has_text="http_5xx").first).to_be_visible()
    person.page_done("list")

    # Each tally links to the fixes it counts, the page's other filters kept.
    runbook_row.locator("td a").click()
    expect(tab).to_have_url(re.compile(rf"/fixes/\?runbook={listed.runbook.pk}&days=90$"))
    _listed(person, listed.not_held, listed.measuring)
    person.page_done("by-runbook")
    _tally(tab.locator("#by-person"), "minji").locator("a").click()
    expect(tab).to_have_url(
        re.compile(rf"/fixes/\?person=minji&days=90&runbook={listed.runbook.pk}$")
    )
    _listed(person, listed.measuring)
    expect(tab.locator("input[name=person]")).to_have_value("minji")
    person.go("/fixes/")
    _tally(tab.locator("#by-kind"), _label(language, FixKind.CODE_CHANGE)).locator("a").click()
    expect(tab).to_have_url(re.compile(r"/fixes/\?kind=code_change&days=90$"))
    _listed(person, listed.held)
    expect(tab.locator("select[name=kind]")).to_have_value(FixKind.CODE_CHANGE.value)
    person.go("/fixes/")
    _tally(tab.locator("#by-person"), "jisoo").locator("a").click()
    expect(tab).to_have_url(re.compile(r"/fixes/\?person=jisoo&days=90$"))
    _listed(person, listed.not_held, listed.unmeasurable)
    person.page_done("by-person")

    # A bad filter: a 400, the form says what is wrong, and no list.
    window = person.t("The window is 1 to %(limit_value)s days.", limit_value=400)
    for days in ("0", "401"):
        person.go(f"/fixes/?days={days}", status=400)
        error = tab.locator(".query-errors")
        expect(error).to_contain_text(person.t("This page cannot show what the address asks for:"))
        expect(error.locator("li")).to_have_count(1)
        expect(error.locator("li .code")).to_have_text("days")
        # ?days=0 reads "1 to 1 days" (contracts.forms.window_days_field's min_value
        # message is given the minimum): its window's start is checked, 401 its end.
        expect(error).to_contain_text(window.split("400")[0] if days == "0" else window)
        expect(tab.locator("input[name=days]")).to_have_value(days)
        expect(tab.locator("table.fixes-table, #by-kind")).to_have_count(0)
        _on_screen(person, error)
        _on_screen(person, tab.locator("form.filters button[type=submit]"))
    person.page_done("bad-filter")
    person.finish()
