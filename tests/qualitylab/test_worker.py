"""Runs through a real Celery worker on the real broker (Redis) and the test database.

A worker is SIGKILLed in the middle of a run; a second worker gets the unacknowledged task
back (a short broker visibility timeout), takes the run over (a short stale-heartbeat
window), and finishes it with exactly one result per (case, repetition). And a broker
that cannot be reached fails ``run_start`` fast, marking the run failed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.db.models import Count

from qualitylab import services
from qualitylab.models import CaseResult, CaseRun, Collection, RunStatus
from tests.factories import demo_collection, run_settled

pytestmark = [
    pytest.mark.services("redis", "postgres"),
    pytest.mark.django_db(transaction=True),
]

ROOT = Path(settings.BASE_DIR)
# Every job of these tests goes to a queue of their own, so no other worker on this Redis
# database takes it, and nothing is left for one.
QUEUE = f"qualitylab-worker-test-{os.getpid()}"
VISIBILITY_TIMEOUT_SECONDS = 2
STALE_RUN_SECONDS = 2
CASES = 20
REPEAT = 25  # 500 results: a few seconds of work, so the kill lands mid-run


def _test_database_url() -> str:
    """The database this test runs on (pytest-django's test database), as a URL."""
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db["HOST"] or "127.0.0.1"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{credentials}@{host}{port}/{db['NAME']}"


def _worker_env() -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_VISIBILITY_TIMEOUT_SECONDS": str(VISIBILITY_TIMEOUT_SECONDS),
        "QUALITYLAB_STALE_RUN_SECONDS": str(STALE_RUN_SECONDS),
        "DJANGO_DEBUG": "1",
    }


class Worker:
    """One ``celery worker --pool solo`` subprocess on the test queue, logging to a file."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable, "-m", "celery", "-A", "config", "worker",
                    "--pool", "solo", "--concurrency", "1", "--loglevel", "WARNING",
                    "--queues", QUEUE, "--hostname", f"{log_path.stem}-{os.getpid()}@%h",
                    "--without-mingle", "--without-gossip",
                ],
                cwd=ROOT,
                env=_worker_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[[str], Worker]]:
    started: list[Worker] = []

    def start(name: str) -> Worker:
        worker = Worker(tmp_path / f"{name}.log")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def test_queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Send this process's task messages to the test queue; empty it afterwards.

    Named on every send: Celery caches its routing after the first message of the
    process, so changing the default queue later would not reach an earlier test's cache.
    """
    send = services._send

    def send_to_test_queue(task: Any, **kwargs: Any) -> None:
        send(SimpleNamespace(apply_async=partial(task.apply_async, queue=QUEUE)), **kwargs)

    monkeypatch.setattr(services, "_send", send_to_test_queue)
    yield QUEUE
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(QUEUE, f"_kombu.binding.{QUEUE}")


@pytest.fixture
def shop() -> Collection:
    return demo_collection()


def _wait_until(
    condition: Callable[[], bool], *, timeout: float, worker: Worker, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if worker.process.poll() is not None:
            pytest.fail(f"the worker exited while waiting for {what}:\n{worker.log()}")
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}:\n{worker.log()}")


def test_a_killed_worker_loses_no_result_and_a_new_worker_finishes_the_run(
    shop: Collection, test_queue: str, workers: Callable[[str], Worker]
) -> None:
    case_ids = sorted(
        shop.cases.filter(mode__in=["search", "plan"]).values_list("case_id", flat=True)
    )[:CASES]
    assert len(case_ids) == CASES
    run = services.run_start(collection=shop, case_ids=case_ids, repeat=REPEAT, channel="cli")
    total = CASES * REPEAT
    assert run.total == total

    first = workers("worker-1")
    _wait_until(
        lambda: CaseRun.objects.get(pk=run.pk).done >= 40,
        timeout=60,
        worker=first,
        what="the first results",
    )
    first.kill()
    killed = CaseRun.objects.get(pk=run.pk)
    assert killed.status == RunStatus.RUNNING
    assert killed.done < total, "the run finished before the kill; raise REPEAT"
    results_at_kill = CaseResult.objects.filter(run=run).count()
    assert results_at_kill == killed.done

    # The redelivered task takes over only a run whose heartbeat is stale, and the broker
    # hands the unacknowledged message out again only after its visibility timeout.
    time.sleep(max(STALE_RUN_SECONDS, VISIBILITY_TIMEOUT_SECONDS) + 0.5)
    second = workers("worker-2")
    _wait_until(
        lambda: run_settled(run.pk),
        timeout=90,
        worker=second,
        what="the run to finish on the second worker",
    )

    finished = CaseRun.objects.get(pk=run.pk)
    assert finished.status == RunStatus.DONE, finished.error
    assert finished.done == total
    assert finished.passed + finished.failed == total
    results = CaseResult.objects.filter(run=run)
    assert results.count() == total
    per_key = results.values("case_id", "repetition").annotate(n=Count("id"))
    assert len(per_key) == total and {row["n"] for row in per_key} == {1}
    assert set(results.values_list("repetition", flat=True)) == set(range(1, REPEAT + 1))
    assert finished.passed == results.filter(passed=True).count()
    assert finished.metrics["cases"] == total


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


_START_WITH_BROKER_DOWN = """
import json, time
from qualitylab import services
from qualitylab.models import CaseRun, Collection
started = time.monotonic()
try:
    services.run_start(collection=Collection.objects.get(name="shop"), channel="cli")
except services.QueueUnavailable as exc:
    outcome = {"raised": "QueueUnavailable", "message": str(exc)}
else:
    outcome = {"raised": None}
outcome["seconds"] = time.monotonic() - started
print(json.dumps(outcome))
"""


def test_an_unreachable_broker_fails_run_start_fast_and_marks_the_run_failed(
    shop: Collection,
) -> None:
    env = {**_worker_env(), "REDIS_URL": f"redis://127.0.0.1:{_closed_port()}/0"}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", _START_WITH_BROKER_DOWN],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    outcome: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["raised"] == "QueueUnavailable"
    assert outcome["seconds"] < 10
    run = CaseRun.objects.get()
    assert run.status == RunStatus.FAILED
    assert "unreachable" in run.error
    assert run.finished_at is not None
