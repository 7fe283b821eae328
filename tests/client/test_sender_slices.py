"""The sender's CPU work is cut in slices: between two of them it hands the interpreter
(the GIL) to other threads, so report() in the caller's thread never waits behind a whole
batch being read, checked and answered. And the desk's answer, decoded item by item for
that, means what json.loads would make of it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from triage_desk_client import reporter as reporter_module
from triage_desk_client import spool as spool_module
from triage_desk_client.spool import Slices, Spool, frame


def test_reading_and_answering_a_batch_hands_the_interpreter_over_in_short_stretches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = Spool(directory=str(tmp_path), segment_bytes=8 << 20, max_bytes=1 << 30)
    segment = spool.open_active()
    evidence = "x" * 1000
    for number in range(500):
        spool.append(
            frame(
                b'{"type":"failure","id":"f-%d","body":{"evidence":"%s","n":%d}}'
                % (number, evidence.encode(), number)
            )
        )
    answer = json.dumps(
        {"items": [{"index": n, "id": f"f-{n}", "status": "accepted"} for n in range(500)]}
    ).encode()
    # CPU time of this thread between two hand-overs: what another thread would wait for
    # the interpreter at most (the machine's load does not count in it).
    stretches: list[float] = []
    last = time.thread_time()

    def hand_over() -> None:
        nonlocal last
        stretches.append(time.thread_time() - last)
        os.sched_yield()
        last = time.thread_time()

    monkeypatch.setattr(spool_module, "_hand_over", hand_over)
    started = time.thread_time()
    batch = spool.read_batch(segment, 0, segment.size, 500, 4 << 20)
    body = b'{"items":[' + b",".join(batch.payloads) + b"]}"
    outcome = reporter_module._item_statuses(answer, batch.payloads)
    stretches.append(time.thread_time() - last)
    total = time.thread_time() - started

    assert len(json.loads(body)["items"]) == 500
    assert outcome == {"accepted": 500, "duplicate": 0, "rejected": []}
    # Judged loosely: many hand-overs, and no stretch near the whole work (one stretch of
    # it all is what the sender did before: up to the 5 ms switch interval for report()).
    assert len(stretches) >= 10
    assert max(stretches) < total / 4


ANSWERS = [
    b"",
    b"{}",
    b"[]",
    b"\xff",
    b'{"items":[]}',
    b' { "items" : [ 1 , {"status":"accepted"} ] }\n',
    b'{"a":1,"items":[{"status":"accepted"}],"b":[1,2]}',
    b'{"items":[1],"items":[2,3]}',  # the last one wins, as in json.loads
    b'{"items":[[1,2],[]]}',
    b'{"items":5}',
    b'{"items":{"a":1}}',
    b'{"items":[1,]}',
    b'{"items":[,1]}',
    b'{"items":[1 2]}',
    b'{"items":[1]',
    b'{"items":[1]}x',
    b'{"items":[1],}',
    b'{"items" [1]}',
    b'{"items":[1],"x"}',
    b"{1:2}",
]


@pytest.mark.parametrize("data", ANSWERS)
def test_the_answer_decoded_item_by_item_is_what_json_loads_reads(data: bytes) -> None:
    try:
        items = json.loads(data)["items"]
        expected = items if isinstance(items, list) else None
    except (ValueError, TypeError, KeyError):
        expected = None
    assert reporter_module._answer_items(data, Slices()) == expected
