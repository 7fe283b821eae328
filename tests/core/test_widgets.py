"""The desk's form renderer writes inputs and selects in Python (core.widgets): they must stay
exactly what Django's own widget templates write, so a Django upgrade that changes those
templates fails here rather than on a page. It is every form's renderer, so the pages' forms
are compared here, unbound and bound to odd values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django import forms
from django.forms.renderers import DjangoTemplates, get_default_renderer
from django.utils import timezone
from django.utils.safestring import mark_safe

from alerts.forms import ChannelForm, LogQueryForm, RuleForm
from contracts.forms import ContractsFilterForm
from core.widgets import INPUT_TEMPLATES, PythonWidgets
from learning.forms import QueueFilterForm
from organisation.forms import AuditQueryForm, MemberForm, TeamForm
from qualitylab.forms import CollectionCreateForm, RunCompareForm
from triage.forms import (
    ApiKeyCreateForm,
    BulkActionForm,
    GroupActionForm,
    GroupRecordsForm,
    IngestionQueryForm,
    RunbookForm,
    TimeZonePreferenceForm,
    TriageFilterForm,
)

pytestmark = pytest.mark.django_db


def _both(form: forms.BaseForm) -> tuple[str, str]:
    html = []
    for renderer in (DjangoTemplates(), PythonWidgets()):
        form.renderer = renderer
        html.append("".join(str(field) for field in form))
    return html[0], html[1]


def test_every_form_renders_with_it() -> None:
    assert isinstance(get_default_renderer(), PythonWidgets)


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


# Each page's forms, as their views make them, empty and filled with odd values.
ODD = {
    "action": "mute",
    "assignee": "<nobody>",
    "mute_for": "-1",
    "mute_count": "x",
    "confirm_count": "-1",
    "query": "<b>",
    "note": 'a "quoted" <note> & more',
    "url": "javascript:alert(1)",
    "subject": "tool",
    "scope": "every",
    "name": "<team>",
    "collection": 'c"<',
    "time_zone": "Mars/Olympus",
    "before": "2026-13-45",
    "scopes": ["read", "nonsense"],
    "kind": "webhook",
    "target": "http://127.0.0.1/",
    "status": "any",
}
FORMS: dict[str, Callable[[Any, Any], forms.BaseForm]] = {
    "bulk": lambda data, user: BulkActionForm(data, user=user),
    "group action": lambda data, user: GroupActionForm(data, user=user),
    "group records": lambda data, user: GroupRecordsForm(data),
    "runbook": lambda data, user: RunbookForm(data),
    "time zone": lambda data, user: TimeZonePreferenceForm(data),
    "API key": lambda data, user: ApiKeyCreateForm(data),
    "ingestion query": lambda data, user: IngestionQueryForm(data),
    "alert rule": lambda data, user: RuleForm(data, user=user),
    "alert channel": lambda data, user: ChannelForm(data),
    "alert log": lambda data, user: LogQueryForm(data),
    "contracts filter": lambda data, user: ContractsFilterForm(data),
    "review queue": lambda data, user: QueueFilterForm(data, collections=["shop", 'c"<']),
    "team": lambda data, user: TeamForm(data),
    "member": lambda data, user: MemberForm(data),
    "audit": lambda data, user: AuditQueryForm(data),
    "Quality Lab collection": lambda data, user: CollectionCreateForm(data),
    "run compare": lambda data, user: RunCompareForm(data),
}


@pytest.mark.parametrize("name", sorted(FORMS))
@pytest.mark.parametrize("data", [None, ODD], ids=["empty", "odd values"])
def test_the_pages_forms_are_written_as_djangos_templates_write_them(
    name: str, data: Any, django_user_model: Any
) -> None:
    user = django_user_model.objects.create_user("renderer", is_superuser=True)
    django_user_model.objects.create_user('"<odd>&name')
    form = FORMS[name](data, user)
    form.is_valid()
    django, ours = _both(form)
    assert ours == django


class _Odd(forms.Form):
    """Every widget written here, with values a form could hold."""

    flag = forms.BooleanField(required=False, widget=forms.CheckboxInput(attrs={"data-x": True}))
    grouped = forms.ChoiceField(
        choices=[("Fruit", [("a", "<apple>"), ("b", mark_safe("<i>b</i>"))]), ("c", "c")]
    )
    number = forms.IntegerField(widget=forms.NumberInput(attrs={"disabled": False, "min": 0}))
    hidden = forms.CharField(widget=forms.HiddenInput, initial='"quoted"')
    email = forms.EmailField(required=False)
    url = forms.URLField(
        required=False, assume_scheme="https", widget=forms.URLInput(attrs={"placeholder": "<url>"})
    )
    password = forms.CharField(widget=forms.PasswordInput(render_value=True))
    secret = forms.CharField(widget=forms.PasswordInput)
    phone = forms.CharField(widget=forms.TextInput(attrs={"type": "tel"}))
    search = forms.CharField(widget=forms.SearchInput)
    colour = forms.CharField(widget=forms.ColorInput)
    day = forms.DateField(widget=forms.DateInput)
    moment = forms.DateTimeField(widget=forms.DateTimeInput)
    clock = forms.TimeField(widget=forms.TimeInput)
    upload = forms.FileField(required=False)
    many = forms.MultipleChoiceField(choices=[("1", "one"), ("2", "<two>")])
    note = forms.CharField(widget=forms.Textarea)


def test_every_widget_written_here_comes_out_as_django_writes_it() -> None:
    form = _Odd(
        {
            "grouped": "b",
            "number": "3",
            "hidden": "x&y",
            "email": 'a"@b',
            "url": "<x>",
            "password": "p<w>",
            "secret": "not shown",
            "phone": "+82 &",
            "search": '"',
            "colour": "#ff0000",
            "day": "2026-02-30",
            "moment": "2026-12-05 18:41",
            "clock": "25:00",
            "many": ["2"],
            "note": "</textarea>",
            "flag": "on",
        }
    )
    form.is_valid()
    django, ours = _both(form)
    assert ours == django


def test_the_templates_written_here_only_include_djangos_input() -> None:
    """A widget template is written here only when all it does is include input.html."""
    renderer = PythonWidgets()
    for name in INPUT_TEMPLATES - {"django/forms/widgets/input.html"}:
        source = renderer.get_template(name).template.source.strip()
        assert source == '{% include "django/forms/widgets/input.html" %}', name
