"""Forms of the triage pages: filters (read from the URL) and actions."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import Promise, lazy
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, gettext_lazy, ngettext
from django.utils.translation import gettext_lazy as _

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from core.fields import clean_shown_link, validate_collection_name
from organisation.models import Team
from triage import timezones
from triage.models import (
    RELEASE_VERSION_MAX_LENGTH,
    RUNBOOK_NOTE_MAX_LENGTH,
    RUNBOOK_URL_MAX_LENGTH,
    GroupAction,
    GroupStatus,
    ReconciliationFinding,
    RunbookSubject,
    ToolPolicy,
)
from triage.vocabulary import taxonomy

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7),
           "30d": timedelta(days=30)}  # fmt: skip
# What each window covers, said as it is: 1h is the last 60 minutes, not the hours since the
# start of the previous one.
WINDOW_LABELS: dict[str, Promise] = {
    "1h": _("last 60 minutes"),
    "24h": _("last 24 hours"),
    "7d": _("last 7 days"),
    "30d": _("last 30 days"),
}
CUSTOM_WINDOW_LABEL = _("custom window")
# The triage page's auto-refresh choices (absent: off).
REFRESH_SECONDS = {"10s": 10, "30s": 30, "1m": 60}
# Ids in URLs: a 64-bit id column holds nothing larger.
MAX_ID = 2**63 - 1
# The default view hides what nobody needs to look at: resolved and muted groups.
ACTIVE = "active"
# The default view shows production: every source but Quality Lab's test runs, which can
# outnumber runtime failures ten to one right after a run.
PRODUCTION = "production"
ANY_SOURCE = "any"
ACTIVE_STATUSES = (GroupStatus.OPEN, GroupStatus.ACKNOWLEDGED, GroupStatus.REGRESSED)


def search_text(value: str) -> str:
    """Typed search text in one Unicode form (NFC): Hangul typed as separate jamo (as some
    keyboards and pasted file names give it) matches the composed syllables that are stored."""
    return unicodedata.normalize("NFC", value or "").strip()


def _choices(values: tuple[str, ...] | list[str], empty: Any) -> list[tuple[str, Any]]:
    # The values are codes (lanes, execution states): the same in every language.
    return [("", empty), *((value, value) for value in values)]


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    label: Any

    @property
    def span(self) -> str:
        """Exactly what the window covers, in the person's zone: '18:07-19:07 KST'."""
        return timezones.local_span(self.start, self.end)


