"""Issue 27's walk: what a person on call sees, point by point, at a desk (1280 px) and on a
phone (390 px), in English and in Korean, with the browser in Seoul or in Los Angeles (a
zone other than UTC, and not the language's own: the zone is the browser's).

The world is built through ingest and the services: production failures of the last hour
(a reason whose groups differ in lane, one of them new while the reason is older), a
bigger failure of earlier today, Quality Lab's failures, a receipt waiting for a status
lookup, a reconcile_first group whose runtime sends no receipts (muted until 09:00
tomorrow), an alert rule's delivery about the new group, learning suggestions (one
rejected). First comes the 3 a.m. question: what is failing in production now, and is it
safe to retry? It is answered on the first screen, with no click. Then each point of the
issue, mostly one page each.

Screenshots go to var/test-artifacts/ (on-call-*), for a person to look at."""

from __future__ import annotations

import ipaddress
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone, translation
from django.utils.translation import gettext, ngettext, pgettext
from playwright.sync_api import expect

from alerts import channels as alert_channels
from alerts import services as alerts
from alerts.models import Channel, ChannelKind, Delivery
from learning import services as learning
from learning.models import Suggestion
from tests.browser.checks import PHONE, assert_stacked, check_table, english_left, fits
from tests.browser.conftest import shot
from tests.factories import failure_item, receipt_item
from tests.learning.conftest import attempt_item
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, batch_ingest
from triage.models import FailureGroup, GroupStatus, Receipt
from triage.services import group_act
from triage.vocabulary import taxonomy

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

SEOUL = "Asia/Seoul"
LOS_ANGELES = "America/Los_Angeles"
DESK = 1280
# A public address for the pasted webhook's host: the channel is created, never called.
PUBLIC_ADDRESS = ipaddress.ip_address("93.184.215.14")
WEBHOOK_URL = "https://hooks.example.com/services/T0001/B0002/on-call"


# --- the world ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class World:
    get_order: int  # http_5xx, GET: retry_safe, first seen hours ago, failing now
    create_invoice: int  # http_5xx, POST: reconcile_first, first seen in the last hour
    detail: int  # unsatisfied_field: input_stale, one record in the last hour
    send_mail: int  # timeout after sending: reconcile_first, no receipts, muted
    waiting: int  # createInvoice's receipt, waiting for a status lookup
    muted_until: datetime
    rejected: int  # a rejected learning suggestion


def _ago(minutes: float) -> str:
    return (timezone.now() - timedelta(minutes=minutes)).isoformat()


