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

With the reporter's default durability (``append``) a record is handed to the operating
system (``os.write``) before ``report()`` returns, so it survives the process being killed
(``SIGKILL`` included); with ``batched`` a background writer appends records in groups a
few milliseconds later. Surviving a power cut also needs it on the disk: segments are
``fsync``-ed on a timer and at close, so a power cut loses at most the last
``fsync_interval`` seconds.

Whoever can write into the spool directory could plant a symbolic link where the reporter
writes, or a segment that leads elsewhere, so the directory must be this user's and no one
else may write to it (``UnsafeSpoolDirectory`` otherwise); it is created ``0700`` and opened
once, and every file is reached through that descriptor (a directory renamed or replaced
by a link afterwards is not followed). Files are created with ``O_EXCL | O_NOFOLLOW`` (an
ack file is written under a temporary name and renamed over the old one), and a segment
is read only when it is a regular file of this user's with no other name: anything else
is logged and left alone.

This module is not thread-safe by itself: the reporter calls it under its lock, except
for the methods documented as the sender's or the housekeeper's, which do their file I/O
without the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Callable

logger = logging.getLogger("triage_desk_client")

SEGMENT_SUFFIX = ".seg"
ACK_SUFFIX = ".ack"
_CREATING_SUFFIX = ".new"
_TEMPORARY_SUFFIX = ".tmp"
_MAX_ACK_BYTES = 32  # an offset in decimal digits; more is not an ack file of ours
_MAX_GROUP_BYTES = 1 << 20  # one append_lines() write: the reporter's lock is held over it
# Files are created only where nothing is (a link planted at the name makes it fail) and
# opened without following a link; O_NONBLOCK: opening a FIFO planted as a segment must
# not wait for a writer.
_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
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


def _make_way() -> None:
    # A thread waiting for the GIL on the other core is woken when it is released, but
    # sched_yield() gets it back within a microsecond or two, before that thread runs, and
    # the waiter's timer starts over (measured: report() waited 10 ms behind one sliced
    # batch). Sleeping through the timer slack lets it take the GIL.
    time.sleep(MAKE_WAY_SECONDS)


MAKE_WAY_SECONDS = 20e-6


class Slices:
    """Cuts a sender's CPU work into short slices: ``tick()`` between two steps hands the
    interpreter (the GIL) to other threads once ``SLICE_SECONDS`` have passed since the
    last hand-over. CPython otherwise lets a thread that never blocks keep it for its
    whole switch interval (``sys.getswitchinterval()``, 5 ms), which a library must not
    change for the process; the caller's ``report()`` would wait behind each batch.

    `urgent` says whether a ``report()`` is under way: that caller can only be waiting for
    the GIL while this thread runs, so the hand-over then sleeps (``_make_way``) long
    enough for it to take the GIL; otherwise it only yields (``_hand_over``), which costs
    the sender nothing when no one waits."""

    __slots__ = ("_until", "_urgent")

    def __init__(self, urgent: Callable[[], object] | None = None) -> None:
        self._until = time.perf_counter() + SLICE_SECONDS
        self._urgent = urgent

    def tick(self) -> None:
        if time.perf_counter() >= self._until:
            # Releases the GIL: a thread waiting for it runs now.
            if self._urgent is not None and self._urgent():
                _make_way()
            else:
                _hand_over()
            self._until = time.perf_counter() + SLICE_SECONDS


class UnsafeSpoolDirectory(PermissionError):
    """The spool directory is a symbolic link, is not this user's, or others may write to it."""


