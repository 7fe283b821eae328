"""The alerts page by role: viewers read; operators edit rules and webhook and
Slack-compatible channels; admins every channel, email ones too."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from alerts import channels, services
from alerts.models import Channel, ChannelKind, Delivery, Rule
from alerts.sinks import WebhookReceiver

pytestmark = pytest.mark.django_db


def test_viewers_read_the_page_without_forms(
    client_as: Callable[..., Any], webhook: Channel, make_rule: Callable[..., Any],
    django_assert_max_num_queries: Any,
) -> None:  # fmt: skip
    make_rule("new_group", [webhook], name="shop-new")
    client = client_as("viewer")
    with django_assert_max_num_queries(12):
        response = client.get("/alerts/")
    assert response.status_code == 200
    assert response.templates[0].name == "alerts/alerts.html"
    body = response.content.decode()
    assert "shop-new" in body and "http://127.0.0.1/••••" in body
    assert "/hook" not in body  # the webhook URL is a secret
    assert "New rule" not in body and "send a test" not in body
    partial = client.get("/alerts/", headers={"HX-Request": "true"})
    assert partial.status_code == 200
    assert partial.content.decode().lstrip().startswith('<section id="delivery-log">')


def test_operators_create_rules(client_as: Callable[..., Any], webhook: Channel) -> None:
    client = client_as("operator")
    body = client.get("/alerts/").content.decode()
    assert "New rule" in body
    response = client.post("/alerts/rules/new", {
        "name": "spikes", "kind": "spike", "enabled": "on", "channels": [webhook.pk],
        "min_interval_minutes": "60", "spike_count": "10", "spike_factor": "3",
        "spike_window_hours": "1",
    })  # fmt: skip
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert (Rule.objects.get().kind, Rule.objects.get().source) == ("spike", "production")
    # A new rule's form starts on production: Quality Lab's test runs page nobody unless asked.
    assert '<option value="production" selected>' in body
    bad = client.post("/alerts/rules/new", {"name": "x", "kind": "spike", "channels": [webhook.pk],
                                            "min_interval_minutes": "60"})  # fmt: skip
    assert bad.status_code == 400
    assert "A spike rule needs N" in bad.content.decode()
    wrong_filter = client.post("/alerts/rules/new", {
        "name": "y", "kind": "retry_budget", "channels": [webhook.pk], "stage": "execute",
        "min_interval_minutes": "60",
    })  # fmt: skip
    assert wrong_filter.status_code == 400
    assert "does not apply" in wrong_filter.content.decode()


def test_operators_create_test_edit_and_delete_webhook_channels(
    client_as: Callable[..., Any], receiver: WebhookReceiver
) -> None:
    client = client_as("operator")
    page = client.get("/alerts/").content.decode()
    assert "New channel" in page
    assert '<option value="email"' not in page  # admins add email channels
    created = client.post("/alerts/channels/new", {"name": "ops", "target": receiver.url("/ops")})
    assert created.status_code == 200, created.content.decode()[-2000:]
    channel = Channel.objects.get(name="ops")
    assert channel.kind == ChannelKind.WEBHOOK
    assert channel.signing_secret in created.content.decode()
    slack = client.post(
        "/alerts/channels/new", {"name": "chat", "kind": "slack", "target": receiver.url("/chat")}
    )
    assert slack.status_code == 200
    assert Channel.objects.get(name="chat").kind == ChannelKind.SLACK

    tested = client.post(f"/alerts/channels/{channel.pk}/test", follow=True)
    assert "Test sent to ops (answer 200)" in tested.content.decode()
    assert client.get(f"/alerts/channels/{channel.pk}/edit").status_code == 200
    edited = client.post(f"/alerts/channels/{channel.pk}/edit", {"target": receiver.url("/new")})
    assert edited.status_code == 302
    channel.refresh_from_db()
    assert channel.target.endswith("/new")
    assert client.post(f"/alerts/channels/{channel.pk}/delete").status_code == 302
    assert not Channel.objects.filter(pk=channel.pk).exists()


def test_operators_are_held_to_the_webhook_address_rule(
    client_as: Callable[..., Any], receiver: WebhookReceiver
) -> None:
    client = client_as("operator")
    metadata = client.post(
        "/alerts/channels/new", {"name": "meta", "target": "http://169.254.169.254/latest/"}
    )
    assert metadata.status_code == 400
    assert "link-local" in metadata.content.decode()
    with override_settings(ALERTS_ALLOWED_HOSTS=[]):
        loopback = client.post("/alerts/channels/new", {"name": "lo", "target": receiver.url()})
    assert loopback.status_code == 400
    assert "a loopback address" in loopback.content.decode()
    assert not Channel.objects.exists()


@pytest.mark.parametrize(
    "form",
    [
        {"name": "mail", "target": "oncall@example.com"},
        {"name": "mail", "kind": "email", "target": "oncall@example.com"},
    ],
    ids=["from the address", "chosen"],
)
def test_an_operator_posting_an_email_channel_gets_a_form_error(
    client_as: Callable[..., Any], form: dict[str, str]
) -> None:
    response = client_as("operator").post("/alerts/channels/new", form)
    assert response.status_code == 400
    assert "Only an admin can add an email channel" in response.content.decode()
    assert not Channel.objects.exists()


def test_operators_cannot_touch_email_channels(
    client_as: Callable[..., Any], webhook: Channel
) -> None:
    mail, _ = services.channel_create(
        name="mail", kind=ChannelKind.EMAIL, target="oncall@example.com"
    )
    client = client_as("operator")
    page = client.get("/alerts/").content.decode()
    assert f"/alerts/channels/{webhook.pk}/edit" in page
    assert f"/alerts/channels/{mail.pk}/edit" not in page
    assert f"/alerts/channels/{mail.pk}/delete" not in page
    assert client.get(f"/alerts/channels/{mail.pk}/edit").status_code == 403
    assert (
        client.post(f"/alerts/channels/{mail.pk}/edit", {"target": "other@example.com"})
    ).status_code == 403
    assert client.post(f"/alerts/channels/{mail.pk}/test").status_code == 403
    assert client.post(f"/alerts/channels/{mail.pk}/delete").status_code == 403
    mail.refresh_from_db()
    assert mail.target == "oncall@example.com"
    assert not Delivery.objects.exists()


def test_admins_still_manage_email_channels(client_as: Callable[..., Any]) -> None:
    client = client_as("admin")
    response = client.post("/alerts/channels/new", {"name": "mail", "target": "a@example.com"})
    assert response.status_code == 200
    mail = Channel.objects.get()
    assert (mail.kind, mail.signing_secret) == (ChannelKind.EMAIL, "")
    edited = client.post(f"/alerts/channels/{mail.pk}/edit", {"target": "b@example.com"})
    assert edited.status_code == 302
    assert client.post(f"/alerts/channels/{mail.pk}/delete").status_code == 302


def test_viewers_create_no_channels(client_as: Callable[..., Any], webhook: Channel) -> None:
    client = client_as("viewer")
    assert "New channel" not in client.get("/alerts/").content.decode()
    form = {"name": "n", "target": "https://hooks.example.com/x"}
    assert client.post("/alerts/channels/new", form).status_code == 403
    assert client.post(f"/alerts/channels/{webhook.pk}/test").status_code == 403
    assert client.post(f"/alerts/channels/{webhook.pk}/delete").status_code == 403


def test_admins_create_a_webhook_and_see_its_secret_once(
    client_as: Callable[..., Any], receiver: WebhookReceiver
) -> None:
    client = client_as("admin")
    response = client.post(
        "/alerts/channels/new", {"name": "ops", "kind": "webhook", "target": receiver.url()}
    )
    assert response.status_code == 200
    channel = Channel.objects.get()
    assert channel.signing_secret in response.content.decode()
    assert channel.signing_secret not in client.get("/alerts/").content.decode()

    refused = client.post(
        "/alerts/channels/new",
        {"name": "meta", "kind": "webhook", "target": "http://169.254.169.254/latest/"},
    )
    assert refused.status_code == 400
    assert "link-local" in refused.content.decode()
    assert Channel.objects.count() == 1


def test_a_single_label_webhook_host_is_judged_by_its_address(
    client_as: Callable[..., Any], receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``http://receiver:PORT`` (a compose service): refused while its loopback address is
    not allowed on that port, created and delivered to once it is."""
    monkeypatch.setattr(
        channels, "resolver", lambda host, port: [ipaddress.ip_address("127.0.0.1")]
    )
    client = client_as("admin")
    target = f"http://receiver:{receiver.port}/hook"
    form = {"name": "ops", "kind": "slack", "target": target}
    for allowed in ([], [f"receiver:{receiver.port + 1}"], [f"127.0.0.1:{receiver.port + 1}"]):
        with override_settings(ALERTS_ALLOWED_HOSTS=allowed):
            refused = client.post("/alerts/channels/new", form)
        assert refused.status_code == 400, allowed
        assert "a loopback address" in refused.content.decode()
    assert not Channel.objects.exists()
    with override_settings(ALERTS_ALLOWED_HOSTS=[f"receiver:{receiver.port}"]):
        assert client.post("/alerts/channels/new", form).status_code == 200
        channel = Channel.objects.get()
        sent = client.post(f"/alerts/channels/{channel.pk}/test", follow=True)
    assert "answer 200" in sent.content.decode()
    [request] = receiver.wait_for(1)
    assert request.path == "/hook"