def _build(zone: str) -> World:
    post = {"http_status": 502, "http_method": "POST"}
    batch_ingest(
        owner="on-call",
        items=[
            # One reason, two groups, two answers: getOrder may be retried, createInvoice may
            # have run (a POST answered 502): look the status up first.
            failure_item(tool="getOrder", occurred_at=_ago(180)),
            *(failure_item(tool="getOrder", occurred_at=_ago(n)) for n in (2, 3, 4, 5, 6, 8)),
            *(failure_item(tool="createInvoice", evidence=post, occurred_at=_ago(n),
                           idempotency_key=f"invoice:inv-{n}") for n in (4, 9)),
            failure_item(stage="synthesize", reason="unsatisfied_field", tool="getOrderDetail",
                         occurred_at=_ago(12), evidence={"field_name": "orderNo"}),
            failure_item(reason="timeout", tool="sendInvoiceEmail", occurred_at=_ago(20),
                         execution_state="started_unknown", evidence={"http_method": "POST"}),
            # Earlier today's biggest: not what is failing now.
            *(failure_item(reason="network_error", tool="getStock", occurred_at=_ago(300 + n))
              for n in range(12)),
            receipt_item("waiting", tool_run_id="tr_invoice_4", tool="createInvoice",
                         result="uncertain", code="REMOTE_TIMEOUT_AFTER_ACCEPT",
                         execution_state="started_unknown", side_effect="external_write",
                         next_action="query_by_idempotency_key", idempotency_key="invoice:inv-4"),
        ],
    )  # fmt: skip
    # Quality Lab's runs fail on purpose, and more than production does.
    batch_ingest(
        owner=DESK_OWNER,
        channel=DESK_CHANNEL,
        items=[
            failure_item(stage="retrieve", reason="not_retrieved", tool="labOnly",
                         source="quality_lab", occurred_at=_ago(2))
            for _ in range(15)
        ],
    )  # fmt: skip
    groups = {group.tool: group for group in FailureGroup.objects.all()}
    lead = get_user_model().objects.create_user(username="minji")
    local = timezone.now().astimezone(zoneinfo.ZoneInfo(zone))
    muted_until = (local + timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)
    group_act(group=groups["sendInvoiceEmail"], actor=lead, action="mute", muted_until=muted_until)

    # An admin's email channel and a rule on new groups: its delivery names createInvoice's.
    mail, _ = alerts.channel_create(name="oncall_mail", kind=ChannelKind.EMAIL,
                                    target="oncall@example.com")  # fmt: skip
    alerts.rule_create(name="new_groups_shop", kind="new_group", channels=[mail])
    alerts.batch_evaluate(
        new_group_ids=[groups["createInvoice"].pk], regressed_group_ids=[], enqueue=False
    )
    assert Delivery.objects.filter(payload__group__id=groups["createInvoice"].pk).exists()

    # Learning: suggestions from production attempts, one of them rejected.
    def derive(*, kwargs: dict[str, Any], retry: bool) -> None:
        learning.suggestions_derive(**kwargs)

    with mock.patch("learning.tasks.derive_suggestions.apply_async", side_effect=derive):
        batch_ingest(owner="on-call", items=[attempt_item("oc-a1", created_at=_ago(30))])
        batch_ingest(owner="on-call", items=[attempt_item("oc-a2", created_at=_ago(300))])
    rejected = Suggestion.objects.exclude(type="target_preference").order_by("pk").first()
    assert rejected is not None
    learning.suggestion_reject(
        suggestion=rejected, reviewer=lead, reason="operator_rejected", note="not what runs want"
    )
    return World(
        get_order=groups["getOrder"].pk,
        create_invoice=groups["createInvoice"].pk,
        detail=groups["getOrderDetail"].pk,
        send_mail=groups["sendInvoiceEmail"].pk,
        waiting=Receipt.objects.get(tool_run_id="tr_invoice_4").pk,
        muted_until=muted_until,
        rejected=rejected.pk,
    )


# --- what the pages say, in the walk's language ----------------------------------------------


def _t(language: str, message: str, **values: Any) -> str:
    with translation.override(language):
        text = gettext(message)
    return text % values if values else text


def _n(language: str, singular: str, plural: str, number: int, **values: Any) -> str:
    with translation.override(language):
        return ngettext(singular, plural, number) % values


def _verdict(language: str, lane: str) -> str:
    return _t(language, {
        "retry_safe": "yes, with backoff",
        "reconcile_first": "no: look up the status first",
        "input_stale": "no: refresh the inputs",
    }[lane])  # fmt: skip


@dataclass
class Walk:
    """One person's walk: their tab, language, zone and width, and what each page left."""

    tab: Any
    base: str
    language: str
    zone: str
    width: int
    world: World
    english: dict[str, list[str]]

    def go(self, path: str) -> None:
        response = self.tab.goto(f"{self.base}{path}")
        assert response is not None and response.status == 200, (path, response and response.status)

    def t(self, message: str, **values: Any) -> str:
        return _t(self.language, message, **values)

    @property
    def abbreviation(self) -> str:
        return str(timezone.now().astimezone(zoneinfo.ZoneInfo(self.zone)).tzname())

    def page_done(self, name: str) -> None:
        """Every page: its times in the person's zone, the zone on hover; on a phone no
        sideways scroll; in Korean no English left; a screenshot."""
        self.times_in_zone()
        fits(self.tab)
        shot(self.tab, f"on-call-{name}-{self.width}-{self.language}")
        if self.language == "ko":
            self.english[name] = english_left(self.tab)

    def times_in_zone(self) -> None:
        """Each <time> is written in the person's zone (its offset there, on that date: a
        mute that ends after a change of summer time has the other one) and says the
        zone's short name and name on hover."""
        place = zoneinfo.ZoneInfo(self.zone)
        times = self.tab.locator("main time").evaluate_all(
            "all => all.map(t => [t.dateTime, t.title])"
        )
        for value, title in times:
            moment = datetime.fromisoformat(value)
            there = moment.astimezone(place)
            assert moment.utcoffset() == there.utcoffset(), (self.tab.url, value)
            assert title.endswith(f" {there.tzname()} ({self.zone})"), (self.tab.url, title)


