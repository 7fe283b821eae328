"""Honest windows and times, the person's time zone, mute presets and the live triage page."""

from __future__ import annotations

import json
import re
import zoneinfo
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import failure_item
from tests.triage.test_triage_views import ingest, records_per_group
from triage.models import FailureGroup, FailureRecord, GroupStatus, PersonPreference
from triage.timezones import COOKIE, start_of_next_week

pytestmark = pytest.mark.django_db

SEOUL = zoneinfo.ZoneInfo("Asia/Seoul")


@pytest.fixture
def one_failure(ingest_client: APIClient) -> FailureGroup:
    ingest(ingest_client, [failure_item(occurred_at=timezone.now().isoformat())])
    return FailureGroup.objects.get()


def _seoul_client(client_as: Any, role: str = "operator") -> Any:
    client = client_as(role)
    client.cookies[COOKIE] = "Asia/Seoul"
    return client


# --- the person's zone ---------------------------------------------------------------------


def test_pages_follow_the_browser_zone_and_label_it(one_failure: Any, client_as: Any) -> None:
    response = _seoul_client(client_as, "viewer").get("/")
    html = response.content.decode()
    assert 'data-time-zone="Asia/Seoul"' in html and 'data-time-zone-source="browser"' in html
    assert "times in KST" in html
    now_in_seoul = timezone.now().astimezone(SEOUL)
    (as_of,) = re.findall(r"as of <time [^>]*>(\d\d:\d\d:\d\d)</time> KST", html)
    assert as_of.startswith((f"{now_in_seoul:%H:%M}", f"{now_in_seoul:%H}"))


def test_a_chosen_zone_wins_over_the_browser(one_failure: Any, client_as: Any) -> None:
    client = _seoul_client(client_as, "viewer")
    response = client.post("/preferences/", {"time_zone": "Europe/Berlin"})
    assert response.status_code == 302
    html = client.get("/").content.decode()
    assert 'data-time-zone="Europe/Berlin"' in html and 'data-time-zone-source="chosen"' in html
    assert "times in CET" in html or "times in CEST" in html
    # Blank follows the browser again.
    client.post("/preferences/", {"time_zone": ""})
    assert 'data-time-zone="Asia/Seoul"' in client.get("/").content.decode()
    preference = PersonPreference.objects.get()
    assert preference.time_zone == "" and preference.language == ""


@pytest.mark.parametrize(
    "cookie", ["Mars/Olympus", "../../etc/passwd", "x" * 500, "", "UTC\x00", "Asia/Seoul;"]
)
def test_a_cookie_naming_no_zone_is_the_servers_zone(
    one_failure: Any, client_as: Any, cookie: str
) -> None:
    client = client_as("viewer")
    client.cookies[COOKIE] = cookie
    response = client.get("/")
    assert response.status_code == 200
    assert 'data-time-zone="UTC"' in response.content.decode()