def open_directory(path: str) -> int:
    """The spool directory, created ``0700`` when missing, opened (``O_NOFOLLOW``) and
    checked: this user's, a directory, and no one else may write to it."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # a link or a file there: judged below
        os.mkdir(path, 0o700)
    advice = (
        "it holds what the runtime reported until the desk has it; give the reporter a "
        "directory of this user's that no one else may write to (mkdir -m 700)"
    )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        # Linux answers a link ELOOP, or ENOTDIR when O_DIRECTORY is judged first.
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(path):
            raise UnsafeSpoolDirectory(
                errno.EPERM, f"the spool directory is a symbolic link: {advice}", path
            ) from None
        raise
    found = os.fstat(fd)
    problem = ""
    if found.st_uid != os.geteuid():
        problem = f"belongs to another user (uid {found.st_uid})"
    elif stat.S_IMODE(found.st_mode) & 0o022:
        problem = f"may be written by others (mode {stat.S_IMODE(found.st_mode):04o})"
    if problem:
        os.close(fd)
        raise UnsafeSpoolDirectory(errno.EPERM, f"the spool directory {problem}: {advice}", path)
    return fd


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
    # Dropped (a full spool) or answered for entirely: its files are deleted when released.
    discard: bool = False
    unlinked: bool = False  # its files are deleted already (its descriptor may be in use)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def ack_name(self) -> str:
        return self.name[: -len(SEGMENT_SUFFIX)] + ACK_SUFFIX

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
    # Dropped or answered for entirely: the housekeeper deletes and closes them (never the
    # caller's thread, never under the reporter's lock).
    to_close: list[Segment] = field(default_factory=list)
    # A created, locked, empty segment the next rotation takes, so report() rotating does
    # no file system work (made by the housekeeper; report() makes one only when it is late).
    spare: Segment | None = None
    dir_dirty: bool = False
    # Kept up to date by every change below (report() must not walk the segments).
    total_bytes: int = 0  # bytes of the segments held
    unanswered: int = 0  # their records the desk has not answered for
    refused: set[str] = field(default_factory=set)  # names logged as not regular files
    dir_fd: int = field(default=-1, init=False)  # the directory, opened once and checked

    def __post_init__(self) -> None:
        self.directory = os.path.abspath(self.directory)
        self.dir_fd = open_directory(self.directory)

    # --- the caller's side (under the reporter's lock) ------------------------------------

    def open_active(self) -> Segment:
        """A new, locked, empty segment that report() appends to: the spare when there is
        one, else one made now."""
        segment, self.spare = self.spare or self.create_segment(), None
        segment.active = True
        self.segments.append(segment)
        self.dir_dirty = True
        return segment

    def append(self, line: bytes) -> int:
        """Write one framed record to the active segment; the number of records dropped
        to stay under ``max_bytes``."""
        return self.append_lines([line], 0)[1]

    def append_lines(self, lines: list[bytes], start: int) -> tuple[int, int]:
        """Write framed records ``lines[start:]`` to the active segment, as many as one
        write takes (one segment, about ``_MAX_GROUP_BYTES``, at least one record): how many
        were written, and how many records were dropped to stay under ``max_bytes``."""
        active = self.segments[-1] if self.segments and self.segments[-1].active else None
        first = len(lines[start])
        rotate = active is None or (active.size > 0 and active.size + first > self.segment_bytes)
        used = 0 if active is None or rotate else active.size
        room = min(self.segment_bytes - used, _MAX_GROUP_BYTES)
        count = size = 0
        for index in range(start, len(lines)):
            length = len(lines[index])
            if length > self.max_bytes:
                if count:
                    break
                raise ValueError(
                    f"an item of {length} bytes does not fit a spool of {self.max_bytes} bytes"
                )
            if count and size + length > room:
                break
            count += 1
            size += length
        dropped = 0
        while self.total_bytes + size > self.max_bytes and self.segments:
            dropped += self.drop_oldest()
        if active is not None and (rotate or not active.active):
            active.active = False
            active = None
        if active is None:
            active = self.open_active()
        data = lines[start] if count == 1 else b"".join(lines[start : start + count])
        try:
            written = os.write(active.fd, data)
            while written < size:  # a short write (a signal, a nearly full disk)
                written += os.write(active.fd, memoryview(data)[written:])
        except BaseException:
            # Never leave part of a record: the next one would be glued to it and both lost.
            with contextlib.suppress(OSError):
                os.ftruncate(active.fd, active.size)
            raise
        active.size += size
        active.items += count
        active.dirty = True
        self.total_bytes += size
        self.unanswered += count
        return count, dropped

    def drop_oldest(self) -> int:
        """Let go of the oldest segment (the spool is full); the records it held unanswered.
        Its files are deleted by the housekeeper (``tidy``), not here in report()'s path."""
        segment = self.segments[0]
        lost = segment.unanswered
        self.retire(segment)
        logger.error(
            "triage desk spool full (%d bytes): dropped the oldest segment, %d unsent items",
            self.max_bytes,
            lost,
        )
        return lost

    def retire(self, segment: Segment) -> None:
        """Stop holding `segment` and hand it to the housekeeper, which deletes its files."""
        self.remove(segment)
        segment.active = False
        segment.discard = True
        self.to_close.append(segment)

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

    def offer_spare(self, segment: Segment) -> bool:
        """Keep `segment` (made by the housekeeper) for the next rotation; False when a
        spare is there already (the caller releases `segment`)."""
        if self.spare is not None:
            return False
        self.spare = segment
        return True

    # --- the housekeeper's side (no lock) ----------------------------------------------------

    def create_segment(self) -> Segment:
        """A new, locked, empty segment file (not held yet: see ``open_active``)."""
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        creating = name + _CREATING_SUFFIX
        fd = os.open(creating, os.O_RDWR | os.O_APPEND | _CREATE, 0o600, dir_fd=self.dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(
                creating, name + SEGMENT_SUFFIX, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd
            )
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(creating, dir_fd=self.dir_fd)
            raise
        return Segment(
            path=os.path.join(self.directory, name + SEGMENT_SUFFIX),
            fd=fd,
            size=0,
            acked=0,
            items=0,
            answered=0,
        )

    def unlink(self, segment: Segment) -> None:
        """Delete the files of `segment` (its descriptor stays open for a sender using it)."""
        if not segment.unlinked:
            segment.unlinked = True
            for name in (segment.name, segment.ack_name):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=self.dir_fd)

    def release(self, segment: Segment, *, delete: bool) -> None:
        """Stop holding `segment`: delete it (every record answered, or dropped) or leave it
        for a later reporter. The lock goes with the file descriptor."""
        if delete:
            self.unlink(segment)
        elif segment.dirty:
            with contextlib.suppress(OSError):
                os.fsync(segment.fd)
        with contextlib.suppress(OSError):
            os.close(segment.fd)

    def close(self) -> None:
        """Close the directory (once every segment is released)."""
        if self.dir_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.dir_fd)
            self.dir_fd = -1

    # --- the sender's side -------------------------------------------------------------------

    def read_batch(
        self,
        segment: Segment,
        start: int,
        end: int,
        max_items: int,
        max_bytes: int,
        slices: Slices | None = None,
    ) -> Batch:
        """Records of `segment` from byte `start` (a record boundary) up to `end`, at most
        `max_items` of them and about `max_bytes` (at least one). Sender only, no lock.
        Checking the records is cut in slices (`Slices`), so other threads run meanwhile."""
        batch = Batch(segment=segment, start=start, end=start, payloads=[], ends=[])
        total = 0
        slices = slices or Slices()
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
        """Record that the desk answered for `segment` up to `offset` (sender only): a new
        file under a temporary name, renamed over the old one."""
        temporary = segment.ack_name + _TEMPORARY_SUFFIX
        try:
            fd = os.open(temporary, os.O_WRONLY | _CREATE, 0o600, dir_fd=self.dir_fd)
        except FileExistsError:
            # Left by a crash between the create and the rename, or planted: unlink removes
            # the name, never what a link there points to.
            found = os.stat(temporary, dir_fd=self.dir_fd, follow_symlinks=False)
            if not stat.S_ISREG(found.st_mode):
                logger.error(
                    "triage desk spool: removed %s, which was not a file of ours",
                    os.path.join(self.directory, temporary),
                )
            os.unlink(temporary, dir_fd=self.dir_fd)
            fd = os.open(temporary, os.O_WRONLY | _CREATE, 0o600, dir_fd=self.dir_fd)
        try:
            data = str(offset).encode()
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
        finally:
            os.close(fd)
        os.replace(temporary, segment.ack_name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)

    def sync(self, segments: list[Segment]) -> None:
        """fsync what was written since the last time (sender only)."""
        for segment in segments:
            with contextlib.suppress(OSError):
                os.fsync(segment.fd)
        if self.dir_dirty:
            self.dir_dirty = False
            with contextlib.suppress(OSError):
                os.fsync(self.dir_fd)

    def find_orphans(self, held: list[str]) -> list[Segment]:
        """Segments in the directory that no reporter holds, locked and measured (sender
        only, no lock: the reporter adds them to `segments` afterwards)."""
        found: list[Segment] = []
        try:
            names = sorted(os.listdir(self.dir_fd))
        except OSError:
            return found
        present = {name for name in names if name.endswith(SEGMENT_SUFFIX)}
        for name in names:
            ack = name[: -len(_TEMPORARY_SUFFIX)] if name.endswith(_TEMPORARY_SUFFIX) else name
            if ack.endswith(ACK_SUFFIX) and ack[: -len(ACK_SUFFIX)] + SEGMENT_SUFFIX not in present:
                self._remove_stale_ack(name, ack)
        for name in sorted(present):
            path = os.path.join(self.directory, name)
            if path in held:
                continue
            segment = self._adopt(path)
            if segment is not None:
                found.append(segment)
        return found

    def _remove_stale_ack(self, name: str, ack: str) -> None:
        # An ack file (or one being written) whose segment is gone: deleted by its owner,
        # who died before the ack.
        try:
            os.stat(
                ack[: -len(ACK_SUFFIX)] + SEGMENT_SUFFIX,
                dir_fd=self.dir_fd,
                follow_symlinks=False,
            )
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.dir_fd)
        except OSError:
            pass

    def _refuse(self, name: str, why: str) -> None:
        if name not in self.refused:
            self.refused.add(name)
            logger.error(
                "triage desk spool: %s is %s; it is not read (remove it)",
                os.path.join(self.directory, name),
                why,
            )

    def _open_regular(self, name: str, flags: int) -> int | None:
        """`name` opened without following a link, when it is a regular file of this user's
        with no other name (hard link); None (logged once) otherwise."""
        try:
            fd = os.open(name, flags | _OPEN, dir_fd=self.dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self._refuse(name, "a symbolic link")
            return None
        try:
            found = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        why = ""
        if not stat.S_ISREG(found.st_mode):
            why = "not a regular file"
        elif found.st_uid != os.geteuid():
            why = f"another user's file (uid {found.st_uid})"
        elif found.st_nlink != 1:
            why = "a file with other names (hard links)"
        if why:
            os.close(fd)
            self._refuse(name, why)
            return None
        return fd

    def _adopt(self, path: str) -> Segment | None:
        name = os.path.basename(path)
        fd = self._open_regular(name, os.O_RDONLY)
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Its owner may have deleted it between our open and our lock.
            if (
                os.fstat(fd).st_ino
                != os.stat(name, dir_fd=self.dir_fd, follow_symlinks=False).st_ino
            ):
                raise FileNotFoundError(path)
        except OSError:
            os.close(fd)
            return None
        segment = Segment(path=path, fd=fd, size=0, acked=0, items=0, answered=0)
        segment.acked = self._read_ack(segment.ack_name)
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

    def _read_ack(self, name: str) -> int:
        fd = self._open_regular(name, os.O_RDONLY)
        if fd is None:
            return 0  # none (or not ours): send the segment from its start; the desk dedupes
        try:
            return max(0, int(os.read(fd, _MAX_ACK_BYTES).strip() or 0))
        except (OSError, ValueError):
            return 0
        finally:
            os.close(fd)
