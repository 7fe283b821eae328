"""The triage page writes its forms' selects and inputs in Python (triage.pages.groups,
`_PythonWidgets`): they must stay exactly what Django's own widget templates write, so a
Django upgrade that changes those templates fails here rather than on the page."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms
from django.forms.renderers import DjangoTemplates
from django.utils import timezone
from django.utils.safestring import mark_safe

from triage.forms import BulkActionForm, TriageFilterForm
from triage.pages.groups import _WIDGETS

pytestmark = pytest.mark.django_db


def _both(form: forms.Form) -> tuple[str, str]:
    html = []
    for renderer in (DjangoTemplates(), _WIDGETS):
        form.renderer = renderer
        html.append("".join(str(field) for field in form))
    return html[0], html[1]


@pytest.mark.parametrize(
    "data",
    [
        None,
        {"window": "7d", "status": "any", "sort": "stage", "collection": 'sh"op<&>'},
        {"window": "custom", "start": "not a time", "end": "2026-01-01T00:00"},
        {"window": "24h", "lane": "retry_safe", "execution_state": "no_such_state"},
    ],
)
def test_the_filter_form_is_written_as_djangos_templates_write_it(data: Any) -> None:
    form = TriageFilterForm(data, now=timezone.now())
    form.is_valid()
    django, ours = _both(form)
    assert ours == django


def test_the_bulk_form_is_written_as_djangos_templates_write_it(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("bulk-renderer")
    for form in (
        BulkActionForm(),
        BulkActionForm({"action": "mute", "confirm_count": "-1", "query": "<b>"}, user=user),
    ):
        form.is_valid()
        django, ours = _both(form)
        assert ours == django


class _Odd(forms.Form):
    """What the page's forms do not hold today but the renderer claims to write."""

    flag = forms.BooleanField(required=False, widget=forms.CheckboxInput(attrs={"data-x": True}))
    grouped = forms.ChoiceField(
        choices=[("Fruit", [("a", "<apple>"), ("b", mark_safe("<i>b</i>"))]), ("c", "c")]
    )
    number = forms.IntegerField(widget=forms.NumberInput(attrs={"disabled": False, "min": 0}))
    hidden = forms.CharField(widget=forms.HiddenInput, initial='"quoted"')


def test_other_widgets_and_odd_values_come_out_as_django_writes_them() -> None:
    django, ours = _both(_Odd({"grouped": "b", "number": "3", "hidden": "x&y"}))
    assert ours == django
