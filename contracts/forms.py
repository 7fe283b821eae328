from __future__ import annotations

from typing import Any

from django import forms
from django.utils.functional import lazy
from django.utils.translation import gettext, gettext_lazy

from contracts.models import FindingKind
from contracts.selectors import DEFAULT_DAYS, MAX_DAYS, ContractsFilters
from core.collection_names import collection_name_problem
from core.storable import identifier_problem


def window_days_field(maximum: int) -> forms.IntegerField:
    """A window of 1 to `maximum` days, optional (each form says its default). Too short or
    too long, the message names both ends (the limit Django passes is the one crossed)."""
    message = lazy(
        lambda: gettext("The window is 1 to %(limit_value)s days.") % {"limit_value": maximum},
        str,
    )()
    return forms.IntegerField(
        required=False,
        min_value=1,
        max_value=maximum,
        label=gettext_lazy("days"),
        error_messages={"min_value": message, "max_value": message},
    )


class ToolScopeForm(forms.Form):
    """One collection and one tool, each checked as ingest checks names (the fixes list
    filters by them too)."""

    collection = forms.CharField(required=False, max_length=200, strip=False)
    tool = forms.CharField(required=False, max_length=200, strip=False)

    def clean_collection(self) -> str | None:
        value = self.cleaned_data["collection"]
        if value and (problem := collection_name_problem(value)):
            raise forms.ValidationError(
                gettext_lazy("The collection name %(problem)s."),
                code="invalid_collection",
                params={"problem": problem},
            )
        return value or None

    def clean_tool(self) -> str | None:
        value = self.cleaned_data["tool"]
        if value and (problem := identifier_problem(value)):
            raise forms.ValidationError(
                gettext_lazy("The tool name holds %(problem)s."),
                code="invalid_tool",
                params={"problem": problem},
            )
        return value or None


class ContractsFilterForm(ToolScopeForm):
    """The page's, the API's and the CLI's filters: the window and one tool or collection."""

    days = window_days_field(MAX_DAYS)
    kind = forms.ChoiceField(required=False, choices=[("", ""), *FindingKind.choices])

    def filters(self) -> ContractsFilters:
        data: dict[str, Any] = self.cleaned_data
        return ContractsFilters(
            days=data.get("days") or DEFAULT_DAYS,
            collection=data.get("collection"),
            tool=data.get("tool"),
        )
