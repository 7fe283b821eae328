"""bench/incident.py and bench/crowded.py on made-up runs: an error page is never a fast
page, a baseline that measured nothing is never 1, and refused or duplicate work is never
counted as ingested."""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench.incident import Cpu, Row, Tally, _viewer, ratios, report
from bench.verdict import EXIT_BROKEN, EXIT_MET, EXIT_MISSED


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_desk() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_error_page_is_counted_but_never_timed(failing_desk: int) -> None:
    tally = Tally()
    _viewer(failing_desk, "session", time.monotonic() + 30, tally, 0, 0.0, pages=8)
    assert tally.page_status == Counter({500: 8})
    assert tally.pages_ms == [] and tally.path_ms == {}
    row = Row("a", "(a) viewers alone", tally, 1.0, Cpu())
    assert row.page_p95 is None
    assert row.problems() == ["pages answered {500: 8} (0: no answer)", "no page answered 200"]


def viewers(p95_ms: float) -> Tally:
    tally = Tally(page_status=Counter({200: 100}))
    tally.pages_ms = [p95_ms * 0.5] * 90 + [p95_ms] * 10
    return tally


def senders(records: int, **fields: object) -> Tally:
    tally = Tally(ingest_status=Counter({200: max(1, records // 500)}), records=records)
    for name, value in fields.items():
        setattr(tally, name, value)
    return tally


def row(name: str, tally: Tally, *, viewers: bool, senders: bool, stored: int | None = None) -> Row:
    accepted = tally.records if stored is None else stored
    return Row(
        name,
        f"({name})",
        tally,
        10.0,
        Cpu(),
        viewers=viewers,
        senders=senders,
        stored=(accepted, accepted) if senders else None,
    )


def round_of(split_pages: float, split_records: int, alone_records: int) -> list[Row]:
    split = viewers(split_pages)
    split.ingest_status, split.records = Counter({200: 10}), split_records
    return [
        row("a", viewers(100.0), viewers=True, senders=False),
        row("c", split, viewers=True, senders=True),
        row("d", senders(alone_records), viewers=False, senders=True),
    ]


def args(strict: bool) -> argparse.Namespace:
    return argparse.Namespace(
        occurred="now", viewers=4, think=1.0, senders=2, batch=500, seconds=10.0,
        web_workers=2, ingest_workers=2, ingest_threads=16, ingest_slots=0, strict=strict,
        results_dir=None,
    )  # fmt: skip


def test_checked_runs_are_judged(capsys: pytest.CaptureFixture[str]) -> None:
    assert report([round_of(120.0, 40_000, 50_000)], args(strict=True)) == EXIT_MET
    out = capsys.readouterr().out
    assert "PASS  split pools: page p95 against the viewers alone 1.20x" in out
    assert "PASS  split pools: ingest against its rate alone 0.80x" in out
    assert report([round_of(200.0, 40_000, 50_000)], args(strict=True)) == EXIT_MISSED


def test_a_zero_baseline_rate_is_no_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    # The senders alone ingested nothing: once read as a rate of 1 record/s, so that any
    # split-pool rate passed; now it is no baseline at all.
    rows = round_of(120.0, 40_000, 0)
    rows[2].tally.ingest_status = Counter({503: 40})
    assert ratios(rows).split_ingest is None
    assert report([rows], args(strict=False)) == EXIT_BROKEN
    out = capsys.readouterr().out
    assert "BROKEN  d: round 1: ingest answered" not in out  # 503 asks for a retry: not wrong
    assert "BROKEN  d: round 1: no item accepted" in out
    assert "MISS  split pools: ingest against its rate alone: not judged, the d path" in out
    assert "split pools' ingest" not in out  # no round's ratio printed from it either


@pytest.mark.parametrize(
    ("tally", "stored", "problem"),
    [
        (senders(5_000, duplicates=500), None, "500 duplicates: the benchmark sent items twice"),
        (senders(5_000, rejected=3), None, "3 items refused"),
        (senders(5_000, ran_out=True), None, "the senders ran out of batches"),
        (senders(0), None, "no item accepted"),
        (senders(5_000), 4_500, "the database holds 4,500 claims"),
    ],
)
def test_refused_duplicate_or_lost_work_fails_a_sender_run(
    tally: Tally, stored: int | None, problem: str
) -> None:
    found = row("d", tally, viewers=False, senders=True, stored=stored).problems()
    assert any(line.startswith(problem) for line in found), found


def test_ingest_errors_fail_a_run_and_a_wait_and_retry_does_not() -> None:
    busy = senders(5_000)
    busy.ingest_status.update({503: 3, 429: 1})
    assert row("d", busy, viewers=False, senders=True).problems() == []
    broken = senders(5_000)
    broken.ingest_status.update({500: 2, 0: 1})
    assert row("d", broken, viewers=False, senders=True).problems() == [
        "ingest answered {0: 1, 500: 2} (0: no answer)"
    ]


def test_the_floods_items_are_new_calls_not_the_loaded_ones_again() -> None:
    """The same numbers make the same bodies: a flood that kept the loaded records' spans
    was stored as duplicates of calls already recorded (and the run was BROKEN)."""
    import json
    from datetime import UTC, datetime

    from bench.incident import sender_batches
    from bench.triage_scale import Traffic

    loaded = {
        (item["body"]["trace_id"], item["body"]["span_id"])
        for item in Traffic.build(datetime.now(UTC)).items(0, 50, prefix="scale")
    }
    flood = [
        (item["body"]["trace_id"], item["body"]["span_id"])
        for batch in sender_batches(1, 50, tag="abc123")
        for item in json.loads(batch)["items"]
    ]
    assert len(set(flood)) == 50 and not loaded & set(flood)
