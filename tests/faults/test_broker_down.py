"""Redis (the Celery broker) goes down (issue 6, "faults survived").

This process's Celery app and a real worker reach Redis through a `TcpProxy` the test
controls; the machine's Redis is shared and never stopped. While the proxy is down:
every page renders (no page even opens a broker connection); ingest keeps accepting, and
learning attempts wait for their derivation; starting a Quality Lab run, from the page or
the command line, says the queue is unavailable, and that run is marked failed with the
reason (never left "queued" for nobody, never run later behind the person's back); the
beat's requeue of lost runs fails loudly and changes nothing. When the broker is back,
the person's retry runs once, on the worker that was there all along, and a run whose
message the broker lost (never sent, or lost in a blip as the worker took it) is sent
again by the beat task and runs exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from io import StringIO
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from django.core.management import call_command
from django.db.models import Count
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from learning.models import LearningAttempt, Suggestion
from qualitylab import services
from qualitylab.models import CaseResult, CaseRun, RunStatus
from tests.factories import demo_collection, failure_item, receipt_item, run_settled
from tests.faults.processes import ROOT, CeleryWorker, base_env, wait_until
from tests.faults.proxy import TcpProxy
from tests.learning.conftest import attempt_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup

pytestmark = pytest.mark.services("redis", "postgres")

QUEUE = f"faults-broker-down-{os.getpid()}"
STALE_RUN_SECONDS = 2


def _through(proxy: TcpProxy) -> str:
    parts = urlsplit(settings.REDIS_URL)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


@pytest.fixture(scope="module")
def broker_proxy() -> Iterator[TcpProxy]:
    redis_url = urlsplit(settings.REDIS_URL)
    with TcpProxy(redis_url.port or 6379, redis_url.hostname or "127.0.0.1") as proxy:
        yield proxy.start()
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(QUEUE, f"_kombu.binding.{QUEUE}")


@contextmanager
def _celery_broker(url: str) -> Iterator[None]:
    """Point this process's Celery app at `url`, and back afterwards.

    The app keeps its producer pool in private attributes, which a fork resets
    (`_after_fork`); the next send then takes a pool for the new URL. The pools are
    kombu's, shared per URL and never closed here: later tests still use them.
    """
    from config.celery import app as celery_app

    app: Any = celery_app  # private attributes the stubs do not know
    # Configured from Django settings with the CELERY namespace: the prefixed key wins.
    saved = app.conf.CELERY_BROKER_URL
    app.conf.CELERY_BROKER_URL = url
    app._after_fork()
    assert app.connection_for_write().as_uri(include_password=True) == url
    try:
        yield
    finally:
        app.conf.CELERY_BROKER_URL = saved
        app._after_fork()


@pytest.fixture
def broker(broker_proxy: TcpProxy, monkeypatch: pytest.MonkeyPatch) -> Iterator[TcpProxy]:
    """The broker as this process sees it: the proxy, up at the start of each test. Every
    message goes to this module's queue (named on each send: Celery caches its routes)."""
    send = services._send

    def send_to_test_queue(task: Any, **kwargs: Any) -> None:
        send(SimpleNamespace(apply_async=partial(task.apply_async, queue=QUEUE)), **kwargs)

    monkeypatch.setattr(services, "_send", send_to_test_queue)
    broker_proxy.start()
    with _celery_broker(_through(broker_proxy)):
        yield broker_proxy
    broker_proxy.start()


@pytest.fixture(scope="module")
def worker(
    broker_proxy: TcpProxy,
    django_db_setup: Any,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CeleryWorker]:
    """One worker for the module, on the broker through the proxy: it lives through the
    outages of the tests and must reconnect by itself."""
    env = base_env(
        REDIS_URL=_through(broker_proxy),
        QUALITYLAB_STALE_RUN_SECONDS=str(STALE_RUN_SECONDS),
        CELERY_VISIBILITY_TIMEOUT_SECONDS="30",
    )
    process = CeleryWorker(
        queue=QUEUE, env=env, log_path=tmp_path_factory.mktemp("worker") / "worker.log"
    )
    yield process
    process.stop()


