"""The reporter's durability choice (issue 26, 7): ``batched`` queues in memory and a
background writer appends in groups (order kept, flush and close drain it, nothing lost at
close, memory bounded by blocking the caller); ``append`` leaves the file work other than
its own write to the housekeeping thread. And a sender with nothing to send sleeps."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from triage_desk_client import Reporter
from triage_desk_client import spool as spool_module
from triage_desk_client.spool import Slices, unframe

from tests.client.fake_desk import FakeDesk


@pytest.fixture
def make_reporter(make_reporter: Callable[..., Reporter]) -> Callable[..., Reporter]:
    """The conftest's reporters, in the batched mode unless a test names another."""

    def make(**options: Any) -> Reporter:
        return make_reporter(**{"durability": "batched", **options})

    return make


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.01)


def failure(number: int, **extra: object) -> dict[str, object]:
    return {"stage": "execute", "reason": "http_5xx", "evidence": {"number": number}, **extra}


def spooled_ids(spool: Path) -> list[str]:
    """The ids of the records in the spool files, in segment order, then file order."""
    import json

    found: list[str] = []
    for path in sorted(spool.glob("*.seg")):
        for line in path.read_bytes().splitlines():
            payload = unframe(line)
            assert payload is not None, f"a damaged record in {path}"
            found.append(json.loads(payload)["id"])
    return found


