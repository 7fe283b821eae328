"""Django's PostgreSQL backend, with ``timestamptz`` columns read by psycopg's C loader,
each connection's server process run at the niceness of the process it serves, no JIT, and
no parallel workers unless configured (``DATABASE_PARALLEL_WORKERS``).

Django registers its own loader for ``timestamptz`` (to attach the connection's time zone),
a subclass of psycopg's pure-Python one, so every timestamp a query returns is parsed in
Python even when psycopg's C implementation is installed: about 8 µs a value here, which
is most of the triage page's cost of reading 2,600 groups (two timestamps each) and its
sparkline's hours at a million records. The connection's time zone is always UTC here
(``USE_TZ`` with no per-database ``TIME_ZONE``), and for a UTC session psycopg's C loader
returns the same aware datetimes (``tzinfo=datetime.timezone.utc``) that Django's does,
ten times faster. Django's loader stays wherever that does not hold.

The ingest pool runs niced so that the pages win the CPU (config/wsgi.py), but most of a
batch's work is done by its PostgreSQL backend, which would still take the CPU from the
pages at full priority. When the database runs on this host, a niced process's connection
gives its backend the same niceness. Only a backend proved to be this connection's own is
touched (its command line names this socket's address and port; over a Unix socket, its
parent is the server this socket is connected to), and only where the operating system
allows it (the same user, or root): elsewhere, a container or another host, it keeps its
priority and the process logs why, once.

Where Linux's autogroups are on, a process's niceness counts only inside its session's
autogroup (config/priority.py), and PostgreSQL starts every backend in a session of its
own: a reniced backend alone in its autogroup still weighs as much as the web worker's
whole group. So the backend's autogroup is given the niceness too, when the backend leads
its session (its group then holds it alone; a group it shared would be left as it is).
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import socket
import struct
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.backends.postgresql import base
from psycopg import adapt, adapters
from psycopg.pq import Format

from config import priority

logger = logging.getLogger(__name__)

_C_LOADER: Any = adapters.get_loader(adapters.types["timestamptz"].oid, Format.TEXT)


class _UtcTimestamptzLoader(adapt.Loader):
    """psycopg's C ``timestamptz`` loader behind the ``timezone`` attribute Django reads
    off a connection's loader (the C class cannot be subclassed)."""

    timezone = datetime.UTC

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self.load = _C_LOADER(oid, context).load  # type: ignore[method-assign]

    def load(self, data: Any) -> datetime.datetime:  # replaced per instance, above
        raise NotImplementedError


# Without psycopg's C implementation the loader registered globally is the Python one.
_FAST_UTC_LOADER: type[adapt.Loader] | None = (
    None if _C_LOADER.__module__.startswith("psycopg.") else _UtcTimestamptzLoader
)


@functools.lru_cache
def _with_fast_loader(template: adapt.AdaptersMap, loader: type[adapt.Loader]) -> adapt.AdaptersMap:
    context = adapt.AdaptersMap(template)
    context.register_loader("timestamptz", loader)
    return context


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        if _FAST_UTC_LOADER is not None and self.timezone == datetime.UTC:
            params["context"] = _with_fast_loader(params["context"], _FAST_UTC_LOADER)
        # No JIT compilation: the desk's queries are short, and at ten million records the
        # planner's cost estimates of a query over many day partitions pass the JIT
        # threshold, where compiling took seconds for a query that runs in milliseconds
        # (measured: ingest's span probe, 9.4 s of JIT for 22 ms of work).
        # And no parallel workers unless configured (DATABASE_PARALLEL_WORKERS): a page's
        # statement that PostgreSQL planned with two workers took longer, not shorter,
        # than alone (the 24h triage page's window statement at a million records, 23 ms
        # against 14 ms on two cores), since each worker is a process started for it; and
        # every request's workers come out of one server-wide pool.
        workers = f"-c max_parallel_workers_per_gather={settings.DATABASE_PARALLEL_WORKERS}"
        params["options"] = " ".join(
            filter(None, [params.get("options", ""), "-c jit=off", workers])
        )
        return params

    def init_connection_state(self) -> None:
        super().init_connection_state()
        niceness = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else 0
        if niceness > 0:
            _share_niceness(self.connection, niceness)


_told = False


def _share_niceness(connection: Any, niceness: int) -> None:
    """Give this connection's backend `niceness`, when it is a process of this host."""
    global _told
    pid = connection.info.backend_pid
    try:
        if not _is_own_backend(connection.pgconn.socket, pid):
            reason = "it is not a process of this host"
        else:
            os.setpriority(os.PRIO_PROCESS, pid, niceness)
            if not priority.autogroups_on():
                return
            if not _leads_its_session(pid):
                reason = "it shares its session's autogroup, which is left as it is"
            elif priority.nice_autogroup(Path(f"/proc/{pid}/autogroup"), niceness, attempts=5):
                return
            else:
                reason = "its autogroup refused the niceness"
    except OSError as exc:  # no /proc, not allowed to renice, the backend gone
        reason = f"{type(exc).__name__}: {exc.strerror or exc}"
    if not _told:
        _told = True
        logger.info(
            "PostgreSQL backends keep their priority (niceness %d not shared): %s", niceness, reason
        )


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command's name (which may hold spaces):
    state, ppid, pgrp, session, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _leads_its_session(pid: int) -> bool:
    """Whether process `pid` started its session (a PostgreSQL backend does)."""
    return int(_stat(pid)[3]) == pid


def _is_own_backend(fd: int, pid: int) -> bool:
    """Whether process `pid` of this host is the server end of the socket `fd`."""
    with socket.socket(fileno=os.dup(fd)) as sock:
        if sock.family == socket.AF_UNIX:
            credentials = sock.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
            )
            server = struct.unpack("3i", credentials)[0]
            return server > 0 and int(_stat(pid)[1]) == server  # its parent
        host, port = sock.getsockname()[:2]
    # PostgreSQL's process title names the client: "... 127.0.0.1(46186) idle".
    title = Path(f"/proc/{pid}/cmdline").read_bytes()
    return f" {host}({port}) ".encode() in title.replace(b"\0", b" ")
