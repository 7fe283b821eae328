"""Forms of the triage pages: filters (read from the URL) and actions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.utils import timezone

from triage import taxonomy
from triage.models import GroupAction, GroupStatus, ReconciliationFinding, ToolPolicy

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7),
           "30d": timedelta(days=30)}  # fmt: skip
# The default view hides what nobody needs to look at: resolved and muted groups.
ACTIVE = "active"
ACTIVE_STATUSES = (GroupStatus.OPEN, GroupStatus.ACKNOWLEDGED, GroupStatus.REGRESSED)


def _choices(values: tuple[str, ...] | list[str], empty: str) -> list[tuple[str, str]]:
    return [("", empty), *((value, value) for value in values)]


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    label: str


class TriageFilterForm(forms.Form):
    """Every filter lives in the URL, so a filtered view is a link that can be shared."""

    DEFAULTS = {"window": "24h", "status": ACTIVE}

    window = forms.ChoiceField(
        choices=[*((key, key) for key in WINDOWS), ("custom", "custom")], required=False
    )
    since = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    until = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    collection = forms.CharField(required=False, max_length=200)
    source = forms.ChoiceField(choices=_choices(taxonomy.SOURCES, "any source"), required=False)
    tool = forms.CharField(required=False, max_length=200)
    lane = forms.ChoiceField(choices=_choices(taxonomy.LANES, "any lane"), required=False)
    status = forms.ChoiceField(
        choices=[(ACTIVE, "open, ack'd, regressed"), ("all", "any status"),
                 *GroupStatus.choices],
        required=False,
    )  # fmt: skip
    execution_state = forms.ChoiceField(
        choices=_choices(taxonomy.EXECUTION_STATES, "any execution state"), required=False
    )
    q = forms.CharField(required=False, max_length=200, label="search")
    # Exact stage and reason: the link "all N groups" of a reason row narrows to that row.
    stage = forms.CharField(required=False, max_length=64)
    reason = forms.CharField(required=False, max_length=100)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("window") == "custom":
            if not data.get("since"):
                self.add_error("since", "A custom window needs a start.")
            elif data.get("until") and data["until"] <= data["since"]:
                self.add_error("until", "The end must be after the start.")
        return data

    def window_range(self, *, now: datetime) -> Window:
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
        if data.get("window") == "custom" and data.get("since"):
            end = data.get("until") or now
            return Window(data["since"], end, "custom window")
        key = data.get("window") or "24h"
        return Window(now - WINDOWS[key], now, f"last {key}")

    def filters(self) -> dict[str, str]:
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
        keys = ("collection", "source", "tool", "lane", "execution_state", "q", "stage", "reason")
        chosen = {key: data[key].strip() for key in keys if data.get(key)}
        chosen["status"] = data.get("status") or ACTIVE
        return chosen


class GroupActionForm(forms.Form):
    action = forms.ChoiceField(choices=[c for c in GroupAction.choices if c[0] != "undo"])
    note = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=4000
    )
    assignee = forms.ModelChoiceField(queryset=get_user_model().objects.none(), required=False)
    muted_until = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    mute_count = forms.IntegerField(required=False, min_value=1, max_value=1_000_000)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        users = get_user_model().objects.filter(is_active=True).order_by("username")
        self.fields["assignee"].queryset = users  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        action = data.get("action")
        if action == GroupAction.MUTE:
            until, count = data.get("muted_until"), data.get("mute_count")
            if (until is None) == (count is None):
                raise forms.ValidationError("Mute until a time, or for a number of new records.")
            if until is not None and until <= timezone.now():
                self.add_error("muted_until", "The mute must end in the future.")
        if action == GroupAction.NOTE and not (data.get("note") or "").strip():
            self.add_error("note", "Write the note.")
        return data


class BulkActionForm(GroupActionForm):
    confirm_count = forms.IntegerField(min_value=0)
    query = forms.CharField(required=False, max_length=1000)


class ReconcileForm(forms.Form):
    finding = forms.ChoiceField(choices=ReconciliationFinding.choices, widget=forms.RadioSelect)
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=4000)


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
        help_texts = {
            "collection": "Empty: applies to this tool in every collection.",
            "idempotency_lookup": "How to find an operation by key, e.g. GET /notes/by-key/{key}",
        }


class ApiKeyCreateForm(forms.Form):
    name = forms.SlugField(max_length=100)
    owner = forms.CharField(
        max_length=100, required=False, help_text="Idempotency namespace; defaults to the name."
    )
    scopes = forms.MultipleChoiceField(
        choices=[("ingest", "ingest"), ("read", "read")],
        widget=forms.CheckboxSelectMultiple,
        initial=["ingest"],
    )
    expires_days = forms.IntegerField(required=False, min_value=1, max_value=3650)
