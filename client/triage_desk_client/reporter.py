"""The reporter: a runtime's items go to a spool on disk and to the desk's
``POST /api/v1/ingest`` from background threads (``max_in_flight`` batches at once, one
connection each), leaving the spool only once the desk has answered for them.

Durability, chosen per reporter (``durability=``):

- ``"append"`` (the default): ``report()`` appends the item to the spool file before it
  returns, so a process killed right after (``SIGKILL`` included) has it on disk. The
  caller's thread does that one ``os.write`` and no other file work: a new segment is made
  ahead of time, and full or answered segments are deleted, by the housekeeping thread.
- ``"batched"``: ``report()`` puts the item in a queue in memory and returns; the
  housekeeping thread appends what is queued every ``write_interval`` seconds (5 ms) in one
  write. The caller does no I/O and takes no lock that I/O holds. A crash loses what was
  queued (the last ``write_interval``, more if the disk is slower than the runtime), so it
  is for runtimes that prefer speed. The queue holds at most ``max_pending_bytes``; a
  ``report()`` that finds it full waits until the writer has made room (nothing is dropped:
  the seeds' reporter loses nothing), and raises ``OSError`` while the spool cannot be
  written. ``flush()`` and ``close()`` write the queue out first; ``close()`` always does,
  whatever its timeout.

Either way the item is scrubbed first, in the caller's thread, with the desk's own rules
(``triage_desk_client.scrub``), so a secret never reaches the spool file, even in the
batched mode's queue. Most items hold nothing to scrub, and copying one through
``scrub_item`` costs several times what encoding it does, so the reporter first asks
``is_clean_item`` (a read-only pass over the same values, the rules' gates run once over
the strings not met before) whether the walk would change anything; when it would not,
the item itself is encoded, which gives the JSON and the id the copy would have. Scrubbing
stays in the caller's thread rather than moving to the batched writer: report() returns
the item's id, which digests the scrubbed item (a digest of the secret would leak it to a
guess); what is queued is the scrubbed item's JSON, so the runtime may change its dict
after the call; and it is CPU work linear in the item's size (the rules run in linear
time), no I/O and no lock, which is what keeps the caller's worst call bounded.

What the sender does with the desk's answers:

- 200 / 207: every item has its status. ``accepted`` and ``duplicate`` are delivered;
  ``conflict`` and ``rejected`` are logged once (type, id, code, field; never the body)
  and not sent again.
- 401 / 403: sending stops and the spool is kept (a revoked key is an operator's problem,
  not a reason to lose data) until ``set_api_key()`` gives another key, or a process
  started with a good key adopts the spool.
- 413, and 400 with the desk's error code (an item nested past the desk's depth limit
  makes its whole batch ``json_too_deep``): the batch is split in halves until the item at
  fault is alone; that item is then counted as rejected. A 400 without the desk's error
  body (a proxy's, or a Host header the desk refuses) is retried like any other error:
  a misconfiguration never empties the spool.
- 429 / 503: wait for ``Retry-After``, then send the same batch again.
- Anything else, and network failures: exponential backoff with jitter, up to
  ``max_backoff`` seconds.
"""

from __future__ import annotations

import atexit
import dataclasses
import email.utils
import http.client
import json
import logging
import math
import os
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from threading import get_ident
from typing import Any, Callable

from triage_desk_client import ids
from triage_desk_client.scrub import is_clean_item, scrub_item
from triage_desk_client.spool import Batch, Segment, Slices, Spool, frame

logger = logging.getLogger("triage_desk_client")

# Items that carry the runtime's release (``Reporter(release=...)`` or this variable).
RELEASE_ENVIRONMENT_VARIABLE = "TRIAGE_RELEASE"
RELEASED_ITEM_TYPES = frozenset({"failure", "envelope", "runner_event", "receipt"})
MAX_RELEASE_LENGTH = 64
ITEM_TYPES = (
    "failure",
    "runner_event",
    "receipt",
    "learning_attempt",
    "audit_event",
    "envelope",
)
DURABILITIES = ("append", "batched")
INGEST_PATH = "/api/v1/ingest"
DEFAULT_MAX_SPOOL_BYTES = 256 * 1024 * 1024
MAX_BATCH_BYTES = 4 * 1024 * 1024  # the desk refuses bodies over 5 MB
MAX_BATCH_ITEMS = 1000  # and batches over 1,000 items
MAX_IN_FLIGHT = 8
DEFAULT_WRITE_INTERVAL = 0.005
DEFAULT_MAX_PENDING_BYTES = 8 * 1024 * 1024
_WRITE_RETRY = 0.5  # after the spool could not be written (a full disk)
_RETRY_AFTER_CAP = 3600.0
_ORPHAN_SCAN_INTERVAL = 5.0
_USER_AGENT = "triage-desk-client/0.1.0"

