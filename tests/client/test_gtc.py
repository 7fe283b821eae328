"""triage_desk_client.gtc without a desk process: what report_stream, the failure helpers
and the ids put in the spool, read back from a fake desk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from graph_tool_call.graphify import select_target_candidate
from graph_tool_call.learning import build_trace_learning_record
from graph_tool_call.plan.runner import PlanStarted, StepFailed
from triage_desk_client import Reporter
from triage_desk_client.gtc import report_selection_failure, report_stream

from tests.client.fake_desk import FakeDesk


@pytest.fixture
def desk() -> Iterator[FakeDesk]:
    fake = FakeDesk().start()
    yield fake
    fake.stop()


@pytest.fixture
def reporter(desk: FakeDesk, tmp_path: Path) -> Iterator[Reporter]:
    reporter = Reporter(desk.url, "good-key", spool_dir=str(tmp_path), flush_interval=0.05)
    yield reporter
    reporter.close(timeout=0)


def stored(desk: FakeDesk, item_id: str) -> dict[str, object]:
    return json.loads(desk.stored[item_id])


def test_report_stream_yields_each_event_unchanged_and_reports_it_once(
    reporter: Reporter, desk: FakeDesk
) -> None:
    events = [
        PlanStarted(plan_id="p1", goal="g", step_count=1),
        StepFailed(plan_id="p1", step_id="s1", tool="getOrder", error={"kind": "tool"}),
    ]
    assert list(report_stream(reporter, iter(events))) == events
    assert list(report_stream(reporter, iter(events))) == events  # reported twice
    assert reporter.flush(5)
    assert len(desk.stored) == 2 and reporter.stats()["duplicate"] == 2
    ids = sorted(desk.stored)
    assert ids[0].startswith("p1/-/plan.started/0/") and ids[1].startswith("p1/s1/step.failed/1/")
    assert stored(desk, ids[1])["error"] == {"kind": "tool"}


def test_a_selection_failure_is_a_select_target_failure_with_the_selectors_reasons(
    reporter: Reporter, desk: FakeDesk
) -> None:
    tools = {
        "getOrderDetail": {"name": "getOrderDetail", "description": "Get one order's detail"},
        "getOrderItems": {"name": "getOrderItems", "description": "Get one order's items"},
    }
    selection = select_target_candidate(
        "order", ["getOrderDetail", "getOrderItems"], tools, llm_target="getOrderItems"
    )
    item_id = report_selection_failure(reporter, selection, collection="shop", plan_id="p2")
    assert reporter.flush(5)
    body = stored(desk, item_id)
    codes = list(selection["reason_codes"])
    assert (body["stage"], body["collection"], body["plan_id"]) == ("select_target", "shop", "p2")
    assert body["reason"] == (codes[0] if codes else "selector_mismatch")
    assert body["evidence"]["reason_codes"] == codes  # type: ignore[index]
    assert body["execution_state"] == "not_started"


def test_two_learning_attempts_at_one_query_get_two_ids_and_the_same_one_twice_one(
    reporter: Reporter, desk: FakeDesk
) -> None:
    first = build_trace_learning_record(query="q", collection_id="c", session_id="a")
    second = build_trace_learning_record(query="q", collection_id="c", session_id="b")
    assert first["attempt_id"] == second["attempt_id"]  # the library's default
    one, other = reporter.learning_attempt(first), reporter.learning_attempt(second)
    assert one != other and reporter.learning_attempt(first) == one
    assert reporter.flush(5)
    stats = reporter.stats()
    assert (stats["sent"], stats["duplicate"], stats["rejected"]) == (2, 1, 0)
