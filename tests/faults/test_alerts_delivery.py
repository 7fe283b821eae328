"""Alerts under faults (issue 12): Redis down while a batch is committed and its delivery
is due, then back: the notification goes out once; a worker killed after claiming a
delivery and before sending it: the next worker sends it, once (killed after sending, it is
sent again with the same delivery key: at least once, deduplicated by the receiver).

A real worker (and, for the kill, a second one) on the machine's Redis, through a
`TcpProxy` the test stops for the outage; a real HTTP receiver on loopback.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from alerts import services
from alerts.models import ChannelKind, Delivery, PendingEvaluation, RuleKind
from alerts.selectors import Match
from alerts.sinks import SmtpSink, WebhookReceiver
from config.celery import publish
from tests.factories import failure_item
from tests.faults.processes import CeleryWorker, base_env, wait_until
from tests.faults.proxy import TcpProxy
from tests.faults.test_broker_down import _celery_broker
from triage.intake.ingest import batch_ingest

pytestmark = [
    pytest.mark.services("redis", "postgres"),
    pytest.mark.django_db(transaction=True),
]

QUEUE = f"faults-alerts-{os.getpid()}"


def _through(proxy: TcpProxy) -> str:
    parts = urlsplit(settings.REDIS_URL)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


def _env(**extra: str) -> dict[str, str]:
    return base_env(
        CELERY_TASK_DEFAULT_QUEUE=QUEUE,
        CELERY_VISIBILITY_TIMEOUT_SECONDS="2",
        ALERTS_ALLOWED_HOSTS="127.0.0.1",
        ALERTS_TIMEOUT_SECONDS="1",
        ALERTS_LEASE_MARGIN_SECONDS="1",
        **extra,
    )


@pytest.fixture
def to_test_queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process sends alert tasks to the test's queue, as the workers do (by setting)."""

    def send(task: Any, **kwargs: Any) -> None:
        class Routed:
            apply_async = partial(task.apply_async, queue=QUEUE)

        publish(Routed, **kwargs)

    monkeypatch.setattr(services, "publish", send)
    with override_settings(ALERTS_ALLOWED_HOSTS=["127.0.0.1"]):
        yield
    redis.Redis.from_url(settings.REDIS_URL).delete(QUEUE, f"_kombu.binding.{QUEUE}")


@pytest.fixture
def workers() -> Iterator[list[CeleryWorker]]:
    started: list[CeleryWorker] = []
    yield started
    for worker in started:
        worker.stop()


def _hook(receiver: WebhookReceiver) -> None:
    channel, secret = services.channel_create(
        name="hook", kind=ChannelKind.WEBHOOK, target=receiver.url("/hook")
    )
    receiver.secrets["/hook"] = secret
    services.rule_create(name="new", kind=RuleKind.NEW_GROUP, channels=[channel])


def test_redis_down_during_delivery_then_back_sends_once(
    to_test_queue: None, workers: list[CeleryWorker], tmp_path: Path
) -> None:
    redis_url = urlsplit(settings.REDIS_URL)
    with (
        TcpProxy(redis_url.port or 6379, redis_url.hostname or "127.0.0.1") as proxy,
        WebhookReceiver() as receiver,
    ):
        proxy.start()
        with _celery_broker(_through(proxy)):
            worker = CeleryWorker(queue=QUEUE, env=_env(REDIS_URL=_through(proxy)),
                                  log_path=tmp_path / "worker.log")  # fmt: skip
            workers.append(worker)
            _hook(receiver)
            proxy.stop()
            # Ingest commits with the broker down: the batch waits in the database.
            batch_ingest(owner="runtime-a", items=[failure_item("down-1")])
            assert PendingEvaluation.objects.count() == 1
            # The beat's tick while it is still down: the delivery is queued in the
            # database, its message cannot be sent.
            services.rules_evaluate()
            [delivery] = Delivery.objects.all()
            assert delivery.status == "queued"
            assert receiver.wait_for(1, timeout=1) == []

            proxy.start()
            services.rules_evaluate(now=timezone.now() + timedelta(minutes=1))

            def delivered() -> bool:
                if not worker.alive():
                    pytest.fail(f"the worker exited:\n{worker.log()}")
                return Delivery.objects.filter(status="sent").exists()

            wait_until(delivered, timeout=60, what="the delivery", log=worker.log())
            # Another tick and a little time: nothing is sent twice.
            services.rules_evaluate(now=timezone.now() + timedelta(minutes=2))
            time.sleep(2)
    requests = receiver.requests
    assert len(requests) == 1, worker.log()
    assert requests[0].signature_ok is True
    assert requests[0].json()["kind"] == "new_group"


