from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy

from contracts.forms import ToolScopeForm, window_days_field
from core.fields import clean_shown_link
from fixes.models import FixKind, Verdict
from fixes.selectors import Filters
from triage.forms import GroupActionForm
from triage.models import FailureGroup, Runbook

MAX_DAYS = 400


class FixesFilterForm(ToolScopeForm):
    """The fixes list's and the API's filters."""

    days = window_days_field(MAX_DAYS)
    kind = forms.ChoiceField(required=False, choices=[("", ""), *FixKind.choices])
    verdict = forms.ChoiceField(required=False, choices=[("", ""), *Verdict.choices])
    runbook = forms.IntegerField(required=False, min_value=1, max_value=2**62)
    group = forms.IntegerField(required=False, min_value=1, max_value=2**62)
    person = forms.CharField(required=False, max_length=150)

    def filters(self) -> Filters:
        data: dict[str, Any] = self.cleaned_data
        return Filters(
            days=data.get("days") or 90,
            kind=data.get("kind") or "",
            verdict=data.get("verdict") or "",
            runbook=data.get("runbook"),
            person=data.get("person") or "",
            collection=data.get("collection") or "",
            tool=data.get("tool") or "",
            group=data.get("group"),
        )


class ResolveWithFixForm(GroupActionForm):
    """A resolve (its release, its note) and the fix behind it, from the group page."""

    fix_kind = forms.ChoiceField(
        required=False, choices=[("", ""), *FixKind.choices], label=gettext_lazy("The fix")
    )
    fix_url = forms.CharField(required=False, max_length=2000, label=gettext_lazy("Link"))
    runbook = forms.IntegerField(required=False, min_value=1, max_value=2**62)
    verify = forms.BooleanField(required=False, label=gettext_lazy("Verify with Quality Lab"))

    def __init__(self, *args: Any, group: FailureGroup, runbooks: list[Runbook], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.group = group
        self.runbooks = {runbook.pk: runbook for runbook in runbooks}

    def clean_fix_url(self) -> str:
        return clean_shown_link(self.cleaned_data["fix_url"])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        runbook_id = data.get("runbook")
        data["runbook"] = None
        if data.get("fix_kind") == FixKind.RUNBOOK_STEP:
            if runbook_id is not None and runbook_id not in self.runbooks:
                self.add_error("runbook", gettext_lazy("Choose one of this group's runbooks."))
            elif runbook_id is not None:
                data["runbook"] = self.runbooks[runbook_id]
            elif len(self.runbooks) == 1:
                data["runbook"] = next(iter(self.runbooks.values()))
        return data
