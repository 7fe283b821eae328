"""new_group and regression: judged from what ingest publishes at commit, delivered to a real
HTTP receiver and a real SMTP server on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from alerts import services
from alerts.models import (
    ChannelKind,
    Delivery,
    DeliveryStatus,
    PendingEvaluation,
    RuleKind,
    RuleSubjectState,
)
from alerts.sinks import SmtpSink, WebhookReceiver
from tests.factories import failure_item
from triage.intake import ingest
from triage.intake.ingest import BatchCommitted, batch_ingest
from triage.models import FailureGroup, RunbookSubject
from triage.services import group_act, runbook_set

pytestmark = pytest.mark.django_db

PAYLOAD_KEYS = {"rule", "kind", "group", "count", "window_start", "window_end", "first_seen",
                "runbook", "sent_at"}  # fmt: skip
GROUP_KEYS = {"id", "stage", "reason", "tool", "collection", "lane", "url"}


def _ingest(captured: Any, *items: dict[str, Any]) -> None:
    with captured(execute=True):
        batch_ingest(owner="runtime-a", items=list(items))


def test_a_new_group_is_posted_once_signed_with_the_documented_payload(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
    settings: Any,
) -> None:
    settings.DESK_BASE_URL = "https://desk.example.com"
    make_rule(RuleKind.NEW_GROUP, [webhook], name="new-shop", collection="shop")
    _ingest(django_capture_on_commit_callbacks, failure_item("a1"), failure_item("a2"))
    _ingest(django_capture_on_commit_callbacks, failure_item("a3"))  # same group: not new

    [request] = receiver.wait_for(1)
    assert request.signature_ok is True
    body = request.json()
    assert set(body) == PAYLOAD_KEYS
    assert set(body["group"]) == GROUP_KEYS
    group = FailureGroup.objects.get()
    assert body["rule"] == "new-shop"
    assert body["kind"] == "new_group"
    assert body["group"]["id"] == group.pk
    assert body["group"]["url"] == f"https://desk.example.com/triage/groups/{group.pk}/"
    assert (body["group"]["stage"], body["group"]["reason"]) == ("execute", "http_5xx")
    assert body["count"] == 2
    assert body["runbook"] is None  # nobody wrote one
    assert request.delivery == f"{Delivery.objects.get().rule_id}:group:{group.pk}:new"
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.answer_code) == ("sent", 1, "200")
    assert receiver.wait_for(2, timeout=0.3) == [request]


def test_the_signature_is_an_hmac_of_the_raw_body(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
) -> None:
    import hashlib
    import hmac

    channel, secret = services.channel_create(
        name="signed", kind=ChannelKind.WEBHOOK, target=receiver.url("/signed")
    )
    assert len(secret) == 64
    make_rule(RuleKind.NEW_GROUP, [channel])
    _ingest(django_capture_on_commit_callbacks, failure_item("s1"))
    [request] = receiver.wait_for(1)
    expected = "sha256=" + hmac.new(secret.encode(), request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-triage-signature"] == expected
    tampered = request.body.replace(b"http_5xx", b"http_4xx")
    assert "sha256=" + hmac.new(secret.encode(), tampered, hashlib.sha256).hexdigest() != expected


def test_a_regression_alerts_once_within_the_interval_and_again_after_it(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
) -> None:
    make_rule(RuleKind.REGRESSION, [webhook], min_interval_minutes=30)
    _ingest(django_capture_on_commit_callbacks, failure_item("r1"))
    group = FailureGroup.objects.get()
    assert receiver.wait_for(1, timeout=0.3) == []  # new, not a regression

    group_act(group=group, actor=None, action="resolve")
    _ingest(django_capture_on_commit_callbacks, failure_item("r2"))
    [first] = receiver.wait_for(1)
    assert first.json()["kind"] == "regression"
    assert first.json()["group"]["id"] == group.pk

    # Resolved and regressed again within the interval: quiet.
    group_act(group=group, actor=None, action="resolve")
    _ingest(django_capture_on_commit_callbacks, failure_item("r3"))
    assert len(receiver.wait_for(2, timeout=0.3)) == 1

    # After the interval, the next regression alerts again.
    RuleSubjectState.objects.update(last_fired_at=timezone.now() - timedelta(minutes=31))
    group_act(group=group, actor=None, action="resolve")
    _ingest(django_capture_on_commit_callbacks, failure_item("r4"))
    assert len(receiver.wait_for(2)) == 2


def test_a_group_muted_before_the_evaluation_never_alerts(
    django_capture_on_commit_callbacks: Any,
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_rule(RuleKind.REGRESSION, [webhook])
    make_rule(RuleKind.NEW_GROUP, [webhook])
    handed: list[dict[str, Any]] = []
    monkeypatch.setattr(services, "publish", lambda task, **kwargs: handed.append(kwargs))
    with django_capture_on_commit_callbacks(execute=True):
        batch_ingest(owner="runtime-a", items=[failure_item("m2", tool="third")])
    [event] = handed
    group = FailureGroup.objects.get(tool="third")
    group_act(group=group, actor=None, action="mute", mute_count=100)
    assert (
        services.batch_evaluate(
            new_group_ids=event["new_group_ids"], regressed_group_ids=event["regressed_group_ids"]
        )
        == []
    )


def test_email_and_slack_channels_receive_the_alert(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    receiver: WebhookReceiver,
    smtp: SmtpSink,
    make_rule: Callable[..., Any],
) -> None:
    mail, _ = services.channel_create(name="oncall", kind=ChannelKind.EMAIL,
                                      target="oncall@example.com")  # fmt: skip
    slack, secret = services.channel_create(
        name="slack", kind=ChannelKind.SLACK, target=receiver.url("/services/T0/B0/XYZ")
    )
    assert secret == ""
    make_rule(RuleKind.NEW_GROUP, [mail, slack], name="to-people")
    _ingest(django_capture_on_commit_callbacks, failure_item("e1", reason="timeout"))

    [(recipients, message)] = smtp.wait_for(1)
    assert recipients == ["oncall@example.com"]
    assert "to-people" in message["Subject"]
    group = FailureGroup.objects.get()
    text = message.get_payload()
    assert f"/triage/groups/{group.pk}/" in text
    assert "execute/timeout" in text
    [request] = receiver.wait_for(1)
    assert set(request.json()) == {"text"}
    assert f"/triage/groups/{group.pk}/" in request.json()["text"]
    assert set(Delivery.objects.values_list("status", flat=True)) == {"sent"}
    assert Delivery.objects.get(channel=mail).answer_code == "250"


def test_an_alert_carries_the_runbooks_operators_wrote_for_its_reason_and_tool(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    smtp: SmtpSink,
    make_rule: Callable[..., Any],
) -> None:
    runbook_set(subject=RunbookSubject.REASON, reason="http_5xx", url="https://wiki.example/5xx",
                note="check the upstream status page", actor=None)  # fmt: skip
    runbook_set(subject=RunbookSubject.TOOL, collection="shop", tool="getOrderDetail",
                url="https://wiki.example/orders", note="", actor=None)  # fmt: skip
    runbook_set(subject=RunbookSubject.TOOL, collection="other", tool="getOrderDetail",
                url="https://wiki.example/not-this-one", note="", actor=None)  # fmt: skip
    mail, _ = services.channel_create(name="oncall", kind=ChannelKind.EMAIL,
                                      target="oncall@example.com")  # fmt: skip
    make_rule(RuleKind.NEW_GROUP, [webhook, mail], name="with-runbooks")
    _ingest(django_capture_on_commit_callbacks, failure_item("rb1"))

    [request] = receiver.wait_for(1)
    assert request.json()["runbook"] == {
        "reason": {"url": "https://wiki.example/5xx", "note": "check the upstream status page"},
        "tool": {"url": "https://wiki.example/orders", "note": ""},
    }
    [(_, message)] = smtp.wait_for(1)
    text = message.get_payload()
    assert "https://wiki.example/5xx (check the upstream status page)" in text
    assert "https://wiki.example/orders" in text
    assert "not-this-one" not in text


def test_more_than_twenty_matches_send_one_digest(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
) -> None:
    make_rule(RuleKind.NEW_GROUP, [webhook], name="everything-new")
    _ingest(django_capture_on_commit_callbacks,
            *[failure_item(f"d{n}", tool=f"tool{n}") for n in range(25)])  # fmt: skip
    [request] = receiver.wait_for(1)
    assert receiver.wait_for(2, timeout=0.3) == [request]
    body = request.json()
    assert body["digest"] is True and body["group"] is None
    assert len(body["groups"]) == 25
    assert {group["tool"] for group in body["groups"]} == {f"tool{n}" for n in range(25)}
    assert request.signature_ok is True
    assert Delivery.objects.get().is_digest


def test_twenty_matches_are_twenty_messages(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
) -> None:
    make_rule(RuleKind.NEW_GROUP, [webhook])
    _ingest(django_capture_on_commit_callbacks,
            *[failure_item(f"t{n}", tool=f"tool{n}") for n in range(20)])  # fmt: skip
    assert len(receiver.wait_for(20)) == 20
    assert not Delivery.objects.filter(is_digest=True).exists()


def test_filters_select_the_groups(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
) -> None:
    make_rule(RuleKind.NEW_GROUP, [webhook], collection="billing", lane="retry_safe",
              source="runtime", execution_state="started_unknown", reason="timeout")  # fmt: skip
    _ingest(
        django_capture_on_commit_callbacks,
        failure_item("f1", collection="shop", reason="timeout"),
        failure_item("f2", collection="billing", reason="http_5xx"),
        failure_item("f3", collection="billing", reason="timeout", tool="getInvoice",
                     evidence={"http_method": "GET"}),
    )  # fmt: skip
    group = FailureGroup.objects.get(collection="billing", reason="timeout")
    assert (group.lane, group.facets.get(dimension="execution_state").value) == (
        "retry_safe", "started_unknown",
    )  # fmt: skip
    [request] = receiver.wait_for(1)
    assert request.json()["group"]["id"] == group.pk
    assert receiver.wait_for(2, timeout=0.3) == [request]


def test_ingest_publishes_once_per_batch_and_only_when_a_group_is_new_or_regressed(
    django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[BatchCommitted] = []
    monkeypatch.setattr(ingest, "_BATCH_LISTENERS", [events.append])
    with django_capture_on_commit_callbacks(execute=True):
        batch_ingest(owner="o", items=[failure_item("p1"), failure_item("p2", tool="x")])
    with django_capture_on_commit_callbacks(execute=True):
        batch_ingest(owner="o", items=[failure_item("p3")])
    group = FailureGroup.objects.get(tool="x")
    group_act(group=group, actor=None, action="resolve")
    with django_capture_on_commit_callbacks(execute=True):
        batch_ingest(owner="o", items=[failure_item("p4", tool="x"), failure_item("p5", tool="y")])
    assert len(events) == 2
    assert len(events[0].new_group_ids) == 2 and events[0].regressed_group_ids == ()
    new = FailureGroup.objects.get(tool="y")
    assert (events[1].new_group_ids, events[1].regressed_group_ids) == ((new.pk,), (group.pk,))


def test_with_the_broker_down_the_batch_waits_in_the_database_for_the_beat(
    django_capture_on_commit_callbacks: Any,
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_rule(RuleKind.NEW_GROUP, [webhook])

    def down(task: Any, **kwargs: Any) -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(services, "publish", down)
    _ingest(django_capture_on_commit_callbacks, failure_item("b1"))
    assert PendingEvaluation.objects.count() == 1
    outcome = services.rules_evaluate()  # the broker is still down: rows stay queued
    assert PendingEvaluation.objects.count() == 0
    [delivery] = Delivery.objects.all()
    assert delivery.status == DeliveryStatus.QUEUED and outcome.queued == [delivery.pk]

    sent: list[int] = []
    monkeypatch.setattr(services, "publish", lambda task, **kw: sent.append(kw["delivery_id"]))
    later = timezone.now() + timedelta(minutes=1)
    services.rules_evaluate(now=later)
    assert sent == [delivery.pk]
    services.delivery_attempt(delivery_id=delivery.pk)
    services.delivery_attempt(delivery_id=delivery.pk)  # the same message twice: sent once
    assert len(receiver.wait_for(2, timeout=0.5)) == 1
    assert json.loads(receiver.requests[0].body)["kind"] == "new_group"


def test_a_new_rule_watches_production_so_quality_lab_runs_never_page(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
) -> None:
    """A rule created without a source watches production; "any" must be asked for."""
    default = make_rule(RuleKind.NEW_GROUP, [webhook], name="new-production")
    assert default.source == "production"
    make_rule(RuleKind.NEW_GROUP, [webhook], name="new-anything", source="")
    with django_capture_on_commit_callbacks(execute=True):
        batch_ingest(
            owner=ingest.DESK_OWNER,
            channel=ingest.DESK_CHANNEL,
            items=[failure_item("lab-1", source="quality_lab", tool="labOnly")],
        )
    _ingest(django_capture_on_commit_callbacks, failure_item("rt-1", tool="inProduction"))
    fired = sorted((r.json()["rule"], r.json()["group"]["tool"]) for r in receiver.wait_for(3))
    assert fired == [
        ("new-anything", "inProduction"),
        ("new-anything", "labOnly"),
        ("new-production", "inProduction"),
    ]


def test_the_production_default_is_dropped_on_kinds_that_read_no_source(
    webhook: Any, make_rule: Callable[..., Any]
) -> None:
    rule = make_rule(RuleKind.QUALITYLAB_REGRESSION, [webhook])
    assert rule.source == ""
    with pytest.raises(ValidationError) as refused:
        make_rule(RuleKind.NEW_GROUP, [webhook], source="staging")
    assert "source" in refused.value.message_dict


def test_a_regression_names_the_release_that_brought_the_group_back(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
) -> None:
    from triage.services import release_declare

    deployed = timezone.now() - timedelta(days=1)
    release_declare(collection="shop", version="1.3", deployed_at=deployed)
    release_declare(collection="shop", version="1.4", deployed_at=deployed + timedelta(hours=1))
    make_rule(RuleKind.REGRESSION, [webhook])
    _ingest(django_capture_on_commit_callbacks, failure_item("v1", release="1.3"))
    group = FailureGroup.objects.get()
    group_act(group=group, actor=None, action="resolve", resolved_in_release="1.4")

    _ingest(django_capture_on_commit_callbacks, failure_item("v2", release="1.3"))
    assert receiver.wait_for(1, timeout=0.3) == []  # an earlier release: still resolved

    _ingest(django_capture_on_commit_callbacks, failure_item("v3", release="1.4"))
    [request] = receiver.wait_for(1)
    body = request.json()
    assert body["kind"] == "regression"
    assert set(body) == PAYLOAD_KEYS | {"release"}
    assert body["release"] == "1.4"
    delivery = Delivery.objects.get()
    assert delivery.summary.endswith("in release 1.4")
    assert delivery.summary.startswith("regression execute/http_5xx")


def test_a_regression_without_a_release_says_release_null(
    django_capture_on_commit_callbacks: Any,
    inline_queue: list[Any],
    webhook: Any,
    receiver: WebhookReceiver,
    make_rule: Callable[..., Any],
) -> None:
    make_rule(RuleKind.REGRESSION, [webhook])
    _ingest(django_capture_on_commit_callbacks, failure_item("n1"))
    group_act(group=FailureGroup.objects.get(), actor=None, action="resolve")
    _ingest(django_capture_on_commit_callbacks, failure_item("n2"))
    [request] = receiver.wait_for(1)
    assert request.json()["release"] is None
    assert "in release" not in Delivery.objects.get().summary
