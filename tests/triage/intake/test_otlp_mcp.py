"""An MCP server built on the official SDK (`mcp` 2.3), its own OpenTelemetry middleware on
(the default), exporting with the OpenTelemetry SDK's OTLP/HTTP exporter to a live desk,
called by the SDK's own Client: what the desk stores WITHOUT triage-desk-client's middleware.

What the SDK's span really carries (read in mcp/server/_otel.py, and checked here): an
`MCPServer` turns every failure of a tool, an unknown tool and arguments that fail the
input schema included, into an `isError` result before its middleware sees it, so the
span says only `error.type = tool_error`; the desk stores those honestly as
`tool_error_unreported`. A low-level `Server` whose handler raises a protocol error
(`MCPError`) gets the JSON-RPC code on its span, and the desk reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx2
import mcp.shared._otel as mcp_otel
import mcp_types
import pytest
from django.urls import reverse
from mcp import Client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.faults.processes import Gunicorn, base_env
from triage.models import FailureGroup, FailureRecord, IngestBatch, RunnerEvent

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db(transaction=True)]

SERVICE = "weather-mcp"


@pytest.fixture(scope="module")
def server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    with Gunicorn.serving(env=base_env(), log_dir=tmp_path_factory.mktemp("gunicorn")) as gunicorn:
        yield gunicorn


@pytest.fixture
def exporting_to_the_desk(
    server: Gunicorn, make_api_key: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[TracerProvider]:
    """The SDK's middleware spans go through this test's own provider (the process-wide one
    can be set only once) to the desk, batched as a deployed server exports them."""
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    exporter = OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{server.port}/v1/traces",
        headers={"Authorization": f"Bearer {make_api_key()}"},
        timeout=30,
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    monkeypatch.setattr(mcp_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    try:
        yield provider
    finally:
        provider.shutdown()


def weather_server() -> MCPServer:
    server = MCPServer("weather")

    @server.tool()
    def get_city(city: str) -> str:
        return city.title()

    @server.tool()
    def get_delivery(order_id: str) -> str:
        raise RuntimeError("HTTP 503: Service Unavailable")

    @server.tool()
    def get_profile(user: str) -> str:
        raise RuntimeError("HTTP 403: Forbidden")

    @server.tool()
    def get_forecast(city: str) -> str:
        raise httpx2.ReadTimeout("read timed out")

    return server


async def call_all(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    outcomes = []
    async with Client(server) as client:
        for tool, arguments in calls:
            try:
                result = await client.call_tool(tool, arguments)
            except MCPError as error:
                outcomes.append(f"protocol error {error.code}")
            else:
                outcomes.append("isError" if result.is_error else "ok")
    return outcomes


def run_calls(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """call_all in a thread of its own: the browser tests' Playwright keeps an event loop
    running in the main thread for the rest of the session, where anyio.run refuses."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, call_all, server, calls).result(timeout=120)


