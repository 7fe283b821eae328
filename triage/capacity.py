"""How many ingest batches one process works on at once.

A batch costs about 100 ms of CPU on the server. Left alone, a flood of senders queues
requests in the workers without bound, each waiting longer than the last. Each process
holds a fixed number of slots; a request waits a short while for one, then is answered
503 `ingest_busy` with Retry-After, and the sender (the reporter keeps its spool) retries.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from triage.intake.errors import IngestBusy

_lock = threading.Lock()
_slots: dict[int, threading.BoundedSemaphore] = {}


def _semaphore() -> threading.BoundedSemaphore:
    size = settings.TRIAGE_INGEST_CONCURRENT_BATCHES
    with _lock:
        if size not in _slots:
            _slots[size] = threading.BoundedSemaphore(size)
        return _slots[size]


@contextmanager
def ingest_slot() -> Iterator[None]:
    """Hold one of this process's ingest slots for the block, or raise IngestBusy."""
    slots = _semaphore()
    wait = settings.TRIAGE_INGEST_SLOT_WAIT_SECONDS
    if not slots.acquire(timeout=wait):
        raise IngestBusy(wait=max(1, math.ceil(wait)))
    try:
        yield
    finally:
        slots.release()
