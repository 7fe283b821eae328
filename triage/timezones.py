"""The person's time zone: which one applies to a request, and how times are labelled in it.

A person's own choice (PersonPreference.time_zone) wins; blank follows the browser, whose zone
static/js/desk.js sends as the ``desk_tz`` cookie; without either, the server's TIME_ZONE.
Django's current time zone is set to it for the request (triage.middleware), so every
``|date`` in a template and every date a form reads is in that zone.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from functools import cache

from django.conf import settings
from django.http import HttpRequest
from django.utils import dateformat, timezone
from django.utils.formats import get_format
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext, pgettext_lazy

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
    return _zone_label(timezone.localtime(moment or timezone.now()))


def _zone_label(local: datetime) -> str:
    """abbreviation() of a moment already in the current zone."""
    name = local.tzname() or ""
    if name and name[0] not in "+-":
        return name
    offset = local.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours:02d}:{rest:02d}" if rest else f"UTC{sign}{hours}"


def local_span(start: datetime, end: datetime) -> str:
    """'Dec 1, 18:07-19:07 KST' within one local day, 'Nov 30 19:07 - Dec 1 19:07 KST' across
    days, both ends in the current zone."""
    first, last = timezone.localtime(start), timezone.localtime(end)
    zone = abbreviation(end)
    if first.date() == last.date():
        # Each language punctuates its own: "Dec 1, 18:07-19:07 KST", "12월 1일 18:07-19:07 KST".
        return gettext("%(day)s, %(start)s-%(end)s %(zone)s") % {
            "day": moment_text(first, "day"),
            "start": moment_text(first, "hours"),
            "end": moment_text(last, "hours"),
            "zone": zone,
        }
    return f"{moment_text(first)} - {moment_text(last)} {zone}"


def local_moment(moment: datetime, *, weekday: bool = False) -> str:
    """One moment in the current zone, labelled: 'Dec 1 19:07 KST' ('Tue Dec 1 19:07 KST'
    with its weekday), in the page's language."""
    return moment_text(moment, "weekday" if weekday else "short", zone=True)


# --- one way to write a time ------------------------------------------------------------------
# Every page writes a moment through moment_text, in the current zone (the person's, set by
# triage.middleware) and the page's language (config/formats/<language>/formats.py names each
# style); the templates use the `moment` filter (triage.templatetags.desk), which adds the
# full date, time and zone on hover.
MOMENT_FORMATS = {
    "short": "SHORT_DATETIME_FORMAT",  # Dec 5 18:41 · 12월 5일 18:41
    "seconds": "SECONDS_DATETIME_FORMAT",  # Dec 5 18:41:07 · 12월 5일 18:41:07
    "long": "DATETIME_FORMAT",  # Dec 5, 2026 18:41 · 2026년 12월 5일 18:41
    "weekday": "WEEKDAY_DATETIME_FORMAT",  # Sat Dec 5 18:41 · 12월 5일 (토) 18:41
    "full": "FULL_DATETIME_FORMAT",  # Sat Dec 5, 2026 18:41:07 · 2026년 12월 5일 (토) 18:41:07
    "day": "MONTH_DAY_FORMAT",  # Dec 5 · 12월 5일
    "time": "SECONDS_TIME_FORMAT",  # 18:41:07
    "hours": "TIME_FORMAT",  # 18:41
}

# The short weekday of a date ("Sat", "토"): Django's Korean "D" is the whole word ("토요일"),
# and Korean writes the short one in brackets after the date: 12월 5일 (토).
_SHORT_WEEKDAYS = (
    pgettext_lazy("short weekday", "Mon"),
    pgettext_lazy("short weekday", "Tue"),
    pgettext_lazy("short weekday", "Wed"),
    pgettext_lazy("short weekday", "Thu"),
    pgettext_lazy("short weekday", "Fri"),
    pgettext_lazy("short weekday", "Sat"),
    pgettext_lazy("short weekday", "Sun"),
)


class _DeskDateFormat(dateformat.DateFormat):
    """Django's date formatting of one local moment, made for a page that writes hundreds
    (the group page's timeline titles each of its 336 hours): it skips Django's test of
    whether the moment is ambiguous in its zone, which only the zone's own format
    characters read, and which the desk's formats do not name (DESK_FORMAT_CHARACTERS; the
    zone is written by abbreviation()). Skipping that test and cutting each format once
    (_format_pieces) took a moment from about 32 to about 10 microseconds; the test alone
    was about 7 of them."""

    data: datetime

    def __init__(self, moment: datetime) -> None:
        self.data = moment
        self.timezone = moment.tzinfo

    def D(self) -> str:  # Django's name for the format character (the short weekday)
        return str(_SHORT_WEEKDAYS[self.data.weekday()])


