"""The demo's alerting pieces: its sinks receive what its rules send for the demo traffic."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from alerts import demo, services
from alerts.models import Delivery, Rule, RuleKind
from triage.demo_data import demo_items
from triage.intake.ingest import batch_ingest

pytestmark = pytest.mark.django_db


def test_the_demo_rules_fire_on_the_demo_traffic_into_its_sinks(
    django_capture_on_commit_callbacks: Any, inline_queue: Any
) -> None:
    said: list[str] = []
    sinks = demo.start_sinks(webhook_port=0, smtp_port=0, say=said.append)
    try:
        with override_settings(
            EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
            EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=sinks.smtp.port,
        ):
            rules = demo.install(sinks=sinks)
            assert {rule.kind for rule in rules} == set(RuleKind.values)
            again = demo.install(sinks=sinks)  # a second start replaces, not duplicates
            assert Rule.objects.count() == len(again) == len(RuleKind.values)
            with django_capture_on_commit_callbacks(execute=True):
                batch_ingest(owner="demo", items=list(demo_items(now=timezone.now())))
            webhook = [r for r in sinks.receiver.wait_for(2) if r.path == "/webhook"]
            assert webhook and all(request.signature_ok for request in webhook)
            assert webhook[0].json()["digest"] is True  # the demo makes more than 20 groups
            assert sinks.smtp.wait_for(1)
            # A minute later the beat finds the demo's uncertain work still waiting.
            later = timezone.now() + timedelta(minutes=2)
            for delivery_id in services.rules_evaluate(now=later).queued:
                services.delivery_attempt(delivery_id=delivery_id, now=later)
    finally:
        sinks.stop()
    kinds = set(Delivery.objects.filter(status="sent").values_list("rule__kind", flat=True))
    assert {"new_group", "reconcile_waiting"} <= kinds, kinds
    assert any(line.startswith("[alerts] webhook (signature ok)") for line in said)
    assert any(
        line.startswith("[alerts] email to oncall@demo.invalid: Triage Desk") for line in said
    )