def test_without_the_middleware_tool_errors_are_stored_as_unreported(
    exporting_to_the_desk: TracerProvider, client: Any, django_user_model: Any
) -> None:
    calls = [
        ("get_city", {"city": "busan"}),
        ("get_delivery", {"order_id": "A-1"}),
        ("get_profile", {"user": "kim"}),
        ("get_forecast", {"city": "busan"}),
        ("get_wether", {"city": "busan"}),  # no such tool
        ("get_city", {}),  # missing its required argument
    ]
    outcomes = run_calls(weather_server(), calls)
    assert outcomes == ["ok"] + ["isError"] * 5  # the agent sees text, no protocol error
    assert exporting_to_the_desk.force_flush(30_000)

    records = FailureRecord.objects.order_by("occurred_at")
    assert [record.tool for record in records] == [
        "get_delivery",
        "get_profile",
        "get_forecast",
        "get_wether",
        "get_city",
    ]
    for record in records:
        # The span cannot tell a 503 from a timeout or a refusal: nothing is made up.
        assert (record.stage, record.reason, record.lane, record.execution_state) == (
            "execute",
            "tool_error_unreported",
            "manual_investigation",
            "started_unknown",
        )
        assert record.evidence == {"error_type": "tool_error"}
        assert record.extra["otlp"]["convention"] == "mcp"
        assert record.extra["otlp"]["span_kind"] == "SPAN_KIND_SERVER"
        assert record.collection == SERVICE and record.source == "otlp"
        assert len(record.trace_id or "") == 32 and len(record.span_id or "") == 16
    assert list(RunnerEvent.objects.values_list("event_type", "tool")) == [
        ("step.completed", "get_city")
    ]
    # server/discover and tools/list are MCP spans too, but no tool calls.
    assert sum(IngestBatch.objects.values_list("skipped", flat=True)) >= 1

    group = FailureGroup.objects.get(reason="tool_error_unreported", tool="get_delivery")
    # A superuser: this transactional test may follow one that flushed the roles' rows.
    client.force_login(django_user_model.objects.create_superuser("lead", "", "x"))
    page = client.get(reverse("triage:group", args=[group.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="unreported-reason"' in text
    assert f'NextActionContract(reporter, collection="{group.collection}")' in text
    assert 'span.set_attribute("tool_call.failure.reason", "timeout")' in text


def test_a_low_level_servers_protocol_errors_carry_their_jsonrpc_code(
    exporting_to_the_desk: TracerProvider,
) -> None:
    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        return mcp_types.ListToolsResult(
            tools=[mcp_types.Tool(name="get_city", input_schema={**schema, "required": ["city"]})]
        )

    async def call_tool(ctx: Any, params: Any) -> mcp_types.CallToolResult:
        if params.name != "get_city":
            raise MCPError(mcp_types.METHOD_NOT_FOUND, f"Unknown tool: {params.name}")
        if not (params.arguments or {}).get("city"):
            raise MCPError(mcp_types.INVALID_PARAMS, "Missing required argument: city")
        if params.arguments["city"] == "?":
            raise MCPError(mcp_types.INVALID_PARAMS, "city must be a name")
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="ok")])

    server = Server("weather", on_list_tools=list_tools, on_call_tool=call_tool)
    calls = [("get_wether", {}), ("get_city", {}), ("get_city", {"city": "?"})]
    outcomes = run_calls(server, calls)
    assert outcomes == ["protocol error -32601", "protocol error -32602", "protocol error -32602"]
    assert exporting_to_the_desk.force_flush(30_000)

    landed = [
        (record.tool, record.stage, record.reason, record.execution_state, record.message)
        for record in FailureRecord.objects.order_by("occurred_at")
    ]
    assert landed == [
        ("get_wether", "synthesize", "unknown_target", "not_started", "Unknown tool: get_wether"),
        (
            "get_city",
            "bind_request",
            "missing_required_argument",
            "not_started",
            "Missing required argument: city",
        ),
        (
            "get_city",
            "bind_request",
            "argument_coercion_failed",
            "not_started",
            "city must be a name",
        ),
    ]
    codes = FailureRecord.objects.values_list("evidence__jsonrpc_code", flat=True)
    assert sorted(codes) == [-32602, -32602, -32601]


def test_a_tool_that_says_why_on_its_span_is_stored_with_its_reason(
    exporting_to_the_desk: TracerProvider,
) -> None:
    """What the group page of tool_error_unreported advises: the tool's own code names the
    reason and execution state on the SDK's span, which the desk reads before the rest."""
    from opentelemetry import trace

    server = MCPServer("billing")

    @server.tool()
    def send_invoice(order_id: str) -> str:
        span = trace.get_current_span()
        span.set_attribute("tool_call.failure.reason", "timeout")
        span.set_attribute("tool_call.execution_state", "started_unknown")
        raise TimeoutError("no answer after the request was sent")

    outcomes = run_calls(server, [("send_invoice", {"order_id": "A-1"})])
    assert outcomes == ["isError"]
    assert exporting_to_the_desk.force_flush(30_000)
    record = FailureRecord.objects.get()
    assert (record.tool, record.stage, record.reason, record.execution_state) == (
        "send_invoice",
        "execute",
        "timeout",
        "started_unknown",
    )
    assert "does not say why" not in record.message