# Which of these elements are drawn over one another: "text | text" for each such pair.
OVERLAPS = """elements => {
  const boxes = elements.map(e => [e.textContent.trim().slice(0, 30), e.getBoundingClientRect()]);
  const found = [];
  boxes.forEach(([a, r], i) => boxes.slice(i + 1).forEach(([b, s]) => {
    if (r.left < s.right - 0.5 && s.left < r.right - 0.5
        && r.top < s.bottom - 0.5 && s.top < r.bottom - 0.5) found.push(`${a} | ${b}`);
  }));
  return found;
}"""


# --- the points --------------------------------------------------------------------------------


def _three_in_the_morning(walk: Walk) -> None:
    """What is failing in production now, and is it safe to retry? The first screen, no
    click, nothing scrolled."""
    tab = walk.tab
    assert tab.url == f"{walk.base}/"
    assert tab.evaluate("window.scrollY") == 0
    row = tab.locator("tr.reason").first
    expect(row).to_contain_text("http_5xx")
    expect(row.locator("a.code", has_text="http_5xx")).to_be_in_viewport(ratio=1)
    # Production only (Quality Lab fails more, on purpose), and the page says so.
    expect(tab.locator("#source-note")).to_be_in_viewport()
    for lane in ("retry_safe", "reconcile_first"):
        verdict = row.locator(f"td.retryable .verdict-{lane}")
        expect(verdict).to_have_text(_verdict(walk.language, lane))
        expect(verdict).to_be_in_viewport(ratio=1)
    # Readable: no lane, answer or status is drawn over another (a phone's stacked row).
    boxes = row.locator(".pill[class*=lane-], td.retryable .verdict, td.retryable .num, td.status")
    assert tab.evaluate(OVERLAPS, boxes.element_handles()) == []
    shot(tab, f"on-call-3am-{walk.width}-{walk.language}", full_page=False)


def _point_4_the_first_screen_is_now(walk: Walk) -> None:
    tab = walk.tab
    note = tab.locator("#window-note")
    expect(note).to_contain_text(walk.t("Showing the last 60 minutes: something failed in them."))
    expect(note.locator("a")).to_have_attribute("href", "/?window=24h")
    expect(tab.locator("select[name=window]")).to_have_value("1h")
    # Earlier today's biggest failure is not on it.
    expect(tab.locator("tr.reason", has_text="network_error")).to_have_count(0)


def _point_3_tests_never_page_on_call(walk: Walk) -> None:
    """On the first screen: Quality Lab's failures are not in the default view."""
    tab = walk.tab
    expect(tab.locator("#source-note")).to_contain_text(
        walk.t("Showing production: Quality Lab runs are hidden")
    )
    expect(tab.locator("select[name=source]")).to_have_value("production")
    expect(tab.locator("tr.reason", has_text="not_retrieved")).to_have_count(0)


