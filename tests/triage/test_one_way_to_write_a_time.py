"""One way to write a time: every page of triage, the group, receipts, ingestion, alerts and
learning writes a moment through the `moment` filter, in the person's zone and language, with
the full date, time and zone on hover; mutes say when they end in the list and the history;
the presets include 09:00 tomorrow on the person's clock."""

from __future__ import annotations

import re
import string
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.db import transaction
from django.template import Context, Template
from django.utils import dateformat, timezone, translation
from django.utils.formats import get_format

from alerts.models import Delivery
from tests.factories import failure_item
from tests.security import test_url_matrix as matrix
from tests.triage.test_triage_views import ingest
from triage.forms import mute_preset_end
from triage.models import FailureGroup, GroupEvent, GroupStatus
from triage.timezones import (
    _SHORT_WEEKDAYS,
    COOKIE,
    DESK_FORMAT_CHARACTERS,
    MOMENT_FORMATS,
    abbreviation,
    local_span,
    moment_text,
    moment_title,
    moment_writer,
    relative_text,
    tomorrow_morning,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SEOUL = zoneinfo.ZoneInfo("Asia/Seoul")
LOS_ANGELES = zoneinfo.ZoneInfo("America/Los_Angeles")
# Saturday 5 December 2026, 09:41:07 UTC: 18:41:07 in Seoul, 01:41:07 in Los Angeles.
MOMENT = datetime(2026, 12, 5, 9, 41, 7, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _english_after_korean_pages() -> Iterator[None]:
    """A page read in Korean leaves Korean active in this thread: the next test reads English."""
    yield
    translation.activate(settings.LANGUAGE_CODE)


def _render(source: str, **context: Any) -> str:
    return Template("{% load desk %}" + source).render(Context(context))


# --- the filter and the texts it is made of -------------------------------------------------


@pytest.mark.parametrize(
    ("language", "zone", "style", "text"),
    [
        ("en", SEOUL, "short", "Dec 5 18:41"),
        ("ko", SEOUL, "short", "12월 5일 18:41"),
        ("en", SEOUL, "weekday", "Sat Dec 5 18:41"),
        # Korean writes the short weekday after the date, in brackets.
        ("ko", SEOUL, "weekday", "12월 5일 (토) 18:41"),
        ("ko", LOS_ANGELES, "weekday", "12월 5일 (토) 01:41"),
        ("en", LOS_ANGELES, "seconds", "Dec 5 01:41:07"),
        ("ko", SEOUL, "long", "2026년 12월 5일 18:41"),
        ("en", SEOUL, "time", "18:41:07"),
        ("ko", SEOUL, "day", "12월 5일"),
    ],
)
def test_a_moment_is_written_in_the_persons_zone_and_language(
    language: str, zone: zoneinfo.ZoneInfo, style: str, text: str
) -> None:
    with translation.override(language), timezone.override(zone):
        assert moment_text(MOMENT, style) == text


class _DjangosWay(dateformat.DateFormat):
    """Django's date formatting as it is (its test of an ambiguous moment included), with the
    desk's short weekday."""

    data: datetime

    def D(self) -> str:
        return str(_SHORT_WEEKDAYS[self.data.weekday()])


@pytest.mark.parametrize("language", [code for code, _name in settings.LANGUAGES])
def test_a_moment_is_written_as_djangos_date_format_writes_it(language: str) -> None:
    """moment_text cuts each format once and skips Django's test of an ambiguous moment,
    which only the zone's format characters read: the desk's formats name none of them,
    and every moment reads as Django writes it, across a change of daylight saving time
    (Berlin's 02:00-03:00 of 25 October 2026 happens twice) and on a half-hour zone."""
    with translation.override(language):
        formats = {style: str(get_format(setting)) for style, setting in MOMENT_FORMATS.items()}
    for style, format_string in formats.items():
        characters = set(re.sub(r"\\.", "", format_string)) & set(string.ascii_letters)
        assert characters <= DESK_FORMAT_CHARACTERS, (language, style)
    berlin_fall_back = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)
    for zone in (zoneinfo.ZoneInfo("Europe/Berlin"), zoneinfo.ZoneInfo("Asia/Kolkata"), SEOUL):
        for quarter in range(0, 6 * 4):
            moment = berlin_fall_back + timedelta(minutes=15 * quarter, seconds=7)
            with translation.override(language), timezone.override(zone):
                local = timezone.localtime(moment)
                for style, format_string in formats.items():
                    expected = _DjangosWay(local).format(format_string)
                    assert moment_text(moment, style) == expected, (zone, moment, style)


@pytest.mark.parametrize("language", [code for code, _name in settings.LANGUAGES])
def test_one_writer_writes_many_moments_as_each_is_written_alone(language: str) -> None:
    """moment_writer keeps a date's words (its month's name, its weekday's) per local day:
    one writer over three days of hours, across Berlin's change of daylight saving time and
    each zone's midnights, writes every moment as Django's date format writes it, its zone's
    short name after it when asked."""
    start = datetime(2026, 10, 23, 20, 30, tzinfo=UTC)
    for zone in (zoneinfo.ZoneInfo("Europe/Berlin"), zoneinfo.ZoneInfo("Asia/Kolkata"), SEOUL):
        with translation.override(language), timezone.override(zone):
            for style, setting in MOMENT_FORMATS.items():
                format_string = str(get_format(setting))
                plain, zoned = moment_writer(style), moment_writer(style, zone=True)
                for hour in range(72):
                    moment = start + timedelta(hours=hour)
                    expected = _DjangosWay(timezone.localtime(moment)).format(format_string)
                    assert plain(moment) == expected, (zone, moment, style)
                    assert zoned(moment) == f"{expected} {abbreviation(moment)}"


def test_the_hover_says_the_full_date_time_and_zone() -> None:
    with timezone.override(SEOUL):
        with translation.override("en"):
            assert moment_title(MOMENT) == "Sat Dec 5, 2026 18:41:07 KST (Asia/Seoul)"
            html = _render("{{ when|moment }}", when=MOMENT)
        assert html == (
            '<time datetime="2026-12-05T18:41:07+09:00" '
            'title="Sat Dec 5, 2026 18:41:07 KST (Asia/Seoul)">Dec 5 18:41</time>'
        )
        with translation.override("ko"):
            assert moment_title(MOMENT) == "2026년 12월 5일 (토) 18:41:07 KST (Asia/Seoul)"
    with timezone.override(LOS_ANGELES), translation.override("en"):
        # The short name follows daylight saving time; the zone's name stays.
        assert moment_title(MOMENT).endswith("01:41:07 PST (America/Los_Angeles)")
        july = MOMENT.replace(month=7)
        assert moment_title(july).endswith("02:41:07 PDT (America/Los_Angeles)")
    with timezone.override(zoneinfo.ZoneInfo("UTC")), translation.override("en"):
        assert moment_title(MOMENT) == "Sat Dec 5, 2026 09:41:07 UTC"


def test_a_window_reads_in_the_persons_language() -> None:
    hour_later = MOMENT + timedelta(hours=1)
    with timezone.override(SEOUL):
        with translation.override("en"):
            assert local_span(MOMENT, hour_later) == "Dec 5, 18:41-19:41 KST"
        with translation.override("ko"):
            assert local_span(MOMENT, hour_later) == "12월 5일 18:41-19:41 KST"
            assert local_span(MOMENT, MOMENT + timedelta(hours=6)) == (
                "12월 5일 18:41 - 12월 6일 00:41 KST"
            )


def test_relative_times_and_both() -> None:
    now = MOMENT
    with translation.override("en"):
        assert relative_text(now - timedelta(seconds=20), now) == "just now"
        # A number and its unit never part at the end of a line.
        assert relative_text(now - timedelta(minutes=11, seconds=5), now) == "11\xa0minutes ago"
        assert relative_text(now + timedelta(hours=3, minutes=1), now) == "in 3\xa0hours"
    with translation.override("ko"):
        # No space before the unit nor before 전/후.
        assert relative_text(now - timedelta(minutes=11), now) == "11분 전"
        assert relative_text(now + timedelta(hours=3, minutes=1), now) == "3시간 후"
        assert relative_text(now - timedelta(seconds=5), now) == "방금"
    with (
        translation.override("en"),
        timezone.override(SEOUL),
        mock.patch("triage.timezones.timezone.now", return_value=now + timedelta(minutes=11)),
    ):
        both = _render('{{ when|moment:"both" }}', when=MOMENT)
        assert re.fullmatch(
            r'<time datetime="[^"]+" title="[^"]+">Dec 5 18:41 \(11\xa0minutes ago\)</time>', both
        )
        relative = _render('{{ when|moment:"relative" }}', when=MOMENT)
        assert ">11\xa0minutes ago</time>" in relative and "KST (Asia/Seoul)" in relative
        # A moment kept as text (a history row's data) is read; none writes nothing.
        assert _render("{{ when|moment }}", when=MOMENT.isoformat()).endswith(">Dec 5 18:41</time>")
        assert _render("{{ when|moment }}", when=None) == ""
        assert _render('{{ when|moment:"title" }}', when=MOMENT) == (
            "Sat Dec 5, 2026 18:41:07 KST (Asia/Seoul)"
        )


def test_the_templates_write_times_only_through_the_filter() -> None:
    """The other ways (|date, |timesince, |naturaltime, |timeuntil) are gone from the pages of
    triage, receipts, ingestion, alerts and learning."""
    other_ways = re.compile(r"\|\s*(date|time|timesince|timeuntil|naturaltime|naturalday)\b")
    found = {
        str(path.relative_to(ROOT)): other_ways.findall(path.read_text(encoding="utf-8"))
        for folder in ("triage", "alerts", "learning")
        for path in (ROOT / "templates" / folder).rglob("*.html")
    }
    assert not {path: ways for path, ways in found.items() if ways}


# --- every time of every page, in Seoul ---------------------------------------------------

# Hours and minutes outside a <time> are only allowed where the zone is written beside them
# (a window's span, "as of 18:41:07 KST", a preset's end).
_TIME_ELEMENT = re.compile(r'<time datetime="([^"]+)" title="([^"]+)">(.*?)</time>', re.S)
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b(?![^<]{0,40}\b(?:KST|UTC)(?![A-Za-z]))")
_ISO_DAY = re.compile(r"\b20\d\d-\d\d-\d\d\b")
# An example of what a person may type, not a time shown.
EXAMPLES = {"/preferences/": {"19:03"}}


def _visible(html: str) -> str:
    """The page's text outside script, style, code and the times' own elements."""
    html = re.sub(r"<(script|style|pre|code)\b.*?</\1>", " ", html, flags=re.S)
    html = _TIME_ELEMENT.sub(" ", html)
    html = re.sub(r'\s(?:data-[\w-]+|value|href|hx-[\w-]+|datetime)="[^"]*"', " ", html)
    return html


@pytest.mark.parametrize("language", ["en", "ko"])
def test_every_page_writes_each_time_one_way_with_the_zone_on_hover(
    client_as: Any, language: str
) -> None:
    # The URL matrix's world derives its suggestions when its ingest commits: here, at once.
    def at_once(callback: Any, using: Any = None, robust: bool = False) -> None:
        callback()

    with (
        mock.patch("qualitylab.services._send"),
        mock.patch.object(transaction, "on_commit", side_effect=at_once),
    ):
        world = matrix._build_world()
    ids = world.ids
    group = FailureGroup.objects.get(pk=ids["group"])
    Delivery.objects.create(
        rule_id=ids["alert_rule"], channel_id=ids["alert_channel"], idempotency_key="times-1",
        summary="new group", status="sent", attempts=1, answer_code="250",
        sent_at=timezone.now(),
    )  # fmt: skip
    client = client_as("admin")
    client.cookies[COOKIE] = "Asia/Seoul"
    client.cookies["django_language"] = language
    client.post(f"/triage/groups/{group.pk}/act", {"action": "mute", "mute_for": "tomorrow"})
    pages = [
        "/?window=30d&status=all&source=any",
        "/?window=30d&status=all&source=any&view=groups",
        "/?window=30d&status=all&source=any&sort=last_seen",
        f"/triage/groups/{group.pk}/",
        "/receipts/",
        "/ingestion/",
        f"/ingestion/?batch={ids['batch']}",
        "/alerts/",
        "/learning/",
        f"/learning/suggestions/{ids['suggestion']}/",
        "/preferences/",
    ]
    seen = 0
    for path in pages:
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        assert f'<html lang="{language}"' in html, path
        for moment, title, _text in _TIME_ELEMENT.findall(html):
            seen += 1
            assert moment.endswith("+09:00"), (path, moment)
            assert title.endswith("KST (Asia/Seoul)"), (path, title)
            # The hover's date is the element's date: the same moment, in Seoul.
            local = datetime.fromisoformat(moment)
            day = (
                f"{local.month}월 {local.day}일" if language == "ko" else f"{local:%b} {local.day},"
            )
            assert day in title, (path, title)
        visible = _visible(html)
        clocks = [clock for clock in _CLOCK.findall(visible) if clock not in EXAMPLES.get(path, ())]
        assert not clocks, (path, clocks[:5])
        assert not _ISO_DAY.findall(visible), (path, _ISO_DAY.findall(visible)[:5])
    assert seen > 20


# --- mutes: their end in the list and the history; 09:00 tomorrow -----------------------------


@pytest.fixture
def muted(ingest_client: Any, client_as: Any) -> tuple[FailureGroup, Any]:
    ingest(ingest_client, [failure_item(occurred_at=timezone.now().isoformat())])
    group = FailureGroup.objects.get()
    client = client_as("operator")
    client.cookies[COOKIE] = "America/Los_Angeles"
    response = client.post(
        f"/triage/groups/{group.pk}/act", {"action": "mute", "mute_for": "tomorrow"}
    )
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.status == GroupStatus.MUTED
    return group, client


def test_a_mute_until_09_00_tomorrow_ends_then_on_the_persons_clock(
    muted: tuple[FailureGroup, Any],
) -> None:
    group, _client = muted
    assert group.muted_until is not None
    local = group.muted_until.astimezone(LOS_ANGELES)
    today = timezone.now().astimezone(LOS_ANGELES).date()
    assert (local.date(), local.hour, local.minute) == (today + timedelta(days=1), 9, 0)


@pytest.mark.parametrize("view", ["", "&view=groups"])
def test_the_list_says_when_a_mute_ends(muted: tuple[FailureGroup, Any], view: str) -> None:
    group, client = muted
    html = client.get(f"/?window=24h&status=all{view}").content.decode()
    (end,) = re.findall(
        r'<span class="mute-end small muted">until (<time [^>]+>[^<]+</time>)', html
    )
    assert group.muted_until is not None
    ends = group.muted_until.astimezone(LOS_ANGELES)
    assert f'datetime="{ends.isoformat()}"' in end
    assert f">{ends:%a %b} {ends.day} 09:00</time>" in end
    assert "(America/Los_Angeles)" in end


def test_a_mute_for_records_says_so_in_the_list(ingest_client: Any, client_as: Any) -> None:
    ingest(ingest_client, [failure_item(occurred_at=timezone.now().isoformat())])
    group = FailureGroup.objects.get()
    client = client_as("operator")
    client.post(f"/triage/groups/{group.pk}/act", {"action": "mute", "mute_count": "5"})
    html = client.get("/?window=24h&status=all").content.decode()
    assert '<span class="mute-end small muted">for 5 more records</span>' in html


def test_the_history_says_when_each_mute_ends(muted: tuple[FailureGroup, Any]) -> None:
    group, client = muted
    client.post(f"/triage/groups/{group.pk}/act", {"action": "mute", "mute_count": "3"})
    html = client.get(f"/triage/groups/{group.pk}/").content.decode()
    history = html.split("<h3>History</h3>")[1]
    assert group.muted_until is not None
    ends = group.muted_until.astimezone(LOS_ANGELES)
    until = re.escape(f'<span class="mute-end">until <time datetime="{ends.isoformat()}"')
    assert re.search(rf"mute</strong> \(open → muted\) {until}", history)
    assert '<span class="mute-end">for 3 new records</span>' in history
    assert GroupEvent.objects.filter(group=group, action="mute").count() == 2


@pytest.mark.parametrize(
    ("zone", "now_local", "ends_local"),
    [
        # Seoul keeps one offset all year.
        ("Asia/Seoul", datetime(2026, 12, 5, 23, 30), datetime(2026, 12, 6, 9, 0)),
        ("Asia/Seoul", datetime(2026, 12, 5, 0, 10), datetime(2026, 12, 6, 9, 0)),
        # Los Angeles, the night daylight saving time ends (1 November 2026): 09:00 PST...
        ("America/Los_Angeles", datetime(2026, 10, 31, 20, 0), datetime(2026, 11, 1, 9, 0)),
        # ...and the night it starts (8 March 2026): 09:00 PDT.
        ("America/Los_Angeles", datetime(2026, 3, 7, 22, 0), datetime(2026, 3, 8, 9, 0)),
        # Across a month and a year.
        ("America/Los_Angeles", datetime(2026, 12, 31, 18, 0), datetime(2027, 1, 1, 9, 0)),
    ],
)
def test_09_00_tomorrow_is_on_the_local_clock_across_daylight_saving_time(
    zone: str, now_local: datetime, ends_local: datetime
) -> None:
    place = zoneinfo.ZoneInfo(zone)
    now = now_local.replace(tzinfo=place)
    with timezone.override(place):
        ends = tomorrow_morning(now)
        assert mute_preset_end("tomorrow", now) == ends
    assert ends == ends_local.replace(tzinfo=place)
    local = ends.astimezone(place)
    assert (local.hour, local.minute) == (9, 0)
    # Not simply 24 hours or so later: the offset at the end is the end's own.
    assert local.utcoffset() == place.utcoffset(ends_local)


def test_the_los_angeles_end_of_dst_is_a_25_hour_night() -> None:
    place = LOS_ANGELES
    now = datetime(2026, 10, 31, 8, 0, tzinfo=place)  # PDT, UTC-7
    with timezone.override(place):
        ends = tomorrow_morning(now)
    # 08:00 PDT to 09:00 PST the next day (subtracted in UTC: Python subtracts two times of
    # one zone on the wall clock).
    assert ends.astimezone(UTC) - now.astimezone(UTC) == timedelta(hours=26)
    assert ends.astimezone(UTC) == datetime(2026, 11, 1, 17, 0, tzinfo=UTC)


def test_the_preset_is_offered_with_its_end(muted: tuple[FailureGroup, Any]) -> None:
    group, client = muted
    html = client.get(f"/triage/groups/{group.pk}/").content.decode()
    with timezone.override(LOS_ANGELES):
        ends = tomorrow_morning(timezone.now()).astimezone(LOS_ANGELES)
    zone = "PDT" if ends.dst() else "PST"
    assert (
        f'<option value="tomorrow">until 09:00 tomorrow · ends {ends:%a %b} {ends.day} 09:00 '
        f"{zone}</option>"
    ) in html
    client.cookies["django_language"] = "ko"
    html = client.get(f"/triage/groups/{group.pk}/").content.decode()
    weekday = "월화수목금토일"[ends.weekday()]
    assert (
        f'<option value="tomorrow">내일 09:00까지 · {ends.month}월 {ends.day}일 ({weekday}) 09:00 '
        f"{zone}에 끝남</option>"
    ) in html


# --- first seen is never after last seen --------------------------------------------------------


@pytest.mark.parametrize(
    "batches",
    [
        # A record older than the group's first, sent later (a spool flushed late).
        [["2026-11-01T12:00:00Z"], ["2026-11-01T10:00:00Z"]],
        # Within one batch, out of order; then both ends moved by the next.
        [["2026-11-01T12:00:00Z", "2026-11-01T09:00:00Z"], ["2026-11-01T13:00:00Z",
                                                             "2026-11-01T08:00:00Z"]],
        # Other offsets: 12:00+09:00 is 03:00 UTC, before 10:00 UTC.
        [["2026-11-01T10:00:00+00:00"], ["2026-11-01T12:00:00+09:00"]],
        # Fractions of a second either way.
        [["2026-11-01T12:00:00.5Z"], ["2026-11-01T12:00:00Z", "2026-11-01T12:00:00.9Z"]],
    ],
)  # fmt: skip
def test_a_groups_first_seen_is_its_oldest_record_whatever_order_they_arrive_in(
    ingest_client: Any, client_as: Any, batches: list[list[str]]
) -> None:
    for batch in batches:
        ingest(ingest_client, [failure_item(occurred_at=stamp) for stamp in batch])
    group = FailureGroup.objects.get()
    stamps = [datetime.fromisoformat(stamp) for batch in batches for stamp in batch]
    assert (group.first_seen, group.last_seen) == (min(stamps), max(stamps))
    html = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    first, last = re.findall(r'<time datetime="([^"]+)"', html.split("<dt>first / last</dt>")[1])[
        :2
    ]
    assert datetime.fromisoformat(first) <= datetime.fromisoformat(last)
