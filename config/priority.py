"""The ingest pool's lower CPU priority (TRIAGE_INGEST_NICE): its workers' (config/wsgi.py)
and their PostgreSQL backends' (config/postgresql/base.py)."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Protocol

AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")
AUTOGROUP = Path("/proc/self/autogroup")


class _Writable(Protocol):
    def write_text(self, data: str) -> int: ...


def autogroups_on() -> bool:
    """Whether Linux shares the CPU between sessions first (``kernel.sched_autogroup_enabled``)."""
    try:
        return AUTOGROUP_SWITCH.read_text().strip() == "1"
    except OSError:  # not Linux, or a kernel without autogroups
        return False


def nice_autogroup(group: _Writable, niceness: int, *, attempts: int) -> bool:
    """Write `niceness` to an autogroup file (``/proc/<pid>/autogroup``); False when refused.

    Unprivileged processes may do this ten times a second on the whole host: a refusal for
    that (EAGAIN) is tried again, up to `attempts` times, after a short random pause."""
    for _ in range(attempts):
        try:
            group.write_text(str(niceness))
            return True
        except BlockingIOError:
            time.sleep(0.05 + random.random() * 0.1)
        except OSError:
            return False
    return False


def give_way(niceness: int) -> None:
    """Run this process at `niceness`, in a way the scheduler honours against the pages.

    With Linux's autogroups on (``kernel.sched_autogroup_enabled = 1``, the default of most
    distributions), the scheduler first shares the CPU fairly between sessions, and a
    process's niceness only counts against the other processes of its own session. The
    web pool, the ingest pool and PostgreSQL each run in their own session when started
    by systemd, a process manager or ``setsid``, so a niced ingest worker alone would still
    take its session's full share from the pages: on 2 cores, 4 viewers' pages under a flood
    were as slow with the ingest pool niced 10 as with it not niced (p95 358 against 366 ms;
    with its autogroup niced, 186-248 against 284-362 ms in later runs). So the
    worker starts a session of its own (its autogroup holds only itself) and gives that
    group the niceness. In a container or a systemd unit with its own CPU cgroup,
    autogroups do not apply and the worker's niceness is what counts; there, give the
    ingest service a smaller CPU weight too (``cpu_shares`` in docker-compose.yml)."""
    os.nice(niceness)
    if not autogroups_on():
        return
    try:
        os.setsid()  # refused only to a process group leader, which a worker never is
    except OSError:
        return
    nice_autogroup(AUTOGROUP, niceness, attempts=20)
