"""The real OpenTelemetry SDK exports to a live desk (gunicorn, as deployed) over HTTP, once
with its protobuf exporter and once as OTLP JSON built from the same spans; and the tool
spans of OpenInference, OpenLLMetry and MCP, named with their own packages' constants."""

from __future__ import annotations

import http.client
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.apps import apps
from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv_ai import SpanAttributes as LLMetry
from opentelemetry.semconv_ai import TraceloopSpanKindValues
from opentelemetry.trace import SpanKind, Status, StatusCode

from tests.faults.processes import Gunicorn, base_env
from tests.triage.intake.otlp_helpers import (
    BEARER,
    EMAIL,
    FAILING_CALLS,
    ToolCall,
    export_request,
    otlp_json_bytes,
    record,
)
from triage.models import FailureRecord, IngestBatch, RunnerEvent

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db(transaction=True)]

# (stage, lane) each failing call must land in; the tool is the call's own.
EXPECTED = {
    "http_5xx": ("execute", "retry_safe"),  # a read that got 503
    "auth_failed": ("execute", "policy_blocked"),
    "http_4xx": ("execute", "input_stale"),
    "timeout": ("execute", "reconcile_first"),  # a POST whose answer never came
    "network_error": ("execute", "retry_safe"),  # refused: the request never left
}


@pytest.fixture(scope="module")
def server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    with Gunicorn.serving(env=base_env(), log_dir=tmp_path_factory.mktemp("gunicorn")) as gunicorn:
        yield gunicorn


def protobuf_export(port: int, key: str) -> Callable[[list[ReadableSpan]], None]:
    exporter = OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{port}/v1/traces",
        headers={"Authorization": f"Bearer {key}"},
        compression=Compression.Gzip,
        timeout=30,
    )

    def export(spans: list[ReadableSpan]) -> None:
        assert exporter.export(spans) == SpanExportResult.SUCCESS

    return export


def json_export(port: int, key: str) -> Callable[[list[ReadableSpan]], None]:
    def export(spans: list[ReadableSpan]) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/traces",
            data=otlp_json_bytes(export_request(spans)),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
            assert response.read() == b"{}"  # no partial_success: nothing refused

    return export


def stored_text() -> str:
    """Everything the desk's apps hold, as text."""
    rows = []
    for model in apps.get_models():
        if model._meta.app_label in ("triage", "learning", "qualitylab"):
            rows += [repr(row) for row in model._default_manager.values()]
    return "\n".join(rows)


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_an_instrumented_agent_lands_its_failing_tool_calls_classified(
    server: Gunicorn, make_api_key: Callable[..., str], encoding: str
) -> None:
    key = make_api_key()
    send = (protobuf_export if encoding == "protobuf" else json_export)(server.port, key)
    secret_call = ToolCall(
        "getDelivery",
        status=503,
        attributes={"http.request.header.authorization": BEARER, "enduser.email": EMAIL},
    )
    calls = [
        secret_call,
        *(call for reason, call in FAILING_CALLS.items() if reason != "http_5xx"),
        ToolCall("getCatalog", status=200, ok=True),
    ]
    spans = record(calls)
    send(spans)
    send(spans)  # the exporter's retry of the same spans

    records = {record.reason: record for record in FailureRecord.objects.all()}
    assert FailureRecord.objects.count() == len(FAILING_CALLS)
    for reason, (stage, lane) in EXPECTED.items():
        landed = records[reason]
        assert (landed.stage, landed.lane, landed.tool) == (stage, lane, FAILING_CALLS[reason].tool)
        assert landed.source == "otlp" and landed.collection == "shop-agent"
        assert landed.plan_id and len(landed.step_id) == 16
    assert records["timeout"].execution_state == "started_unknown"
    assert records["network_error"].execution_state == "not_started"
    assert records["http_5xx"].extra["otlp"]["service_version"] == "2.3.1"
    assert records["http_5xx"].extra["otlp"]["scope"] == {
        "name": "shop.agent.tools",
        "version": "0.9.0",
    }
    # The success counts toward success rates; the chat and agent spans are not stored.
    assert list(RunnerEvent.objects.values_list("event_type", "tool")) == [
        ("step.completed", "getCatalog")
    ]
    first, retry = IngestBatch.objects.order_by("id")
    assert (first.accepted, first.skipped, first.channel) == (6, 2, "otlp")
    assert (retry.accepted, retry.duplicates) == (0, 6)

    text = stored_text()
    assert BEARER.split()[1] not in text
    assert EMAIL not in text
    assert "http.request.header.authorization" in text  # the attribute is kept, scrubbed