def _point_1_safe_to_retry_on_the_list(walk: Walk) -> None:
    tab = walk.tab
    row = tab.locator("tr.reason", has_text="http_5xx")
    cell = row.locator("td.retryable")
    # The share within the window (6 of 8 records are in getOrder's retry_safe group),
    # labelled; then each answer with its groups.
    share = cell.locator("span.num")
    expect(share).to_have_text("75%")
    expect(share).to_have_attribute(
        "title", walk.t("%(share)s of the window's failures are safe to retry", share="75%")
    )
    answers = cell.locator("ul.verdicts li")
    expect(answers).to_have_count(2)
    expect(answers.nth(0)).to_contain_text(_verdict(walk.language, "retry_safe"))
    expect(answers.nth(0)).to_contain_text("getOrder")
    expect(answers.nth(1)).to_contain_text(_verdict(walk.language, "reconcile_first"))
    expect(answers.nth(1)).to_contain_text("createInvoice")
    # A row of one group says its one answer.
    detail = tab.locator("tr.reason", has_text="unsatisfied_field").locator("td.retryable")
    expect(detail).to_have_text(_verdict(walk.language, "input_stale"))

    # The lane explains itself on hover and on keyboard focus.
    pill = row.locator(".pill.lane-reconcile_first")
    meaning = walk.t(taxonomy.LANE_INFO["reconcile_first"].default_action)
    expect(pill).to_have_attribute("data-tip", meaning)
    expect(pill).to_have_attribute("aria-description", meaning)
    tip = "e => getComputedStyle(e, '::after').content"
    assert pill.evaluate(tip) == "none"
    pill.hover()
    assert pill.evaluate(tip) == f'"{meaning}"'
    _tip_on_screen(walk, pill)
    tab.mouse.move(0, 0)
    assert pill.evaluate(tip) == "none"
    pill.focus()
    expect(pill).to_be_focused()
    assert pill.evaluate(tip) == f'"{meaning}"'
    _tip_on_screen(walk, pill)
    pill.blur()


# Where a pill's shown meaning (its ::after) lies across the screen: [left, right].
TIP_SPAN = """pill => {
  const tip = getComputedStyle(pill, "::after");
  const left = parseFloat(tip.left)
    + (tip.position === "fixed" ? 0 : pill.getBoundingClientRect().left);
  return [left, left + parseFloat(tip.width)];
}"""


def _tip_on_screen(walk: Walk, pill: Any) -> None:
    """The meaning is read whole: inside the screen's width, the page not widened by it."""
    left, right = pill.evaluate(TIP_SPAN)
    assert left >= 0 and right <= walk.width, (left, right)
    fits(walk.tab)


def _point_2_groups_on_the_reason_view(walk: Walk) -> None:
    """On the first screen: the new group of an older reason is flagged; the row of two
    groups opens their list (Enter, not silently the largest)."""
    tab = walk.tab
    row = tab.locator("tr.reason", has_text="http_5xx")
    flag = row.locator(".pill.flag-new")
    expect(flag).to_have_text(
        _n(walk.language, "%(count)s new group", "%(count)s new groups", 1, count=1)
    )
    window = walk.t("last 60 minutes")
    expect(flag).to_have_attribute("title", walk.t("first seen in the %(window)s", window=window))
    # A wrapped list of tools never starts a line with a comma (point 10).
    expect(row.locator("td.tools span.nowrap")).to_have_text(["getOrder,", "createInvoice"])
    # Row checkboxes (point 5): one per row.
    expect(tab.locator("input.choose-row")).to_have_count(tab.locator("tr.reason").count())


def _point_2_a_row_of_groups_opens_their_list(walk: Walk) -> None:
    tab = walk.tab
    tab.keyboard.press("j")
    row = tab.locator("tr.reason").first
    expect(row).to_have_class(re.compile("is-current"))
    expect(row).to_contain_text("http_5xx")
    tab.keyboard.press("Enter")
    expect(tab).to_have_url(re.compile(r"/\?stage=execute&reason=http_5xx$"))
    groups = tab.locator("#results ul.group-list li")
    expect(groups).to_have_count(2)
    expect(groups.nth(0)).to_contain_text("getOrder")
    expect(groups.nth(1)).to_contain_text("createInvoice")
    walk.page_done("reason-groups")


def _point_2_the_group_view(walk: Walk) -> None:
    """One row per group, sorted by last seen with the value shown (in the person's zone,
    on hover), the new group flagged, each group's answer; the muted group's end."""
    tab = walk.tab
    walk.go("/?view=groups&sort=last_seen&status=all")
    table = tab.locator("#groups-view")
    rows = table.locator("tr.group-row")
    expect(rows).to_have_count(4)
    expect(rows.nth(0)).to_have_attribute("data-name", "http_5xx · getOrder · shop")  # 2 min ago
    for index in range(4):
        value = rows.nth(index).locator(".sort-value time")
        expect(value).to_be_visible()
        expect(value).to_have_text(re.compile(r"\d"))
    created = _group_row(table, "createInvoice")
    with translation.override(walk.language):
        new = pgettext("reason row", "new")
    expect(created.locator(".pill.flag-new")).to_have_text(new)
    expect(_group_row(table, "getOrder").locator(".flag-new")).to_have_count(0)
    expect(created.locator(".verdict")).to_have_text(_verdict(walk.language, "reconcile_first"))
    # A mute's end in the list (point 6), in the person's zone.
    _mute_end(walk, _group_row(table, "sendInvoiceEmail").locator(".mute-end"))
    check_table(table, walk.width)  # point 9: the group view stacks on a phone too
    walk.page_done("group-view")


