"""The project's Celery app for a worker that SIGKILLs itself at a named point.

`celery -A tests.faults.kill_points worker` with `FAULTS_KILL_AT` set to a name below: the
first time the worker reaches that point, the process dies as `kill -9` would kill it,
between two statements no test could time from outside.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

from celery import signals

from config.celery import app

__all__ = ["app"]


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _before(owner: Any, name: str, when: Callable[..., bool] = lambda *a, **k: True) -> None:
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if when(*args, **kwargs):
            _die()
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _install(point: str) -> None:
    from qualitylab import services

    if point == "ingest-after-results":
        # A batch's results are inserted; its failure records and learning attempts, which
        # commit with them, are not written yet.
        _before(services._ResultWriter, "_ingest")
    elif point == "finish":
        # Every result is committed with its records and attempts; the run is not done yet
        # (a finished run is never taken over).
        _before(services, "_finish_run")
    elif point == "alert-send":
        # An alert delivery is claimed (its row says sending, with a lease); nothing has
        # been sent to its channel yet.
        from alerts import channels

        _before(channels, "send")
    elif point == "alert-after-send":
        # The channel took the message; the delivery's row does not say so yet.
        from alerts import channels

        send = channels.send

        def send_then_die(*args: Any, **kwargs: Any) -> Any:
            send(*args, **kwargs)
            _die()

        channels.send = send_then_die
    else:
        raise ValueError(f"unknown kill point {point!r}")


@signals.task_prerun.connect
def _arm(**kwargs: Any) -> None:
    # At the first task Django is set up, so the services can be imported and patched.
    point = os.environ.get("FAULTS_KILL_AT")
    if point and not getattr(_arm, "armed", False):
        _arm.armed = True  # type: ignore[attr-defined]
        _install(point)