@pytest.mark.parametrize("kill_at", ["alert-send", "alert-after-send"])
def test_a_worker_killed_mid_delivery_leaves_it_to_the_next_worker(
    to_test_queue: None, workers: list[CeleryWorker], tmp_path: Path, kill_at: str
) -> None:
    """Killed before sending: the next worker sends it, once. Killed after the receiver got
    it and before the row says so: the next worker cannot know, and sends it again with the
    same X-Triage-Delivery key, which is what a receiver dedupes on."""
    with WebhookReceiver() as receiver:
        _hook(receiver)
        first = CeleryWorker(queue=QUEUE, app="tests.faults.kill_points",
                             env=_env(FAULTS_KILL_AT=kill_at),
                             log_path=tmp_path / "first.log")  # fmt: skip
        workers.append(first)
        from django.db import transaction

        with transaction.atomic():
            batch_ingest(owner="runtime-a", items=[failure_item("kill-1")])
        wait_until(lambda: not first.alive(), timeout=60,
                   what="the worker to reach the kill point", log=first.log())  # fmt: skip
        assert first.process.returncode == -signal.SIGKILL, first.log()
        delivery = Delivery.objects.get()
        assert (delivery.status, delivery.attempts) == ("sending", 1)
        assert len(receiver.requests) == (0 if kill_at == "alert-send" else 1)

        time.sleep(2.5)  # past the visibility timeout and the delivery's lease
        second = CeleryWorker(queue=QUEUE, env=_env(), log_path=tmp_path / "second.log")
        workers.append(second)

        def sent() -> bool:
            if not second.alive():
                pytest.fail(f"the second worker exited:\n{second.log()}")
            return Delivery.objects.filter(status="sent").exists()

        wait_until(sent, timeout=60, what="the second worker to deliver", log=second.log())
        time.sleep(2)
    delivery.refresh_from_db()
    assert delivery.attempts == 2
    if kill_at == "alert-send":
        assert len(receiver.requests) == 1
    else:
        assert len(receiver.requests) == 2
        assert {request.delivery for request in receiver.requests} == {delivery.idempotency_key}
        assert all(request.signature_ok for request in receiver.requests)


def _delivery_for(channel: Any, *, tool: str) -> int:
    """One new_group delivery on `channel` for a group whose tool is `tool`, published to the
    test's queue (a group stored before ingest refused control characters in identifiers)."""
    rule = services.rule_create(name="new", kind=RuleKind.NEW_GROUP, channels=[channel])
    now = timezone.now()
    match = Match(
        subject="group:1", window="w", count=1, window_start=now, window_end=now,
        first_seen=now, summary=f"new group: {tool}",
        group={"id": 1, "stage": "execute", "reason": "http_5xx", "tool": tool,
               "collection": "crlf", "lane": "retry_safe",
               "url": "http://127.0.0.1:8000/triage/groups/1/"},
    )  # fmt: skip
    [delivery_id] = services.rule_fire(rule=rule, matches=[match], now=now)
    return delivery_id


@override_settings(ALERTS_DELIVERY_ATTEMPTS=2)
def test_a_channel_whose_send_raises_ends_failed_with_its_error_after_its_attempts(
    to_test_queue: None, workers: list[CeleryWorker], tmp_path: Path
) -> None:
    """Before: the exception escaped the task, the row stayed `sending` with no error and
    the beat took it over every minute, past its attempts, for ever."""
    with WebhookReceiver() as receiver:
        channel, _ = services.channel_create(
            name="hook", kind=ChannelKind.WEBHOOK, target=receiver.url("/hook")
        )
        worker = CeleryWorker(queue=QUEUE, app="tests.faults.raising_channel",
                              env=_env(ALERTS_DELIVERY_ATTEMPTS="2",
                                       FAULTS_CHANNEL_ERROR="refused at '/hook?token=abc'"),
                              log_path=tmp_path / "worker.log")  # fmt: skip
        workers.append(worker)
        delivery_id = _delivery_for(channel, tool="getOrder")

        def failed() -> bool:
            if not worker.alive():
                pytest.fail(f"the worker exited:\n{worker.log()}")
            return Delivery.objects.filter(pk=delivery_id, status="failed").exists()

        # The first attempt is retried after the first backoff step (10 s).
        wait_until(failed, timeout=60, what="the delivery to fail", log=worker.log())
        delivery = Delivery.objects.get(pk=delivery_id)
        assert (delivery.attempts, delivery.lease_until) == (2, None)
        assert delivery.answer_code == "error"
        assert delivery.error == "RuntimeError: refused at '...'"
        # The beat, later: nothing is taken over or sent again.
        assert services.deliveries_resend_due(now=timezone.now() + timedelta(hours=1)) == 0
        time.sleep(1)
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts) == ("failed", 2)
        assert receiver.requests == []
    assert "Traceback" not in worker.log()


def test_an_email_header_django_refuses_fails_its_delivery_in_a_worker(
    to_test_queue: None, workers: list[CeleryWorker], tmp_path: Path
) -> None:
    """The issue's reproduction past ingest: a group whose tool holds CR/LF (stored before
    ingest refused it). Django refuses the subject; the delivery fails at once, with its
    error, and no mail leaves (header injection stays blocked)."""
    with SmtpSink() as sink:
        worker = CeleryWorker(queue=QUEUE,
                              env=_env(EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(sink.port),
                                       DJANGO_EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend"),
                              log_path=tmp_path / "worker.log")  # fmt: skip
        workers.append(worker)
        mail, _ = services.channel_create(
            name="mail", kind=ChannelKind.EMAIL, target="oncall@example.com"
        )
        delivery_id = _delivery_for(mail, tool="getOrder\r\nBcc: x@attacker.example")

        def failed() -> bool:
            if not worker.alive():
                pytest.fail(f"the worker exited:\n{worker.log()}")
            return Delivery.objects.filter(pk=delivery_id, status="failed").exists()

        wait_until(failed, timeout=60, what="the delivery to fail", log=worker.log())
        delivery = Delivery.objects.get(pk=delivery_id)
        assert (delivery.attempts, delivery.answer_code) == (1, "bad_header")
        assert "BadHeaderError" in delivery.error
        assert sink.wait_for(1, timeout=0.5) == []
    assert "Traceback" not in worker.log()