def test_batched_records_reach_the_spool_in_the_order_they_were_reported(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path
) -> None:
    desk.stop()
    # Small segments: the order holds across rotations too.
    reporter = make_reporter(segment_bytes=8 * 1024, write_interval=0.002)
    ids = [f"order-{number:05d}" for number in range(3000)]

    def report(mine: list[str]) -> None:
        for item_id in mine:
            reporter.failure(failure(int(item_id[-5:])), id=item_id)

    # Two threads: each one's items in its own order, every item exactly once.
    threads = [threading.Thread(target=report, args=(ids[part::2],)) for part in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not reporter.close(timeout=0)
    found = spooled_ids(tmp_path / "spool")
    assert sorted(found) == ids
    for part in range(2):
        assert [item_id for item_id in found if item_id in set(ids[part::2])] == ids[part::2]


def test_flush_writes_the_queue_out_and_sends_it(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    # The writer gathers for a second and the sender waits a minute: only flush() sends now.
    reporter = make_reporter(write_interval=1.0, flush_interval=60)
    ids = [reporter.failure(failure(number)) for number in range(10)]
    started = time.monotonic()
    assert reporter.flush(10)
    assert time.monotonic() - started < 0.9  # flush() did not wait for the gathering
    assert sorted(desk.stored) == sorted(ids)
    stats = reporter.stats()
    assert (stats["sent"], stats["queued"], stats["pending"]) == (10, 0, 0)


def test_close_writes_every_queued_item_to_disk_whatever_its_timeout(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path
) -> None:
    desk.stop()
    spool = tmp_path / "spool"
    reporter = make_reporter(write_interval=1.0)
    ids = [reporter.failure(failure(number)) for number in range(500)]
    assert reporter.stats()["pending"] > 0  # still in memory: the writer gathers for 1 s
    assert not reporter.close(timeout=0)
    assert sorted(spooled_ids(spool)) == sorted(ids)
    with pytest.raises(RuntimeError, match="closed"):
        reporter.failure(failure(1000))
    # The next start on the spool sends them all, once.
    desk.start()
    make_reporter(durability="append")
    wait_for(lambda: len(desk.stored) == 500)
    assert sorted(desk.stored) == sorted(ids) and set(desk.received.values()) == {1}


def test_a_writer_that_falls_behind_blocks_the_caller_at_the_bound_and_loses_nothing(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 8 * 1024
    reporter = make_reporter(max_pending_bytes=bound, write_interval=0.001)
    go = threading.Event()
    write_pending = reporter._write_pending

    def slow_disk(stopping: bool) -> None:
        go.wait(10)
        write_pending(stopping)

    monkeypatch.setattr(reporter, "_write_pending", slow_disk)
    reported: list[str] = []

    def report() -> None:
        for number in range(200):  # about 40 KB: five times the bound
            reported.append(reporter.failure(failure(number, padding="x" * 150)))

    runtime = threading.Thread(target=report)
    runtime.start()
    wait_for(lambda: len(reported) > 10)
    time.sleep(0.3)
    # The caller waits at the bound: the queue holds no more than it.
    assert runtime.is_alive() and len(reported) < 200
    with reporter._pending_lock:
        assert 0 < reporter._pending_bytes <= bound
    stats = reporter.stats()
    assert stats["pending"] == len(reported) and stats["dropped"] == 0
    go.set()
    runtime.join(10)
    assert not runtime.is_alive() and len(reported) == 200
    assert reporter.flush(10)
    assert sorted(desk.stored) == sorted(reported)
    assert reporter.stats()["dropped"] == 0


def test_a_spool_that_cannot_be_written_makes_report_raise_and_keeps_what_was_queued(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, monkeypatch: pytest.MonkeyPatch
) -> None:
    reporter = make_reporter(write_interval=0.001)
    spool = reporter._spool
    append_lines = spool.append_lines
    disk_full = threading.Event()
    disk_full.set()

    def full_disk(lines: list[bytes], start: int) -> tuple[int, int]:
        if disk_full.is_set():
            raise OSError(errno.ENOSPC, "No space left on device")
        return append_lines(lines, start)

    monkeypatch.setattr(spool, "append_lines", full_disk)
    queued = reporter.failure(failure(1))
    wait_for(lambda: reporter._write_error is not None)
    with pytest.raises(OSError, match="spool cannot be written"):
        reporter.failure(failure(2))  # loud, as the append mode's write would be
    assert "spool not writable" in str(reporter.stats()["last_error"])
    disk_full.clear()  # space again: the queued item is written on the next attempt
    assert reporter.flush(10)
    after = reporter.failure(failure(3))
    assert reporter.flush(10)
    assert sorted(desk.stored) == sorted([queued, after])


def test_append_mode_leaves_making_and_deleting_segments_to_the_housekeeper(
    desk: FakeDesk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk.stop()
    callers: list[str] = []
    create_segment = spool_module.Spool.create_segment
    unlink = spool_module.Spool.unlink

    def watched_create(self: spool_module.Spool) -> spool_module.Segment:
        callers.append(f"create {threading.current_thread().name}")
        return create_segment(self)

    def watched_unlink(self: spool_module.Spool, segment: spool_module.Segment) -> None:
        callers.append(f"unlink {threading.current_thread().name}")
        unlink(self, segment)

    monkeypatch.setattr(spool_module.Spool, "create_segment", watched_create)
    monkeypatch.setattr(spool_module.Spool, "unlink", watched_unlink)
    # Segments of ~16 records and a spool of ~4 of them: rotations, and full-spool drops.
    reporter = Reporter(
        desk.url,
        "good-key",
        spool_dir=str(tmp_path / "spool"),
        segment_bytes=4096,
        max_spool_bytes=16384,
        max_backoff=0.2,
    )
    try:
        main = threading.current_thread().name
        callers.clear()  # the first segment is made by the constructor
        for number in range(400):
            # As a runtime between tool calls: the housekeeper keeps up (it is not raced).
            wait_for(lambda: reporter._spool.spare is not None and not reporter._spool.to_close)
            reporter.failure(failure(number, padding="y" * 150))
        stats = reporter.stats()
        assert stats["dropped"] > 0 and stats["spooled"] <= 16384
        assert any(entry.startswith("create") for entry in callers)
        assert any(entry.startswith("unlink") for entry in callers)
        assert not [entry for entry in callers if entry.endswith(f" {main}")]
    finally:
        reporter.close(timeout=0)


def test_a_sender_with_nothing_to_send_sleeps_while_another_holds_the_batch(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One sender holds the only batch (a slow desk); the other has nothing to send. It used
    # to wake at deadlines already past, thousands of times a second, holding the GIL and
    # the reporter's lock that report() takes.
    reporter = make_reporter(durability="append", max_in_flight=2, flush_interval=0.01)
    posting, go = threading.Event(), threading.Event()
    post = reporter._post

    def slow_desk(body: bytes, key: str) -> tuple[int, str | None, bytes]:
        posting.set()
        go.wait(10)
        return post(body, key)

    monkeypatch.setattr(reporter, "_post", slow_desk)
    reporter.failure(failure(1))
    assert posting.wait(10)
    picks = 0
    pick = reporter._pick

    def counted(now: float) -> Any:
        nonlocal picks
        picks += 1
        return pick(now)

    monkeypatch.setattr(reporter, "_pick", counted)
    time.sleep(0.5)
    go.set()
    assert reporter.flush(10)
    assert picks < 0.5 / 0.01 + 10  # at most once per flush_interval, not a spin


def test_a_report_under_way_gets_a_hand_over_it_can_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made_way: list[str] = []
    monkeypatch.setattr(spool_module, "_make_way", lambda: made_way.append("sleep"))
    monkeypatch.setattr(spool_module, "_hand_over", lambda: made_way.append("yield"))
    monkeypatch.setattr(spool_module, "SLICE_SECONDS", 0.0)
    waiting = {0}
    slices = Slices(waiting.__len__)
    slices.tick()
    waiting.clear()
    slices.tick()
    assert made_way == ["sleep", "yield"]


@pytest.mark.parametrize(
    "options",
    [
        {"durability": "fast"},
        {"write_interval": 0},
        {"write_interval": 5},
        {"max_pending_bytes": 0},
    ],
)
def test_durability_options_are_checked(tmp_path: Path, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Reporter("http://127.0.0.1:9", "k", spool_dir=str(tmp_path / "spool"), **options)
    assert not (tmp_path / "spool").exists()
