"""triage_desk_client against a live desk: gunicorn + PostgreSQL, as in CI (issue 14): the desk
down mid-run, SIGKILLed reporters, the desk's 413 and a revoked key, a real plan run, a
synthesis error, the suggestion cache and the demo's traffic.

gunicorn serves the desk on the test database; the reporter reaches it through a
`TcpProxy` this module controls, so the desk can go down and come back. The test's own
connection checks what was stored.
"""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Count, Max, Sum
from graph_tool_call.execute.http_executor import HttpExecutor
from graph_tool_call.learning import build_trace_learning_record
from graph_tool_call.plan.runner import PlanRunner
from graph_tool_call.plan.synthesizer import UnsatisfiableFieldError
from triage_desk_client import Reporter
from triage_desk_client.gtc import SuggestionCache, report_stream, report_synthesis_error

from learning import services as learning_services
from learning.models import Suggestion
from qualitylab.engine import LoadedCollection
from qualitylab.models import Collection
from qualitylab.sandbox import DEMO_TOKEN, SandboxServer
from tests.client.reporting_process import item as killed_item
from tests.faults.processes import Gunicorn, base_env
from tests.faults.proxy import TcpProxy

# The demo collection's engine and the sandbox API, shared with the Quality Lab tests.
from tests.qualitylab.conftest import demo_built, demo_collection, sandbox  # noqa: F401
from triage.models import (
    ApiKey,
    FailureGroup,
    FailureGroupBucket,
    FailureReasonBucket,
    FailureRecord,
    IngestBatch,
    IngestItem,
    RunnerEvent,
)
from triage.services import api_key_revoke

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db(transaction=True)]

OWNER = "runtime-live"


