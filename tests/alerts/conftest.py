from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import override_settings

from alerts import services, tasks
from alerts.models import Channel, ChannelKind
from alerts.sinks import SmtpSink, WebhookReceiver


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


@pytest.fixture
def smtp() -> Iterator[SmtpSink]:
    with (
        SmtpSink() as sink,
        override_settings(
            EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
            EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=sink.port,
        ),
    ):
        yield sink


@pytest.fixture(autouse=True)
def loopback_allowed() -> Iterator[None]:
    """The receivers listen on 127.0.0.1, which only an allowance lets webhooks reach."""
    with override_settings(ALERTS_ALLOWED_HOSTS=["127.0.0.1"]):
        yield


@pytest.fixture
def inline_queue(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The queue, run here: each message is handled when it is sent, once (a retry is only
    recorded: the test decides when time has passed)."""
    sent: list[tuple[str, dict[str, Any]]] = []

    def publish(task: Any, **kwargs: Any) -> None:
        sent.append((task.name, kwargs))
        if task.name.endswith("evaluate_batch"):
            tasks.evaluate_batch.run(**kwargs)
        elif task.name.endswith("deliver"):
            services.delivery_attempt(delivery_id=kwargs["delivery_id"])

    monkeypatch.setattr(services, "publish", publish)
    return sent


@pytest.fixture
def webhook(db: Any, receiver: WebhookReceiver) -> Channel:
    channel, secret = services.channel_create(
        name="hook", kind=ChannelKind.WEBHOOK, target=receiver.url("/hook")
    )
    receiver.secrets["/hook"] = secret
    return channel


@pytest.fixture
def make_rule(db: Any) -> Callable[..., Any]:
    counter = iter(range(1, 1000))

    def make(kind: str, channels: list[Channel], **fields: Any) -> Any:
        return services.rule_create(
            name=fields.pop("name", f"{kind.replace('_', '-')}-{next(counter)}"),
            kind=kind,
            channels=channels,
            **fields,
        )

    return make
