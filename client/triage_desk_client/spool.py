"""The spool: what a reporter has not yet heard the desk answer for, in files on disk.

Layout of a spool directory:

- ``<name>.seg``: a segment, records appended one per line. A record is the ingest item's
  JSON (``{"type", "id", "body"}``) prefixed with the CRC-32 of that JSON in 8 hex digits:
  ``1a2b3c4d{"type":"failure","id":"...","body":{...}}\\n``. JSON never holds a raw newline,
  so a line is a record; a line that is cut short (the process died inside the write) or
  whose checksum does not match is ignored when the segment is read again.
- ``<name>.ack``: the byte offset up to which the desk has answered for every record of
  that segment, rewritten (a new file renamed over the old one) after each answer. A
  restart sends from that offset, so it re-sends at most the batch that was in flight,
  which the desk answers as ``duplicate``.

Each segment is locked (``flock``) by the one reporter that owns it, from the moment it is
created (under a temporary name, renamed once locked) until it is deleted or the reporter
closes. Reporters scan the directory for segments nobody holds (left by a process that
exited or was killed) and adopt them, so two processes never send the same segment.

A record is handed to the operating system (``os.write``) before ``report()`` returns, so
it survives the process being killed (``SIGKILL`` included). Surviving a power cut also
needs it on the disk: segments are ``fsync``-ed on a timer and at close, so a power cut
loses at most the last ``fsync_interval`` seconds.

This module is not thread-safe by itself: the reporter calls it under its lock, except
for the methods documented as the sender's, which do their file I/O without the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
import uuid
import zlib
from dataclasses import dataclass, field

logger = logging.getLogger("triage_desk_client")

SEGMENT_SUFFIX = ".seg"
ACK_SUFFIX = ".ack"
_CREATING_SUFFIX = ".new"
_READ_CHUNK = 1 << 20
_BATCH_CHUNK = 64 << 10  # read_batch's reads: their split is one step of C work
# The longest stretch of pure-Python work a sender does before it lets other threads run
# (see Slices): report() in the caller's thread waits for the interpreter at most this long
# behind it, instead of up to the interpreter's switch interval (5 ms).
SLICE_SECONDS = 20e-6


def frame(payload: bytes) -> bytes:
    """One spool line: the payload's CRC-32 (8 hex digits), the payload, a newline."""
    return b"%08x%s\n" % (zlib.crc32(payload), payload)


def unframe(line: bytes) -> bytes | None:
    """The payload of a spool line (without its newline), or None when it is damaged."""
    if len(line) < 10:
        return None
    try:
        checksum = int(line[:8], 16)
    except ValueError:
        return None
    payload = line[8:]
    return payload if zlib.crc32(payload) == checksum else None


# os.sched_yield() releases the GIL around a syscall of a microsecond or two; time.sleep(0)
# does too, but sleeps for the kernel's timer slack (50-100 µs on Linux).
_hand_over = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


class Slices:
    """Cuts a sender's CPU work into short slices: ``tick()`` between two steps hands the
    interpreter (the GIL) to other threads once ``SLICE_SECONDS`` have passed since the
    last hand-over. CPython otherwise lets a thread that never blocks keep it for its
    whole switch interval (``sys.getswitchinterval()``, 5 ms), which a library must not
    change for the process; the caller's ``report()`` would wait behind each batch."""

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until = time.perf_counter() + SLICE_SECONDS

    def tick(self) -> None:
        if time.perf_counter() >= self._until:
            _hand_over()  # releases the GIL: a thread waiting for it runs now
            self._until = time.perf_counter() + SLICE_SECONDS


@dataclass(eq=False)
class Segment:
    """One segment file this reporter holds the lock of."""

    path: str
    fd: int
    size: int  # bytes of complete records
    acked: int  # bytes the desk has answered for
    items: int  # complete records in the file
    answered: int  # records the desk has answered for (or that were skipped as damaged)
    active: bool = False  # the segment report() appends to
    dirty: bool = False  # written since the last fsync
    # Batches of it being sent (up to the reporter's max_in_flight at once), the bytes and
    # records handed to them, and answered ranges that wait for an earlier one: ``acked``
    # only moves over a contiguous prefix, so a crash never skips an unanswered record.
    in_flight: int = 0
    in_flight_items: int = 0
    claimed: int = 0  # bytes handed to a sender (at least ``acked``)
    finished: dict[int, int] = field(default_factory=dict)  # start -> end, answered early
    resend: list[tuple[int, int]] = field(default_factory=list)  # ranges a sender gave back
    ack_written: int = 0  # the offset last written to the ack file

    @property
    def ack_path(self) -> str:
        return self.path[: -len(SEGMENT_SUFFIX)] + ACK_SUFFIX

    @property
    def unanswered(self) -> int:
        return self.items - self.answered


