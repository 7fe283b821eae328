"""A delivery always ends with its outcome recorded: a channel that raises, a header Django
refuses, a worker that died on the last attempt. And a webhook URL with a control character
is refused wherever a channel is made, its secret page is never cached."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from alerts import channels, services
from alerts.models import Channel, ChannelKind, Delivery, DeliveryStatus, RuleKind
from alerts.selectors import Match
from alerts.sinks import SmtpSink, WebhookReceiver
from triage.models import IngestRejection

pytestmark = pytest.mark.django_db


def _match(tool: str = "getOrder") -> Match:
    now = timezone.now()
    return Match(
        subject="group:1", window="w",
        group={"id": 1, "stage": "execute", "reason": "http_5xx", "tool": tool,
               "collection": "crlf", "lane": "retry_safe",
               "url": "http://127.0.0.1:8000/triage/groups/1/"},
        count=1, window_start=now, window_end=now, first_seen=now, summary=f"new: {tool}",
    )  # fmt: skip


def test_a_channel_whose_send_raises_ends_failed_with_its_error_after_its_attempts(
    webhook: Channel, make_rule: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:  # fmt: skip
    settings.ALERTS_DELIVERY_ATTEMPTS = 2
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)

    def raises(channel: Channel, message: channels.Message) -> channels.Answer:
        raise RuntimeError("the channel broke at 'http://127.0.0.1/secret-path'")

    monkeypatch.setattr(channels, "send", raises)
    rule = make_rule(RuleKind.NEW_GROUP, [webhook])
    now = timezone.now()
    [delivery_id] = services.rule_fire(rule=rule, matches=[_match()], now=now)
    first = services.delivery_attempt(delivery_id=delivery_id, now=now)
    assert first.status == DeliveryStatus.RETRYING
    delivery = Delivery.objects.get(pk=delivery_id)
    assert delivery.status == DeliveryStatus.RETRYING
    assert delivery.error.startswith("RuntimeError: the channel broke")
    assert "secret-path" not in delivery.error  # what the exception quoted is left out
    second = services.delivery_attempt(delivery_id=delivery_id, now=now + timedelta(minutes=5))
    assert second.status == DeliveryStatus.FAILED
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.lease_until) == ("failed", 2, None)
    assert delivery.error.startswith("RuntimeError")
    # Nothing is queued again for it.
    assert services.deliveries_resend_due(now=now + timedelta(hours=1)) == 0


def test_a_header_django_refuses_fails_the_email_delivery_at_once(
    smtp: SmtpSink, make_rule: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group stored before identifiers refused control characters still has one."""
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
    mail, _ = services.channel_create(name="mail", kind=ChannelKind.EMAIL, target="a@example.com")
    rule = make_rule(RuleKind.NEW_GROUP, [mail])
    [delivery_id] = services.rule_fire(
        rule=rule, matches=[_match("getOrder\r\nBcc: x@attacker.example")], now=timezone.now()
    )
    outcome = services.delivery_attempt(delivery_id=delivery_id)
    assert outcome.status == DeliveryStatus.FAILED
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.answer_code, delivery.attempts) == ("bad_header", 1)
    assert "BadHeaderError" in delivery.error
    assert smtp.wait_for(1, timeout=0.3) == []


def test_a_delivery_left_sending_with_no_attempts_left_is_failed_not_taken_over(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch, settings: Any,
) -> None:  # fmt: skip
    settings.ALERTS_DELIVERY_ATTEMPTS = 3
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
    rule = make_rule(RuleKind.NEW_GROUP, [webhook])
    now = timezone.now()
    [delivery_id] = services.rule_fire(rule=rule, matches=[_match()], now=now)
    Delivery.objects.filter(pk=delivery_id).update(
        status="sending", attempts=3, lease_until=now - timedelta(seconds=1)
    )
    assert services.deliveries_resend_due(now=now) == 0
    assert services.delivery_attempt(delivery_id=delivery_id, now=now).status == "skipped"
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts) == ("failed", 3)
    assert "no attempts are left" in delivery.error
    assert receiver.wait_for(1, timeout=0.3) == []