@pytest.fixture(scope="module")
def server(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    log_dir = tmp_path_factory.mktemp("gunicorn")
    with Gunicorn.serving(env=base_env(), log_dir=log_dir) as gunicorn:
        yield gunicorn


@pytest.fixture
def desk(server: Gunicorn) -> Iterator[TcpProxy]:
    """The desk as runtimes reach it: stop() takes it down, start() brings it back."""
    with TcpProxy(server.port) as proxy:
        yield proxy


@pytest.fixture
def key(make_api_key: Callable[..., str]) -> str:
    return make_api_key(OWNER, scopes=("ingest", "read"))


@pytest.fixture
def reporters(tmp_path: Path) -> Iterator[list[Reporter]]:
    made: list[Reporter] = []
    yield made
    for reporter in made:
        reporter.close(timeout=0)


def reporter_for(
    desk: TcpProxy | Gunicorn, key: str, spool: Path, made: list[Reporter], **options: Any
) -> Reporter:
    reporter = Reporter(f"http://127.0.0.1:{desk.port}", key, spool_dir=str(spool), **options)
    made.append(reporter)
    return reporter


def assert_counters_match_a_recount(records: int) -> None:
    assert FailureRecord.objects.count() == records
    recount = dict(FailureRecord.objects.values_list("group").annotate(n=Count("id")))
    assert dict(FailureGroup.objects.values_list("pk", "count")) == recount
    assert FailureGroupBucket.objects.aggregate(n=Sum("count"))["n"] == records
    assert FailureReasonBucket.objects.aggregate(n=Sum("count"))["n"] == records


def test_the_desk_down_in_the_middle_of_5000_reports_loses_and_doubles_nothing(
    desk: TcpProxy, key: str, tmp_path: Path, reporters: list[Reporter]
) -> None:
    reporter = reporter_for(
        desk, key, tmp_path / "spool", reporters, flush_interval=0.1, max_backoff=0.5
    )
    slowest = 0.0

    def report(numbers: range) -> None:
        nonlocal slowest
        for number in numbers:
            started = time.perf_counter()
            reporter.failure(killed_item(number), id=f"live-{number}")
            slowest = max(slowest, time.perf_counter() - started)

    report(range(0, 2000))
    desk.stop()
    report(range(2000, 4000))
    # Every report returned while the desk was away: the caller only appended to the spool.
    assert reporter.stats()["queued"] >= 2000
    time.sleep(1.0)
    assert not reporter.flush(0.5)
    desk.start()
    report(range(4000, 5000))
    assert reporter.flush(60), reporter.stats()
    # A report that waited for the network would take a connect, a batch or a backoff
    # (0.1 s and more); an append takes microseconds (bench/reporter.py measures it).
    assert slowest < 1.0

    stats = reporter.stats()
    assert stats["queued"] == 0 and stats["dropped"] == 0 and stats["rejected"] == 0
    # A batch in flight when the desk went away was stored but never answered: sent again,
    # it came back duplicate. Every item got exactly one answer.
    assert stats["sent"] + stats["duplicate"] == 5000
    stored = set(IngestItem.objects.filter(owner=OWNER).values_list("client_id", flat=True))
    assert stored == {f"live-{number}" for number in range(5000)}
    assert_counters_match_a_recount(5000)


def test_a_reporting_process_killed_three_times_stores_every_item_once(
    desk: TcpProxy, key: str, tmp_path: Path, reporters: list[Reporter]
) -> None:
    total = 3000
    spool = tmp_path / "spool"
    script = Path(__file__).with_name("reporting_process.py")
    url = f"http://127.0.0.1:{desk.port}"
    rng = random.Random()
    start = 0
    for round_number in range(3):
        # The second process meets the desk down: what it reported can only be in its spool
        # when it is killed, so the third, or the runtime's next start, must send it.
        desk_down = round_number == 1
        if desk_down:
            desk.stop()
        round_start = start
        child = subprocess.Popen(
            [sys.executable, str(script), url, key, str(spool), str(start), str(total)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.5))
        child.kill()
        child.wait()
        printed = [line.strip() for line in child.stdout.read().splitlines()]
        numbers = [int(line) for line in printed if line.isdigit()]
        # Everything up to the last number printed had returned from report(): the next
        # run starts after it (a number reported but not printed is reported again).
        start = (numbers[-1] + 1) if numbers else start
        assert start < total, "the kill came after the last report: kill sooner"
        if desk_down:
            assert start > round_start, "the process was killed before it reported anything"
            on_desk = set(
                IngestItem.objects.filter(owner=OWNER).values_list("client_id", flat=True)
            )
            assert not on_desk & {f"kill-{n}" for n in range(round_start, start)}
            desk.start()

    # The runtime's next start on the same spool sends what the killed ones left.
    reporter = reporter_for(desk, key, spool, reporters, flush_interval=0.05)
    for number in range(start, total):
        reporter.failure(killed_item(number), id=f"kill-{number}")
    deadline = time.monotonic() + 60
    while IngestItem.objects.filter(owner=OWNER).count() < total:
        assert time.monotonic() < deadline, reporter.stats()
        time.sleep(0.1)
    assert reporter.flush(30)
    stored = list(IngestItem.objects.filter(owner=OWNER).values_list("client_id", flat=True))
    assert sorted(stored) == sorted(f"kill-{number}" for number in range(total))
    assert_counters_match_a_recount(total)
    assert reporter.stats()["rejected"] == 0  # re-sent items came back duplicate, never conflict


def test_the_desks_413_and_a_revoked_key_then_a_new_one_lose_and_double_nothing(
    make_api_key: Callable[..., str], tmp_path: Path, reporters: list[Reporter]
) -> None:
    """A desk that takes at most 40 items a batch answers the reporter's batches of 100 with
    413: they are split until they fit. A revoked key (401) stops sending and keeps the
    spool; the operator's new key for the same owner sends the rest."""
    old_key = make_api_key(OWNER)
    log_dir = tmp_path / "gunicorn"
    log_dir.mkdir()
    with Gunicorn.serving(env=base_env(TRIAGE_INGEST_MAX_ITEMS="40"), log_dir=log_dir) as small:
        # No timed flush: every batch is a whole 100 until flush() is asked for.
        reporter = reporter_for(
            small, old_key, tmp_path / "spool", reporters, batch_size=100, flush_interval=60,
            max_backoff=0.5,
        )  # fmt: skip
        for number in range(300):
            reporter.failure(killed_item(number), id=f"limit-{number}")
        assert reporter.flush(60), reporter.stats()
        batches = IngestBatch.objects.filter(api_key__name=OWNER)
        assert batches.aggregate(most=Max("accepted"))["most"] <= 40  # split, never refused
        assert batches.count() >= 300 // 40

        api_key_revoke(api_key=ApiKey.objects.get(name=OWNER))
        for number in range(300, 400):
            reporter.failure(killed_item(number), id=f"limit-{number}")
        assert not reporter.flush(3)
        stats = reporter.stats()
        assert stats["queued"] == 100 and "HTTP 401 (revoked_api_key)" in str(stats["last_error"])

        reporter.set_api_key(make_api_key("runtime-live-rotated", owner=OWNER))
        assert reporter.flush(60), reporter.stats()
    stats = reporter.stats()
    assert (stats["sent"], stats["duplicate"], stats["rejected"], stats["queued"]) == (400, 0, 0, 0)
    stored = set(IngestItem.objects.filter(owner=OWNER).values_list("client_id", flat=True))
    assert stored == {f"limit-{number}" for number in range(400)}
    assert_counters_match_a_recount(400)


def test_the_desks_503_busy_is_waited_out_for_its_retry_after_and_loses_nothing(
    make_api_key: Callable[..., str],
    tmp_path: Path,
    reporters: list[Reporter],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ingest pool with one batch slot and no wait for it answers the reporter's second
    batch in flight 503 ingest_busy with Retry-After: that sender waits as long before it
    sends again, and every item is stored once."""
    key = make_api_key(OWNER)
    log_dir = tmp_path / "gunicorn"
    log_dir.mkdir()
    busy_env = base_env(
        TRIAGE_POOL="ingest",
        TRIAGE_INGEST_CONCURRENT_BATCHES="1",
        TRIAGE_INGEST_SLOT_WAIT_SECONDS="0",
    )
    answers: list[tuple[int, float, float, int, str | None]] = []
    with Gunicorn.serving(env=busy_env, log_dir=log_dir, threads=4) as busy:
        reporter = reporter_for(
            busy, key, tmp_path / "spool", reporters, batch_size=50, flush_interval=60,
            max_in_flight=2,
        )  # fmt: skip
        post = reporter._post

        def timed_post(body: bytes, api_key: str) -> tuple[int, str | None, bytes]:
            started = time.monotonic()
            status, retry_after, data = post(body, api_key)
            answers.append((threading.get_ident(), started, time.monotonic(), status, retry_after))
            return status, retry_after, data

        monkeypatch.setattr(reporter, "_post", timed_post)
        for number in range(600):
            reporter.failure(killed_item(number), id=f"busy-{number}")
        assert reporter.flush(120), reporter.stats()

    refused = [answer for answer in answers if answer[3] == 503]
    assert refused, "two batches in flight never met: nothing was answered 503"
    for thread, _, answered_at, _, retry_after in refused:
        assert retry_after is not None and float(retry_after) >= 1
        later = [answer[1] for answer in answers if answer[0] == thread and answer[1] > answered_at]
        assert later and min(later) - answered_at >= float(retry_after) * 0.99
    stats = reporter.stats()
    assert (stats["sent"], stats["duplicate"], stats["rejected"], stats["queued"]) == (600, 0, 0, 0)
    stored = set(IngestItem.objects.filter(owner=OWNER).values_list("client_id", flat=True))
    assert stored == {f"busy-{number}" for number in range(600)}
    assert_counters_match_a_recount(600)


def _call_tool(collection: LoadedCollection, base_url: str) -> Callable[[str, dict], Any]:
    """A runtime's tool invoker: graph-tool-call's HttpExecutor against the sandbox."""
    executor = HttpExecutor(base_url, headers={"Authorization": f"Bearer {DEMO_TOKEN}"})

    def call(name: str, args: dict[str, Any]) -> Any:
        original = collection.tool_schemas[name]
        schema = dataclasses.replace(original, metadata={**original.metadata, "base_url": base_url})
        result = executor.execute(schema, args)
        if not result.get("ok"):
            raise RuntimeError(f"HTTP {result.get('status')}: {result.get('error')}")
        body = result.get("body")
        output = dict(body) if isinstance(body, dict) else {}
        output.update(body=body, body_view=result.get("body_view"))
        return output

    return call


def test_a_real_plan_run_reported_with_report_stream_is_on_the_desk_classified_once(
    desk: TcpProxy,
    key: str,
    tmp_path: Path,
    reporters: list[Reporter],
    demo_collection: LoadedCollection,  # noqa: F811
    sandbox: SandboxServer,  # noqa: F811
) -> None:
    reporter = reporter_for(desk, key, tmp_path / "spool", reporters)
    runner = PlanRunner(_call_tool(demo_collection, sandbox.base_url))
    chained = demo_collection.synthesize(target="getOrderDetail", entities={}, goal="my order")
    broken = demo_collection.synthesize(
        target="getOrderDetail", entities={"orderNo": "ORD-500"}, goal="order ORD-500"
    )
    seen: dict[str, list[Any]] = {}
    for plan in (chained, broken):
        meta = {"collection": "shop"}
        for event in report_stream(reporter, runner.run_stream(plan, trace_metadata=meta)):
            seen.setdefault(plan.id, []).append(event)  # yielded unchanged: the PlanEvent
    assert reporter.flush(30)

    steps = ["step.started", "step.completed"]
    assert [event.type for event in seen[chained.id]] == [
        "plan.started",
        *steps,
        *steps,
        "plan.completed",
    ]
    assert [event.type for event in seen[broken.id]] == [
        "plan.started",
        "step.started",
        "step.failed",
        "plan.aborted",
    ]
    for plan in (chained, broken):
        stored = RunnerEvent.objects.filter(plan_id=plan.id)
        assert sorted(stored.values_list("event_type", "step_id")) == sorted(
            (event.type, getattr(event, "step_id", "")) for event in seen[plan.id]
        )
    [failure] = FailureRecord.objects.filter(plan_id=broken.id)
    assert (failure.stage, failure.reason, failure.tool) == (
        "execute",
        "http_5xx",
        "getOrderDetail",
    )
    assert not FailureRecord.objects.filter(plan_id=chained.id).exists()

    # The same events reported again are the same items: duplicates, not new records.
    for sequence, event in enumerate(seen[broken.id]):
        reporter.runner_event(event, sequence=sequence)
    assert reporter.flush(10) and reporter.stats()["duplicate"] == 4
    assert RunnerEvent.objects.filter(plan_id=broken.id).count() == 4
    assert FailureRecord.objects.filter(plan_id=broken.id).count() == 1


def test_a_synthesis_error_is_a_failure_from_its_to_dict(
    desk: TcpProxy, key: str, tmp_path: Path, reporters: list[Reporter]
) -> None:
    reporter = reporter_for(desk, key, tmp_path / "spool", reporters)
    error = UnsatisfiableFieldError(
        "Required field orderNo cannot be supplied (this text is never parsed)",
        reason="unsatisfied_field",
        field_name="orderNo",
        target_tool="getOrderDetail",
    )
    report_synthesis_error(reporter, error, collection="shop", plan_id="plan-9")
    assert reporter.flush(10)
    record = FailureRecord.objects.get(plan_id="plan-9")
    assert (record.stage, record.reason, record.tool, record.collection) == (
        "synthesize",
        "unsatisfied_field",
        "getOrderDetail",
        "shop",
    )
    assert record.evidence["field_name"] == "orderNo"
    assert (record.lane, record.execution_state) == ("input_stale", "not_started")


QUERY = "find refund-ready orders"
CANDIDATES = [
    {"name": "getOrderDetail", "score": 0.72},
    {"name": "getRefundableOrders", "score": 0.71},
    {"name": "listOrders", "score": 0.40},
]


def _top(result: dict[str, Any]) -> str:
    return str(max(result["candidates"], key=lambda row: row["score"])["name"])


def test_suggestion_cache_follows_promotions_polls_with_304_and_outlives_the_desk(
    desk: TcpProxy, key: str, tmp_path: Path, reporters: list[Reporter]
) -> None:
    reporter = reporter_for(desk, key, tmp_path / "spool", reporters)
    for session in ("a", "b"):
        reporter.learning_attempt(
            build_trace_learning_record(
                query=QUERY,
                collection_id="bo-dev",
                session_id=f"session-{session}",
                selected_target="getRefundableOrders",
                llm_target="getOrderDetail",
                plan_tools=["searchOrders", "getRefundableOrders"],
                success=True,
                latency_ms=1200,
            )
        )
    assert reporter.flush(10) and reporter.stats()["sent"] == 2
    learning_services.suggestions_derive(collection_id=Collection.objects.get(name="bo-dev").pk)

    cache = SuggestionCache(f"http://127.0.0.1:{desk.port}", key, "bo-dev", refresh=3600)
    assert _top(cache.apply(QUERY, CANDIDATES)) == "getOrderDetail"  # nothing promoted yet
    assert cache.last_status == 200

    suggestion = Suggestion.objects.get(collection__name="bo-dev", type="target_preference")
    reviewer = get_user_model().objects.create(username="rita")
    learning_services.suggestion_approve(suggestion=suggestion, reviewer=reviewer, reason="wins")
    assert cache.refresh() and cache.last_status == 200
    assert _top(cache.apply(QUERY, CANDIDATES)) == "getRefundableOrders"

    assert cache.refresh() and cache.last_status == 304  # nothing changed: no body sent
    assert _top(cache.apply(QUERY, CANDIDATES)) == "getRefundableOrders"

    desk.stop()
    assert not cache.refresh()
    assert cache.last_status is None and "cannot reach the desk" in str(cache.last_error)
    assert _top(cache.apply(QUERY, CANDIDATES)) == "getRefundableOrders"  # the last answer


def test_the_demo_sends_its_traffic_through_the_reporter(
    desk: TcpProxy, tmp_path: Path, settings: Any
) -> None:
    from io import StringIO

    from django.utils import timezone

    from demo.management.commands.demo import DEMO_OWNER, Command
    from triage.demo_data import demo_items

    settings.BASE_DIR = tmp_path  # the demo's spool goes under var/
    output = StringIO()
    Command(stdout=output)._load_traffic(f"http://127.0.0.1:{desk.port}")
    expected = len(list(demo_items(now=timezone.now())))
    stored = IngestItem.objects.filter(owner=DEMO_OWNER).count()
    assert "with triage_desk_client.Reporter" in output.getvalue()
    assert f"Sent {expected} demo items" in output.getvalue()
    assert f"{stored} accepted" in output.getvalue() and stored > 0
    assert not list((tmp_path / "var" / "demo-spool").glob("*.seg"))  # all delivered