@dataclass
class Batch:
    """Records read from one segment: their payloads and where each one ends."""

    segment: Segment
    start: int
    end: int  # byte offset just past the last line read (payload or damaged)
    payloads: list[bytes]
    ends: list[int]  # byte offset just past each payload's line
    damaged: int = 0  # damaged lines skipped (never sendable: counted as dropped)


@dataclass
class Spool:
    directory: str
    segment_bytes: int
    max_bytes: int
    segments: list[Segment] = field(default_factory=list)  # oldest first
    to_close: list[Segment] = field(default_factory=list)  # dropped; the sender closes them
    dir_dirty: bool = False
    # Kept up to date by every change below (report() must not walk the segments).
    total_bytes: int = 0  # bytes of the segments held
    unanswered: int = 0  # their records the desk has not answered for

    # --- the caller's side (under the reporter's lock) ------------------------------------

    def open_active(self) -> Segment:
        """A new, locked, empty segment that report() appends to."""
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        creating = os.path.join(self.directory, name + _CREATING_SUFFIX)
        path = os.path.join(self.directory, name + SEGMENT_SUFFIX)
        fd = os.open(creating, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(creating, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(creating)
            raise
        segment = Segment(path=path, fd=fd, size=0, acked=0, items=0, answered=0, active=True)
        self.segments.append(segment)
        self.dir_dirty = True
        return segment

    def append(self, line: bytes) -> int:
        """Write one framed record to the active segment; the number of records dropped
        to stay under ``max_bytes``."""
        size = len(line)
        if size > self.max_bytes:
            raise ValueError(
                f"an item of {size} bytes does not fit a spool of {self.max_bytes} bytes"
            )
        dropped = 0
        while self.total_bytes + size > self.max_bytes and self.segments:
            dropped += self.drop_oldest()
        active = self.segments[-1] if self.segments and self.segments[-1].active else None
        if active is None or (active.size and active.size + size > self.segment_bytes):
            if active is not None:
                active.active = False
            active = self.open_active()
        try:
            written = os.write(active.fd, line)
            while written < size:  # a short write (a signal, a nearly full disk)
                written += os.write(active.fd, line[written:])
        except BaseException:
            # Never leave half a record: the next one would be glued to it and both lost.
            with contextlib.suppress(OSError):
                os.ftruncate(active.fd, active.size)
            raise
        active.size += size
        active.items += 1
        active.dirty = True
        self.total_bytes += size
        self.unanswered += 1
        return dropped

    def drop_oldest(self) -> int:
        """Delete the oldest segment (the spool is full); the records it held unanswered."""
        segment = self.segments[0]
        lost = segment.unanswered
        self.remove(segment)
        for path in (segment.path, segment.ack_path):
            with contextlib.suppress(OSError):
                os.unlink(path)
        segment.active = False
        self.to_close.append(segment)
        logger.error(
            "triage desk spool full (%d bytes): dropped the oldest segment, %d unsent items",
            self.max_bytes,
            lost,
        )
        return lost

    def remove(self, segment: Segment) -> None:
        """Stop counting `segment` as held (its file is released separately)."""
        self.segments.remove(segment)
        self.total_bytes -= segment.size
        self.unanswered -= segment.unanswered

    def add(self, segments: list[Segment]) -> None:
        """Hold adopted segments, in age order before the active one."""
        self.segments.extend(segments)
        self.segments.sort(key=lambda segment: (segment.active, segment.path))
        self.total_bytes += sum(segment.size for segment in segments)
        self.unanswered += sum(segment.unanswered for segment in segments)

    def answered(self, segment: Segment, records: int) -> None:
        """The desk answered for `records` more records of `segment` (or they were skipped)."""
        segment.answered += records
        self.unanswered -= records

    # --- the sender's side -------------------------------------------------------------------

    def read_batch(
        self, segment: Segment, start: int, end: int, max_items: int, max_bytes: int
    ) -> Batch:
        """Records of `segment` from byte `start` (a record boundary) up to `end`, at most
        `max_items` of them and about `max_bytes` (at least one). Sender only, no lock.
        Checking the records is cut in slices (`Slices`), so other threads run meanwhile."""
        batch = Batch(segment=segment, start=start, end=start, payloads=[], ends=[])
        total = 0
        slices = Slices()
        while batch.end < end and len(batch.payloads) < max_items and total < max_bytes:
            position = batch.end
            for size in (_BATCH_CHUNK, _READ_CHUNK, end - position):  # a record longer
                chunk = os.pread(segment.fd, min(size, end - position), position)  # than one
                cut = chunk.rfind(b"\n")
                if cut >= 0 or len(chunk) >= end - position:
                    break
            if cut < 0:
                break
            for line in chunk[:cut].split(b"\n"):
                slices.tick()
                batch.end += len(line) + 1
                payload = unframe(line)
                if payload is None:
                    batch.damaged += 1
                    logger.error("triage desk spool: skipped a damaged record in %s", segment.path)
                    continue
                batch.payloads.append(payload)
                batch.ends.append(batch.end)
                total += len(line)
                if len(batch.payloads) >= max_items or total >= max_bytes:
                    break
        return batch

    def write_ack(self, segment: Segment, offset: int) -> None:
        """Record that the desk answered for `segment` up to `offset` (sender only)."""
        temporary = segment.ack_path + ".tmp"
        with open(temporary, "w") as handle:
            handle.write(str(offset))
        os.replace(temporary, segment.ack_path)

    def release(self, segment: Segment, *, delete: bool) -> None:
        """Stop holding `segment`: delete it (every record answered) or leave it for a later
        reporter. The lock goes with the file descriptor."""
        if delete:
            for path in (segment.path, segment.ack_path):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        if segment.dirty and not delete:
            with contextlib.suppress(OSError):
                os.fsync(segment.fd)
        with contextlib.suppress(OSError):
            os.close(segment.fd)

    def sync(self, segments: list[Segment]) -> None:
        """fsync what was written since the last time (sender only)."""
        for segment in segments:
            with contextlib.suppress(OSError):
                os.fsync(segment.fd)
        if self.dir_dirty:
            self.dir_dirty = False
            with contextlib.suppress(OSError):
                fd = os.open(self.directory, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def find_orphans(self, held: list[str]) -> list[Segment]:
        """Segments in the directory that no reporter holds, locked and measured (sender
        only, no lock: the reporter adds them to `segments` afterwards)."""
        found: list[Segment] = []
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return found
        present = {name for name in names if name.endswith(SEGMENT_SUFFIX)}
        for name in names:
            if (
                name.endswith(ACK_SUFFIX)
                and name[: -len(ACK_SUFFIX)] + SEGMENT_SUFFIX not in present
            ):
                self._remove_stale_ack(os.path.join(self.directory, name))
        for name in sorted(present):
            path = os.path.join(self.directory, name)
            if path in held:
                continue
            segment = self._adopt(path)
            if segment is not None:
                found.append(segment)
        return found

    def _remove_stale_ack(self, path: str) -> None:
        # An ack file whose segment is gone (deleted by its owner, who died before the ack).
        segment_path = path[: -len(ACK_SUFFIX)] + SEGMENT_SUFFIX
        if not os.path.exists(segment_path):
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _adopt(self, path: str) -> Segment | None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Its owner may have deleted it between our open and our lock.
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                raise FileNotFoundError(path)
        except OSError:
            os.close(fd)
            return None
        segment = Segment(path=path, fd=fd, size=0, acked=0, items=0, answered=0)
        segment.acked = _read_ack(segment.ack_path)
        size = os.fstat(fd).st_size
        segment.acked = min(segment.acked, size)
        position = segment.acked
        while position < size:
            chunk = os.pread(fd, min(_READ_CHUNK, size - position), position)
            cut = chunk.rfind(b"\n")
            if cut < 0:
                if len(chunk) < size - position:
                    chunk = os.pread(fd, size - position, position)
                    cut = chunk.rfind(b"\n")
                if cut < 0:
                    break  # a record cut short by a kill: never returned to its caller
            segment.items += chunk.count(b"\n", 0, cut + 1)
            position += cut + 1
        segment.size = position
        if segment.items == 0:  # all answered, or only a record cut short by a kill
            self.release(segment, delete=True)
            return None
        return segment


def _read_ack(path: str) -> int:
    try:
        with open(path) as handle:
            return max(0, int(handle.read().strip() or 0))
    except (OSError, ValueError):
        return 0