def test_send_a_test_shows_the_answer(
    client_as: Callable[..., Any], webhook: Channel, receiver: WebhookReceiver
) -> None:
    response = client_as("admin").post(f"/alerts/channels/{webhook.pk}/test", follow=True)
    assert "Test sent to hook (answer 200)" in response.content.decode()
    assert receiver.wait_for(1)[0].signature_ok
    assert Delivery.objects.get().is_test
    assert client_as("viewer").post(f"/alerts/channels/{webhook.pk}/test").status_code == 403


def test_a_channel_edit_checks_the_new_address(
    client_as: Callable[..., Any], webhook: Channel
) -> None:
    client = client_as("admin")
    assert client.get(f"/alerts/channels/{webhook.pk}/edit").status_code == 200
    response = client.post(f"/alerts/channels/{webhook.pk}/edit", {"target": "http://10.0.0.1/"})
    assert response.status_code == 400
    webhook.refresh_from_db()
    assert webhook.target.startswith("http://127.0.0.1")
    ok = client.post(f"/alerts/channels/{webhook.pk}/edit", {"target": "ops@example.com"})
    assert ok.status_code == 400  # a webhook's address is a URL
    services.channel_create(name="mail", kind=ChannelKind.EMAIL, target="a@example.com")


def test_a_bad_rule_filter_in_the_address_is_a_form_error(client_as: Callable[..., Any]) -> None:
    response = client_as("viewer").get("/alerts/?rule=abc")
    assert response.status_code == 400
    assert "This page cannot show" in response.content.decode()