# The format characters the desk's date formats may use (config/formats): none of the zone's.
DESK_FORMAT_CHARACTERS = frozenset("DMFjnYyHisGA")


@cache
def _format_pieces(format_string: str) -> tuple[tuple[str, bool], ...]:
    """A date format cut into its literal text and its format characters (True), once, as
    Django's dateformat cuts it on every call."""
    pieces: list[tuple[str, bool]] = []
    for index, piece in enumerate(dateformat.re_formatchars.split(format_string)):
        if index % 2:
            pieces.append((piece, True))
        elif piece:
            pieces.append((dateformat.re_escaped.sub(r"\1", piece), False))
    return tuple(pieces)


def moment_text(moment: datetime, style: str = "short", *, zone: bool = False) -> str:
    """A moment in the current zone and language, in one of MOMENT_FORMATS' styles, followed
    by the zone's short name when `zone` is set ('Dec 5 18:41 KST')."""
    return moment_writer(style, zone=zone)(moment)


# The format characters whose text depends on the local date alone (the day, the month and
# its name, the year, the weekday's name).
_DATE_CHARACTERS = frozenset("DMFjnYy")


def moment_writer(style: str = "short", *, zone: bool = False) -> Callable[[datetime], str]:
    """moment_text(moment, style, zone=zone) for the many moments of one page: the current
    zone and the style's format are looked up once, and a date's words (its month's name,
    its weekday's) once per local day, instead of once per moment through the translation
    machinery. The group page's timeline titles each of its 336 hours with one."""
    current = timezone.get_current_timezone()
    pieces = _format_pieces(str(get_format(MOMENT_FORMATS[style])))
    dates: dict[tuple[date, str], str] = {}

    def write(moment: datetime) -> str:
        local = timezone.localtime(moment, current)
        formatter = _DeskDateFormat(local)
        day = local.date()
        texts = []
        for piece, character in pieces:
            if not character:
                texts.append(piece)
            elif piece in _DATE_CHARACTERS:
                text = dates.get((day, piece))
                if text is None:
                    text = dates[(day, piece)] = str(getattr(formatter, piece)())
                texts.append(text)
            else:
                texts.append(str(getattr(formatter, piece)()))
        text = "".join(texts)
        return f"{text} {_zone_label(local)}" if zone else text

    return write


def moment_title(moment: datetime) -> str:
    """What a time says on hover: the full date and time, the zone's short name and its
    name ('Sat Dec 5, 2026 18:41:07 KST (Asia/Seoul)')."""
    text = moment_text(moment, "full", zone=True)
    name = timezone.get_current_timezone_name()
    return text if text.endswith(f" {name}") else f"{text} ({name})"


def relative_text(moment: datetime, now: datetime | None = None) -> str:
    """'11 minutes ago', 'in 3 hours' ('11분 전', '3시간 후'): the largest unit only; 'just
    now' within the minute (never '0 minutes ago')."""
    now = now or timezone.now()
    if now - timedelta(minutes=1) < moment <= now:
        return gettext("just now")
    if moment <= now:
        return gettext("%(since)s ago") % {"since": timesince(moment, now, depth=1)}
    return gettext("in %(until)s") % {"until": timeuntil(moment, now, depth=1)}


# When "until next week" and "until 09:00 tomorrow" end: the start of a working day, local time.
NEXT_WEEK_HOUR = 9


def start_of_next_week(now: datetime) -> datetime:
    """The next Monday 09:00 in the current zone (from Monday 08:00, a week later)."""
    local = timezone.localtime(now)
    monday = local.date() + timedelta(days=7 - local.weekday())
    zone = timezone.get_current_timezone()
    return datetime.combine(monday, time(NEXT_WEEK_HOUR), tzinfo=zone)


def tomorrow_morning(now: datetime) -> datetime:
    """09:00 of the next calendar day in the current zone. Built from the local date, not by
    adding 24 hours: across a change of daylight saving time it is still 09:00 on the clock."""
    local = timezone.localtime(now)
    zone = timezone.get_current_timezone()
    return datetime.combine(local.date() + timedelta(days=1), time(NEXT_WEEK_HOUR), tzinfo=zone)
