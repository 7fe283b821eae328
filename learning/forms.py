"""Forms of the learning review: the queue's filters (in the URL) and the decisions."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext, gettext_lazy
from graph_tool_call.learning import SUGGESTION_TYPES

from learning.models import QUEUE_ORDER, RejectionReason
from learning.selectors import QueueFilters
from qualitylab.models import LearningMode
from triage.forms import search_text


class QueueFilterForm(forms.Form):
    """Every filter lives in the URL, so a filtered queue is a link that can be shared."""

    collection = forms.ChoiceField(label=gettext_lazy("Collection"), required=False)
    type = forms.ChoiceField(
        label=gettext_lazy("Type"),
        choices=[
            ("", gettext_lazy("any type")),
            *((name, name) for name in sorted(SUGGESTION_TYPES)),
        ],
        required=False,
    )
    status = forms.ChoiceField(
        label=gettext_lazy("Status"),
        choices=[
            ("", gettext_lazy("any status")),
            *((status.value, status.label) for status in QUEUE_ORDER),
        ],
        required=False,
    )
    family = forms.CharField(required=False, max_length=200, label=gettext_lazy("query family"))
    page = forms.IntegerField(
        label=gettext_lazy("Page"), required=False, min_value=1, max_value=1_000_000
    )

    def __init__(self, *args: Any, collections: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["collection"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", gettext("any collection")), *((name, name) for name in collections)]
        self.fields["family"].widget.attrs.update(
            {"placeholder": gettext("query family contains…"), "type": "search"}
        )

    def filters(self) -> QueueFilters:
        """The filters that passed validation: a refused one is dropped (the page shows
        its error), the others still apply."""
        if not self.is_bound:
            return QueueFilters()
        self.is_valid()
        data = self.cleaned_data
        return QueueFilters(
            collection=data.get("collection") or "",
            type=data.get("type") or "",
            status=data.get("status") or "",
            family=search_text(data.get("family") or ""),
        )

    def page_number(self) -> int:
        if not self.is_bound or not self.is_valid():
            return 1
        return self.cleaned_data.get("page") or 1


class ApproveForm(forms.Form):
    reason = forms.CharField(label=gettext_lazy("Reason"), max_length=2000, strip=True)


class RejectForm(forms.Form):
    reason = forms.ChoiceField(label=gettext_lazy("Reason"), choices=RejectionReason.choices)
    note = forms.CharField(label=gettext_lazy("Note"), max_length=4000, strip=True)


class DemoteForm(forms.Form):
    reason = forms.CharField(label=gettext_lazy("Reason"), max_length=2000, strip=True)


class PolicyForm(forms.Form):
    learning_mode = forms.ChoiceField(
        label=gettext_lazy("Learning mode"), choices=LearningMode.choices
    )
    learning_allowed = forms.BooleanField(label=gettext_lazy("Learning allowed"), required=False)
    write_capable = forms.BooleanField(label=gettext_lazy("Write-capable"), required=False)
