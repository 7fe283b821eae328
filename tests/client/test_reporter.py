"""triage_desk_client.Reporter against a small fake desk: delivery, the server's answers
(429/503 Retry-After, 413 and the desk's 400, a foreign 400, 401 then a new key), a full
spool, restarts and two reporters on one spool. The live desk's tests are in
test_live_desk.py."""

from __future__ import annotations

import fcntl
import logging
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from triage_desk_client import Reporter
from triage_desk_client.spool import frame

from tests.client.fake_desk import FakeDesk


def failure(number: int, **extra: object) -> dict[str, object]:
    return {
        "stage": "execute",
        "reason": "http_5xx",
        "tool": "getDelivery",
        "plan_id": f"plan-{number}",
        "step_id": "s1",
        "message": "HTTP 503",
        "evidence": {"status": 503, "number": number},
        **extra,
    }


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.02)


def segments(spool: Path) -> list[Path]:
    """The segments holding records (a running reporter keeps an empty one ready besides)."""
    return sorted(path for path in spool.glob("*.seg") if path.stat().st_size)


def test_reported_items_reach_the_desk_once_and_leave_the_spool(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path
) -> None:
    reporter = make_reporter(batch_size=500)
    ids = [reporter.failure(failure(number)) for number in range(1200)]
    assert reporter.flush(10)
    assert sorted(desk.stored) == sorted(ids) and set(desk.received.values()) == {1}
    assert all(items <= 500 for _, items in desk.requests)
    stats = reporter.stats()
    assert (stats["sent"], stats["queued"], stats["duplicate"], stats["dropped"]) == (1200, 0, 0, 0)
    assert reporter.close()
    assert list((tmp_path / "spool").iterdir()) == []