# Canonical JSON (sorted keys): the default ids digest it; values JSON cannot hold (a
# datetime, a set) are written as their str(). No circular-reference check: it costs every
# report() a dict entry per nested container, and a body that contains itself is caught by
# the recursion limit instead (see _append).
_ENCODER = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=str,
    check_circular=False,
)

_encode_string: Callable[[str], str] = json.encoder.encode_basestring
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")

IdMaker = Callable[[Mapping[str, Any], bytes], str]


class Reporter:
    """Ships items to a Triage Desk; see the module docstring for what happens to them.

    ``report()`` and the typed helpers append to the spool (or, with
    ``durability="batched"``, queue for it) and return the item's id; they do no network
    I/O and never raise because the desk is away. They raise ``TypeError`` or
    ``ValueError`` for an item that cannot be sent at all (a body that is not a JSON
    object, NaN, an id over 200 characters), and ``OSError`` when the spool cannot be
    written (a full disk): loud, never a silent loss.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        spool_dir: str,
        batch_size: int = 500,
        flush_interval: float = 1.0,
        max_spool_bytes: int = DEFAULT_MAX_SPOOL_BYTES,
        timeout: float = 10.0,
        fsync_interval: float = 1.0,
        max_backoff: float = 30.0,
        segment_bytes: int | None = None,
        close_timeout: float = 5.0,
        max_in_flight: int = 2,
        durability: str = "append",
        write_interval: float = DEFAULT_WRITE_INTERVAL,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        release: str | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}")
        if not 1 <= batch_size <= MAX_BATCH_ITEMS:
            raise ValueError(f"batch_size must be 1-{MAX_BATCH_ITEMS}")
        if not 1 <= max_in_flight <= MAX_IN_FLIGHT:
            raise ValueError(f"max_in_flight must be 1-{MAX_IN_FLIGHT}")
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {', '.join(DURABILITIES)}")
        if not 0 < write_interval <= 1:
            raise ValueError("write_interval must be over 0 and at most 1 second")
        if max_pending_bytes < 1:
            raise ValueError("max_pending_bytes must be at least 1")
        # The runtime's release, sent as ``release`` on every failure, envelope, runner event
        # and receipt (a body that says its own keeps it); None reads TRIAGE_RELEASE.
        if release is None:
            release = os.environ.get(RELEASE_ENVIRONMENT_VARIABLE, "")
        if not isinstance(release, str) or len(release) > MAX_RELEASE_LENGTH:
            raise ValueError(f"release must be a string of at most {MAX_RELEASE_LENGTH} characters")
        if release != release.strip() or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in release):
            raise ValueError("release must not hold control characters or end with spaces")
        self._release = release
        self._connection_class: type[http.client.HTTPConnection] = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        self._host = parts.hostname
        self._port = parts.port
        self._path = parts.path.rstrip("/") + INGEST_PATH
        self._api_key = api_key
        self._blocked_key: str | None = None  # the key the desk refused (401/403)
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._timeout = timeout
        self._fsync_interval = fsync_interval
        self._max_backoff = max_backoff
        self._close_timeout = close_timeout
        self._spool = Spool(
            directory=spool_dir,
            segment_bytes=segment_bytes or min(8 << 20, max(64 << 10, max_spool_bytes // 16)),
            max_bytes=max_spool_bytes,
        )
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # new items, answers, key, closing
        # One sender at a time picks and reads the next batch (never under ``_lock``, which
        # report() takes), and one at a time writes ack files.
        self._read_lock = threading.Lock()
        self._ack_lock = threading.Lock()
        self._stop = threading.Event()  # interrupts the sender's waits at close
        self._closing = False
        self._closed = False
        self._senders_running = max_in_flight  # sender threads not ended yet
        self._left = 0  # items left in the spool at close
        self._flushing = 0
        self._batch_opened_at = 0.0
        self._local = threading.local()  # each sender thread's connection
        self._next_scan = 0.0
        # Set once the first scan for segments an earlier process left is done: flush()
        # waits for it, so what a new reporter finds on its spool is sent by that flush.
        self._scanned = threading.Event()
        self._next_sync = time.monotonic() + fsync_interval
        self._failures_in_a_row = 0
        self._counts = {"sent": 0, "duplicate": 0, "rejected": 0, "dropped": 0}
        self._last_error: str | None = None
        # The batched mode's queue: framed records, oldest first. Its bytes count the group
        # being written too, until it is on disk, so memory holds at most the bound.
        self._batched = durability == "batched"
        self._write_interval = write_interval
        self._max_pending_bytes = max_pending_bytes
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._pending_lock = threading.Lock()  # never held while taking ``_lock``
        self._room = threading.Condition(self._pending_lock)  # written: room, flush's target
        self._accepting = True
        self._enqueued = 0  # records queued since the start
        self._written = 0  # of those, appended to the spool (or lost with the disk at close)
        self._write_error: OSError | None = None
        self._write_now = threading.Event()  # flush, close or a full queue: no gathering
        self._housekeeping = threading.Event()  # work for the housekeeping thread
        self._housekeeper_stop = False
        # Threads inside report() now (set.add and set.discard are atomic under the GIL).
        self._reporting: set[int] = set()
        with self._lock:
            self._spool.open_active()
        self._housekeeper = threading.Thread(
            target=self._keep_house, name="triage-desk-spool", daemon=True
        )
        self._housekeeping.set()  # the first spare segment
        self._housekeeper.start()
        self._threads = [
            threading.Thread(target=self._run, name=f"triage-desk-reporter-{n}", daemon=True)
            for n in range(max_in_flight)
        ]
        for thread in self._threads:
            thread.start()
        atexit.register(self._close_at_exit)

    # --- the caller's side ------------------------------------------------------------------

    def report(self, item_type: str, item_id: str | None, body: Mapping[str, Any]) -> str:
        """Spool one ingest item (``id`` None: a stable one derived from the body)."""
        if item_type not in ITEM_TYPES:
            raise ValueError(f"item_type must be one of {', '.join(ITEM_TYPES)}")
        return self._append(item_type, item_id, body, _ID_MAKERS[item_type])

    def failure(self, body: Mapping[str, Any], id: str | None = None) -> str:
        """A normalized failure record (stage, reason, evidence, ...)."""
        return self._append("failure", id, body, ids.failure_id)

    def runner_event(
        self, event: Any, id: str | None = None, *, sequence: int | None = None
    ) -> str:
        """A graph-tool-call ``PlanEvent`` (or its dict); `sequence`, the event's position
        in its run, goes into the default id."""
        body = _event_dict(event)
        return self._append(
            "runner_event",
            id,
            body,
            lambda data, canonical: ids.runner_event_id(data, canonical, sequence=sequence),
        )

    def receipt(self, body: Mapping[str, Any]) -> str:
        """A tool-run receipt; its id is its ``tool_run_id`` (``#attempt`` when given)."""
        return self._append("receipt", None, body, ids.receipt_id)

    def audit_event(self, body: Mapping[str, Any]) -> str:
        """An outbound call the runtime's own audit saw."""
        return self._append("audit_event", None, body, ids.audit_event_id)

    def learning_attempt(self, record: Mapping[str, Any]) -> str:
        """graph-tool-call's ``build_trace_learning_record`` output (id: its ``attempt_id``
        and a digest of the record)."""
        return self._append("learning_attempt", None, record, ids.learning_attempt_id)

    def envelope(self, body: Mapping[str, Any], id: str | None = None) -> str:
        """Seed 004's error envelope of a failed tool call, with ``tool`` and ``collection``
        beside it (id: its trace and span ids, tool and code, and a digest of the body)."""
        return self._append("envelope", id, body, _envelope_id)

    def _append(
        self, item_type: str, item_id: str | None, body: Mapping[str, Any], make_id: IdMaker
    ) -> str:
        reporting = self._reporting
        caller = get_ident()
        reporting.add(caller)  # the senders make way while it is there (see Slices)
        try:
            return self._spool_item(item_type, item_id, body, make_id)
        finally:
            reporting.discard(caller)

    def _spool_item(
        self, item_type: str, item_id: str | None, body: Mapping[str, Any], make_id: IdMaker
    ) -> str:
        if type(body) is not dict and not isinstance(body, Mapping):
            raise TypeError(f"a {item_type} body must be a mapping, not {type(body).__name__}")
        if self._release and item_type in RELEASED_ITEM_TYPES and "release" not in body:
            body = {**body, "release": self._release}
        if not is_clean_item(body):  # something to scrub, or there may be: the walk
            try:
                body = scrub_item(body)
            except ValueError as exc:  # the one thing it refuses: a body that contains itself
                raise ValueError(f"a {item_type} body must not contain itself ({exc})") from None
        try:
            canonical = _ENCODER.encode(body).encode()
        except RecursionError:
            raise ValueError(
                f"a {item_type} body must not contain itself, nor be nested deeper than "
                "Python's recursion limit"
            ) from None
        if item_id is None:
            item_id = make_id(body, canonical)
        if not isinstance(item_id, str) or not 0 < len(item_id) <= ids.MAX_ID_LENGTH:
            raise ValueError(f"an item id must be a string of 1-{ids.MAX_ID_LENGTH} characters")
        line = frame(
            b'{"type":"%s","id":%s,"body":%s}'
            % (item_type.encode(), _encode_string(item_id).encode(), canonical)
        )
        if self._batched:
            self._enqueue(line)
            return item_id
        with self._lock:
            if self._closed:
                raise RuntimeError("this reporter is closed")
            self._spooled(1, self._spool.append(line))
            # Rotation took the spare, or the spool was full: the housekeeper makes the next
            # one and deletes the dropped files, off this thread.
            tidy = self._spool.spare is None or bool(self._spool.to_close)
        if tidy:
            self._housekeeping.set()
        return item_id

    def _spooled(self, records: int, dropped: int) -> None:
        """Account for `records` just appended (under the lock): wake the sender when a
        batch is full, count the records a full spool dropped."""
        queued = self._spool.unanswered - records
        if dropped:
            self._counts["dropped"] += dropped
            self._changed.notify_all()
        if queued <= 0:
            self._batch_opened_at = time.monotonic()
            queued = 0
        if queued % self._batch_size + records >= self._batch_size:  # a batch is full
            self._changed.notify_all()

    def _enqueue(self, line: bytes) -> None:
        """The batched mode's report(): queue `line` for the housekeeper to append."""
        size = len(line)
        if size > self._spool.max_bytes:  # what the append would raise, raised now
            raise ValueError(
                f"an item of {size} bytes does not fit a spool of {self._spool.max_bytes} bytes"
            )
        with self._pending_lock:
            while True:
                if not self._accepting:
                    raise RuntimeError("this reporter is closed")
                if self._write_error is not None:
                    error = self._write_error
                    raise OSError(error.errno, f"the spool cannot be written: {error}")
                # Full: wait for the writer (an item larger than the bound goes alone).
                if not self._pending_bytes or self._pending_bytes + size <= self._max_pending_bytes:
                    break
                self._write_now.set()
                self._housekeeping.set()
                self._room.wait()
            idle = not self._pending
            self._pending.append(line)
            self._pending_bytes += size
            self._enqueued += 1
        if idle:
            self._housekeeping.set()

    def set_api_key(self, api_key: str) -> None:
        """Send with another key from now on (after the desk refused the old one)."""
        with self._lock:
            self._api_key = api_key
            self._changed.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Send what was reported so far (written out of the batched mode's queue first),
        and what an earlier process left on the spool that this reporter found at its
        start; True once the desk has answered for all of it, False when `timeout` passed
        first or the desk refuses the key."""
        deadline = time.monotonic() + timeout
        if not self._scanned.wait(max(0.0, deadline - time.monotonic())):
            return False
        if self._batched and not self._drain(deadline):
            return False
        with self._lock:
            # Done with a segment once its acknowledged offset covers what it held now and
            # every answer for it is counted: the offset moves (and is written to the ack
            # file) before the answer's counts, so stats() after a True must count them.
            waiting = [(segment, segment.size, segment.items) for segment in self._spool.segments]
            self._flushing += 1
            self._changed.notify_all()
            try:
                while True:
                    held = self._spool.segments
                    if all(
                        seg not in held or (seg.acked >= size and seg.answered >= items)
                        for seg, size, items in waiting
                    ):
                        return True
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._closed or self._blocked_key == self._api_key:
                        return False
                    self._changed.wait(remaining)
            finally:
                self._flushing -= 1

    def _drain(self, deadline: float) -> bool:
        """Wait until what was queued so far is in the spool; False at `deadline`."""
        with self._pending_lock:
            target = self._enqueued
            while self._written < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._write_now.set()
                self._housekeeping.set()
                self._room.wait(remaining)
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Flush for up to `timeout` seconds (default ``close_timeout``), stop the sender,
        fsync and release the spool. What the desk has not answered for stays on disk for
        the next reporter on this ``spool_dir``; the batched mode's queue is written out
        whatever the timeout. True when nothing was left."""
        if self._closed:
            return self._left == 0
        delivered = self.flush(self._close_timeout if timeout is None else timeout)
        with self._pending_lock:
            self._accepting = False
        self._stop_housekeeper()
        with self._lock:
            spare, self._spool.spare = self._spool.spare, None
        if spare is not None:  # never written to: it goes at once, whatever is in flight
            self._spool.release(spare, delete=True)
        with self._lock:
            self._closing = True
            self._changed.notify_all()
        self._stop.set()
        deadline = time.monotonic() + 1.0
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._closed = True
            left = self._left = self._queued()
            # Requests the senders started before `_closing` (one each at most) may still be
            # under way: their segments stay locked, so no other reporter on this spool_dir
            # sends them too, until the last sender has the desk's answer (or the request
            # fails) and releases them on its way out.
            if not self._senders_running:
                self._release_all()
        atexit.unregister(self._close_at_exit)
        return delivered and left == 0

    def _close_at_exit(self) -> None:
        self.close()

    def stats(self) -> dict[str, Any]:
        """``queued`` (items the desk has not answered for yet, the batched mode's queue
        included), ``pending`` (of those, the items still in that queue, not yet in the
        spool), ``spooled`` (bytes of spool files held), ``sent`` (accepted), ``duplicate``,
        ``rejected`` (rejected or conflict), ``dropped`` (lost to a full spool or a damaged
        record), ``last_error``."""
        with self._lock:
            with self._pending_lock:
                pending = self._enqueued - self._written
            return {
                "queued": self._queued() + pending,
                "pending": pending,
                "spooled": self._spool.total_bytes,
                **self._counts,
                "last_error": self._last_error,
            }

    def _queued(self) -> int:
        return self._spool.unanswered

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the housekeeping thread ----------------------------------------------------------------

    def _keep_house(self) -> None:
        """The file work kept out of report() and away from the network: the batched mode's
        appends, the next segment made ahead of a rotation, the files of dropped and
        answered segments deleted, the timed fsync and the adoption of orphaned segments
        (a sender waiting out the desk's backoff no longer delays them)."""
        retry_at: float | None = None
        while True:
            wake = min(self._next_scan, self._next_sync, retry_at or math.inf)
            self._housekeeping.wait(max(0.0, wake - time.monotonic()))
            self._housekeeping.clear()
            stopping = self._housekeeper_stop
            try:
                if self._batched:
                    self._write_pending(stopping)
                self._tidy(stopping)
                now = time.monotonic()
                if now >= self._next_sync:
                    self._next_sync = now + self._fsync_interval
                    self._sync()
                if now >= self._next_scan and not stopping:
                    self._next_scan = now + _ORPHAN_SCAN_INTERVAL
                    try:
                        self._adopt_orphans()
                    finally:
                        self._scanned.set()
                retry_at = None
            except Exception as exc:  # a full disk, or a bug: keep what is queued, go on
                if retry_at is None:
                    logger.exception("triage desk spool: the spool's file work failed; retrying")
                with self._lock:
                    self._last_error = f"spool not writable: {type(exc).__name__}: {exc}"
                if stopping:
                    self._lose_pending(exc)
                retry_at = time.monotonic() + _WRITE_RETRY
            if stopping:
                return

    def _write_pending(self, stopping: bool) -> None:
        """Append the queue to the spool in groups (one write each) after gathering for
        ``write_interval``; what could not be written stays queued, in order."""
        with self._pending_lock:
            if not self._pending:
                return
        if not stopping:
            self._write_now.wait(self._write_interval)  # gather: one write for many calls
        self._write_now.clear()
        with self._pending_lock:
            lines, self._pending = self._pending, []
        done = 0
        try:
            while done < len(lines):
                # The lock per group, not per queue: a sender waits one write at most.
                with self._lock:
                    count, dropped = self._spool.append_lines(lines, done)
                    self._spooled(count, dropped)
                    tidy = self._spool.spare is None or bool(self._spool.to_close)
                done += count
                if tidy:
                    self._tidy(stopping)
        except OSError as exc:
            with self._pending_lock:
                self._write_error = exc
            raise
        finally:
            with self._pending_lock:
                self._pending[:0] = lines[done:]
                self._pending_bytes -= sum(len(line) for line in lines[:done])
                self._written += done
                if done == len(lines):
                    self._write_error = None
                self._room.notify_all()
        if self._pending:  # queued while this group was written: its gathering starts now
            self._housekeeping.set()

    def _lose_pending(self, error: Exception) -> None:
        """At close, with the spool unwritable: count the queue as dropped, loudly."""
        with self._pending_lock:
            lost, self._pending = self._pending, []
            self._pending_bytes = 0
            self._written += len(lost)
            self._room.notify_all()
        if lost:
            with self._lock:
                self._counts["dropped"] += len(lost)
            logger.error(
                "triage desk spool: %d queued items lost at close, the spool cannot be written: %s",
                len(lost),
                error,
            )

    def _tidy(self, stopping: bool) -> None:
        """Delete and close the segments let go of; make the spare segment."""
        with self._lock:
            spool = self._spool
            done = [segment for segment in spool.to_close if not segment.in_flight]
            busy = [segment for segment in spool.to_close if segment.in_flight]
            spool.to_close[:] = busy
            make_spare = spool.spare is None and not stopping and not self._closing
        for segment in busy:  # a sender still reads it: its files go now, the descriptor later
            if segment.discard:
                spool.unlink(segment)
        for segment in done:
            spool.release(segment, delete=segment.discard)
        if make_spare:
            spare = spool.create_segment()
            with self._lock:
                kept = not self._closing and spool.offer_spare(spare)
            if not kept:
                spool.release(spare, delete=True)

    def _stop_housekeeper(self) -> None:
        """Stop the housekeeping thread once it wrote out the queue (close() only)."""
        self._housekeeper_stop = True
        self._write_now.set()
        self._housekeeping.set()
        self._housekeeper.join()

    # --- the sender thread --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._send_until_closed()
                    return
                except Exception as exc:  # a bug or an unusable spool: keep the items, go on
                    logger.exception("triage desk reporter: the sender failed; retrying")
                    with self._lock:
                        self._last_error = f"sender failed: {type(exc).__name__}"
                    self._stop.wait(self._max_backoff)
        finally:
            connection = getattr(self._local, "connection", None)
            if connection is not None:
                connection.close()
            with self._lock:
                self._senders_running -= 1
                if self._closed and not self._senders_running:  # close() returned meanwhile
                    self._release_all()

    def _release_all(self) -> None:
        """Release every segment (under the lock, once the sender no longer uses them):
        delete those the desk answered for entirely, leave the rest for a later reporter."""
        spool = self._spool
        for segment in spool.segments + spool.to_close:
            empty = segment.discard or (segment.acked >= segment.size and segment in spool.segments)
            spool.release(segment, delete=empty)
        if spool.spare is not None:
            spool.release(spool.spare, delete=True)
            spool.spare = None
        spool.segments.clear()
        spool.to_close.clear()
        spool.close()

    def _send_until_closed(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            with self._read_lock:
                with self._lock:
                    if self._closing:
                        return
                    picked, wake = self._pick(now)
                    if picked is None:
                        self._changed.wait(max(0.0, wake - now))
                        continue
                    segment, start, end = picked
                    segment.in_flight += 1
                    self._batch_opened_at = now
                try:
                    batch = self._spool.read_batch(
                        segment, start, end, self._batch_size, MAX_BATCH_BYTES, self._slices()
                    )
                except BaseException:
                    with self._lock:
                        segment.in_flight -= 1
                    raise
                records = len(batch.payloads) + batch.damaged
                with self._lock:
                    segment.claimed = max(segment.claimed, batch.end)
                    segment.in_flight_items += records
            delivered = False
            try:
                delivered = self._deliver(batch)
            finally:
                with self._lock:
                    segment.in_flight -= 1
                    segment.in_flight_items -= records
                    if not delivered:  # closing, or a failure: send the range again later
                        segment.resend.append((start, batch.end))
                    let_go = segment.discard and not segment.in_flight
                if let_go:  # dropped meanwhile: the housekeeper may close it now
                    self._housekeeping.set()

    def _pick(self, now: float) -> tuple[tuple[Segment, int, int] | None, float]:
        """The next records to send (under the lock) when it is time to send them, else
        None and when to look again: always later than `now`, so a sender with nothing to
        do sleeps. (It used to wake at deadlines already past while another sender held the
        only batch, and spun holding the GIL and this lock: report() waited behind it.)"""
        later = now + self._flush_interval  # nothing to send: look again after an interval
        if self._blocked_key == self._api_key:
            return None, later  # set_api_key() wakes the senders
        for segment in list(self._spool.segments):
            while segment.resend:
                start, end = segment.resend.pop(0)
                if end > segment.acked:
                    return (segment, max(start, segment.acked), end), now
            start = max(segment.acked, segment.claimed)
            if start < segment.size:
                due_at = self._batch_opened_at + self._flush_interval
                due = (
                    not segment.active
                    or segment.unanswered - segment.in_flight_items >= self._batch_size
                    or self._flushing
                    or now >= due_at
                )
                return ((segment, start, segment.size), now) if due else (None, due_at)
            if segment.in_flight or segment.acked < segment.size:
                continue  # every record handed to a sender; answers pending
            if not segment.active:  # every record answered: deleted by the housekeeper
                self._spool.retire(segment)
                self._housekeeping.set()
        return None, later

    def _deliver(self, batch: Batch) -> bool:
        """Send the batch until the desk answered for it; False when that did not happen
        (closing, or the segment was dropped)."""
        if batch.damaged:
            with self._lock:
                if batch.segment in self._spool.segments:
                    self._spool.answered(batch.segment, batch.damaged)
                    self._counts["dropped"] += batch.damaged
        if batch.payloads:
            return self._send(batch, 0, len(batch.payloads))
        self._answered(batch, 0, 0, {})
        return True

    def _send(self, batch: Batch, low: int, high: int) -> bool:
        """Send payloads[low:high] until the desk answered for them; False when closing."""
        attempt = 0
        while True:
            with self._lock:
                while self._blocked_key == self._api_key and not self._closing:
                    self._changed.wait()
                if self._closing or self._stop.is_set():
                    return False
                if batch.segment not in self._spool.segments:
                    return False  # dropped meanwhile (the spool was full): counted there
                key = self._api_key
            body = b'{"items":[' + b",".join(batch.payloads[low:high]) + b"]}"
            delay: float | None = None
            try:
                status, retry_after, data = self._post(body, key)
            except (OSError, http.client.HTTPException) as exc:
                status, retry_after, data = 0, None, b""
                error = f"cannot reach the desk: {type(exc).__name__}: {exc}"
            else:
                error = f"HTTP {status}{_error_code(data)}"
            if status in (200, 207):
                outcome = _item_statuses(data, batch.payloads[low:high], self._slices())
                if outcome is not None:
                    self._answered(batch, low, high, outcome)
                    return True
                error = f"HTTP {status} without a status for every item"
            elif status in (401, 403):
                with self._lock:
                    self._blocked_key = key
                    self._last_error = error
                    self._changed.notify_all()
                logger.error(
                    "triage desk refused the API key (%s): sending stopped, the spool is kept "
                    "until another key is set",
                    error,
                )
                continue
            elif status == 413 or (status == 400 and _error_code(data)):
                # The desk (or a proxy's body limit) refused the batch as a whole: halve it
                # until the item at fault is alone. A 400 that is not the desk's judgement
                # of the body (a proxy's, or a Host the desk does not serve) is retried below.
                if high - low > 1:
                    middle = (low + high) // 2
                    return self._send(batch, low, middle) and self._send(batch, middle, high)
                code = (
                    "too_large"
                    if status == 413
                    else _error_code(data).strip(" ()") or "bad_request"
                )
                item = _item_head(batch.payloads[low])
                self._answered(batch, low, high, {"rejected": [(item[0], item[1], code, "")]})
                return True
            elif status in (429, 503):
                delay = _retry_after(retry_after)
            if delay is None:
                delay = min(self._max_backoff, 0.5 * 2**attempt) * random.uniform(0.5, 1.0)
                attempt += 1
            self._failed(error)
            if self._stop.wait(delay):
                return False

    def _slices(self) -> Slices:
        """Slices that make way at once for a report() under way (see ``Slices``)."""
        return Slices(self._reporting.__len__)

    def _post(self, body: bytes, key: str) -> tuple[int, str | None, bytes]:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connection_class(self._host, self._port, timeout=self._timeout)
            self._local.connection = connection
        try:
            connection.request(
                "POST",
                self._path,
                body=body,
                headers={
                    "Authorization": f"Bearer {key}",
                    "Content-Type": "application/json",
                    "User-Agent": _USER_AGENT,
                },
            )
            response = connection.getresponse()
            data = response.read()
        except BaseException:
            connection.close()
            self._local.connection = None
            raise
        if response.will_close:
            connection.close()
        return response.status, response.getheader("Retry-After"), data

    def _failed(self, error: str) -> None:
        with self._lock:
            self._last_error = error
        self._failures_in_a_row += 1
        if self._failures_in_a_row == 1:
            logger.warning("triage desk: %s; the spool keeps the items and retries", error)

    def _answered(
        self,
        batch: Batch,
        low: int,
        high: int,
        outcome: Mapping[str, Any],
    ) -> None:
        segment = batch.segment
        start = batch.start if low == 0 else batch.ends[low - 1]
        end = batch.end if high == len(batch.payloads) else batch.ends[high - 1]
        with self._lock:
            if segment not in self._spool.segments:
                return  # dropped meanwhile (a full spool)
            # Batches may be answered out of order: the acknowledged offset only moves over
            # records that are all answered, so a crash never skips an unanswered one.
            segment.finished[start] = max(end, segment.finished.get(start, 0))
            moved = True
            while moved:
                moved = False
                for answered_from, answered_to in list(segment.finished.items()):
                    if answered_from <= segment.acked:
                        del segment.finished[answered_from]
                        if answered_to > segment.acked:
                            segment.acked, moved = answered_to, True
            acked = segment.acked
        # Still held (close() leaves a segment in flight to its sender): the desk answered,
        # so the next reporter must not send these records again.
        # The ack file only spares a restart from re-sending what the desk then answers as
        # duplicate; failing to write it (a full disk, a link planted again at its
        # temporary name) must not lose the answer's counts below, or flush() would wait
        # for records the desk already has. The next answer writes it again.
        with self._ack_lock:
            if acked > segment.ack_written:
                try:
                    self._spool.write_ack(segment, acked)
                except OSError as exc:
                    logger.error(
                        "triage desk spool: cannot write the ack file of %s (%s); a restart "
                        "may send its answered items again",
                        segment.path,
                        exc,
                    )
                else:
                    segment.ack_written = acked
        if self._failures_in_a_row:
            logger.info("triage desk reachable again")
        self._failures_in_a_row = 0
        for item_type, item_id, code, field in outcome.get("rejected", ()):
            logger.warning(
                "triage desk rejected %s %s: %s%s",
                item_type,
                item_id,
                code,
                f" (field {field})" if field else "",
            )
        with self._lock:
            if segment in self._spool.segments:  # not dropped meanwhile
                self._spool.answered(segment, high - low)
            self._counts["sent"] += outcome.get("accepted", 0)
            self._counts["duplicate"] += outcome.get("duplicate", 0)
            self._counts["rejected"] += len(outcome.get("rejected", ()))
            if self._blocked_key is not None and self._blocked_key != self._api_key:
                self._blocked_key = None
            self._changed.notify_all()

    def _adopt_orphans(self) -> None:
        with self._lock:
            held = [segment.path for segment in self._spool.segments]
        found = self._spool.find_orphans(held)
        if not found:
            return
        with self._lock:
            if self._closing:
                for segment in found:
                    self._spool.release(segment, delete=False)
                return
            self._spool.add(found)
            self._changed.notify_all()
        logger.info(
            "triage desk spool: adopted %d unsent items left by an earlier process",
            sum(segment.unanswered for segment in found),
        )

    def _sync(self) -> None:
        with self._lock:
            dirty = [segment for segment in self._spool.segments if segment.dirty]
            for segment in dirty:
                segment.dirty = False
        self._spool.sync(dirty)


# --- helpers ----------------------------------------------------------------------------------


def _envelope_id(body: Mapping[str, Any], canonical: bytes) -> str:
    """One failed call, one envelope: its trace and span ids (the desk merges a report and
    a span of one call by them), tool and code, then the body's digest."""
    parts = [
        str(body.get(key)) if body.get(key) not in (None, "") else "-"
        for key in ("trace_id", "span_id", "tool", "code")
    ]
    tail = ids.digest(canonical)
    return f"{'/'.join(['envelope', *parts])[: ids.MAX_ID_LENGTH - len(tail) - 1]}/{tail}"


_ID_MAKERS: dict[str, IdMaker] = {
    "failure": ids.failure_id,
    "runner_event": lambda body, canonical: ids.runner_event_id(body, canonical),
    "receipt": ids.receipt_id,
    "audit_event": ids.audit_event_id,
    "learning_attempt": ids.learning_attempt_id,
    "envelope": _envelope_id,
}


def _event_dict(event: Any) -> Mapping[str, Any]:
    if dataclasses.is_dataclass(event) and not isinstance(event, type):
        return dataclasses.asdict(event)
    if isinstance(event, Mapping):
        return event
    raise TypeError(f"a runner event must be a PlanEvent or a mapping, not {type(event).__name__}")


def _item_statuses(
    data: bytes, payloads: list[bytes], slices: Slices | None = None
) -> dict[str, Any] | None:
    """accepted / duplicate counts and (type, id, code, field) of each refused item."""
    slices = slices or Slices()
    items = _answer_items(data, slices)
    if items is None or len(items) != len(payloads):
        return None
    outcome: dict[str, Any] = {"accepted": 0, "duplicate": 0, "rejected": []}
    refused: list[tuple[str, str, str, str]] = outcome["rejected"]
    for index, item in enumerate(items):
        slices.tick()
        status = item.get("status") if isinstance(item, dict) else None
        if status in ("accepted", "duplicate"):
            outcome[status] += 1
        elif status in ("conflict", "rejected"):
            error = item.get("error") if isinstance(item.get("error"), dict) else {}
            item_type, item_id = _item_head(payloads[index])
            refused.append(
                (
                    item_type,
                    item_id,
                    str(error.get("code") or status),
                    str(error.get("field") or ""),
                )
            )
        else:
            return None
    return outcome


def _answer_items(data: bytes, slices: Slices) -> list[Any] | None:
    """The ``items`` list of the desk's answer (a JSON object), or None when it is not one.

    The same result as ``json.loads(data)["items"]`` (the last ``items`` key wins), but
    decoded one item at a time with `slices` ticking between them: one ``json.loads`` of
    a 500-item answer holds the interpreter for a quarter of a millisecond."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    decode = _DECODER.raw_decode
    items: list[Any] | None = None
    try:
        at = _skip_space(text, 0)
        if text[at : at + 1] != "{":
            return None
        at = _skip_space(text, at + 1)
        if text[at : at + 1] == "}":
            return None  # no items
        while True:
            key, at = decode(text, at)
            at = _skip_space(text, at)
            if not isinstance(key, str) or text[at : at + 1] != ":":
                return None
            at = _skip_space(text, at + 1)
            if key == "items" and text[at : at + 1] == "[":
                items, at = _decode_list(text, _skip_space(text, at + 1), slices)
            else:
                value, at = decode(text, at)
                if key == "items":
                    items = value if isinstance(value, list) else None
            at = _skip_space(text, at)
            separator = text[at : at + 1]
            at = _skip_space(text, at + 1)
            if separator == "}":
                break
            if separator != ",":
                return None
    except ValueError:  # json.JSONDecodeError, or a list that is not one
        return None
    return None if text[at:] else items


def _skip_space(text: str, at: int) -> int:
    """The offset of the first character at or after `at` that is not JSON whitespace."""
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _decode_list(text: str, at: int, slices: Slices) -> tuple[list[Any], int]:
    """The JSON list whose first value (or ``]``) is at `at`, and the offset after it."""
    decode = _DECODER.raw_decode
    values: list[Any] = []
    if text[at : at + 1] == "]":
        return values, at + 1
    while True:
        slices.tick()
        value, at = decode(text, at)
        values.append(value)
        at = _skip_space(text, at)
        separator = text[at : at + 1]
        at = _skip_space(text, at + 1) if separator == "," else at + 1
        if separator == "]":
            return values, at
        if separator != ",":
            raise ValueError("not a JSON list")


def _item_head(payload: bytes) -> tuple[str, str]:
    try:
        item = json.loads(payload)
        return str(item.get("type") or ""), str(item.get("id") or "")
    except ValueError:
        return "", ""


def _error_code(data: bytes) -> str:
    """` (code)` of a desk error answer, for logs and ``last_error``; never a body."""
    try:
        code = json.loads(data)["error"]["code"]
    except (ValueError, TypeError, KeyError):
        return ""
    return f" ({code})" if isinstance(code, str) and len(code) <= 80 else ""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = moment.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return min(_RETRY_AFTER_CAP, max(0.0, seconds))