def _group_row(table: Any, tool: str) -> Any:
    """The group view's row of this tool (in the collection shop)."""
    return table.locator(f"tr.group-row[data-name$=' · {tool} · shop']")


def _mute_end(walk: Walk, end: Any) -> None:
    moment = end.locator("time")
    expect(moment).to_contain_text("09:00")
    shown = datetime.fromisoformat(moment.get_attribute("datetime") or "")
    assert shown == walk.world.muted_until, (shown, walk.world.muted_until)
    zone = f" {walk.world.muted_until.tzname()} ({walk.zone})"
    expect(moment).to_have_attribute("title", re.compile(rf"{re.escape(zone)}$"))


def _point_1_a_reconcile_first_group_links_its_receipts(walk: Walk) -> None:
    """From the list of http_5xx's groups to createInvoice's page: the run waiting for a
    status lookup, linked to the receipts page's form."""
    tab = walk.tab
    walk.go("/?stage=execute&reason=http_5xx")
    tab.locator("ul.group-list a", has_text="createInvoice").click()
    expect(tab).to_have_url(re.compile(rf"/triage/groups/{walk.world.create_invoice}/"))
    lookup = tab.locator("#reconcile-lookup")
    expect(lookup).to_contain_text(
        _n(
            walk.language,
            "Look up the status first: %(runs)s run waits for it.",
            "Look up the status first: %(runs)s runs wait for it.",
            1,
            runs=1,
        )
    )
    link = lookup.locator("a", has_text="tr_invoice_4")
    expect(link).to_have_attribute("href", f"/receipts/#receipt-{walk.world.waiting}")

    # Point 10: "API called" said once; "Same reason elsewhere" counts all time, and says so.
    info = tab.locator("dt", has_text=walk.t("API called")).locator(
        "xpath=following-sibling::dd[1]"
    )
    said = walk.t("yes")
    expect(info).to_have_text(said if said == "yes" else f"{said} yes")
    if said != "yes":
        expect(info.locator(".code")).to_have_text("yes")
    siblings = tab.locator(".card", has_text=walk.t("Same reason elsewhere")).locator("table")
    expect(siblings.locator("th.num")).to_have_text(walk.t("records, all time"))
    expect(siblings.locator("tr", has_text="getOrder").locator("td.num")).to_have_text("7")

    # Point 9: the records stack on a phone, the lane whole.
    records = tab.locator("#records table")
    check_table(records, walk.width)
    lane = records.locator(".pill.lane-reconcile_first").first
    lane.scroll_into_view_if_needed()
    assert lane.evaluate("e => e.scrollWidth <= e.clientWidth"), "the lane's text is cut"
    walk.page_done("group-reconcile")

    link.click()
    expect(tab).to_have_url(re.compile(rf"/receipts/#receipt-{walk.world.waiting}$"))
    receipt = tab.locator(f"#receipt-{walk.world.waiting}")
    expect(receipt).to_contain_text("tr_invoice_4")
    expect(receipt.locator(".pill")).to_have_text("reconcile_first")
    expect(receipt.locator("form.reconcile input[name=finding][value=not_applied]")).to_be_visible()
    expect(receipt.locator("form.reconcile button")).to_be_in_viewport()
    walk.page_done("receipts")


def _point_1_no_receipts_said_plainly_and_6_mute_end(walk: Walk) -> None:
    """A reconcile_first group whose runtime sends no receipts says so, and what to send;
    its mute says when it ends, in the status and in the history."""
    tab = walk.tab
    walk.go(f"/triage/groups/{walk.world.send_mail}/")
    lookup = tab.locator("#reconcile-lookup")
    for field in ("receipt", "tool_run_id", "execution_state", "idempotency_key"):
        expect(lookup.locator("code", has_text=re.compile(rf"^{field}$"))).to_have_count(1)
    expect(lookup.locator("a")).to_have_count(0)
    _mute_end(walk, tab.locator("dl.kv").first.locator("dd", has_text="09:00"))
    _mute_end(walk, tab.locator(".card li .mute-end").first)
    walk.page_done("group-no-receipts")


