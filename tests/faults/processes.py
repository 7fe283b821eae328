"""The processes a fault test runs the code in: gunicorn (as docker-compose.yml does) and a
Celery worker, each on the test database and with its output in a log file."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

ROOT = Path(settings.BASE_DIR)


def database_url(*, host: str | None = None, port: int | None = None) -> str:
    """The database this test runs on (pytest-django's test database) as a URL, optionally
    at another address (a proxy in front of it)."""
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = host or db["HOST"] or "127.0.0.1"
    port_part = f":{port or db['PORT']}" if (port or db["PORT"]) else ""
    return f"postgres://{credentials}@{host}{port_part}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str, log: str = "") -> None:
    """Poll `condition` until it holds; fail with `what` (and a log tail) when it never does."""
    import pytest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{log}")


class _Process:
    stop_signal = signal.SIGTERM

    def __init__(self, command: list[str], *, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def base_env(**overrides: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_DEBUG": "1",
        "TRIAGE_LOG_LEVEL": "WARNING",
    }
    env.update(overrides)
    return env


class Gunicorn(_Process):
    """`gunicorn config.wsgi` with one sync worker, as in docker-compose.yml but smaller."""

    stop_signal = signal.SIGINT  # quick shutdown; TERM waits for the idle worker's tick

    def __init__(
        self, *, env: dict[str, str], log_path: Path, threads: int = 1, workers: int = 1
    ) -> None:
        self.port = free_port()
        super().__init__(
            [
                sys.executable, "-m", "gunicorn", "config.wsgi",
                "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
                "--threads", str(threads),  # over 1: a gthread worker, as the ingest pool's
                "--timeout", "60", "--graceful-timeout", "5",
            ],
            env=env,
            log_path=log_path,
        )  # fmt: skip

    @classmethod
    @contextmanager
    def serving(
        cls, *, env: dict[str, str], log_dir: Path, threads: int = 1, workers: int = 1
    ) -> Iterator[Gunicorn]:
        """A gunicorn listening for the duration of the block, stopped after it."""
        gunicorn = cls(env=env, log_path=log_dir / "gunicorn.log", threads=threads, workers=workers)
        try:
            gunicorn.wait_listening()
            yield gunicorn
        finally:
            gunicorn.stop()

    def wait_listening(self, timeout: float = 30) -> None:
        def listening() -> bool:
            if not self.alive():
                import pytest

                pytest.fail(f"gunicorn exited:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_until(listening, timeout=timeout, what="gunicorn to listen", log=self.log())

    def worker_pids(self) -> list[int]:
        """The worker processes (gunicorn's master forks them)."""
        workers = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces, so split after its ")".
            if int(stat.rsplit(")", 1)[1].split()[1]) == self.process.pid:
                workers.append(int(entry.name))
        return workers

    def worker_pid(self) -> int:
        """The one worker process."""
        for pid in self.worker_pids():
            return pid
        raise RuntimeError(f"gunicorn {self.process.pid} has no worker\n{self.log()}")


class CeleryWorker(_Process):
    """`celery worker --pool solo` consuming one queue of its own."""

    def __init__(
        self, *, queue: str, env: dict[str, str], log_path: Path, app: str = "config"
    ) -> None:
        super().__init__(
            [
                sys.executable, "-m", "celery", "-A", app, "worker",
                "--pool", "solo", "--concurrency", "1", "--loglevel", "WARNING",
                "--queues", queue, "--hostname", f"{log_path.stem}-{os.getpid()}@%h",
                "--without-mingle", "--without-gossip",
            ],
            env=env,
            log_path=log_path,
        )  # fmt: skip