def test_the_reproduction_a_crlf_tool_is_refused_at_ingest_and_nothing_is_stuck(
    smtp: SmtpSink, make_rule: Callable[..., Any], inline_queue: list[Any],
    ingest_client: Any, django_capture_on_commit_callbacks: Any,
) -> None:  # fmt: skip
    mail, _ = services.channel_create(name="mail", kind=ChannelKind.EMAIL, target="a@example.com")
    make_rule(RuleKind.NEW_GROUP, [mail], collection="crlf")
    bad = {"stage": "execute", "reason": "http_5xx",
           "tool": "getOrder\r\nBcc: x@attacker.example", "collection": "crlf"}  # fmt: skip
    good = {"stage": "execute", "reason": "http_5xx", "tool": "getOrder", "collection": "crlf"}
    with django_capture_on_commit_callbacks(execute=True):
        response = ingest_client.post(
            "/api/v1/ingest",
            {
                "items": [
                    {"type": "failure", "id": "bad", "body": bad},
                    {"type": "failure", "id": "good", "body": good},
                ]
            },
            format="json",
        )
    assert response.status_code == 207
    refused = response.json()["items"][0]
    assert refused["status"] == "rejected"
    assert (refused["error"]["code"], refused["error"]["field"]) == (
        "invalid_character",
        "body.tool",
    )
    assert "U+000D" in refused["error"]["message"]
    [rejection] = IngestRejection.objects.all()  # in the ledger, as every refusal is
    assert (rejection.client_id, rejection.code) == ("bad", "invalid_character")
    [(recipients, message)] = smtp.wait_for(1)
    assert "getOrder" in message["Subject"] and "attacker" not in str(message)
    assert recipients == ["a@example.com"]
    assert set(Delivery.objects.values_list("status", flat=True)) == {"sent"}


@pytest.mark.parametrize(
    "target",
    [
        "http://hooks.example/a\r\nX-Injected: 1",
        "http://hooks.example/a\nb",
        "http://hooks.example/a\tb",
        "http://hooks.example/\x7f",
    ],
)
def test_a_webhook_url_with_a_control_character_is_refused_without_echoing_it(
    target: str,
) -> None:
    with pytest.raises(services.ChannelError) as refused:
        services.channel_create(name="hook", kind=ChannelKind.WEBHOOK, target=target)
    assert refused.value.code == "invalid_url"
    assert "hooks.example/a" not in str(refused.value)
    assert not Channel.objects.exists()


def test_a_webhook_saved_with_a_crlf_url_fails_at_once_without_its_path_in_the_error(
    receiver: WebhookReceiver, make_rule: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A channel saved before its URL was checked at creation (the form let it through)."""
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
    hook = Channel.objects.create(
        name="old", kind=ChannelKind.WEBHOOK, signing_secret="s" * 32,
        target=receiver.url("/secret-path") + "\r\nX-Injected: 1",
    )  # fmt: skip
    rule = make_rule(RuleKind.NEW_GROUP, [hook])
    [delivery_id] = services.rule_fire(rule=rule, matches=[_match()], now=timezone.now())
    assert services.delivery_attempt(delivery_id=delivery_id).status == DeliveryStatus.FAILED
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.answer_code, delivery.attempts) == ("invalid_url", 1)
    assert "control characters" in delivery.error and "secret-path" not in delivery.error
    assert receiver.wait_for(1, timeout=0.3) == []


def _http_client_refusal() -> Exception:
    """What http.client raises for a path with CR/LF (its text quotes the path)."""
    import http.client

    try:
        http.client.HTTPConnection("127.0.0.1").putrequest("POST", "/secret-path\r\nX: 1")
    except http.client.InvalidURL as exc:
        return exc
    raise AssertionError("http.client took a path with CR/LF")


@pytest.mark.parametrize(
    "exc",
    [
        _http_client_refusal(),
        OSError(2, "No such file", "/secret-path"),
        UnicodeEncodeError("ascii", "/secret-pathé", 12, 13, "ordinal not in range"),
        RuntimeError("cannot reach http://127.0.0.1/secret-path?token=it's"),
    ],
)
def test_a_delivery_error_leaves_out_what_the_exception_quoted(exc: Exception) -> None:
    error = channels.short_error(exc)
    assert error.startswith(exc.__class__.__name__)
    assert "secret-path" not in error


def test_the_form_and_the_command_line_refuse_a_crlf_webhook_url(
    client_as: Callable[..., Any], webhook: Channel
) -> None:
    target = "http://127.0.0.1/secret-path\r\nX: 1"
    response = client_as("admin").post(
        "/alerts/channels/new", {"name": "crlf", "kind": "webhook", "target": target}
    )
    assert response.status_code == 400
    body = response.content.decode()
    error = body[body.index('<ul class="errorlist"') :]
    error = error[: error.index("</ul>")]
    # The admin's own input is shown back in its field; the error never repeats it.
    assert "control characters" in error and "secret-path" not in error
    edit = client_as("admin").post(f"/alerts/channels/{webhook.pk}/edit", {"target": target})
    assert edit.status_code == 400
    with pytest.raises(CommandError) as refused:
        call_command("alerts", "channel-add", "crlf2", "--webhook", target, stdout=StringIO())
    assert "control characters" in str(refused.value)
    assert "secret-path" not in str(refused.value)
    assert set(Channel.objects.values_list("name", flat=True)) == {"hook"}


def test_the_page_that_shows_a_new_signing_secret_is_never_cached(
    client_as: Callable[..., Any], receiver: WebhookReceiver
) -> None:
    response = client_as("admin").post(
        "/alerts/channels/new", {"name": "ops", "kind": "webhook", "target": receiver.url()}
    )
    assert response.status_code == 200
    assert Channel.objects.get().signing_secret in response.content.decode()
    assert "no-store" in response["Cache-Control"]