def _point_5_bulk_actions_on_chosen_rows(walk: Walk) -> None:
    tab = walk.tab
    walk.go("/?sort=last_seen")
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    tab.on("dialog", answer)
    bar = tab.locator("#bulk-form")
    tab.locator("input.choose-row[value='synthesize/unsatisfied_field']").check()
    expect(bar.locator(".bulk-chosen")).to_have_text(
        walk.t("Chosen rows: {rows}, groups: {count}.").format(rows=1, count=1)
    )
    expect(bar.locator(".bulk-scope")).to_be_hidden()
    # Assigning to nobody is refused before any question.
    bar.locator("select[name=action]").select_option("assign")
    bar.locator("button[type=submit]").first.click()
    expect(bar.locator(".bulk-refused")).to_have_text(walk.t("Choose whom to assign."))
    assert asked == []
    assert FailureGroup.objects.get(pk=walk.world.detail).status == GroupStatus.OPEN
    shot(tab, f"on-call-bulk-refused-{walk.width}-{walk.language}")

    bar.locator("select[name=action]").select_option("acknowledge")
    bar.locator("button[type=submit]").first.click()
    expect(tab.locator(".msg-success")).to_be_visible()
    # One question, about the chosen row's one group.
    question = re.escape(walk.t("Apply {action} to the chosen rows (groups: {count})?"))
    question = question.replace(r"\{action\}", ".+").replace(r"\{count\}", "1")
    assert len(asked) == 1 and re.fullmatch(question, asked[0]), asked
    statuses = dict(FailureGroup.objects.values_list("tool", "status"))
    assert statuses["getOrderDetail"] == GroupStatus.ACKNOWLEDGED
    assert statuses["getOrder"] == statuses["createInvoice"] == GroupStatus.OPEN
    # Undo is offered on the view the action came from, and returns to it.
    expect(tab).to_have_url(f"{walk.base}/?sort=last_seen")
    undo = tab.locator("form[action*='/undo'] button")
    expect(undo).to_be_visible()
    undo.click()
    expect(tab).to_have_url(f"{walk.base}/?sort=last_seen")
    expect(tab.locator(".msg-success")).to_be_visible()
    expect(undo).to_have_count(0)
    assert FailureGroup.objects.get(pk=walk.world.detail).status == GroupStatus.OPEN

    # Once the view changes, the offer is gone.
    tab.locator("input.choose-row[value='synthesize/unsatisfied_field']").check()
    bar.locator("select[name=action]").select_option("acknowledge")
    bar.locator("button[type=submit]").first.click()
    expect(undo).to_be_visible()
    tab.select_option("select[name=sort]", "count")
    expect(tab).to_have_url(re.compile(r"sort=count"))
    expect(undo).to_have_count(0)
    tab.remove_listener("dialog", answer)
    walk.page_done("bulk")


