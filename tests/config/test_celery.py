"""config/celery.py: a real worker's log output is scrubbed like the web processes' logs.

Celery replaces the root logger's handlers when a worker starts (and gives task loggers a
handler of their own), which drops the filter settings.LOGGING puts on them. This starts
`celery worker` as docker-compose.yml does (prefork pool, INFO), has a task write secrets
through every path a task logs by, and reads the worker's output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from celery import Celery

from tests.config.worker_tasks import SECRETS, TASK_NAME

ROOT = Path(__file__).resolve().parents[2]


def _broker_options(folder: Path) -> dict[str, object]:
    queue = folder / "queue"
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(queue),
        "data_folder_out": str(queue),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "store_processed": False,
        "polling_interval": 0.1,
    }


def test_a_real_workers_log_output_is_scrubbed(tmp_path: Path) -> None:
    var_dir = tmp_path / "var"
    env = {
        **os.environ,
        "DJANGO_DEBUG": "1",
        "TRIAGE_VAR_DIR": str(var_dir),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'worker.sqlite3'}",
        "REDIS_URL": "",  # the filesystem broker under TRIAGE_VAR_DIR: this worker's alone
        "TRIAGE_LOG_LEVEL": "INFO",
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "config", "worker",
                "--loglevel", "INFO", "--concurrency", "1",
                "--include", "tests.config.worker_tasks",
                "--hostname", f"scrub-{uuid.uuid4().hex[:8]}@%h",
                "--without-mingle", "--without-gossip",
            ],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        sender = Celery(
            broker="filesystem://localhost/",
            broker_transport_options=_broker_options(var_dir / "celery"),
        )
        sender.send_task(TASK_NAME, queue="celery")
        deadline = time.monotonic() + 60
        output = ""
        while time.monotonic() < deadline and worker.poll() is None:
            output = log_path.read_text(encoding="utf-8", errors="replace")
            if "succeeded" in output:
                break
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    output = log_path.read_text(encoding="utf-8", errors="replace")
    if "succeeded" not in output:
        pytest.fail(f"the task did not run in the worker:\n{output[-4000:]}")
    # Every path reached the log, and none of the secrets did.
    for line in ("calling getOrderDetail with", "token", "connecting to", "retrying", "done with"):
        assert line in output, f"{line!r} missing from the worker's log:\n{output}"
    for kind, secret in SECRETS.items():
        assert secret not in output, f"the {kind} secret is in the worker's log:\n{output}"
    assert "[REDACTED" in output
