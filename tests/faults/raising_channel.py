"""The project's Celery app for a worker whose every channel raises while sending.

`celery -A tests.faults.raising_channel worker`: `alerts.channels.send` raises
`FAULTS_CHANNEL_ERROR` (a RuntimeError's message) instead of sending, as a channel's
library might on input or a state nobody foresaw. The delivery must still end with its
outcome recorded.
"""

from __future__ import annotations

import os
from typing import Any

from celery import signals

from config.celery import app

__all__ = ["app"]


def _raise(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(os.environ.get("FAULTS_CHANNEL_ERROR", "the channel broke"))


@signals.task_prerun.connect
def _arm(**kwargs: Any) -> None:
    # At the first task Django is set up, so alerts can be imported and patched.
    if not getattr(_arm, "armed", False):
        _arm.armed = True  # type: ignore[attr-defined]
        from alerts import channels

        channels.send = _raise