def _points_3_and_7_alerts(walk: Walk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new rule starts on production; an operator pastes an https:// URL and gets a
    webhook channel; the delivery log links its group."""
    tab = walk.tab
    monkeypatch.setattr(alert_channels, "resolver", lambda host, port: [PUBLIC_ADDRESS])
    walk.go("/alerts/")
    rules = tab.locator("#rules details")
    rules.locator("summary").click()
    expect(rules.locator("select[name=source]")).to_have_value("production")

    log = tab.locator("#delivery-log")
    about = log.locator(f"a[href='/triage/groups/{walk.world.create_invoice}/']")
    expect(about).to_have_count(1)

    new = tab.locator("#channels details")
    new.locator("summary").click()
    kind = new.locator("select[name=kind]")
    expect(kind).to_have_value("auto")
    expect(kind.locator("option[value=email]")).to_have_count(0)  # admins add email
    new.locator("input[name=name]").fill("ops_hook")
    new.locator("input[name=target]").fill(WEBHOOK_URL)
    new.locator("button.primary").click()
    expect(tab.locator(".msg-success")).to_be_visible()
    expect(tab.locator("#signing-secret")).to_be_visible()
    channel = Channel.objects.get(name="ops_hook")
    assert channel.kind == ChannelKind.WEBHOOK
    row = tab.locator("#channels tr", has_text="ops_hook")
    with translation.override(walk.language):
        expect(row).to_contain_text(str(ChannelKind.WEBHOOK.label))
    expect(row.locator(f"form[action='/alerts/channels/{channel.pk}/test'] button")).to_be_visible()
    walk.page_done("alerts")

    tab.locator(f"#delivery-log a[href='/triage/groups/{walk.world.create_invoice}/']").click()
    expect(tab).to_have_url(re.compile(rf"/triage/groups/{walk.world.create_invoice}/$"))
    expect(tab.locator("h1")).to_contain_text("createInvoice")


def _points_6_9_10_learning(walk: Walk) -> None:
    """Learning's evidence stacks on a phone; absolute times beside relative ones; a
    rejected suggestion can be reopened."""
    tab = walk.tab
    walk.go("/learning/")
    queue = tab.locator("#queue table.learning-queue")
    check_table(queue, walk.width)
    preference = Suggestion.objects.get(type="target_preference")
    block = tab.locator(f"#suggestion-{preference.pk}")
    evidence = block.locator(".evidence-split")
    evidence.scroll_into_view_if_needed()
    box = evidence.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= walk.width, box
    for details in tab.locator("#queue details").all():
        details.evaluate("e => { e.open = true; }")
    attempts = block.locator("table.attempts")
    if walk.width == PHONE:
        assert_stacked(attempts)
    ago = "시간 전" if walk.language == "ko" else "hours ago"
    expect(attempts.locator("time").last).to_have_text(re.compile(rf"\d\d:\d\d \(5\s?{ago}\)"))
    rejected = tab.locator(f"#suggestion-{walk.world.rejected}")
    expect(rejected.locator("button", has_text=walk.t("Reopen"))).to_be_visible()
    walk.page_done("learning")


# --- the walk ----------------------------------------------------------------------------------


WALKS = [
    pytest.param(DESK, "en", SEOUL, id="1280-en-Seoul"),
    pytest.param(PHONE, "en", SEOUL, id="390-en-Seoul"),
    pytest.param(DESK, "ko", LOS_ANGELES, id="1280-ko-LosAngeles"),
    pytest.param(PHONE, "ko", LOS_ANGELES, id="390-ko-LosAngeles"),
]


@pytest.mark.parametrize(("width", "language", "zone"), WALKS)
def test_on_call_walks_every_point_of_the_round(
    operator: Callable[..., Any],
    live_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    width: int,
    language: str,
    zone: str,
) -> None:
    world = _build(zone)
    tab = operator(width=width, zone=zone, language=language, roles=("operator", "reviewer"))
    tab.set_viewport_size({"width": width, "height": 844 if width == PHONE else 900})
    walk = Walk(tab, live_server.url, language, zone, width, world, english={})
    assert tab.locator("html").get_attribute("lang") == language
    expect(tab.locator("#time-zone")).to_contain_text(walk.abbreviation)

    _three_in_the_morning(walk)
    _point_4_the_first_screen_is_now(walk)
    _point_3_tests_never_page_on_call(walk)
    _point_1_safe_to_retry_on_the_list(walk)
    _point_2_groups_on_the_reason_view(walk)
    walk.page_done("first-screen")
    _point_2_a_row_of_groups_opens_their_list(walk)
    _point_2_the_group_view(walk)
    _point_1_a_reconcile_first_group_links_its_receipts(walk)
    _point_1_no_receipts_said_plainly_and_6_mute_end(walk)
    _points_3_and_7_alerts(walk, monkeypatch)
    _points_6_9_10_learning(walk)
    _point_5_bulk_actions_on_chosen_rows(walk)
    # Point 8: no English left on any Korean page of the walk, outside codes and names.
    left = {name: words for name, words in walk.english.items() if words}
    assert not left, "\n".join(f"{name}: {words}" for name, words in left.items())
