"""The demo's alerting: a local webhook receiver and SMTP sink, three channels pointing at
them, and one rule of each kind tuned so the demo traffic and runs make several fire.

`manage.py demo` calls `start_sinks` before anything is sent, `environment` for the
processes it starts, and `install` once the database is migrated.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from email.header import decode_header, make_header
from typing import Any

from django.conf import settings
from django.db import transaction

from alerts import services
from alerts.models import Channel, ChannelKind, Rule, RuleKind
from alerts.sinks import SmtpSink, WebhookReceiver
from core import outbound

PREFIX = "demo-"
# One rule of each kind; the parameters make the demo's own traffic and runs fire them.
RULES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("new_group", {"kind": RuleKind.NEW_GROUP, "min_interval_minutes": 60}),
    ("regression", {"kind": RuleKind.REGRESSION, "min_interval_minutes": 60}),
    ("spike", {"kind": RuleKind.SPIKE, "spike_count": 5, "spike_factor": 2,
               "spike_window_hours": 1}),
    ("reconcile-waiting", {"kind": RuleKind.RECONCILE_WAITING, "wait_minutes": 1}),
    ("retry-budget", {"kind": RuleKind.RETRY_BUDGET}),
    ("qualitylab-regression", {"kind": RuleKind.QUALITYLAB_REGRESSION, "pass_rate_floor": 0.9}),
    ("suggestion-waiting", {"kind": RuleKind.SUGGESTION_WAITING, "wait_minutes": 1}),
    ("contract-violation", {"kind": RuleKind.CONTRACT_VIOLATION}),
)  # fmt: skip


@dataclass
class Sinks:
    receiver: WebhookReceiver
    smtp: SmtpSink

    def stop(self) -> None:
        self.receiver.stop()
        self.smtp.stop()


def start_sinks(*, webhook_port: int, smtp_port: int, say: Callable[[str], None]) -> Sinks:
    """The receiver and the SMTP sink, in this process; each delivery is printed with `say`."""

    def heard(request: Any) -> None:
        body = request.json()
        if "text" in body and len(body) == 1:
            say(f"[alerts] Slack-compatible webhook: {body['text'].splitlines()[0]}")
            return
        verified = {True: "signature ok", False: "BAD SIGNATURE", None: "unsigned"}
        what = (
            f"{len(body['groups'])} groups (digest)"
            if body.get("digest")
            else (f"{body['group']['stage']}/{body['group']['reason']} {body['group']['url']}")
        )
        say(f"[alerts] webhook ({verified[request.signature_ok]}): {body['rule']} "
            f"[{body['kind']}] {what}")  # fmt: skip

    def mailed(recipients: list[str], message: Any) -> None:
        subject = " ".join(str(make_header(decode_header(message["Subject"] or ""))).split())
        say(f"[alerts] email to {', '.join(recipients)}: {subject}")

    receiver = WebhookReceiver(port=webhook_port, on_request=heard).start()
    smtp = SmtpSink(port=smtp_port, on_message=mailed).start()
    return Sinks(receiver=receiver, smtp=smtp)


def environment(*, webhook_port: int, smtp_port: int, base_url: str) -> dict[str, str]:
    """What the web, ingest and worker processes need to reach the sinks: the receiver's
    loopback port is allowed for webhooks, no other (SMTP goes to EMAIL_HOST, which is the
    administrator's setting and needs no allowance)."""
    allowed = {*settings.ALERTS_ALLOWED_HOSTS, outbound.host_port("127.0.0.1", webhook_port)}
    return {
        "ALERTS_ALLOWED_HOSTS": ",".join(sorted(allowed)),
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_port),
        "DESK_BASE_URL": base_url,
    }


def install(*, sinks: Sinks) -> list[Rule]:
    """The demo's channels and rules, made again each start (the sinks' ports may differ)."""
    for name, value in environment(
        webhook_port=sinks.receiver.port, smtp_port=sinks.smtp.port, base_url=settings.DESK_BASE_URL
    ).items():
        os.environ[name] = value
    settings.ALERTS_ALLOWED_HOSTS = os.environ["ALERTS_ALLOWED_HOSTS"].split(",")
    with transaction.atomic():
        Rule.objects.filter(name__startswith=PREFIX).delete()
        Channel.objects.filter(name__startswith=PREFIX).delete()
        webhook, secret = services.channel_create(
            name=f"{PREFIX}webhook", kind=ChannelKind.WEBHOOK, target=sinks.receiver.url("/webhook")
        )
        slack, _ = services.channel_create(
            name=f"{PREFIX}slack", kind=ChannelKind.SLACK, target=sinks.receiver.url("/slack")
        )
        email, _ = services.channel_create(
            name=f"{PREFIX}email", kind=ChannelKind.EMAIL, target="oncall@demo.invalid"
        )
        sinks.receiver.secrets["/webhook"] = secret
        rules = [
            services.rule_create(name=f"{PREFIX}{name}", channels=[webhook, slack, email], **fields)
            for name, fields in RULES
        ]
    return rules
