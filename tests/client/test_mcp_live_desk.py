"""The MCP middleware and client helper against a live desk (gunicorn + PostgreSQL): the
billing example's server (the official SDK's MCPServer with NextActionContract) served over
Streamable HTTP on 127.0.0.1, called seven times by the SDK's Client in ReportingClient,
its failures sent by the real Reporter and its spans by the OpenTelemetry SDK's OTLP/HTTP
exporter, both to the desk. Each failed call is stored once, classified as the agent was
told; the group page shows the envelope; the taxonomy is refreshed from the desk's ETag.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import mcp.shared._otel as mcp_otel
import pytest
from django.urls import reverse
from mcp import Client
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from triage_desk_client import Reporter
from triage_desk_client.mcp import NextActionContract, ReportingClient, envelope_of
from triage_desk_client.taxonomy import TaxonomySource, bundled

from demo.management.commands.demo import Command
from tests.client.test_mcp import REPORTED, TOLD, billing, run_async, summary
from tests.factories import ToolPolicyFactory
from tests.faults.processes import Gunicorn, base_env, free_port
from triage.models import FailureGroup, FailureRecord, IngestBatch

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def server(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    with Gunicorn.serving(env=base_env(), log_dir=tmp_path_factory.mktemp("gunicorn")) as gunicorn:
        yield gunicorn


@pytest.fixture
def key(make_api_key: Callable[..., str]) -> str:
    return make_api_key("billing-mcp", scopes=("ingest", "read"))


@pytest.fixture
def desk_url(server: Gunicorn) -> str:
    return f"http://127.0.0.1:{server.port}"


@pytest.fixture
def spans_to_the_desk(
    desk_url: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TracerProvider]:
    provider = TracerProvider(resource=Resource.create({"service.name": billing.COLLECTION}))
    exporter = OTLPSpanExporter(
        endpoint=f"{desk_url}/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    monkeypatch.setattr(mcp_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    try:
        yield provider
    finally:
        provider.shutdown()


@pytest.fixture
def reporter(desk_url: str, key: str, tmp_path: Path) -> Iterator[Reporter]:
    made = Reporter(desk_url, key, spool_dir=str(tmp_path / "spool"), flush_interval=0.1)
    yield made
    made.close(timeout=0)


def run_the_seven_calls(reporter: Reporter, desk_url: str, key: str) -> list[dict[str, Any]]:
    contract = NextActionContract(
        reporter, collection=billing.COLLECTION, tools=billing.TOOLS, desk_url=desk_url,
        api_key=key,
    )  # fmt: skip

    async def calls(url: str) -> list[dict[str, Any]]:
        async with ReportingClient(
            Client(url, read_timeout_seconds=10),
            reporter,
            collection=billing.COLLECTION,
            tools=billing.TOOLS,
        ) as agent:
            return list(await billing.call_seven(agent))

    try:
        with billing.serving(billing.build_server(middleware=[contract])) as url:
            return run_async(calls, url)
    finally:
        contract.close()


def signed_in(client: Any, users: Any) -> Any:
    # A superuser: a transactional test before this one may have flushed the roles' rows.
    client.force_login(users.objects.create_superuser(f"lead-{users.objects.count()}", "", "x"))
    return client


def stored() -> list[FailureRecord]:
    return list(FailureRecord.objects.order_by("occurred_at"))


def test_reports_first_then_spans_each_failure_is_stored_once_as_the_agent_was_told(
    spans_to_the_desk: TracerProvider,
    reporter: Reporter,
    desk_url: str,
    key: str,
    client: Any,
    django_user_model: Any,
) -> None:
    told = run_the_seven_calls(reporter, desk_url, key)
    assert [summary(entry["envelope"]) for entry in told] == TOLD
    assert reporter.flush(timeout=30)
    assert spans_to_the_desk.force_flush(30_000)

    records = stored()
    assert [(r.tool, r.stage, r.reason) for r in records] == REPORTED
    for record, entry in zip(records, told[1:], strict=True):
        envelope = entry["envelope"]
        assert record.collection == billing.COLLECTION
        assert record.execution_state == envelope["execution"]["state"]
        assert record.retryable is envelope["retry"]["allowed"]
        assert record.extra["envelope"] == envelope  # what the agent was told, kept
        # The span of the same call became this record, not a second one.
        assert record.extra["otlp"]["convention"] == "mcp"
        assert len(record.trace_id or "") == 32 and len(record.span_id or "") == 16
        assert record.contradictions == []
    assert [r.lane for r in records] == [
        "retry_safe", "policy_blocked", "retry_safe", "reconcile_first", "input_stale",
        "manual_investigation",
    ]  # fmt: skip
    assert records[3].idempotency_key == "notify:invoice-819"
    # Six spans merged into six reports: the ledger counts them as duplicates.
    assert sum(IngestBatch.objects.values_list("duplicates", flat=True)) >= 6

    group = FailureGroup.objects.get(reason="timeout", tool="send_invoice")
    page = signed_in(client, django_user_model).get(reverse("triage:group", args=[group.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="agent-envelope"' in text
    assert "query_by_idempotency_key" in text and "notify:invoice-819" in text
    assert 'id="envelope-contradictions"' not in text


def test_spans_first_then_reports_each_failure_is_still_stored_once(
    spans_to_the_desk: TracerProvider, desk_url: str, key: str, tmp_path: Path
) -> None:
    # No tool policies on the desk: the spans carry each tool's declared side effect
    # (tool_call.side_effect, set by the middleware), so the reads stay reads.
    # The reporter's desk is away while the calls run, so the spans land first.
    away = Reporter(f"http://127.0.0.1:{free_port()}", key, spool_dir=str(tmp_path / "spool"))
    told = run_the_seven_calls(away, desk_url, key)
    away.close(timeout=0)
    assert spans_to_the_desk.force_flush(30_000)
    assert [(r.tool, r.reason) for r in stored()] == [(t, r) for t, _, r in REPORTED]
    assert all("envelope" not in r.extra for r in stored())
    # The middleware's message on the span, never the "span does not say why" text.
    assert stored()[3].message == "ReadTimeout: read timed out"
    assert [r.side_effect for r in stored()][:4] == ["read", "read", "read", "external_write"]

    # The same spool, sent by a reporter that reaches the desk.
    late = Reporter(desk_url, key, spool_dir=str(tmp_path / "spool"), flush_interval=0.1)
    try:
        assert late.flush(timeout=30)
    finally:
        late.close(timeout=5)
    records = stored()
    assert len(records) == 6
    for record, entry in zip(records, told[1:], strict=True):
        envelope = entry["envelope"]
        assert record.extra["envelope"] == envelope
        assert record.execution_state == envelope["execution"]["state"]
        assert record.retryable is envelope["retry"]["allowed"]


def test_the_taxonomy_comes_from_the_desk_with_its_etag(
    desk_url: str, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    source = TaxonomySource(desk_url, key)
    with caplog.at_level(logging.INFO, logger="triage_desk_client"):
        assert source.refresh() is True
        assert source.current().document == bundled().document
        assert source.refresh() is False  # 304: nothing new, nothing wrong
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_desks_tool_policy_wins_over_the_codes_declaration(
    desk_url: str, key: str, reporter: Reporter
) -> None:
    """The example declares search_payments a read; the desk's operators say it writes. The
    agent is then told what the desk would conclude (a timeout after sending: look first),
    and the code's key_argument still names the call's idempotency key."""
    ToolPolicyFactory(
        collection=billing.COLLECTION, tool="search_payments", side_effect="external_write",
        idempotency_required=True, idempotency_lookup="GET /payments/by-key/{key}",
    )  # fmt: skip
    tools = {**billing.TOOLS, "search_payments": {"side_effect": "read", "idempotency": {
        "key_argument": "query"}}}  # fmt: skip
    contract = NextActionContract(
        reporter, collection=billing.COLLECTION, tools=tools, desk_url=desk_url, api_key=key
    )
    try:
        deadline = time.monotonic() + 15
        while contract.policy("search_payments").side_effect != "external_write":
            assert time.monotonic() < deadline, "the desk's policies never arrived"
            time.sleep(0.05)
        assert contract.policy("get_invoice").side_effect == "read"  # no desk policy: the code's

        async def call() -> Any:
            async with Client(billing.build_server(middleware=[contract])) as client:
                return await client.call_tool("search_payments", {"query": "INV-819"})

        told = envelope_of(run_async(call))
    finally:
        contract.close()
    assert told is not None
    assert (told["status"], told["retry"]["next_action"]) == (
        "uncertain", "query_by_idempotency_key",
    )  # fmt: skip
    assert told["execution"] == {"state": "started_unknown", "idempotency_key": "INV-819"}
    assert told["evidence"]["lookup"] == "GET /payments/by-key/{key}"


def test_a_desk_that_is_away_leaves_the_snapshot_in_force_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = TaxonomySource(f"http://127.0.0.1:{free_port()}", "k", timeout=1)
    with caplog.at_level(logging.WARNING, logger="triage_desk_client"):
        assert source.refresh() is False
        assert source.refresh() is False
    assert source.current() is bundled()
    assert len([r for r in caplog.records if "taxonomy refresh" in r.getMessage()]) == 1


def test_the_demos_mcp_runtime_sends_its_failures_classified_with_their_envelopes(
    desk_url: str, client: Any, django_user_model: Any
) -> None:
    out = StringIO()
    command = Command(stdout=out)
    command._run_mcp_runtime(desk_url, desk_url)  # its own process, as `make demo` runs it

    printed = out.getvalue()
    assert "uncertain TIMEOUT -> query_by_idempotency_key" in printed
    assert "blocked AUTH_FAILED -> request_approval" in printed
    records = FailureRecord.objects.filter(collection=billing.COLLECTION).order_by("occurred_at")
    assert [(r.tool, r.stage, r.reason) for r in records] == REPORTED
    # Its spans reached the desk too (the OpenTelemetry SDK is installed), stored as the
    # same six records.
    assert all("envelope" in r.extra and "otlp" in r.extra for r in records)

    command._run_mcp_runtime(desk_url, desk_url)  # a second `make demo` keeps them
    assert FailureRecord.objects.filter(collection=billing.COLLECTION).count() == 6
    assert "already loaded" in out.getvalue()

    group = FailureGroup.objects.get(collection=billing.COLLECTION, reason="http_5xx")
    page = signed_in(client, django_user_model).get(reverse("triage:group", args=[group.pk]))
    assert page.status_code == 200
    assert 'id="agent-envelope"' in page.content.decode()
