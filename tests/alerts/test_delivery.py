"""Delivering: the address rule at creation and at delivery, retries with backoff, the claim
that keeps a redelivered task from sending twice, and the delivery log."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from alerts import channels, services
from alerts.models import Channel, ChannelKind, Delivery, DeliveryStatus, RuleKind
from alerts.selectors import Match
from alerts.sinks import WebhookReceiver

pytestmark = pytest.mark.django_db


def _match(subject: str = "group:1", window: str = "w") -> Match:
    now = timezone.now()
    return Match(
        subject=subject, window=window,
        group={"id": 1, "stage": "execute", "reason": "http_5xx", "tool": "t", "collection": "c",
               "lane": "retry_safe", "url": "http://127.0.0.1:8000/triage/groups/1/"},
        count=3, window_start=now, window_end=now, first_seen=now, summary="a test match",
    )  # fmt: skip


def _resolve_as(mapping: dict[str, str]) -> Callable[[str, int], list[Any]]:
    def resolve(host: str, port: int) -> list[Any]:
        if host in mapping:
            return [ipaddress.ip_address(mapping[host])]
        return [ipaddress.ip_address(host)]

    return resolve


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://169.254.169.254/latest/meta-data/", "address_not_allowed"),
        ("http://127.0.0.1:9/hook", "address_not_allowed"),
        ("http://10.1.2.3/hook", "address_not_allowed"),
        ("http://[::ffff:192.168.0.1]/hook", "address_not_allowed"),
        ("http://localhost:9/hook", "address_not_allowed"),  # a name resolving to loopback
        ("http://intranet.example/hook", "address_not_allowed"),  # a name resolving to 10/8
        ("ftp://hooks.example/x", "scheme_not_allowed"),
        ("http://no-such-host.invalid/x", "host_unresolved"),
    ],
)
def test_a_webhook_to_an_internal_address_is_refused_at_creation(
    url: str, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        channels, "resolver", _resolve_as_system_except({"intranet.example": "10.0.0.7"})
    )
    with (
        override_settings(ALERTS_ALLOWED_HOSTS=[]),
        pytest.raises(services.ChannelError) as refused,
    ):
        services.channel_create(name="bad", kind=ChannelKind.WEBHOOK, target=url)
    assert refused.value.code == code
    assert not Channel.objects.exists()


def _resolve_as_system_except(mapping: dict[str, str]) -> Callable[[str, int], list[Any]]:
    from core import outbound

    def resolve(host: str, port: int) -> list[Any]:
        if host in mapping:
            return [ipaddress.ip_address(mapping[host])]
        return outbound.system_resolver(host, port)

    return resolve


def test_loopback_is_allowed_only_when_the_setting_names_it(receiver: WebhookReceiver) -> None:
    with override_settings(ALERTS_ALLOWED_HOSTS=["127.0.0.1"]):
        channel, _ = services.channel_create(
            name="ok", kind=ChannelKind.WEBHOOK, target=receiver.url()
        )
    assert channel.masked_target == "http://127.0.0.1/••••"
    assert "/hook" not in channel.masked_target


def test_a_host_port_allowance_lets_webhooks_reach_that_port_only(
    receiver: WebhookReceiver, make_rule: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with override_settings(ALERTS_ALLOWED_HOSTS=["127.0.0.1"]):  # every port, for now
        channel, _ = services.channel_create(
            name="hook", kind=ChannelKind.SLACK, target=receiver.url("/hook")
        )
    rule = make_rule(RuleKind.NEW_GROUP, [channel])
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
    with override_settings(ALERTS_ALLOWED_HOSTS=[f"127.0.0.1:{receiver.port}"]):
        with pytest.raises(services.ChannelError) as refused:
            services.channel_create(
                name="redis", kind=ChannelKind.WEBHOOK, target="http://127.0.0.1:6379/"
            )
        assert refused.value.code == "address_not_allowed"
        [sent_id] = services.rule_fire(rule=rule, matches=[_match("group:1")], now=timezone.now())
        assert services.delivery_attempt(delivery_id=sent_id).status == DeliveryStatus.SENT
    assert len(receiver.wait_for(1)) == 1
    # The allowance names another port now: checked again at delivery, nothing is sent.
    with override_settings(ALERTS_ALLOWED_HOSTS=[f"127.0.0.1:{receiver.port + 1}"]):
        [refused_id] = services.rule_fire(
            rule=rule, matches=[_match("group:2")], now=timezone.now()
        )
        outcome = services.delivery_attempt(delivery_id=refused_id)
    assert outcome.status == DeliveryStatus.FAILED
    assert Delivery.objects.get(pk=refused_id).answer_code == "address_not_allowed"
    assert len(receiver.wait_for(2, timeout=0.3)) == 1


@pytest.mark.parametrize(
    ("later", "allowed"),
    [
        ("10.0.0.7", ["127.0.0.1"]),  # the name now resolves to a private address
        ("169.254.169.254", ["127.0.0.1"]),  # ... or to the metadata service
        ("127.0.0.1", []),  # loopback, no longer allowed
    ],
)
def test_a_webhook_is_checked_again_at_delivery(
    later: str,
    allowed: list[str],
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(channels, "resolver", _resolve_as({"hooks.example": "127.0.0.1"}))
    channel, _ = services.channel_create(
        name="rebinding", kind=ChannelKind.WEBHOOK,
        target=f"http://hooks.example:{receiver.port}/hook",
    )  # fmt: skip
    rule = make_rule(RuleKind.NEW_GROUP, [channel])
    monkeypatch.setattr(channels, "resolver", _resolve_as({"hooks.example": later}))
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
    with override_settings(ALERTS_ALLOWED_HOSTS=allowed):
        [delivery_id] = services.rule_fire(rule=rule, matches=[_match()], now=timezone.now())
        outcome = services.delivery_attempt(delivery_id=delivery_id)
    assert outcome.status == DeliveryStatus.FAILED and outcome.retry_in is None
    delivery = Delivery.objects.get()
    assert delivery.answer_code == "address_not_allowed"
    assert "/hook" not in delivery.error
    assert receiver.wait_for(1, timeout=0.3) == []


def test_a_redirect_to_an_internal_address_is_not_followed(
    make_rule: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        channel, _ = services.channel_create(
            name="redirects", kind=ChannelKind.SLACK,
            target=f"http://127.0.0.1:{server.server_address[1]}/x",
        )  # fmt: skip
        rule = make_rule(RuleKind.NEW_GROUP, [channel])
        monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
        [delivery_id] = services.rule_fire(rule=rule, matches=[_match()], now=timezone.now())
        services.delivery_attempt(delivery_id=delivery_id)
    finally:
        server.shutdown()
        server.server_close()
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.answer_code) == ("failed", "redirect_refused")


def test_a_failing_receiver_is_retried_with_backoff_then_logged_as_failed(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch, settings: Any,
) -> None:  # fmt: skip
    settings.ALERTS_DELIVERY_ATTEMPTS = 3
    receiver.status = 503
    rule = make_rule(RuleKind.NEW_GROUP, [webhook])
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
    now = timezone.now()
    [delivery_id] = services.rule_fire(rule=rule, matches=[_match()], now=now)
    first = services.delivery_attempt(delivery_id=delivery_id, now=now)
    assert (first.status, first.retry_in) == ("retrying", services.BACKOFF_SECONDS[0])
    # Not due yet: a message that arrives early does not send.
    early = services.delivery_attempt(delivery_id=delivery_id, now=now + timedelta(seconds=1))
    assert early.status == "skipped" and early.retry_in
    assert len(receiver.wait_for(2, timeout=0.3)) == 1
    second = services.delivery_attempt(
        delivery_id=delivery_id, now=timezone.now() + timedelta(seconds=11)
    )
    assert (second.status, second.retry_in) == ("retrying", services.BACKOFF_SECONDS[1])
    receiver.status = 200
    third = services.delivery_attempt(
        delivery_id=delivery_id, now=timezone.now() + timedelta(seconds=60)
    )
    assert third.status == "sent"
    delivery = Delivery.objects.get()
    assert (delivery.attempts, delivery.answer_code, delivery.error) == (3, "200", "")
    assert len({request.delivery for request in receiver.wait_for(3)}) == 1

    receiver.status = 400  # a refusal is final
    [other] = services.rule_fire(rule=rule, matches=[_match("group:2")], now=timezone.now())
    assert services.delivery_attempt(delivery_id=other).status == "failed"
    assert Delivery.objects.get(pk=other).answer_code == "400"


def test_a_delivery_claimed_by_a_live_worker_is_not_sent_again_until_its_lease_ends(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    rule = make_rule(RuleKind.NEW_GROUP, [webhook])
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
    now = timezone.now()
    [delivery_id] = services.rule_fire(rule=rule, matches=[_match()], now=now)
    # A worker claimed it and died before sending (its row says sending, its lease runs).
    Delivery.objects.filter(pk=delivery_id).update(
        status="sending", attempts=1, lease_until=now + timedelta(seconds=40)
    )
    assert services.delivery_attempt(delivery_id=delivery_id, now=now).status == "skipped"
    assert services.deliveries_resend_due(now=now) == 0
    later = now + timedelta(seconds=41)
    assert services.deliveries_resend_due(now=later) == 1
    assert services.delivery_attempt(delivery_id=delivery_id, now=later).status == "sent"
    assert services.delivery_attempt(delivery_id=delivery_id, now=later).status == "skipped"
    assert len(receiver.wait_for(2, timeout=0.3)) == 1
    assert Delivery.objects.get().attempts == 2


def test_firing_twice_for_one_window_queues_one_delivery(
    webhook: Channel, make_rule: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rule = make_rule(RuleKind.NEW_GROUP, [webhook], min_interval_minutes=0)
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: None)
    now = timezone.now()
    [queued] = services.rule_fire(rule=rule, matches=[_match()], now=now)
    # The same window again (a redelivered evaluation): nothing new, the unsent one to finish.
    assert services.rule_fire(rule=rule, matches=[_match()], now=now + timedelta(hours=2)) == [
        queued
    ]
    assert Delivery.objects.count() == 1
    Delivery.objects.filter(pk=queued).update(status="sent")
    assert services.rule_fire(rule=rule, matches=[_match()], now=now + timedelta(hours=3)) == []


def test_a_channel_test_sends_now_and_logs_the_answer(
    receiver: WebhookReceiver, webhook: Channel
) -> None:
    delivery = services.channel_test(channel=webhook)
    assert (delivery.status, delivery.answer_code, delivery.is_test) == ("sent", "200", True)
    [request] = receiver.wait_for(1)
    assert request.signature_ok is True and request.json()["kind"] == "test"


def test_a_webhook_url_never_reaches_the_log(
    webhook: Channel, caplog: pytest.LogCaptureFixture, make_rule: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    rule = make_rule(RuleKind.NEW_GROUP, [webhook])

    def down(task: Any, **kwargs: Any) -> None:
        raise OSError("down")

    monkeypatch.setattr(services, "publish", down)
    with caplog.at_level("DEBUG"):
        services.rule_fire(rule=rule, matches=[_match()], now=timezone.now())
        Channel.objects.filter(pk=webhook.pk).update(target="http://127.0.0.1:9/secret-path")
        delivery = Delivery.objects.get()
        services.delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert "secret-path" not in caplog.text
    assert "secret-path" not in delivery.error
