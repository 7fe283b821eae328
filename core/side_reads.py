"""Statements a page runs beside its main one, on a second connection, while it goes on.

A busy page's reads are independent of each other (the triage page's window statement, its
sparkline and its facets), yet one connection runs them one after the other, and while the
database works the page's Python waits, and while the Python works the database idles. A
side read sends one statement on a connection of its own, from a thread of its own, and
hands the rows back when the page asks for them: the database and the page's Python work
at once (on the 2-core machines the benchmarks run on, the triage page at a million
records about 12-20 % sooner at its median).

A process has `TRIAGE_SIDE_READ_THREADS` side threads (4: a web worker's request threads),
shared by its requests. Each keeps its own connection to each database it read, and closes
it by Django's rules (`CONN_MAX_AGE`, health checks) before a read, as a request does: a
web worker holds up to that many more connections to the database.

A statement runs where the page is instead, in turn, when:

- the page's connection is inside a transaction: the read must see what the transaction
  wrote, and another connection would not (a test's transaction is one);
- the database is not PostgreSQL (the embedded SQLite reads in the process anyway);
- `TRIAGE_SIDE_READS` is off.

Only statements and their rows cross to the side thread: the page builds the SQL (and so
decides who may see what, and which database answers), the side thread executes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections

Rows = list[tuple[Any, ...]]

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_threads = 0
# Whether a side thread may hold a connection (none has read since they were closed).
_connected = False


class SideRead:
    """The rows of a statement, read beside the page or (see the module) in turn."""

    def __init__(
        self,
        sql: str,
        params: Sequence[Any],
        using: str,
        beside: Future[tuple[Rows, float]] | None = None,
    ) -> None:
        self.sql, self.params, self.using = sql, params, using
        self._beside = beside

    @property
    def beside(self) -> bool:
        """Whether the statement runs on a side thread's connection."""
        return self._beside is not None

    def rows(self) -> Rows:
        """The statement's rows, waiting for them if they are not there yet. A database
        error is raised here, as if the page had read them itself (a replica that went
        away is the page's to handle: core.replica)."""
        if self._beside is None:
            return _fetch(self.sql, self.params, self.using)
        rows, seconds = self._beside.result()
        page_connection = connections[self.using]
        if page_connection.queries_logged:
            # Counted with the page's own statements, as Django's debug cursor logs them
            # (a test's or the benchmark's count of the page's queries).
            logged = f"{self.sql} -- beside the page, params {list(self.params)!r}"
            page_connection.queries_log.append({"sql": logged, "time": f"{seconds:.3f}"})
        return rows


def read_beside(sql: str, params: Sequence[Any], *, using: str) -> SideRead:
    """Starts ``sql`` on database ``using`` beside the page, or readies it to run in turn."""
    if not _may_read_beside(using):
        return SideRead(sql, params, using)
    return SideRead(
        sql, params, using, beside=_side_threads().submit(_fetch_on_side, sql, params, using)
    )


def _may_read_beside(using: str) -> bool:
    connection = connections[using]
    return (
        settings.TRIAGE_SIDE_READS
        and connection.vendor == "postgresql"
        and not connection.in_atomic_block
    )


def _side_threads() -> ThreadPoolExecutor:
    global _pool, _pool_threads, _connected
    with _pool_lock:
        _connected = True
        if _pool is None:
            _pool_threads = settings.TRIAGE_SIDE_READ_THREADS
            _pool = ThreadPoolExecutor(max_workers=_pool_threads, thread_name_prefix="side-read")
        return _pool


def _fetch(sql: str, params: Sequence[Any], using: str) -> Rows:
    """The rows as the cursor gives them (no per-value conversion by Django)."""
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _fetch_on_side(sql: str, params: Sequence[Any], using: str) -> tuple[Rows, float]:
    close_old_connections()  # as a request does first: a broken or old connection goes
    started = time.perf_counter()
    rows = _fetch(sql, params, using)
    return rows, time.perf_counter() - started


def close_side_connections() -> None:
    """Closes every side thread's connections (a test database is dropped only once no
    connection is open to it). A side thread reconnects at its next read."""
    global _connected
    with _pool_lock:
        pool, threads, connected = _pool, _pool_threads, _connected
        _connected = False
    if pool is None or not connected:
        return
    # Each side thread closes its own: one task each, held at the barrier until every
    # thread has taken one, so that no thread takes two.
    everyone = threading.Barrier(threads)

    def close_mine() -> None:
        connections.close_all()
        everyone.wait(timeout=30)

    for done in [pool.submit(close_mine) for _ in range(threads)]:
        done.result()