class TriageFilterForm(forms.Form):
    """Every filter lives in the URL, so a filtered view is a link that can be shared."""

    # Count first: in an incident the question is what fails most, and in stage order the
    # largest row can sit at the bottom of a long page.
    DEFAULTS = {"window": "24h", "status": ACTIVE, "source": PRODUCTION, "sort": "count"}

    window = forms.ChoiceField(
        label=gettext_lazy("Window"),
        choices=[*WINDOW_LABELS.items(), ("custom", _("custom: since … until"))],
        required=False,
    )
    since = forms.DateTimeField(
        label=gettext_lazy("From"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    until = forms.DateTimeField(
        label=gettext_lazy("Until"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    collection = forms.CharField(
        label=gettext_lazy("Collection"), required=False, max_length=COLLECTION_NAME_MAX_LENGTH
    )
    source = forms.ChoiceField(label=gettext_lazy("Source"), 
        choices=[(PRODUCTION, gettext_lazy("production (not Quality Lab)")),
                 (ANY_SOURCE, gettext_lazy("any source")),
                 *((value, value) for value in taxonomy.SOURCES)],
        required=False,
    )  # fmt: skip
    tool = forms.CharField(label=gettext_lazy("Tool"), required=False, max_length=200)
    # Groups with records of this release (Release.version, as the records carry it).
    release = forms.CharField(
        label=gettext_lazy("Release"), required=False, max_length=RELEASE_VERSION_MAX_LENGTH
    )
    lane = forms.ChoiceField(
        label=gettext_lazy("Lane"),
        choices=_choices(taxonomy.LANES, gettext_lazy("any lane")),
        required=False,
    )
    status = forms.ChoiceField(label=gettext_lazy("Status"), 
        choices=[(ACTIVE, gettext_lazy("open, ack'd, regressed")),
                 ("all", gettext_lazy("any status")), *GroupStatus.choices],
        required=False,
    )  # fmt: skip
    execution_state = forms.ChoiceField(
        label=gettext_lazy("Execution state"),
        choices=_choices(taxonomy.EXECUTION_STATES, gettext_lazy("any execution state")),
        required=False,
    )
    q = forms.CharField(required=False, max_length=200, label=gettext_lazy("search"))
    # Exact stage and reason: the link "all N groups" of a reason row narrows to that row.
    stage = forms.CharField(label=gettext_lazy("Stage"), required=False, max_length=64)
    reason = forms.CharField(label=gettext_lazy("Reason"), required=False, max_length=100)

    sort = forms.ChoiceField(label=gettext_lazy("Sort"), 
        choices=[("count", gettext_lazy("sort: count")), ("trend", gettext_lazy("sort: trend")),
                 ("last_seen", gettext_lazy("sort: last seen")),
                 ("first_seen", gettext_lazy("sort: first seen")),
                 ("stage", gettext_lazy("sort: stage order"))],
        required=False,
    )  # fmt: skip
    # Not a filter: one row per reason (the default) or one row per group.
    view = forms.ChoiceField(
        label=gettext_lazy("View"),
        choices=[
            ("", gettext_lazy("view: by reason")),
            ("groups", gettext_lazy("view: by group")),
        ],
        required=False,
    )
    # Not a filter: how often the table reloads itself, in the URL so a wall screen keeps it.
    refresh = forms.ChoiceField(
        choices=[("", _("auto-refresh: off")), ("10s", _("refresh every 10 s")),
                 ("30s", _("refresh every 30 s")), ("1m", _("refresh every minute"))],
        required=False,
        label=_("Auto-refresh"),
    )  # fmt: skip

    def __init__(self, *args: Any, now: datetime | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = now or timezone.now()

    def refresh_seconds(self) -> int | None:
        """Seconds between the table's reloads, or None (off, also for a refused value)."""
        return REFRESH_SECONDS.get(str(self._valid_data().get("refresh") or ""))

    def shown_values(self) -> dict[str, str]:
        """What each field is for the results shown (a refused value as its default), so a
        page restored from the browser's history can put its inputs back to match."""
        self._valid_data()
        return {
            name: self.DEFAULTS.get(name, "")
            if name in self.errors
            else str(self[name].value() or "")
            for name in self.fields
        }

    def view_mode(self) -> str:
        """One row per reason, or per group ("groups"); a missing or refused one is reasons."""
        return str(self._valid_data().get("view") or "reasons")

    def sort_order(self) -> str:
        """The chosen order of the rows; a missing or refused one is count."""
        return str(self._valid_data().get("sort") or self.DEFAULTS["sort"])

    def clean_q(self) -> str:
        return search_text(self.cleaned_data.get("q") or "")

    def clean_since(self) -> datetime | None:
        return window_moment(self.cleaned_data.get("since"), now=self.now)

    def clean_until(self) -> datetime | None:
        return window_moment(self.cleaned_data.get("until"), now=self.now)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("window") == "custom":
            since, until = data.get("since"), data.get("until")
            if not since:
                if "since" not in self.errors:
                    self.add_error("since", gettext("A custom window needs a start."))
            elif until and until <= since:
                self.add_error("until", gettext("The end must be after the start."))
            elif (until or self.now) - since > max_window():
                days = settings.TRIAGE_MAX_WINDOW_DAYS
                self.add_error(
                    "since",
                    ngettext(
                        "A window spans at most %(days)d day: move the start or the end.",
                        "A window spans at most %(days)d days: move the start or the end.",
                        days,
                    )
                    % {"days": days},
                )
        return data

    def _valid_data(self) -> dict[str, Any]:
        """What passed validation: a bad field is dropped (the page shows its error), the
        other filters still apply."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return self.cleaned_data

    def window_range(self, *, now: datetime) -> Window:
        data = self._valid_data()
        window_errors = any(name in self.errors for name in ("window", "since", "until"))
        if data.get("window") == "custom" and data.get("since") and not window_errors:
            return Window(data["since"], data.get("until") or now, str(CUSTOM_WINDOW_LABEL))
        key = str(data.get("window") or "")
        if key not in WINDOWS:
            key = "24h"
        return Window(now - WINDOWS[key], now, str(WINDOW_LABELS[key]))

    def filters(self) -> dict[str, str]:
        data = self._valid_data()
        keys = ("collection", "tool", "release", "lane", "execution_state", "q", "stage", "reason")
        chosen = {key: data[key].strip() for key in keys if data.get(key)}
        chosen["status"] = data.get("status") or ACTIVE
        # A URL without a source is production, also for a bulk action's saved query; an
        # empty or refused value is any source (links from before the default existed).
        if "source" not in self.data:
            chosen["source"] = PRODUCTION
        elif data.get("source") and data["source"] != ANY_SOURCE:
            chosen["source"] = data["source"]
        return chosen

    def query_items(self) -> list[tuple[str, str]]:
        """The filters of the URL as it would be shared: the form's own fields, set and
        valid, so links built from it never carry a value the page refused."""
        if not self.is_bound:
            return []
        self.is_valid()
        return [
            (name, str(self.data.get(name)))
            for name in self.fields
            if self.data.get(name) and name not in self.errors
        ]


# The earliest moment a custom window may start: no runtime reports from before it, and
# date arithmetic near the years 1 and 9999 overflows.
EARLIEST_MOMENT = datetime(1970, 1, 1, tzinfo=UTC)
# How far ahead a window may end (records may come from clocks running ahead).
LATEST_AHEAD = timedelta(days=1)


def max_window() -> timedelta:
    return timedelta(days=settings.TRIAGE_MAX_WINDOW_DAYS)


def window_moment(moment: datetime | None, *, now: datetime) -> datetime | None:
    """A window's start or end in UTC, refused outside 1970-01-01 .. a day from now."""
    if moment is None:
        return None
    try:
        in_utc = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        in_utc = None
    if in_utc is None or in_utc < EARLIEST_MOMENT:
        raise forms.ValidationError(
            gettext("Choose a moment from 1970-01-01 on."), code="out_of_range"
        )
    if in_utc > now + LATEST_AHEAD:
        raise forms.ValidationError(
            gettext("Choose a moment no later than tomorrow."), code="out_of_range"
        )
    return in_utc


def triage_back_query(raw: str) -> str:
    """A triage page query carried to the group page (for its "← Triage" link), refused
    unless the triage page itself accepts every filter in it."""
    if not raw:
        return ""
    back = TriageFilterForm(QueryDict(raw))
    if set(back.data) - set(back.fields) or not back.is_valid():
        raise forms.ValidationError(
            gettext("Not a triage view: follow the triage page's own links."), code="invalid_back"
        )
    return urlencode(back.query_items())


class GroupRecordsForm(forms.Form):
    """The group page's URL: which page of records (a keyset cursor from its own links),
    and the triage view the person came from."""

    before = forms.CharField(label=gettext_lazy("Older than"), required=False, max_length=80)
    back = forms.CharField(label=gettext_lazy("Triage view"), required=False, max_length=1000)

    def clean_back(self) -> str:
        return triage_back_query(self.cleaned_data.get("back") or "")

    def clean_before(self) -> str:
        raw = self.cleaned_data.get("before") or ""
        if not raw:
            return ""
        stamp, _, record_id = raw.partition("_")
        try:
            moment = datetime.fromisoformat(stamp)
            valid = moment.tzinfo is not None and moment.astimezone(UTC) is not None
        except (ValueError, OverflowError):
            valid = False
        if not valid or not (record_id.isascii() and record_id.isdigit()) or len(record_id) > 18:
            raise forms.ValidationError(
                gettext("Not a page of this group: follow the page's own older/newest links."),
                code="invalid_cursor",
            )
        return raw


def posted_back(post: QueryDict) -> str:
    """The triage view a form posted from a group page came from ("" when none or not one)."""
    back = GroupRecordsForm({"back": post.get("back", "")})
    return back.cleaned_data["back"] if back.is_valid() else ""


def group_page_url(group_id: int, back: str, anchor: str = "") -> str:
    """A group's page, keeping the triage view it was opened from, at `anchor` ("#fixes")."""
    url = reverse("triage:group", args=[group_id])
    return (f"{url}?{urlencode({'back': back})}" if back else url) + anchor


def group_draft_key(group_id: int) -> str:
    """Where a refused form of a group's page keeps its values (core.drafts)."""
    return f"group-{group_id}"


def help_with_code(text: _StrPromise, **examples: str) -> _StrPromise:
    """A translatable help text whose examples are code: each ``{name}`` of `text` is shown
    as ``<code>example</code>`` (a JSON example or a command reads as code in any language,
    and the sentence around it is translated whole)."""

    def shown() -> SafeString:
        return format_html(
            escape(str(text)),
            **{name: format_html("<code>{}</code>", code) for name, code in examples.items()},
        )

    # Lazy like a gettext_lazy help text (a form class is built once, its page in any language).
    return cast("_StrPromise", lazy(shown, SafeString)())


# Mute presets: how long; until tomorrow's 09:00, and for the week until the next Monday's, on
# the person's clock (their zone, whatever daylight saving time does in between).
MUTE_PRESETS: dict[str, Promise] = {
    "1h": _("1 hour"),
    "4h": _("4 hours"),
    "24h": _("24 hours"),
    "tomorrow": _("until 09:00 tomorrow"),
    "next_week": _("until next week"),
}
_MUTE_DURATIONS = {"1h": timedelta(hours=1), "4h": timedelta(hours=4), "24h": timedelta(hours=24)}


def mute_preset_end(preset: str, now: datetime) -> datetime:
    if preset == "tomorrow":
        return timezones.tomorrow_morning(now)
    if preset == "next_week":
        return timezones.start_of_next_week(now)
    return now + _MUTE_DURATIONS[preset]


# Assigning to nobody, said so: the form's name for an assign action without an assignee.
UNASSIGN = "unassign"
# The resolve form's choices of release: the next one deployed, or a named one.
RESOLVE_IN_NEXT = "next"
RESOLVE_IN_RELEASE = "release:"


class _FetchedChoices(forms.models.ModelChoiceIterator):
    """A model select's choices read in one statement. Django reads them through
    QuerySet.iterator(), which on PostgreSQL declares a server-side cursor: DECLARE, FETCH
    and CLOSE, three round trips on every triage page for a handful of people."""

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        for obj in list(self.queryset):
            yield self.choice(obj)


class _PeopleChoiceField(forms.ModelChoiceField):
    iterator = _FetchedChoices


class GroupActionForm(forms.Form):
    # Labels are what a refused form says ("Mute until: ..."), never the field's name.
    action = forms.ChoiceField(
        choices=[
            *(c for c in GroupAction.choices if c[0] != "undo"),
            (UNASSIGN, gettext_lazy("unassign")),
        ],
        label=_("Action"),
    )
    # "Assign to me": the person acting is the assignee, whatever the assignee field says.
    assign_to_me = forms.BooleanField(required=False, label=_("Assign to me"))
    note = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        max_length=4000,
        label=_("Note"),
    )
    assignee = _PeopleChoiceField(
        queryset=get_user_model().objects.none(),
        required=False,
        label=_("Assignee"),
        empty_label=_("choose whom…"),
        # People's names are data: a browser's page translation leaves them alone.
        widget=forms.Select(attrs={"translate": "no"}),
    )
    # Read in the person's time zone (triage.middleware): "19:03" typed in Seoul is 19:03 KST.
    muted_until = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        label=_("Mute until"),
        error_messages={"invalid": _("Enter a date and a time, such as 2026-12-01 18:30.")},
    )
    mute_count = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=1_000_000,
        label=_("Mute for this many new records"),
    )
    mute_for = forms.ChoiceField(required=False, choices=[], label=_("Mute for"))
    # A resolve's release: "" (none), RESOLVE_IN_NEXT, or RESOLVE_IN_RELEASE + a version (the
    # prefix keeps a version that happens to be spelled "next" a version).
    resolve_in = forms.CharField(
        required=False, max_length=RELEASE_VERSION_MAX_LENGTH + 10, label=_("Resolved in")
    )

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        people = get_user_model()
        # A choice shows the person's name: the rest of their row is not read.
        users = (
            people.objects.filter(is_active=True)
            .only("pk", people.USERNAME_FIELD)
            .order_by(people.USERNAME_FIELD)
        )
        self.fields["assignee"].queryset = users  # type: ignore[attr-defined]
        # Each preset names the moment it ends, so "until next week" cannot surprise.
        now = timezone.now()
        self.fields["mute_for"].choices = [  # type: ignore[attr-defined]
            ("", _("mute for…")),
            *(
                (key, _("%(preset)s · ends %(moment)s")
                 % {"preset": label,
                    "moment": timezones.local_moment(mute_preset_end(key, now), weekday=True)})
                for key, label in MUTE_PRESETS.items()
            ),
        ]  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("assign_to_me"):
            data["action"], data["assignee"] = GroupAction.ASSIGN, self.user
        action = data.get("action")
        # Nobody chosen is a mistake, not an instruction to unassign: that is its own
        # action, which names whom it takes the groups from.
        if action == GroupAction.ASSIGN and data.get("assignee") is None:
            self.add_error("assignee", gettext("Choose whom to assign."))
        if action == GroupAction.MUTE:
            until, count, preset = (
                data.get("muted_until"),
                data.get("mute_count"),
                data.get("mute_for"),
            )
            if sum(value is not None and value != "" for value in (until, count, preset)) != 1:
                raise forms.ValidationError(
                    _("Mute for a preset time, until a time, or for a number of new records: "
                      "choose one.")
                )  # fmt: skip
            if preset:
                data["muted_until"] = mute_preset_end(preset, timezone.now())
            elif until is not None and until <= timezone.now():
                self.add_error("muted_until", gettext("The mute must end in the future."))
        resolve_in = data.get("resolve_in") or ""
        data["resolved_in_next_release"] = resolve_in == RESOLVE_IN_NEXT
        data["resolved_in_release"] = resolve_in.removeprefix(RESOLVE_IN_RELEASE)
        if resolve_in and not (
            resolve_in == RESOLVE_IN_NEXT
            or (resolve_in.startswith(RESOLVE_IN_RELEASE) and data["resolved_in_release"])
        ):
            self.add_error("resolve_in", gettext("Choose the next release or a known one."))
        if resolve_in == RESOLVE_IN_NEXT:
            data["resolved_in_release"] = ""
        if action == GroupAction.NOTE and not (data.get("note") or "").strip():
            self.add_error("note", gettext("Write the note."))
        return data


class BulkActionForm(GroupActionForm):
    confirm_count = forms.IntegerField(min_value=0, label=_("Number of groups"))
    query = forms.CharField(required=False, max_length=1000, label=_("Filter"))


class ReconcileForm(forms.Form):
    """What reconciling found. Recorded in two steps: the first post asks to confirm what the
    finding will mean for the next run; `step=confirm` records it, `step=edit` goes back."""

    STEP_CONFIRM = "confirm"
    STEP_EDIT = "edit"

    finding = forms.ChoiceField(
        label=gettext_lazy("Finding"),
        choices=ReconciliationFinding.choices,
        widget=forms.RadioSelect,
    )
    note = forms.CharField(
        label=gettext_lazy("Note"), widget=forms.Textarea(attrs={"rows": 2}), max_length=4000
    )
    # The finding this one corrects (a correction of an earlier reconciliation).
    corrects = forms.IntegerField(
        label=gettext_lazy("Corrects"), required=False, min_value=1, max_value=MAX_ID
    )
    step = forms.ChoiceField(
        label=gettext_lazy("Step"),
        choices=[("", ""), (STEP_CONFIRM, STEP_CONFIRM), (STEP_EDIT, STEP_EDIT)],
        required=False,
    )


class ToolPolicyForm(forms.ModelForm):
    class Meta:
        model = ToolPolicy
        fields = [
            "collection",
            "tool",
            "side_effect",
            "idempotency_required",
            "idempotency_lookup",
            "timeout_before_send_lane",
            "timeout_after_send_lane",
            "approval_required",
            "retry_max_attempts",
            "retry_budget_failures",
            "retry_budget_window_seconds",
        ]
        labels = {
            "collection": gettext_lazy("Collection"),
            "tool": gettext_lazy("Tool"),
            "side_effect": gettext_lazy("Side effect"),
            "idempotency_required": gettext_lazy("Idempotency required"),
            "idempotency_lookup": gettext_lazy("Idempotency lookup"),
            "timeout_before_send_lane": gettext_lazy("Timeout before send lane"),
            "timeout_after_send_lane": gettext_lazy("Timeout after send lane"),
            "approval_required": gettext_lazy("Approval required"),
            "retry_max_attempts": gettext_lazy("Retry max attempts"),
            "retry_budget_failures": gettext_lazy("Retry budget failures"),
            "retry_budget_window_seconds": gettext_lazy("Retry budget window seconds"),
        }
        help_texts = {
            "collection": gettext_lazy("Empty: applies to this tool in every collection."),
            "idempotency_lookup": help_with_code(
                gettext_lazy("How to find an operation by key, e.g. {example}"),
                example="GET /notes/by-key/{key}",
            ),
        }

    def clean_collection(self) -> str:
        name = self.cleaned_data.get("collection") or ""
        if name:
            validate_collection_name(name)
        return name


class IngestionQueryForm(forms.Form):
    """The ingestion page's URL: a page of the ledger and the batch shown in detail."""

    before = forms.IntegerField(
        label=gettext_lazy("Older than batch"), required=False, min_value=1, max_value=MAX_ID
    )
    batch = forms.IntegerField(
        label=gettext_lazy("Batch"), required=False, min_value=1, max_value=MAX_ID
    )


class PolicyQueryForm(forms.Form):
    """The tool-policy page's URL: text a collection or tool contains."""

    q = forms.CharField(label=gettext_lazy("Search"), required=False, max_length=200)

    def clean_q(self) -> str:
        return search_text(self.cleaned_data.get("q") or "")


class ApiKeyScopeForm(forms.Form):
    """What a key serves: collections named one per line, and/or a team's collections;
    neither is every collection."""

    collections = forms.CharField(
        label=gettext_lazy("Collections"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 24}),
        help_text=gettext_lazy("One per line; empty with no team: every collection."),
    )
    team = forms.ModelChoiceField(
        label=gettext_lazy("Team"),
        queryset=Team.objects.all(),
        required=False,
        empty_label=gettext_lazy("no team"),
    )

    def clean_collections(self) -> list[str]:
        names = [line.strip() for line in self.cleaned_data["collections"].splitlines()]
        names = sorted({name for name in names if name})
        for name in names:
            validate_collection_name(name)
        return names


class ApiKeyCreateForm(ApiKeyScopeForm):
    field_order = ["name", "owner", "scopes", "expires_days", "collections", "team"]

    name = forms.SlugField(label=gettext_lazy("Name"), max_length=100)
    owner = forms.CharField(
        label=gettext_lazy("Owner"),
        max_length=100,
        required=False,
        help_text=gettext_lazy("Idempotency namespace; defaults to the name."),
    )
    scopes = forms.MultipleChoiceField(
        label=gettext_lazy("Scopes"),
        choices=[("ingest", "ingest"), ("read", "read")],
        widget=forms.CheckboxSelectMultiple,
        initial=["ingest"],
    )
    expires_days = forms.IntegerField(
        required=False, min_value=1, max_value=3650, label=_("Expires in (days)")
    )


# Where a tool's runbook applies: the group's collection only, or the tool everywhere.
RUNBOOK_SCOPE_COLLECTION = "collection"
RUNBOOK_SCOPE_EVERY = "every"


class RunbookForm(forms.Form):
    """A runbook link (http or https only: it is rendered as a link) and a short note."""

    subject = forms.ChoiceField(label=gettext_lazy("Subject"), choices=RunbookSubject.choices)
    scope = forms.ChoiceField(
        choices=[(RUNBOOK_SCOPE_COLLECTION, _("this collection only")),
                 (RUNBOOK_SCOPE_EVERY, _("every collection"))],
        required=False,
        label=_("Applies to"),
    )  # fmt: skip
    url = forms.CharField(
        required=False,
        max_length=RUNBOOK_URL_MAX_LENGTH,
        label=_("Runbook link"),
        widget=forms.URLInput(attrs={"placeholder": "https://wiki.example.com/runbooks/…"}),
    )
    note = forms.CharField(
        required=False,
        max_length=RUNBOOK_NOTE_MAX_LENGTH,
        label=_("Note"),
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def clean_url(self) -> str:
        return clean_shown_link(self.cleaned_data.get("url") or "")

    def clean_note(self) -> str:
        return (self.cleaned_data.get("note") or "").strip()


class TimeZonePreferenceForm(forms.Form):
    """The zone a person's pages show times in; blank follows their browser."""

    time_zone = forms.ChoiceField(required=False, choices=[], label=_("time zone"))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].choices = [  # type: ignore[attr-defined]
            ("", _("follow my browser")),
            *((name, name) for name in sorted(timezones.zone_names())),
        ]
