"""How many ingest batches a pool works on at once.

A batch costs about 100 ms of CPU on the server. Left alone, a flood of senders queues
requests in the workers without bound, each waiting longer than the last. The pool holds
a fixed number of slots (``TRIAGE_INGEST_CONCURRENT_BATCHES``); a request waits a short
while for one, then is answered 503 `ingest_busy` with Retry-After, and the sender (the
reporter keeps its spool) retries.

The slots are the pool's, not each process's: a connection stays with the worker that
accepted it, and a gthread worker accepts whatever its slots hold, so two senders' keep-alive
connections often land on one worker (one worker held both in 5 of 6 tries). With a slot
per process that worker served them in turn while the others idled. A slot is an exclusive
``flock`` on one of N files in a directory that every worker of one gunicorn master shares
(:func:`share_with_pool`); the kernel releases it when its holder exits, even by SIGKILL.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import math
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from triage.intake.errors import IngestBusy

_lock = threading.Lock()
_directory: Path | None = None  # the slot files; one per pool, else one per process
_LONGEST_PAUSE = 0.02  # between looks for a free slot: a batch takes 100 ms or more


def share_with_pool(master_pid: int) -> None:
    """Take this process's ingest slots from the pool of `master_pid`'s workers.

    Called by config/wsgi.py in each gunicorn worker, whose parent is the master (without
    ``--preload``, as everywhere here). The directory lives under a per-user parent in the
    temporary directory that only this user may enter, so no other account can hold its
    slots; pools whose master has gone are swept away on the way."""
    global _directory
    directory = pool_directory(master_pid)
    parent = directory.parent
    with contextlib.suppress(FileExistsError):  # a file or a link there: refused below
        parent.mkdir(mode=0o700)
    found = parent.lstat()
    if (
        not stat.S_ISDIR(found.st_mode)
        or found.st_uid != os.getuid()
        or stat.S_IMODE(found.st_mode) & 0o077
    ):
        raise ImproperlyConfigured(
            f"{parent} must be a directory of this user's that no one else may enter "
            "(it holds the ingest pool's batch slots): remove it and start again."
        )
    for pool in parent.iterdir():
        if pool.name.isdigit() and int(pool.name) != master_pid and not _alive(int(pool.name)):
            shutil.rmtree(pool, ignore_errors=True)
    directory.mkdir(mode=0o700, exist_ok=True)
    with _lock:
        _directory = directory


def pool_directory(master_pid: int) -> Path:
    """Where the slot files of `master_pid`'s pool are (one file per slot: slot_file)."""
    return Path(tempfile.gettempdir()) / f"triage-desk-ingest-{os.getuid()}" / str(master_pid)


def slot_file(directory: Path, number: int) -> Path:
    return directory / f"slot-{number}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _slots() -> Path:
    """The pool's slot directory, or, outside a gunicorn pool (the development server, the
    test client, the ingest command), one of this process's own."""
    global _directory
    with _lock:
        if _directory is None:
            _directory = Path(tempfile.mkdtemp(prefix="triage-desk-ingest-"))
            atexit.register(shutil.rmtree, _directory, ignore_errors=True)
        return _directory


def _take(directory: Path, size: int) -> int | None:
    """An open slot file this thread holds the lock of, or None when all `size` are held."""
    for number in range(size):
        path = slot_file(directory, number)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:  # the directory was removed (a cleaner of /tmp): make it again
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        return fd
    return None


@contextmanager
def ingest_slot() -> Iterator[None]:
    """Hold one of the pool's ingest slots for the block, or raise IngestBusy."""
    directory = _slots()
    size = settings.TRIAGE_INGEST_CONCURRENT_BATCHES
    wait = settings.TRIAGE_INGEST_SLOT_WAIT_SECONDS
    deadline = time.monotonic() + wait
    pause = 0.001
    while (held := _take(directory, size)) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise IngestBusy(wait=max(1, math.ceil(wait)))
        time.sleep(min(pause, left))
        pause = min(pause * 2, _LONGEST_PAUSE)
    try:
        yield
    finally:
        os.close(held)  # closing the file releases its lock