def test_a_chunked_export_without_a_length_is_taken(
    server: Gunicorn, make_api_key: Callable[..., str]
) -> None:
    """OpenTelemetry's JavaScript exporter streams its body chunked, with no Content-Length;
    gunicorn takes the chunks apart and the door reads them, within the body limit."""
    body = export_request(record([FAILING_CALLS["http_4xx"]], chat=False)).SerializeToString()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(
            "POST",
            "/v1/traces",
            body=iter([body[:10], body[10:]]),  # an iterable: http.client sends it chunked
            headers={
                "Authorization": f"Bearer {make_api_key()}",
                "Content-Type": "application/x-protobuf",
            },
        )
        response = connection.getresponse()
        assert response.status == 200, response.read()
        response.read()
    finally:
        connection.close()
    assert FailureRecord.objects.get().reason == "http_4xx"


# --- each convention, recorded by the real SDK with its own package's attribute names -----


def record_conventions() -> list[ReadableSpan]:
    """One agent's trace as three instrumentations record it: for each convention a failed
    tool call (HTTP 503 raised, as a tool's HTTP client raises it), a tool call that
    succeeded, and the LLM or chain spans around them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("weather.agent", "1.0.0")
    kind = SpanAttributes.OPENINFERENCE_SPAN_KIND
    with tracer.start_as_current_span("AgentExecutor") as chain:
        chain.set_attribute(kind, OpenInferenceSpanKindValues.CHAIN.value)
        with tracer.start_as_current_span("ChatOpenAI") as llm:
            llm.set_attribute(kind, OpenInferenceSpanKindValues.LLM.value)
        for tool, ok in (("get_forecast", False), ("get_city", True)):
            with tracer.start_as_current_span(tool, record_exception=False) as span:
                span.set_attribute(kind, OpenInferenceSpanKindValues.TOOL.value)
                span.set_attribute(SpanAttributes.TOOL_NAME, tool)
                span.set_attribute(SpanAttributes.INPUT_VALUE, '{"city": "Busan"}')
                _end(span, ok)
    with tracer.start_as_current_span("weather.workflow") as workflow:
        workflow.set_attribute(LLMetry.TRACELOOP_SPAN_KIND, TraceloopSpanKindValues.WORKFLOW.value)
        for tool, ok in (("get_alerts", False), ("get_radar", True)):
            with tracer.start_as_current_span(f"{tool}.tool", record_exception=False) as span:
                span.set_attribute(LLMetry.TRACELOOP_SPAN_KIND, TraceloopSpanKindValues.TOOL.value)
                span.set_attribute(LLMetry.TRACELOOP_ENTITY_NAME, tool)
                span.set_attribute(LLMetry.TRACELOOP_ENTITY_INPUT, '{"city": "Busan"}')
                _end(span, ok)
    for tool, ok in (("get_tides", False), ("get_moon", True)):
        with tracer.start_as_current_span(
            f"tools/call {tool}", kind=SpanKind.SERVER, record_exception=False
        ) as span:
            span.set_attribute("mcp.method.name", "tools/call")
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", tool)
            _end(span, ok)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _end(span: Any, ok: bool) -> None:
    if ok:
        span.set_status(Status(StatusCode.OK))
        return
    error = RuntimeError("HTTP 503: Service Unavailable")
    span.record_exception(error)
    span.set_attribute("error.type", "RuntimeError")
    span.set_status(Status(StatusCode.ERROR, str(error)))


def test_openinference_openllmetry_and_mcp_tool_spans_land_through_one_mapping(
    server: Gunicorn, make_api_key: Callable[..., str]
) -> None:
    send = protobuf_export(server.port, make_api_key())
    spans = record_conventions()
    send(spans)

    records = {record.tool: record for record in FailureRecord.objects.all()}
    assert set(records) == {"get_forecast", "get_alerts", "get_tides"}
    for tool, convention in (
        ("get_forecast", "openinference"),
        ("get_alerts", "openllmetry"),
        ("get_tides", "mcp"),
    ):
        landed = records[tool]
        # Nobody declared these tools reads, so a 5xx may have written: look before a retry.
        assert (landed.stage, landed.reason, landed.lane, landed.execution_state) == (
            "execute",
            "http_5xx",
            "reconcile_first",
            "started_unknown",
        )
        assert landed.evidence["http_status"] == 503
        assert landed.extra["otlp"]["convention"] == convention
        assert landed.collection == "weather-agent" and landed.source == "otlp"
        assert (landed.trace_id, landed.span_id) == (landed.plan_id, landed.step_id)
    # The successes count toward success rates; the chain, LLM and workflow spans do not.
    assert sorted(RunnerEvent.objects.values_list("tool", flat=True)) == [
        "get_city",
        "get_moon",
        "get_radar",
    ]
    batch = IngestBatch.objects.get()
    assert (batch.accepted, batch.skipped, batch.item_count) == (6, 3, 9)
    assert "Busan" not in stored_text()  # a call's raw input is never stored
