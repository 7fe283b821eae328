"""The person's time zone: which one applies to a request, and how times are labelled in it.

A person's own choice (PersonPreference.time_zone) wins; blank follows the browser, whose zone
static/js/desk.js sends as the ``desk_tz`` cookie; without either, the server's TIME_ZONE.
Django's current time zone is set to it for the request (triage.middleware), so every
``|date`` in a template and every date a form reads is in that zone.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo
from functools import cache

from django.conf import settings
from django.http import HttpRequest
from django.utils import dateformat, timezone
from django.utils.formats import date_format

from triage.models import PersonPreference

COOKIE = "desk_tz"
# Where the zone of a request came from.
CHOSEN = "chosen"  # the person's preference
BROWSER = "browser"  # the browser's zone, from the cookie
SERVER = "server"  # neither: settings.TIME_ZONE


@cache
def zone_names() -> frozenset[str]:
    """Every IANA zone this machine knows; a cookie or a form naming another is ignored."""
    return frozenset(zoneinfo.available_timezones())


def zone_named(name: str) -> zoneinfo.ZoneInfo | None:
    if not name or len(name) > 64 or name not in zone_names():
        return None
    return zoneinfo.ZoneInfo(name)


@dataclass(frozen=True)
class PersonZone:
    zone: tzinfo
    name: str
    source: str


# The person's chosen zone ("" for none) is kept in their session from sign-in on, so no page
# pays a query for it; saving a choice updates this session, other browsers at sign-in.
SESSION_KEY = "person_time_zone"


def remember_chosen_zone(request: HttpRequest, user: object) -> str:
    """Read the person's preference into their session (at sign-in, or once for a session
    from before the preference existed)."""
    preference = PersonPreference.for_user(user)
    chosen = preference.time_zone if preference is not None else ""
    request.session[SESSION_KEY] = chosen
    return chosen


def zone_for_request(request: HttpRequest) -> PersonZone:
    """The zone the pages show this request's times in."""
    user = getattr(request, "user", None)
    if getattr(user, "is_authenticated", False) and hasattr(request, "session"):
        chosen_name = request.session.get(SESSION_KEY)
        if chosen_name is None:
            chosen_name = remember_chosen_zone(request, user)
        if chosen := zone_named(chosen_name):
            return PersonZone(chosen, chosen_name, CHOSEN)
    cookie = request.COOKIES.get(COOKIE, "")
    if browser := zone_named(cookie):
        return PersonZone(browser, cookie, BROWSER)
    return PersonZone(zoneinfo.ZoneInfo(settings.TIME_ZONE), settings.TIME_ZONE, SERVER)


def abbreviation(moment: datetime | None = None) -> str:
    """The current zone's short name at a moment ("KST", "CET"/"CEST"); zones without one
    read as their offset ("UTC+05:45"), never as a bare "+0545"."""
    local = timezone.localtime(moment or timezone.now())
    name = local.tzname() or ""
    if name and name[0] not in "+-":
        return name
    offset = local.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours:02d}:{rest:02d}" if rest else f"UTC{sign}{hours}"


def local_span(start: datetime, end: datetime) -> str:
    """'18:07-19:07 KST' within one local day, 'Nov 30 19:07 - Dec 1 19:07 KST' across days,
    both ends in the current zone."""
    first, last = timezone.localtime(start), timezone.localtime(end)
    zone = abbreviation(end)
    if first.date() == last.date():
        day = date_format(first, "MONTH_DAY_FORMAT")
        return f"{day}, {dateformat.format(first, 'H:i')}-{dateformat.format(last, 'H:i')} {zone}"
    return f"{_short(first)} - {_short(last)} {zone}"


def _short(moment: datetime) -> str:
    # The language's own month-day-time (config/formats/): 'Dec 1 19:07', '12월 1일 19:07'.
    return date_format(moment, "SHORT_DATETIME_FORMAT")


def local_moment(moment: datetime, *, weekday: bool = False) -> str:
    """One moment in the current zone, labelled: 'Dec 1 19:07 KST' ('Tue Dec 1 19:07 KST'
    with its weekday), in the page's language."""
    local = timezone.localtime(moment)
    # Where the weekday goes is the language's own: 'Sat Dec 5 17:00', '12월 5일 토요일 17:00'.
    text = date_format(local, "WEEKDAY_DATETIME_FORMAT") if weekday else _short(local)
    return f"{text} {abbreviation(moment)}"


# When "until next week" ends: the coming Monday at the start of a working day, local time.
NEXT_WEEK_HOUR = 9


def start_of_next_week(now: datetime) -> datetime:
    """The next Monday 09:00 in the current zone (from Monday 08:00, a week later)."""
    local = timezone.localtime(now)
    monday = local.date() + timedelta(days=7 - local.weekday())
    zone = timezone.get_current_timezone()
    return datetime.combine(monday, time(NEXT_WEEK_HOUR), tzinfo=zone)
