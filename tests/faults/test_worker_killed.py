"""A worker SIGKILLed at the two moments tests/qualitylab/test_worker.py cannot aim at.

That test kills a worker at a random moment of a long run and checks the results; these
kill it (it kills itself: tests/faults/kill_points.py) between two writes of one step, and
check what the run leaves besides its results: each failed case's failure record on the
triage page, linked from its result, and each case's learning attempt, all exactly once,
after a second worker took the redelivered task over.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db.models import Count

from learning.models import LearningAttempt
from qualitylab import services
from qualitylab.models import CaseResult, RunStatus
from tests.factories import demo_collection, run_settled
from tests.faults.processes import CeleryWorker, base_env, wait_until
from triage.models import FailureRecord

pytestmark = [
    pytest.mark.services("redis", "postgres"),
    pytest.mark.django_db(transaction=True),
]

QUEUE = f"faults-worker-killed-{os.getpid()}"
SECONDS = 2  # visibility timeout and stale-run window


@pytest.fixture
def queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    send = services._send

    def send_to_test_queue(task: Any, **kwargs: Any) -> None:
        apply_async = task.apply_async

        def to_queue(*args: Any, **options: Any) -> Any:
            return apply_async(*args, queue=QUEUE, **options)

        send(SimpleNamespace(apply_async=to_queue), **kwargs)

    monkeypatch.setattr(services, "_send", send_to_test_queue)
    yield QUEUE
    redis.Redis.from_url(settings.REDIS_URL).delete(QUEUE, f"_kombu.binding.{QUEUE}")


def _worker(name: str, tmp_path: Path, **env: str) -> CeleryWorker:
    return CeleryWorker(
        queue=QUEUE,
        app="tests.faults.kill_points",
        env=base_env(
            CELERY_VISIBILITY_TIMEOUT_SECONDS=str(SECONDS),
            QUALITYLAB_STALE_RUN_SECONDS=str(SECONDS),
            **env,
        ),
        log_path=tmp_path / f"{name}.log",
    )


@pytest.mark.parametrize("kill_at", ["ingest-after-results", "finish"])
def test_a_worker_killed_between_two_writes_loses_nothing_of_the_run(
    queue: str, tmp_path: Path, kill_at: str, workers: list[CeleryWorker]
) -> None:
    shop = demo_collection()
    run = services.run_start(collection=shop, mode="search", channel="cli")

    first = _worker("first", tmp_path, FAULTS_KILL_AT=kill_at)
    workers.append(first)
    wait_until(lambda: not first.alive(), timeout=60, what="the worker to reach the kill point",
               log=first.log())  # fmt: skip
    assert first.process.returncode == -signal.SIGKILL, first.log()

    # A new worker gives the broker's unacknowledged messages back when it starts, those
    # older than the visibility timeout (afterwards only every 100 s): let it pass first.
    time.sleep(SECONDS + 0.5)
    second = _worker("second", tmp_path)
    workers.append(second)

    def finished() -> bool:
        if not second.alive():
            pytest.fail(f"the second worker exited:\n{second.log()}")
        return run_settled(run.pk)

    wait_until(finished, timeout=90, what="the second worker to finish the run", log=second.log())
    run.refresh_from_db()
    assert run.status == RunStatus.DONE, run.error
    results = CaseResult.objects.filter(run=run)
    assert results.count() == run.total == run.done
    counts = results.values("case_id", "repetition").annotate(n=Count("id"))
    assert {row["n"] for row in counts} == {1}

    failed = results.filter(passed=False, allowed_failure=False)
    assert failed.exists(), "the demo's search cases include failures on purpose"
    records = FailureRecord.objects.filter(source="quality_lab")
    assert records.count() == failed.count(), "a failed case lost its failure record"
    assert set(failed.values_list("failure_record_id", flat=True)) == set(
        records.values_list("pk", flat=True)
    ), "a failed case's result does not link its failure record"

    attempts = LearningAttempt.objects.filter(client_id__startswith=f"run-{run.pk}/")
    assert attempts.count() == run.total, "a case lost its learning attempt"


@pytest.fixture
def workers() -> Iterator[list[CeleryWorker]]:
    started: list[CeleryWorker] = []
    yield started
    for worker in started:
        worker.stop()
