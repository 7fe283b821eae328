"""config.postgresql: Django's PostgreSQL backend with timestamps read by psycopg's C loader,
and a niced process's backend niced too (the pool test runs that against a real pool)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from psycopg.pq import Format

from config import priority
from tests.faults.processes import base_env

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db]


def test_timestamps_come_back_as_django_would_give_them() -> None:
    from config.postgresql.base import _UtcTimestamptzLoader

    with connection.cursor() as cursor:
        cursor.execute("SELECT TIMESTAMPTZ '2026-12-01 10:00:00.123456+09', NULL::timestamptz")
        moment, missing = cursor.fetchone()
        loader = cursor.connection.adapters.get_loader(
            cursor.connection.adapters.types["timestamptz"].oid, Format.TEXT
        )
    assert loader is _UtcTimestamptzLoader
    assert moment == datetime.datetime(2026, 12, 1, 1, 0, 0, 123456, tzinfo=datetime.UTC)
    assert moment.tzinfo is datetime.UTC and missing is None


def _setting(raw: Any, name: str) -> str:
    with raw.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return str(cursor.fetchone()[0])


def test_no_jit_and_no_parallel_workers_unless_they_are_configured() -> None:
    connection.ensure_connection()
    assert _setting(connection.connection, "jit") == "off"
    assert _setting(connection.connection, "max_parallel_workers_per_gather") == "0"


def test_the_parallel_workers_a_deployment_sets_reach_each_connection(settings: Any) -> None:
    settings.DATABASE_PARALLEL_WORKERS = 3
    raw = connection.get_new_connection(connection.get_connection_params())
    try:
        assert _setting(raw, "max_parallel_workers_per_gather") == "3"
        assert _setting(raw, "jit") == "off"
    finally:
        raw.close()


def test_a_process_that_is_not_the_backend_is_never_reniced() -> None:
    from config.postgresql.base import _is_own_backend

    connection.ensure_connection()
    fd = connection.connection.pgconn.socket
    assert _is_own_backend(fd, connection.connection.info.backend_pid)
    assert not _is_own_backend(fd, os.getpid())
    assert not _is_own_backend(fd, os.getppid())


def test_a_niced_process_gives_its_backend_its_niceness() -> None:
    script = (
        "import os; os.nice(3); import django; django.setup();"
        "from django.db import connection; connection.ensure_connection();"
        "pid = connection.connection.info.backend_pid;"
        "print(os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, pid));"
        "print(open(f'/proc/{pid}/autogroup').read().split()[-1])"
    )
    env = base_env()  # this test's database
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    process, backend, group = map(int, done.stdout.split()[-3:])
    assert process == backend == os.getpriority(os.PRIO_PROCESS, 0) + 3
    if priority.autogroups_on():
        # The backend leads a session of its own, so its niceness counts only once its
        # autogroup has it too.
        assert group == 3


def test_only_a_backend_that_leads_its_session_has_its_autogroup_niced() -> None:
    from config.postgresql.base import _leads_its_session

    connection.ensure_connection()
    assert _leads_its_session(connection.connection.info.backend_pid)  # as PostgreSQL starts it
    for new_session in (False, True):
        child = subprocess.Popen(["sleep", "30"], start_new_session=new_session)
        try:
            assert _leads_its_session(child.pid) is new_session
        finally:
            child.kill()
            child.wait()
