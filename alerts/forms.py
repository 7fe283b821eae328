"""Forms of the alerts page: a rule, a channel, a channel's new address, the log's filter."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from alerts.models import PRODUCTION_SOURCE, Channel, ChannelKind, Rule
from triage import taxonomy


def _choices(values: Any) -> list[tuple[str, str]]:
    return [("", _("any")), *[(value, value) for value in values]]


class RuleForm(forms.ModelForm):
    channels = forms.ModelMultipleChoiceField(
        queryset=Channel.objects.all(), widget=forms.CheckboxSelectMultiple, label=_("Channels")
    )
    lane = forms.ChoiceField(choices=_choices(taxonomy.LANES), required=False, label=_("Lane"))
    source = forms.ChoiceField(
        choices=[
            ("", _("any")),
            (PRODUCTION_SOURCE, _("production (not Quality Lab)")),
            *[(value, value) for value in taxonomy.SOURCES],
        ],
        required=False,
        initial=PRODUCTION_SOURCE,
        label=_("Source"),
    )
    execution_state = forms.ChoiceField(
        choices=_choices(taxonomy.EXECUTION_STATES), required=False, label=_("Execution state")
    )

    def clean_source(self) -> str:
        # Not sent at all (a client that is no browser): the default, as everywhere else.
        if "source" not in self.data:
            return PRODUCTION_SOURCE
        return str(self.cleaned_data["source"])

    class Meta:
        model = Rule
        fields = [
            "name", "kind", "enabled", "channels", "collection", "stage", "reason", "tool",
            "lane", "source", "execution_state", "min_interval_minutes", "spike_count",
            "spike_factor", "spike_window_hours", "wait_minutes", "pass_rate_floor",
        ]  # fmt: skip
        labels = {
            "name": _("Name"),
            "kind": _("Kind"),
            "enabled": _("Enabled"),
            "collection": _("Collection"),
            "stage": _("Stage"),
            "reason": _("Reason"),
            "tool": _("Tool"),
            "min_interval_minutes": _("minimum interval per subject (minutes)"),
            "spike_count": _("spike: at least N records"),
            "spike_factor": _("spike: at least X times the window before"),
            "spike_window_hours": _("spike: window (hours)"),
            "wait_minutes": _("waiting longer than T (minutes)"),
            "pass_rate_floor": _("Quality Lab: pass rate under R (0-1)"),
        }


class ChannelForm(forms.Form):
    name = forms.SlugField(max_length=100, label=_("Name"))
    kind = forms.ChoiceField(choices=ChannelKind.choices, label=_("Kind"))
    target = forms.CharField(
        max_length=2000,
        label=_("email address or webhook URL"),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


class ChannelEditForm(forms.Form):
    target = forms.CharField(
        max_length=2000,
        label=_("new email address or webhook URL"),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


class LogQueryForm(forms.Form):
    rule = forms.IntegerField(label=_("Rule"), required=False, min_value=1, max_value=2**63 - 1)