def _assert_ran_once(run: CaseRun) -> None:
    run.refresh_from_db()
    assert run.status == RunStatus.DONE, run.error
    assert run.done == run.total and run.total > 0
    per_case = CaseResult.objects.filter(run=run).values("case_id", "repetition")
    counts = per_case.annotate(n=Count("id"))
    assert len(counts) == run.total and {row["n"] for row in counts} == {1}


def _wait_finished(run: CaseRun, worker: CeleryWorker) -> None:
    def finished() -> bool:
        if not worker.alive():
            pytest.fail(f"the worker exited:\n{worker.log()}")
        return run_settled(run.pk)

    wait_until(finished, timeout=90, what=f"run {run.pk} to finish", log=worker.log())


# --- pages ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_page_renders_without_touching_the_broker(
    broker: TcpProxy, client_as: Callable[..., Client]
) -> None:
    shop = demo_collection()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "_send", lambda task, **kwargs: None)
        run = services.run_start(collection=shop, mode="plan")
    services.run_execute(run_id=run.pk)  # results, failures and learning attempts
    batch_ingest(owner="runtime-a", items=[failure_item(), receipt_item()])
    group = FailureGroup.objects.filter(collection="shop").first()
    result = CaseResult.objects.filter(run=run).first()
    suggestion = Suggestion.objects.first()
    assert group and result and suggestion
    pages = [
        "/",
        "/?window=7d&lane=retry_safe",
        f"/triage/groups/{group.pk}/",
        "/receipts/",
        "/ingestion/",
        "/policies/",
        "/qualitylab/",
        "/qualitylab/shop/",
        f"/qualitylab/runs/{run.pk}/",
        f"/qualitylab/results/{result.pk}/",
        "/learning/",
        f"/learning/suggestions/{suggestion.pk}/",
        "/api/v1/groups",
        "/healthz",
    ]
    operator = client_as("operator")

    def statuses() -> dict[str, int]:
        return {page: operator.get(page).status_code for page in pages}

    # Up, but watched: not one page opens a connection to the broker.
    connections = broker.connections_accepted
    assert statuses() == dict.fromkeys(pages, 200)
    assert broker.connections_accepted == connections, "a page opened a broker connection"
    broker.stop()
    assert statuses() == dict.fromkeys(pages, 200)


@pytest.mark.django_db(transaction=True)
def test_ingest_keeps_accepting_and_learning_catches_up_when_the_broker_returns(
    broker: TcpProxy, ingest_client: APIClient
) -> None:
    """A learning attempt queues its derivation after commit; with the broker down the
    attempt is stored and waits, and `manage.py learning_derive` merges it later."""
    broker.stop()
    response = ingest_client.post(
        "/api/v1/ingest", {"items": [attempt_item("la-broker-down"), failure_item()]}, format="json"
    )
    assert response.status_code == 200 and response.json()["accepted"] == 2, response.json()
    attempt = LearningAttempt.objects.get(client_id="la-broker-down")
    assert attempt.derived_at is None

    broker.start()
    call_command("learning_derive", stdout=StringIO())
    attempt.refresh_from_db()
    assert attempt.derived_at is not None
    assert Suggestion.objects.filter(collection=attempt.collection).exists()


# --- starting a run ---------------------------------------------------------------------


_UNAVAILABLE = "The task queue is unreachable"


