"""The channel form reads the kind from the pasted address unless one is chosen, and says
what is wrong when the chosen kind and the address disagree."""

from __future__ import annotations

import pytest

from alerts.forms import AUTO_KIND, ChannelForm, LogQueryForm
from alerts.models import ChannelKind


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        ("https://hooks.example.com/triage", ChannelKind.WEBHOOK),
        ("http://receiver:8091/hook", ChannelKind.WEBHOOK),
        ("HTTPS://hooks.example.com/triage", ChannelKind.WEBHOOK),
        ("https://hooks.slack.com/services/T0/B0/secret", ChannelKind.SLACK),
        ("  oncall@example.com ", ChannelKind.EMAIL),
    ],
)
def test_the_kind_comes_from_the_pasted_address(target: str, kind: str) -> None:
    form = ChannelForm({"name": "ops", "kind": AUTO_KIND, "target": target})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["kind"] == kind


def test_a_form_without_a_kind_reads_it_from_the_address() -> None:
    form = ChannelForm({"name": "ops", "target": "oncall@example.com"})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["kind"] == ChannelKind.EMAIL


def test_the_kind_select_starts_on_from_the_address_not_email() -> None:
    html = str(ChannelForm()["kind"])
    assert '<option value="auto" selected>' in html
    assert '<option value="email" selected>' not in html


@pytest.mark.parametrize(
    ("kind", "target"),
    [
        (ChannelKind.SLACK, "https://hooks.example.com/chat"),
        (ChannelKind.WEBHOOK, "https://hooks.slack.com/services/T0/B0/secret"),
        (ChannelKind.EMAIL, "oncall@example.com"),
    ],
)
def test_a_chosen_kind_the_address_allows_is_kept(kind: str, target: str) -> None:
    form = ChannelForm({"name": "ops", "kind": kind, "target": target})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["kind"] == kind


def test_email_chosen_for_a_url_is_an_error_naming_it() -> None:
    form = ChannelForm({"name": "ops", "kind": "email", "target": "https://hooks.example.com/x"})
    assert not form.is_valid()
    assert "The kind is email but the address is a URL" in form.errors["kind"][0]


@pytest.mark.parametrize("kind", [ChannelKind.WEBHOOK, ChannelKind.SLACK])
def test_a_webhook_chosen_for_an_email_address_is_an_error_naming_it(kind: str) -> None:
    form = ChannelForm({"name": "ops", "kind": kind, "target": "oncall@example.com"})
    assert not form.is_valid()
    assert "The kind is a webhook but the address is an email address" in form.errors["kind"][0]


@pytest.mark.parametrize("target", ["oncall", "ftp://files.example.com/hook", "example.com/hook"])
def test_an_address_of_no_kind_is_an_error_when_the_kind_is_not_chosen(target: str) -> None:
    form = ChannelForm({"name": "ops", "kind": AUTO_KIND, "target": target})
    assert not form.is_valid()
    assert "Paste an email address, or a webhook URL" in form.errors["target"][0]


def test_without_email_allowed_email_is_not_offered_and_is_refused_by_name() -> None:
    empty = ChannelForm(email_allowed=False)
    assert '<option value="email"' not in str(empty["kind"])
    pasted = ChannelForm({"name": "m", "target": "a@example.com"}, email_allowed=False)
    assert not pasted.is_valid()
    assert "Only an admin can add an email channel" in pasted.errors["target"][0]
    chosen = ChannelForm(
        {"name": "m", "kind": "email", "target": "a@example.com"}, email_allowed=False
    )
    assert not chosen.is_valid()
    assert "Only an admin can add an email channel" in chosen.errors["kind"][0]
    webhook = ChannelForm({"name": "w", "target": "https://h.example.com/x"}, email_allowed=False)
    assert webhook.is_valid(), webhook.errors


@pytest.mark.parametrize(
    "query",
    [
        {"before": "yesterday"},
        {"before": "2026-01-01T00:00:00+00:00_x"},
        {"after": "2026-01-01T00:00:00_12"},  # no offset: not a cursor the log wrote
        {"after": "9999-12-31T23:59:59-23:59_1"},
        {"before": "2026-01-01T00:00:00+00:00_1", "after": "2026-01-01T00:00:00+00:00_2"},
    ],
)
def test_a_log_page_the_log_did_not_write_is_refused(query: dict[str, str]) -> None:
    assert not LogQueryForm(query).is_valid()