def test_an_unknown_zone_in_the_form_is_a_form_error(client_as: Any) -> None:
    response = client_as("viewer").post("/preferences/", {"time_zone": "Mars/Olympus"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert not PersonPreference.objects.exists()


def test_the_settings_page_offers_every_zone_and_the_browsers(client_as: Any) -> None:
    response = _seoul_client(client_as, "viewer").get("/preferences/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Your browser says Asia/Seoul." in html
    assert '<option value="America/Sao_Paulo">' in html and "follow my browser" in html


# --- windows that say what they cover ------------------------------------------------------


def test_the_1h_window_is_the_last_60_minutes_said_in_the_persons_zone(
    ingest_client: APIClient, client_as: Any
) -> None:
    now = timezone.now()
    ingest(
        ingest_client,
        [
            failure_item(occurred_at=(now - timedelta(minutes=59)).isoformat()),
            failure_item(occurred_at=(now - timedelta(minutes=61)).isoformat()),
            failure_item(occurred_at=(now - timedelta(minutes=119)).isoformat()),
        ],
    )
    response = _seoul_client(client_as, "viewer").get("/?window=1h&sort=stage")
    html = response.content.decode()
    window = response.context["window"]
    assert window.end - window.start == timedelta(minutes=60)
    start, end = window.start.astimezone(SEOUL), window.end.astimezone(SEOUL)
    span = (
        f"{start:%H:%M}-{end:%H:%M} KST"
        if start.date() == end.date()
        else f"{end:%b} {end.day} {end:%H:%M} KST"
    )
    assert "failure in the last 60 minutes" in html and span in html  # 1 failure
    (section,) = response.context["overview"].sections
    (row,) = section.rows
    assert row.count == 1  # 59 minutes ago counts; 61 minutes ago is the window before
    assert row.previous_count == 2


def test_figures_not_for_the_window_are_labelled(ingest_client: APIClient, client_as: Any) -> None:
    ingest(
        ingest_client,
        [
            failure_item(occurred_at=timezone.now().isoformat(), source=s)
            for s in ("runtime", "log")
        ],
    )
    html = client_as("viewer").get("/?window=1h").content.decode()
    assert "execution, all time" in html and "safe to retry?" in html  # the window's own answer
    assert "all time: " in html  # the source mix
    assert "24 hours, per hour" in html  # the 1h window's sparkline shows the day


def test_a_custom_window_is_read_in_the_persons_zone(
    ingest_client: APIClient, client_as: Any
) -> None:
    start = datetime(2026, 11, 20, 9, 0, tzinfo=SEOUL)
    ingest(
        ingest_client,
        [
            failure_item(occurred_at=(start + timedelta(minutes=5)).isoformat()),
            failure_item(occurred_at=(start - timedelta(minutes=5)).isoformat()),
        ],
    )
    response = _seoul_client(client_as, "viewer").get(
        "/?window=custom&since=2026-11-20T09:00&until=2026-11-20T10:00&status=all"
    )
    window = response.context["window"]
    assert window.start == start and window.end == start + timedelta(hours=1)
    assert "Nov 20, 09:00-10:00 KST" in response.content.decode()
    assert response.context["overview"].total == 1


# --- mutes: typed in the person's zone, and presets ----------------------------------------


def test_a_mute_until_typed_in_seoul_ends_then_in_seoul(one_failure: Any, client_as: Any) -> None:
    tomorrow = (timezone.now().astimezone(SEOUL) + timedelta(days=1)).date()
    typed = f"{tomorrow.isoformat()}T19:03"
    response = _seoul_client(client_as).post(
        f"/triage/groups/{one_failure.pk}/act", {"action": "mute", "muted_until": typed}
    )
    assert response.status_code == 302
    one_failure.refresh_from_db()
    assert one_failure.status == GroupStatus.MUTED
    expected = datetime.combine(tomorrow, datetime.min.time(), tzinfo=SEOUL).replace(
        hour=19, minute=3
    )
    assert one_failure.muted_until == expected
    assert one_failure.muted_until.astimezone(UTC).hour == 10  # 19:03 KST is 10:03 UTC


@pytest.mark.parametrize(("preset", "hours"), [("1h", 1), ("4h", 4), ("24h", 24)])
def test_mute_presets_end_that_long_from_now(
    one_failure: Any, client_as: Any, preset: str, hours: int
) -> None:
    before = timezone.now()
    client = _seoul_client(client_as)
    response = client.post(
        f"/triage/groups/{one_failure.pk}/act", {"action": "mute", "mute_for": preset}, follow=True
    )
    one_failure.refresh_from_db()
    assert one_failure.status == GroupStatus.MUTED and one_failure.muted_until is not None
    lasted = one_failure.muted_until - before
    assert timedelta(hours=hours) <= lasted < timedelta(hours=hours, seconds=30)
    assert "Muted until" in response.content.decode() and "KST" in response.content.decode()


def test_until_next_week_is_the_next_monday_morning_in_the_persons_zone() -> None:
    with timezone.override(SEOUL):
        # Wednesday 2026-12-02 15:00 KST -> Monday 2026-12-07 09:00 KST
        wednesday = datetime(2026, 12, 2, 15, 0, tzinfo=SEOUL)
        assert start_of_next_week(wednesday) == datetime(2026, 12, 7, 9, 0, tzinfo=SEOUL)
        # Monday 08:00 is already this week: a week later.
        monday = datetime(2026, 12, 7, 8, 0, tzinfo=SEOUL)
        assert start_of_next_week(monday) == datetime(2026, 12, 14, 9, 0, tzinfo=SEOUL)
    with timezone.override(zoneinfo.ZoneInfo("America/New_York")):
        # Across the end of daylight saving time: 09:00 EST, not 09:00 EDT.
        friday = datetime(2026, 10, 30, 12, 0, tzinfo=zoneinfo.ZoneInfo("America/New_York"))
        ends = start_of_next_week(friday)
        assert ends.astimezone(UTC) == datetime(2026, 11, 2, 14, 0, tzinfo=UTC)


def test_a_preset_and_a_time_together_are_refused(one_failure: Any, client_as: Any) -> None:
    response = _seoul_client(client_as).post(
        f"/triage/groups/{one_failure.pk}/act",
        {"action": "mute", "mute_for": "1h", "mute_count": "5"},
        follow=True,
    )
    assert "choose one" in response.content.decode()
    one_failure.refresh_from_db()
    assert one_failure.status == GroupStatus.OPEN


def test_the_presets_name_when_they_end(one_failure: Any, client_as: Any) -> None:
    html = _seoul_client(client_as).get(f"/triage/groups/{one_failure.pk}/").content.decode()
    # In the reader's zone, as the page reckons it: from 00:00 to 09:00 KST on a Monday
    # (Sunday 15:00 to midnight UTC) Seoul's next week starts a week later than UTC's.
    with timezone.override(SEOUL):
        ends = start_of_next_week(timezone.now()).astimezone(SEOUL)
    assert f"until next week · ends Mon {ends:%b} {ends.day} 09:00 KST" in html


def test_bulk_mute_with_a_preset(one_failure: Any, client_as: Any) -> None:
    response = _seoul_client(client_as).post(
        "/triage/bulk",
        {"action": "mute", "mute_for": "4h", "confirm_count": "1", "query": ""},
    )
    assert response.status_code == 302
    one_failure.refresh_from_db()
    assert one_failure.status == GroupStatus.MUTED


# --- live: auto-refresh --------------------------------------------------------------------


def test_auto_refresh_lives_in_the_url_and_refreshes_only_the_table(
    one_failure: Any, client_as: Any
) -> None:
    client = client_as("viewer")
    html = client.get("/?refresh=10s").content.decode()
    assert 'hx-trigger="click, every 10s"' in html
    assert "refreshes every 10 seconds" in html
    # The timed refresh asks for the view shown and adds no history entry.
    partial = client.get(
        "/?refresh=10s", headers={"HX-Request": "true", "HX-Trigger": "auto-refresh"}
    )
    assert partial.status_code == 200
    assert partial.content.decode().lstrip().startswith('<div id="results" ')
    assert "HX-Push-Url" not in partial.headers
    # A filter change does add one.
    changed = client.get("/?refresh=10s&lane=retry_safe", headers={"HX-Request": "true"})
    assert changed.headers["HX-Push-Url"] == "/?lane=retry_safe&refresh=10s"


def test_auto_refresh_is_off_by_default_and_a_bad_choice_is_a_form_error(
    one_failure: Any, client_as: Any
) -> None:
    client = client_as("viewer")
    html = client.get("/").content.decode()
    assert 'hx-trigger="click"' in html and "every " not in html.split('id="auto-refresh"')[1][:300]
    refused = client.get("/?refresh=1ms")
    assert refused.status_code == 400
    assert "every 1ms" not in refused.content.decode()


# --- history --------------------------------------------------------------------------------


def test_results_say_which_inputs_they_are_for(one_failure: Any, client_as: Any) -> None:
    response = client_as("viewer").get(
        "/?lane=retry_safe&tool=getOrder&lane_extra=1", headers={"HX-Request": "true"}
    )
    state = response.context["form_state"]
    shown = json.loads(state)
    assert shown["lane"] == "retry_safe" and shown["tool"] == "getOrder"
    assert shown["window"] == "24h" and shown["source"] == "production"
    refused = client_as("viewer").get("/?lane=nowhere", headers={"HX-Request": "true"})
    assert json.loads(refused.context["form_state"])["lane"] == ""


def test_a_history_restore_gets_the_whole_page(one_failure: Any, client_as: Any) -> None:
    """htmx asks with HX-Request when a page fell out of its history cache, and swaps the
    answer into the whole body: it must be the whole page, not the table alone."""
    response = client_as("viewer").get(
        "/?lane=retry_safe",
        headers={"HX-Request": "true", "HX-History-Restore-Request": "true"},
    )
    html = response.content.decode()
    assert html.startswith("<!doctype html>") and 'id="filters"' in html
    assert "HX-Push-Url" not in response.headers


def test_each_edge_reads_the_shorter_piece_of_its_hour() -> None:
    from triage.selectors import _Edge, _WindowParts

    now = datetime(2026, 12, 1, 19, 7, tzinfo=UTC)
    parts = _WindowParts.of(now - timedelta(hours=1), now, now=now)
    # 18:07: the bucket of 18:00 less its first 7 minutes; 19:07: the bucket of 19:00 less
    # what lies after now (nothing yet, so nothing to read).
    assert parts.first_hour == datetime(2026, 12, 1, 18, 0, tzinfo=UTC)
    assert parts.end_hour == datetime(2026, 12, 1, 20, 0, tzinfo=UTC)
    assert parts.edges == (
        _Edge(datetime(2026, 12, 1, 18, 0, tzinfo=UTC), now - timedelta(hours=1), -1),
        _Edge(now, datetime(2026, 12, 1, 20, 0, tzinfo=UTC), -1),
    )
    late = datetime(2026, 12, 1, 19, 50, tzinfo=UTC)
    parts = _WindowParts.of(late - timedelta(hours=1), late, now=late)
    # 18:50: the 10 minutes to 19:00 are added; the 19:00 bucket is read whole.
    assert parts.edges[0] == _Edge(late - timedelta(hours=1), late.replace(minute=0), 1)
    assert parts.first_hour == late.replace(minute=0)


def test_each_day_of_a_window_is_read_the_cheaper_way() -> None:
    """A day covered whole reads its rollups; a piece of a day its hourly buckets, or the
    day's rollups less the hours left out when those are fewer by DAY_READ_HOURS."""
    from triage.models import FailureGroupBucket as Hours
    from triage.models import FailureGroupDay as Days
    from triage.selectors import _WindowParts

    def read(start: datetime, end: datetime, now: datetime) -> list[tuple[str, int, int, int]]:
        pieces = _WindowParts.of(start, end, now=now).pieces()
        return [
            (piece.model.__name__, piece.start.day * 100 + piece.start.hour,
             piece.end.day * 100 + piece.end.hour, piece.sign)
            for piece in pieces
            if piece.model is not FailureRecord
        ]  # fmt: skip

    def at(day: int, hour: int) -> datetime:
        return datetime(2026, 12, day, hour, tzinfo=UTC)

    # The last 24 hours at 08:00: yesterday's rollups less its first 8 hours, and today's
    # rollups (nothing after now to take away) instead of 24 hours of buckets.
    assert read(at(4, 8), at(5, 8), now=at(5, 8)) == [
        (Hours.__name__, 400, 408, -1),
        (Days.__name__, 400, 600, 1),
        (Hours.__name__, 508, 600, -1),
    ]
    # The same window seen from later (its end long past): today's left-out hours hold
    # records now, so its 8 hours are read from the buckets.
    assert read(at(4, 8), at(5, 8), now=at(5, 23))[-1] == (Hours.__name__, 500, 508, 1)
    # A few hours of one day: buckets alone.
    assert read(at(4, 2), at(4, 6), now=at(6, 0)) == [(Hours.__name__, 402, 406, 1)]
    # Seven days from 05:00: the first day's 19 hours as its rollups less 5 hours, whole
    # days as one range of rollups, the last day's 5 hours from its buckets.
    assert read(at(1, 5), at(8, 5), now=at(9, 0)) == [
        (Hours.__name__, 100, 105, -1),
        (Days.__name__, 100, 800, 1),
        (Hours.__name__, 800, 805, 1),
    ]


def test_windows_of_every_shape_count_exactly_what_they_hold(db: Any) -> None:
    """Records on and around hour and day boundaries over four days, and windows that start
    and end anywhere among them (inside an hour, across midnights, over whole days, with
    now before or after their end): every count equals the records in the window."""
    import random

    from triage.intake.ingest import batch_ingest
    from triage.selectors import window_counts
    from triage.timebins import day_floor

    rng = random.Random(20261206)
    midnight = day_floor(timezone.now()) - timedelta(days=1)
    moments = [midnight + timedelta(days=days) for days in (-3, -2, -1, 0, 1)]
    moments += [midnight + timedelta(hours=h) for h in range(-72, 24, 5)]
    moments += [midnight + timedelta(minutes=rng.uniform(-72 * 60, 24 * 60)) for _ in range(160)]
    moments = [moment for moment in moments if moment < timezone.now()]
    batch_ingest(
        owner="runtime",
        items=[
            failure_item(occurred_at=moment.isoformat(), tool=f"tool{number % 3}")
            for number, moment in enumerate(moments)
        ],
    )
    for _ in range(40):
        start = midnight + timedelta(minutes=rng.choice([0, 60, 90, rng.randint(-4000, 1400)]))
        start -= timedelta(days=rng.randint(0, 2))
        end = start + timedelta(minutes=rng.choice([30, 60, 24 * 60, rng.randint(1, 5000)]))
        now = end + timedelta(minutes=rng.choice([0, 5, 600]))
        expected = records_per_group(start, end)
        assert window_counts(start=start, end=end, filters={}, now=now) == expected, (start, end)


def test_each_edge_is_read_by_its_own_range_of_the_records() -> None:
    """Edges joined by OR leave the records' group index only the group to seek; once
    PostgreSQL underestimates the matching groups, it reads every record of every group."""
    from triage.selectors import _WindowParts

    now = datetime(2026, 12, 1, 19, 7, tzinfo=UTC)
    parts = _WindowParts.of(now - timedelta(hours=1), now, now=now)
    record_pieces = [piece for piece in parts.pieces() if piece.model is FailureRecord]
    assert len(parts.edges) == 2 and len(record_pieces) == 2
    for piece in record_pieces:
        sql, params = piece.sql([(0, 1)])
        assert " OR " not in sql and sql.count('"occurred_at" >= ') == 1
        assert sql.count('"occurred_at" < ') == 1 and len(params) == 2


def test_a_chosen_zone_follows_the_person_to_their_next_sign_in_at_no_query(
    one_failure: Any, client_as: Any
) -> None:
    from django.test import Client

    client_as("viewer").post("/preferences/", {"time_zone": "Europe/Berlin"})
    other = Client()
    other.cookies[COOKIE] = "Asia/Seoul"
    other.force_login(PersonPreference.objects.get().user)  # another browser signs in
    html = other.get("/").content.decode()
    assert 'data-time-zone="Europe/Berlin"' in html
    # The zone rides in the session: no page reads the preference for it.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert 'data-time-zone="Europe/Berlin"' in other.get("/").content.decode()
    # (The user's own query brings the preference along in a join, for the language: no query
    # of its own.)
    own = 'FROM "triage_personpreference"'
    assert not [q for q in queries.captured_queries if own in q["sql"]]