@pytest.mark.django_db(transaction=True)
def test_a_run_started_while_the_broker_is_down_says_so_and_the_retry_runs_once(
    broker: TcpProxy, worker: CeleryWorker, client_as: Callable[..., Client]
) -> None:
    demo_collection()
    operator = client_as("operator")
    broker.stop()

    # The page: back to the run form, with the reason and what to do.
    response = operator.post("/qualitylab/shop/runs/start", {"mode": "search", "repeat": "1"})
    assert response.status_code == 302 and response["Location"] == "/qualitylab/shop/#run"
    page = operator.get(response["Location"]).content.decode()
    assert _UNAVAILABLE in page and "try again when it is back" in page

    # The command line: exit 2 (the machinery, not the cases), the same reason.
    cli = subprocess.run(
        [sys.executable, "manage.py", "qualitylab", "run", "shop", "--mode", "search"],
        cwd=ROOT,
        env=base_env(REDIS_URL=_through(broker), CELERY_TASK_DEFAULT_QUEUE=QUEUE),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2, (cli.stdout, cli.stderr)
    assert "Queue unavailable" in cli.stderr and _UNAVAILABLE in cli.stderr

    refused = list(CaseRun.objects.order_by("pk"))
    assert [(run.channel, run.status) for run in refused] == [
        ("ui", RunStatus.FAILED),
        ("cli", RunStatus.FAILED),
    ]
    assert all("unreachable" in run.error and run.finished_at for run in refused)
    # Failed means failed: the beat's requeue never picks them up, down or up.
    later = timezone.now() + timedelta(hours=1)
    assert services.runs_requeue_stale(now=later) == []

    broker.start()
    response = operator.post("/qualitylab/shop/runs/start", {"mode": "search", "repeat": "1"})
    assert response.status_code == 302 and response["Location"].startswith("/qualitylab/runs/")
    retried = CaseRun.objects.exclude(pk__in=[run.pk for run in refused]).get()
    _wait_finished(retried, worker)
    _assert_ran_once(retried)
    assert services.runs_requeue_stale(now=later) == []
    for run in refused:
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED and not run.results.exists()


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_message_the_broker_lost_is_sent_again_when_it_returns(
    broker: TcpProxy, worker: CeleryWorker
) -> None:
    shop = demo_collection()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "_send", lambda task, **kwargs: None)  # lost in the restart
        run = services.run_start(collection=shop, mode="search", channel="cli")
    assert run.status == RunStatus.QUEUED
    later = timezone.now() + timedelta(seconds=STALE_RUN_SECONDS + 60)

    broker.stop()
    with pytest.raises(services.QueueUnavailable):
        services.runs_requeue_stale(now=later)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.error == ""

    broker.start()
    assert services.runs_requeue_stale(now=later) == [run.pk]
    # A second beat, maybe before the worker got to it: a second message, still one run.
    assert services.runs_requeue_stale(now=later) in ([run.pk], [])
    _wait_finished(run, worker)
    _assert_ran_once(run)


# The worker's bookkeeping of a message it has just taken off the queue (kombu's Redis
# transport: BRPOP, then MULTI / ZADD unacked_index / HSET unacked / EXEC).
_WORKER_TAKES_MESSAGE = b"HSET\r\n$7\r\nunacked\r\n"


@pytest.mark.django_db(transaction=True)
def test_a_run_lost_in_a_broker_blip_is_sent_again_by_the_beat(
    broker: TcpProxy, worker: CeleryWorker, settings: Any
) -> None:
    """Redis drops every connection at the worst moment: the worker has popped the run's
    message but not yet recorded it as unacknowledged, so the broker has lost it (Redis
    gives kombu at-most-once delivery there). The run stays queued until the beat task
    sends it again; meanwhile the next run goes through the reconnected connections."""
    settings.QUALITYLAB_STALE_RUN_SECONDS = STALE_RUN_SECONDS
    shop = demo_collection()
    fired = broker.cut_after(_WORKER_TAKES_MESSAGE, forward=False, keep_listening=True)
    lost = services.run_start(collection=shop, mode="search", channel="cli")
    assert fired.wait(timeout=30), f"the worker never took the message\n{worker.log()}"

    # This process's connection was dropped too: the next send reconnects.
    next_run = services.run_start(collection=shop, mode="plan", channel="cli")
    _wait_finished(next_run, worker)
    _assert_ran_once(next_run)
    lost.refresh_from_db()
    assert lost.status == RunStatus.QUEUED, "the message was not lost after all"

    later = timezone.now() + timedelta(seconds=STALE_RUN_SECONDS)
    assert services.runs_requeue_stale(now=later) == [lost.pk]
    _wait_finished(lost, worker)
    _assert_ran_once(lost)