def test_flush_returns_only_once_the_answers_it_waited_for_are_counted(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The acknowledged offset moves, and is written to the ack file, before the answer is
    # counted. A wake-up in between (another answer, an append) must not end flush() with
    # the batch still counted as queued.
    reporter = make_reporter(batch_size=500, flush_interval=60)
    flushed = threading.Event()
    write_ack = reporter._spool.write_ack

    def wake_flush_then_write(segment: Any, offset: int) -> None:
        with reporter._changed:
            reporter._changed.notify_all()  # flush() wakes up with the offset already moved
        flushed.wait(0.5)  # long enough for a flush() that does not wait to return
        write_ack(segment, offset)

    monkeypatch.setattr(reporter._spool, "write_ack", wake_flush_then_write)
    for number in range(10):
        reporter.failure(failure(number))
    assert reporter.flush(10)
    flushed.set()
    stats = reporter.stats()
    assert (stats["sent"], stats["queued"]) == (10, 0)


def test_a_batch_goes_when_it_is_full_or_when_flush_interval_passed(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    reporter = make_reporter(batch_size=50, flush_interval=30.0)
    for number in range(50):
        reporter.failure(failure(number))
    wait_for(lambda: len(desk.stored) == 50, timeout=5)  # full: no waiting for the interval
    reporter.failure(failure(50))
    time.sleep(0.5)
    assert len(desk.stored) == 50  # one item waits for the interval (or a flush)
    assert reporter.flush(5) and len(desk.stored) == 51


def test_the_same_item_reported_twice_has_one_id_and_is_a_duplicate(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    reporter = make_reporter()
    first = reporter.failure(failure(1))
    assert reporter.failure(failure(1)) == first
    assert reporter.failure(failure(1, message="HTTP 502")) != first
    receipt = {
        "tool_run_id": "tr_1",
        "tool": "refund",
        "result": "ok",
        "execution_state": "completed",
    }
    assert reporter.receipt(receipt) == "tr_1"
    assert reporter.flush(5)
    stats = reporter.stats()
    assert (stats["sent"], stats["duplicate"], stats["rejected"]) == (3, 1, 0)


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_wait_for_retry_after(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, status: int
) -> None:
    desk.script = [(status, {"Retry-After": "1"})]
    reporter = make_reporter()
    reporter.failure(failure(1))
    started = time.monotonic()
    assert reporter.flush(10)
    # max_backoff is 0.2 s: only Retry-After explains a wait of a second.
    assert time.monotonic() - started >= 0.95
    assert [answer for answer, _ in desk.requests] == [status, 200]
    assert f"HTTP {status}" in str(reporter.stats()["last_error"])


def test_other_errors_back_off_and_send_the_same_batch_again(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    desk.script = [(500, {}), (502, {}), (404, {})]
    reporter = make_reporter()
    ids = [reporter.failure(failure(number)) for number in range(10)]
    assert reporter.flush(10)
    assert [answer for answer, _ in desk.requests] == [500, 502, 404, 200]
    assert sorted(desk.stored) == sorted(ids)


def test_413_splits_the_batch_until_it_fits(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    desk.max_items = 100
    # No timed flush meanwhile: the first request is the whole batch of 450, however slowly
    # the items are reported on a busy machine.
    reporter = make_reporter(batch_size=450, flush_interval=60)
    ids = [reporter.failure(failure(number)) for number in range(450)]
    assert reporter.flush(10)
    assert sorted(desk.stored) == sorted(ids) and set(desk.received.values()) == {1}
    assert (413, 450) in desk.requests
    assert all(items <= 100 for status, items in desk.requests if status == 200)


def test_a_single_item_the_desk_refuses_as_too_large_is_rejected_not_retried(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    desk.max_items = 0
    reporter = make_reporter()
    reporter.failure(failure(1))
    assert reporter.flush(5)
    assert desk.requests == [(413, 1)]
    assert reporter.stats()["rejected"] == 1 and reporter.stats()["queued"] == 0


def test_a_batch_the_desk_refuses_as_400_is_split_down_to_the_item_at_fault(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    reporter = make_reporter(batch_size=40, flush_interval=60)
    ids = [reporter.failure(failure(number)) for number in range(40)]
    desk.too_deep.add(ids[17])
    assert reporter.flush(10)
    assert sorted(desk.stored) == sorted(ids[:17] + ids[18:])
    assert (400, 40) in desk.requests and (400, 1) in desk.requests
    stats = reporter.stats()
    assert stats["rejected"] == 1 and stats["sent"] == 39 and stats["queued"] == 0


def test_a_400_that_is_not_the_desks_answer_is_retried_and_nothing_is_dropped(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    # What Django answers a Host header it does not serve, or a proxy in front of the desk.
    desk.script = [(400, {}, b"<h1>Bad Request (400)</h1>")] * 2
    reporter = make_reporter()
    ids = [reporter.failure(failure(number)) for number in range(10)]
    assert reporter.flush(10)
    assert [answer for answer, _ in desk.requests] == [400, 400, 200]
    assert sorted(desk.stored) == sorted(ids)
    assert reporter.stats()["rejected"] == 0 and reporter.stats()["sent"] == 10


def test_a_rejected_item_is_logged_once_without_its_body_and_not_sent_again(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, caplog: pytest.LogCaptureFixture
) -> None:
    reporter = make_reporter()
    bad = reporter.failure(failure(1, note="sekrit-body-value"))
    desk.reject[bad] = "invalid_field"
    good = reporter.failure(failure(2, note="sekrit-body-value"))
    with caplog.at_level(logging.DEBUG, logger="triage_desk_client"):
        assert reporter.flush(5)
        assert reporter.flush(1)
    assert desk.received[bad] == 1 and good in desk.stored and bad not in desk.stored
    assert reporter.stats()["rejected"] == 1 and reporter.stats()["sent"] == 1
    rejected = [
        record.getMessage() for record in caplog.records if "rejected" in record.getMessage()
    ]
    assert rejected == [f"triage desk rejected failure {bad}: invalid_field (field body)"]
    assert "sekrit" not in caplog.text


def test_401_stops_sending_and_keeps_the_spool_until_a_new_key(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path
) -> None:
    reporter = make_reporter(key="revoked-key")
    ids = [reporter.failure(failure(number)) for number in range(10)]
    started = time.monotonic()
    assert not reporter.flush(5)
    assert time.monotonic() - started < 2  # a refused key is not waited out
    time.sleep(0.5)
    assert desk.requests == [(401, 10)]  # stopped: no retries with the refused key
    stats = reporter.stats()
    assert stats["queued"] == 10 and stats["last_error"] == "HTTP 401 (invalid_api_key)"
    assert segments(tmp_path / "spool")
    reporter.set_api_key("good-key")
    assert reporter.flush(5)
    assert sorted(desk.stored) == sorted(ids) and reporter.stats()["queued"] == 0


def test_a_full_spool_drops_the_oldest_segment_and_counts_it(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    desk.stop()
    reporter = make_reporter(max_spool_bytes=64 * 1024, segment_bytes=16 * 1024)
    ids = [reporter.failure(failure(number, padding="x" * 900)) for number in range(200)]
    stats = reporter.stats()
    assert stats["dropped"] > 0 and stats["spooled"] <= 64 * 1024
    assert stats["queued"] + stats["dropped"] == 200
    desk.start()
    assert reporter.flush(10)
    kept = 200 - stats["dropped"]
    assert sorted(desk.stored) == sorted(ids[-kept:])  # the newest ones, every one of them


def test_close_leaves_what_was_not_answered_for_the_next_reporter(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path
) -> None:
    desk.stop()
    first = make_reporter()
    ids = [first.failure(failure(number)) for number in range(20)]
    assert not first.close(timeout=0.3)
    left = segments(tmp_path / "spool")
    assert left
    with pytest.raises(RuntimeError):
        first.failure(failure(99))
    desk.start()
    make_reporter()
    wait_for(lambda: len(desk.stored) == 20)
    assert sorted(desk.stored) == sorted(ids)
    wait_for(lambda: not any(path.exists() for path in left))  # answered: deleted


def test_flush_on_a_new_reporter_sends_what_an_earlier_one_left(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path
) -> None:
    """The spool's leftovers are found by the housekeeping thread; a flush() right after
    the constructor waits for that first look, so it never says True with them unsent."""
    away = desk.url.rsplit(":", 1)[0] + ":9"  # the discard port: nothing answers there
    for attempt in range(20):  # the race is between the constructor's return and the scan
        spool = tmp_path / f"spool-{attempt}"
        first = Reporter(away, "good-key", spool_dir=str(spool), max_backoff=0.2)
        ids = [first.failure(failure(attempt * 10 + number)) for number in range(3)]
        assert not first.close(timeout=0)
        assert make_reporter(spool=spool, flush_interval=60).flush(timeout=10)
        assert set(ids) <= set(desk.stored)


def test_a_process_that_exits_without_close_sends_its_items_at_exit(
    desk: FakeDesk, tmp_path: Path
) -> None:
    # The runtime never calls close(): the reporter's exit hook flushes what was reported.
    script = (
        "import sys\n"
        "from triage_desk_client import Reporter\n"
        "reporter = Reporter(sys.argv[1], 'good-key', spool_dir=sys.argv[2], flush_interval=60)\n"
        "for number in range(25):\n"
        "    reporter.report('failure', f'exit-{number}', {'stage': 'execute'})\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, desk.url, str(tmp_path / "spool")], check=True, timeout=60
    )
    assert sorted(desk.stored) == sorted(f"exit-{number}" for number in range(25))
    assert not segments(tmp_path / "spool")  # answered: nothing left for a next start


def test_two_reporters_on_one_spool_never_send_the_same_segment(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    desk.stop()
    left = make_reporter()
    earlier = [left.failure(failure(number)) for number in range(300)]
    left.close(timeout=0)
    desk.start()
    one, two = make_reporter(), make_reporter()
    # Distinct items per reporter: the same item reported by both is sent by both (a
    # `duplicate` on the desk), which is not what this test is about.
    newer = [
        reporter.failure(failure(1000 + n, reporter=index))
        for n in range(100)
        for index, reporter in enumerate((one, two))
    ]
    wait_for(lambda: len(desk.stored) == 500)
    assert sorted(desk.stored) == sorted(earlier + newer)
    assert set(desk.received.values()) == {1}  # nothing was sent twice


def test_close_keeps_the_segment_of_a_request_under_way_locked_until_the_desk_answered(
    make_reporter: Callable[..., Reporter],
    desk: FakeDesk,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The sender decided to send (before close) and is held just before its request, as a
    # loaded machine can hold it for longer than close() waits for the thread.
    spool = tmp_path / "spool"
    reporter = make_reporter(batch_size=5, max_in_flight=1)
    posting, go = threading.Event(), threading.Event()
    post = reporter._post

    def held_post(body: bytes, key: str) -> tuple[int, str | None, bytes]:
        posting.set()
        go.wait(10)
        return post(body, key)

    monkeypatch.setattr(reporter, "_post", held_post)
    ids = [reporter.failure(failure(number)) for number in range(10)]
    assert posting.wait(10)
    assert not reporter.close(timeout=0)
    (held,) = segments(spool)
    with open(held, "rb") as handle, pytest.raises(BlockingIOError):
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody else can adopt it yet
    go.set()
    (sender,) = reporter._threads
    sender.join(10)
    assert not sender.is_alive()
    # The request under way was answered and acknowledged; no other one started after close.
    assert desk.requests == [(200, 5)] and sorted(desk.stored) == sorted(ids[:5])
    with open(held, "rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released: adoptable now
        fcntl.flock(handle, fcntl.LOCK_UN)
    make_reporter()
    wait_for(lambda: len(desk.stored) == 10)
    assert sorted(desk.stored) == sorted(ids) and set(desk.received.values()) == {1}
    wait_for(lambda: not held.exists())


def test_two_batches_in_flight_acknowledge_only_what_is_answered_in_order(
    make_reporter: Callable[..., Reporter],
    desk: FakeDesk,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first batch is held at the desk while the second one is answered: both were in
    # flight at once, and the acknowledged offset must not pass the unanswered first batch
    # (a crash then would skip it); once it is answered, the offset covers both.
    spool = tmp_path / "spool"
    reporter = make_reporter(batch_size=5, max_in_flight=2, flush_interval=60)
    second_answered, go = threading.Event(), threading.Event()
    post = reporter._post
    ids = [f"f-{number}" for number in range(10)]

    def post_in_reverse(body: bytes, key: str) -> tuple[int, str | None, bytes]:
        if ids[0].encode() in body:
            assert second_answered.wait(10), "the second batch was not sent meanwhile"
            go.wait(10)
            return post(body, key)
        answer = post(body, key)
        second_answered.set()
        return answer

    monkeypatch.setattr(reporter, "_post", post_in_reverse)
    for number, item_id in enumerate(ids):
        reporter.failure(failure(number), id=item_id)
    assert second_answered.wait(10)
    wait_for(lambda: sorted(desk.stored) == sorted(ids[5:]))
    # The desk stored them before the reporter has read its answer: wait for that too.
    wait_for(lambda: reporter.stats()["queued"] == 5)
    (held,) = segments(spool)
    ack = held.with_suffix(".ack")
    assert not ack.exists() or int(ack.read_text()) == 0
    go.set()
    assert reporter.flush(10)
    assert sorted(desk.stored) == sorted(ids) and set(desk.received.values()) == {1}
    assert int(ack.read_text()) == held.stat().st_size


def test_damaged_records_are_skipped_and_a_record_cut_short_is_ignored(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    good = [
        b'{"type":"failure","id":"a","body":{"stage":"x","reason":"y"}}',
        b'{"type":"failure","id":"b","body":{}}',
    ]
    damaged = frame(b'{"type":"failure","id":"c","body":{}}').replace(b'"c"', b'"d"')
    cut_short = frame(b'{"type":"failure","id":"e","body":{}}')[:-9]
    (spool / "00000000000000000001-1-abcdef01.seg").write_bytes(
        frame(good[0]) + damaged + frame(good[1]) + cut_short
    )
    reporter = make_reporter()
    wait_for(lambda: len(desk.stored) == 2)
    assert sorted(desk.stored) == ["a", "b"]
    wait_for(lambda: reporter.stats()["dropped"] == 1)
    wait_for(lambda: not (spool / "00000000000000000001-1-abcdef01.seg").exists())


def test_an_item_that_cannot_be_sent_raises_in_the_callers_thread(
    make_reporter: Callable[..., Reporter],
) -> None:
    reporter = make_reporter()
    with pytest.raises(ValueError, match="item_type"):
        reporter.report("nonsense", "x", {})
    with pytest.raises(TypeError):
        reporter.report("failure", "x", cast(Any, ["not", "a", "mapping"]))
    with pytest.raises(ValueError):
        reporter.failure({"stage": "x", "reason": "y", "score": math.nan})
    with pytest.raises(ValueError, match="1-200"):
        reporter.report("failure", "x" * 201, {})
    assert reporter.stats()["queued"] == 0


def test_a_body_that_contains_itself_is_refused_and_the_reporter_goes_on(
    make_reporter: Callable[..., Reporter], desk: FakeDesk
) -> None:
    reporter = make_reporter()
    body: dict[str, Any] = failure(1)
    body["evidence"] = {"steps": [body]}
    with pytest.raises(ValueError, match="contain itself"):
        reporter.failure(body)
    assert reporter.stats()["queued"] == 0
    reporter.failure(failure(2), id="after")
    assert reporter.flush(5)
    assert list(desk.stored) == ["after"]


def test_a_spool_directory_that_cannot_be_used_fails_at_construction(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(OSError):
        Reporter("http://127.0.0.1:9", "k", spool_dir=str(blocked / "spool"))
    with pytest.raises(ValueError):
        Reporter("ftp://desk", "k", spool_dir=str(tmp_path / "s"))
    assert os.listdir(tmp_path) == ["file"]


def test_the_release_argument_goes_on_failures_envelopes_runner_events_and_receipts(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("TRIAGE_RELEASE", "from-the-environment")
    reporter = make_reporter(release="1.4.2")
    sent = {
        "failure": reporter.failure(failure(1)),
        "own": reporter.failure(failure(2, release="1.3")),  # a body's own release is kept
        "envelope": reporter.envelope({"status": "failed", "code": "HTTP_503", "tool": "t"}),
        "runner_event": reporter.runner_event({"type": "step.failed", "plan_id": "p"}),
        "receipt": reporter.receipt(
            {"tool_run_id": "tr-1", "tool": "t", "result": "ok", "execution_state": "completed"}
        ),
        "audit": reporter.audit_event({"tool_run_id": "tr-1", "method": "GET"}),
    }
    assert reporter.flush(10)
    releases = {name: json.loads(desk.stored[item_id]).get("release")
                for name, item_id in sent.items()}  # fmt: skip
    assert releases == {
        "failure": "1.4.2", "own": "1.3", "envelope": "1.4.2", "runner_event": "1.4.2",
        "receipt": "1.4.2", "audit": None,
    }  # fmt: skip


def test_the_release_comes_from_triage_release_when_not_given(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("TRIAGE_RELEASE", "2026.06.01-3")
    reporter = make_reporter()
    item_id = reporter.failure(failure(1))
    assert reporter.flush(10)
    assert json.loads(desk.stored[item_id])["release"] == "2026.06.01-3"

    monkeypatch.delenv("TRIAGE_RELEASE")
    quiet = make_reporter(spool=None, release=None)
    other = quiet.failure(failure(2))
    assert quiet.flush(10)
    assert "release" not in json.loads(desk.stored[other])


@pytest.mark.parametrize("release", ["v" * 65, "1.4\n", " 1.4", 14])
def test_a_release_the_desk_would_refuse_is_refused_at_construction(
    make_reporter: Callable[..., Reporter], release: object
) -> None:
    with pytest.raises(ValueError, match="release"):
        make_reporter(release=release)
