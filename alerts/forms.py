"""Forms of the alerts page: a rule, a channel, a channel's new address, the log's filter."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from alerts.models import PRODUCTION_SOURCE, Channel, ChannelKind, Rule, kind_for_target
from alerts.selectors import LogCursor
from organisation import roles
from organisation.access import can_see, has_collection_perm
from triage.vocabulary import taxonomy


def _choices(values: Any) -> list[tuple[str, str]]:
    return [("", _("any")), *[(value, value) for value in values]]


class _ChannelChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        # The kind in the page's language ("shop-hook · 웹훅 (JSON, 서명됨)"), not its code.
        return f"{obj.name} · {obj.get_kind_display()}"


class RuleForm(forms.ModelForm):
    """A rule. Its collection is one the person sees and may write rules for; no collection
    (the whole desk) only for those who see things of no collection (alerts.selectors)."""

    channels = _ChannelChoiceField(
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

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_collection(self) -> str:
        collection = str(self.cleaned_data["collection"])
        if not can_see(self.user, collection):
            if not collection:
                raise forms.ValidationError(
                    _(
                        "A rule with no collection watches every team's collections: choose "
                        "one of your team's collections."
                    ),
                    code="collection_required",
                )
            raise forms.ValidationError(
                _("Choose one of your team's collections."), code="collection_not_allowed"
            )
        if not has_collection_perm(self.user, roles.CHANGE_ALERT_RULES, collection):
            raise forms.ValidationError(
                _("Your role may not change the alert rules of this collection."),
                code="collection_not_allowed",
            )
        return collection

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


# The kind select's first choice: the kind the pasted address is (`kind_for_target`).
AUTO_KIND = "auto"
_WEBHOOK_KINDS = (ChannelKind.WEBHOOK, ChannelKind.SLACK)


class ChannelForm(forms.Form):
    """A new channel. Its kind is read from the pasted address unless the person chose one;
    a chosen kind the address contradicts is an error. Without `email_allowed` (operators)
    email is not offered, and an email address is an error saying who adds one."""

    name = forms.SlugField(max_length=100, label=_("Name"))
    kind = forms.ChoiceField(
        choices=[(AUTO_KIND, _("from the address")), *ChannelKind.choices],
        initial=AUTO_KIND,
        required=False,  # not sent (a client that is no browser): from the address
        label=_("Kind"),
    )
    target = forms.CharField(
        max_length=2000,
        label=_("email address or webhook URL"),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def __init__(self, *args: Any, email_allowed: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.email_allowed = email_allowed
        if not email_allowed:
            kind = self.fields["kind"]
            # The field still accepts email, so that choosing it says why it is refused.
            kind.widget.choices = [
                choice
                for choice in kind.choices  # type: ignore[attr-defined]
                if choice[0] != ChannelKind.EMAIL
            ]
            self.fields["target"].label = _("webhook URL")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        target = data.get("target")
        chosen = data.get("kind") or AUTO_KIND
        if target is None or "kind" in self.errors:
            return data
        found = kind_for_target(target)
        if chosen == AUTO_KIND and found is None:
            self.add_error(
                "target",
                _("Paste an email address, or a webhook URL starting with https:// or http://."),
            )
            return data
        if chosen == ChannelKind.EMAIL and found in _WEBHOOK_KINDS:
            self.add_error(
                "kind",
                _(
                    "The kind is email but the address is a URL: choose a webhook kind, or "
                    "“from the address”."
                ),
            )
        elif chosen in _WEBHOOK_KINDS and found == ChannelKind.EMAIL:
            self.add_error(
                "kind",
                _(
                    "The kind is a webhook but the address is an email address: paste the "
                    "webhook's URL, or choose email."
                ),
            )
        kind = found if chosen == AUTO_KIND else chosen
        if kind == ChannelKind.EMAIL and not self.email_allowed and "kind" not in self.errors:
            self.add_error(
                "kind" if chosen == ChannelKind.EMAIL else "target",
                _(
                    "Only an admin can add an email channel; you can add webhook and "
                    "Slack-compatible channels."
                ),
            )
        data["kind"] = kind
        return data


class ChannelEditForm(forms.Form):
    target = forms.CharField(
        max_length=2000,
        label=_("new email address or webhook URL"),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


class LogQueryForm(forms.Form):
    """The delivery log's address: which rule, and which page (a keyset cursor from the
    log's own older and newer links)."""

    rule = forms.IntegerField(label=_("Rule"), required=False, min_value=1, max_value=2**63 - 1)
    before = forms.CharField(label=_("Older than"), required=False, max_length=80)
    after = forms.CharField(label=_("Newer than"), required=False, max_length=80)

    def _cursor(self, name: str) -> LogCursor | None:
        raw = self.cleaned_data.get(name) or ""
        if not raw:
            return None
        cursor = LogCursor.parse(raw)
        if cursor is None:
            raise forms.ValidationError(
                _("Not a page of this log: follow the log's own older and newer links."),
                code="invalid_cursor",
            )
        return cursor

    def clean_before(self) -> LogCursor | None:
        return self._cursor("before")

    def clean_after(self) -> LogCursor | None:
        return self._cursor("after")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("before") and data.get("after"):
            raise forms.ValidationError(
                _("A page is older or newer than one delivery, not both."), code="two_cursors"
            )
        return data
