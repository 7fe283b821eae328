"""triage_desk_client.mcp with the official MCP SDK (`mcp` 2.3), no fakes of it: the
NextActionContract middleware on an `MCPServer` and a low-level `Server`, called by the
SDK's `Client` in process and over Streamable HTTP on 127.0.0.1, and ReportingClient around
that client. The reporter is the real one (its desk is away: items stay in its spool);
each test reads what it was handed. The live desk's side is in test_mcp_live_desk.py.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.shared._otel as mcp_otel
import mcp_types
import pytest
from mcp import Client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from triage_desk_client import Reporter
from triage_desk_client.mcp import (
    SDK_TOOL_LOGGER,
    NextActionContract,
    ReportingClient,
    envelope_of,
)

from tests.faults.processes import free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "client" / "examples" / "mcp_billing.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("mcp_billing", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mcp_billing"] = module
    spec.loader.exec_module(module)
    return module


billing = load_example()


def run_async(function: Callable[..., Any], *args: Any) -> Any:
    """anyio.run in a thread of its own: the browser tests' Playwright keeps an event loop
    running in the main thread for the rest of the session, where anyio.run refuses."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, function, *args).result(timeout=120)


# What the agent is told for each of the seven calls: (code, next_action, state, status,
# retry allowed); None for the success.
TOLD = [
    None,
    ("HTTP_5XX", "retry_with_backoff", "completed", "failed", True),
    ("AUTH_FAILED", "request_approval", "completed", "blocked", False),
    ("TIMEOUT", "retry_with_backoff", "started_unknown", "uncertain", True),
    ("TIMEOUT", "query_by_idempotency_key", "started_unknown", "uncertain", False),
    ("MISSING_REQUIRED_ARGUMENT", "refresh_inputs_and_replan", "not_started", "failed", False),
    ("UNKNOWN_TARGET", "stop_automation_and_investigate", "not_started", "failed", False),
]
# What reaches the desk for the six failures: (tool, stage, reason).
REPORTED = [
    ("get_delivery_status", "execute", "http_5xx"),
    ("get_customer", "execute", "auth_failed"),
    ("search_payments", "execute", "timeout"),
    ("send_invoice", "execute", "timeout"),
    ("send_invoice", "bind_request", "missing_required_argument"),
    ("refund_invoice", "synthesize", "unknown_target"),
]


class RecordingReporter(Reporter):
    """The real reporter (scrubbing, ids, spool), remembering what it was handed."""

    def __init__(self, spool: Path) -> None:
        super().__init__(f"http://127.0.0.1:{free_port()}", "no-desk", spool_dir=str(spool))
        self.bodies: list[dict[str, Any]] = []

    def envelope(self, body: Mapping[str, Any], id: str | None = None) -> str:
        item_id = super().envelope(body, id)
        self.bodies.append(dict(body))
        return item_id


@pytest.fixture
def reporter(tmp_path: Path) -> Iterator[RecordingReporter]:
    made = RecordingReporter(tmp_path / "spool")
    yield made
    made.close(timeout=0)


def contract_for(reporter: Reporter) -> NextActionContract:
    return NextActionContract(reporter, collection=billing.COLLECTION, tools=billing.TOOLS)


def summary(envelope: Any) -> Any:
    if envelope is None:
        return None
    return (
        envelope["code"],
        envelope["retry"]["next_action"],
        envelope["execution"]["state"],
        envelope["status"],
        envelope["retry"]["allowed"],
    )


async def call_seven_plainly(server: Any) -> list[Any]:
    """The SDK's Client alone: what an agent without the helper reads."""
    results = []
    async with Client(server) as client:
        for tool, arguments in billing.SEVEN_CALLS:
            results.append(await client.call_tool(tool, arguments))
    return results


def test_the_seven_calls_in_process_get_the_envelope_and_are_reported(
    reporter: RecordingReporter,
) -> None:
    server = billing.build_server(middleware=[contract_for(reporter)])
    results = run_async(call_seven_plainly, server)

    assert [summary(result.structured_content) for result in results[1:]] == TOLD[1:]
    assert results[0].is_error is False and results[0].structured_content != TOLD
    for result in results[1:]:
        assert result.is_error is True
        # The prose stays for people; the envelope is what the agent acts on.
        assert result.content and result.content[0].text
    write_timeout = results[4].structured_content
    assert write_timeout["execution"]["idempotency_key"] == "notify:invoice-819"
    assert write_timeout["evidence"]["lookup"] == "GET /invoices/deliveries/by-key/{key}"
    assert results[5].structured_content["evidence"]["fields"] == ["invoice_id"]

    assert [(b["tool"], b["stage"], b["reason"]) for b in reporter.bodies] == REPORTED
    for body, result in zip(reporter.bodies, results[1:], strict=True):
        assert body["collection"] == billing.COLLECTION
        assert body["status"] == result.structured_content["status"]
        assert body["retry"] == result.structured_content["retry"]
        assert "occurred_at" in body and "trace_id" not in body  # no span recorded
    # The operator's copy keeps what the exception said; the agent's does not.
    assert reporter.bodies[0]["message"].startswith("RuntimeError: HTTP 503")
    assert "HTTP 503" not in str(results[1].structured_content)
    assert reporter.stats()["queued"] == 6


def test_the_seven_calls_over_streamable_http(reporter: RecordingReporter) -> None:
    server = billing.build_server(middleware=[contract_for(reporter)])
    with billing.serving(server) as url:
        results = run_async(call_seven_plainly, url)
    assert [summary(result.structured_content) for result in results[1:]] == TOLD[1:]
    assert [(b["tool"], b["reason"]) for b in reporter.bodies] == [
        (tool, reason) for tool, _, reason in REPORTED
    ]


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The SDK's middleware spans, recorded (the process-wide provider can be set once)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(mcp_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    yield exporter
    provider.shutdown()


def test_the_span_of_each_failed_call_names_its_reason(
    reporter: RecordingReporter, spans: InMemorySpanExporter
) -> None:
    server = billing.build_server(middleware=[contract_for(reporter)])
    run_async(call_seven_plainly, server)

    calls = [span for span in spans.get_finished_spans() if span.name.startswith("tools/call ")]
    assert len(calls) == 7
    attributes = [dict(span.attributes or {}) for span in calls]
    failed = [span for span in calls if (span.attributes or {}).get("error.type") == "tool_error"]
    failed_attributes = [dict(span.attributes or {}) for span in failed]
    assert [
        (
            seen["gen_ai.tool.name"],
            seen["tool_call.failure.stage"],
            seen["tool_call.failure.reason"],
        )
        for seen in failed_attributes
    ] == REPORTED
    states = [seen["tool_call.execution_state"] for seen in failed_attributes]
    assert states == [told[2] for told in TOLD[1:] if told is not None]
    assert failed_attributes[3]["tool_call.side_effect"] == "external_write"
    assert failed_attributes[3]["tool_call.failure.message"] == "ReadTimeout: read timed out"
    assert "tool_call.failure.reason" not in attributes[0]
    # Each report names its call's span: the desk stores the span and the report once.
    contexts = [span.get_span_context() for span in failed]
    assert [(b["trace_id"], b["span_id"]) for b in reporter.bodies] == [
        (f"{context.trace_id:032x}", f"{context.span_id:016x}")
        for context in contexts
        if context is not None
    ]
    assert len(contexts) == 6


def test_the_message_on_the_span_is_scrubbed_before_it_leaves(
    reporter: RecordingReporter, spans: InMemorySpanExporter
) -> None:
    server = MCPServer("vault", middleware=[contract_for(reporter)])

    @server.tool()
    def open_vault(name: str) -> str:
        raise RuntimeError("login refused for admin password=Hunter2Secret")

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool("open_vault", {"name": "main"})

    assert run_async(call).is_error
    (span,) = [s for s in spans.get_finished_spans() if s.name == "tools/call open_vault"]
    message = str((span.attributes or {})["tool_call.failure.message"])
    assert "Hunter2Secret" not in message and "[REDACTED" in message


def low_level_server(contract: NextActionContract) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        return mcp_types.ListToolsResult(
            tools=[mcp_types.Tool(name="get_forecast", input_schema=schema)]
        )

    async def call_tool(ctx: Any, params: Any) -> mcp_types.CallToolResult:
        city = (params.arguments or {}).get("city")
        if params.name != "get_forecast":
            raise MCPError(mcp_types.METHOD_NOT_FOUND, f"Unknown tool: {params.name}")
        if not city:
            raise MCPError(mcp_types.INVALID_PARAMS, "Missing required argument: city")
        if city == "busan":
            raise httpx2.ReadTimeout("read timed out")
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="sun")])

    server: Server[Any] = Server("weather", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(contract)
    return server


def test_a_low_level_server_answers_exceptions_and_protocol_errors_with_the_envelope(
    reporter: RecordingReporter,
) -> None:
    contract = NextActionContract(
        reporter, collection="weather", tools={"get_forecast": {"side_effect": "read"}}
    )

    async def calls() -> list[Any]:
        outcomes: list[Any] = []
        async with Client(low_level_server(contract)) as client:
            for arguments in ({"city": "seoul"}, {"city": "busan"}):
                outcomes.append(await client.call_tool("get_forecast", arguments))
            for tool, arguments in (("get_forecast", {}), ("get_wether", {"city": "seoul"})):
                try:
                    await client.call_tool(tool, arguments)
                except MCPError as error:
                    outcomes.append(error)
        return outcomes

    ok, timeout, missing, unknown = run_async(calls)
    assert ok.is_error is False and envelope_of(ok) is None
    # The handler's exception became an isError result, as MCPServer answers one.
    assert summary(envelope_of(timeout)) == (
        "TIMEOUT", "retry_with_backoff", "started_unknown", "uncertain", True
    )  # fmt: skip
    assert timeout.is_error and timeout.content[0].text.startswith("TIMEOUT: ")
    # Protocol errors stay protocol errors, with the envelope in their data.
    assert isinstance(missing, MCPError) and missing.code == mcp_types.INVALID_PARAMS
    assert summary(envelope_of(missing))[0] == "MISSING_REQUIRED_ARGUMENT"
    assert isinstance(unknown, MCPError) and unknown.code == mcp_types.METHOD_NOT_FOUND
    assert summary(envelope_of(unknown))[0] == "UNKNOWN_TARGET"
    assert [(b["tool"], b["reason"]) for b in reporter.bodies] == [
        ("get_forecast", "timeout"),
        ("get_forecast", "missing_required_argument"),
        ("get_wether", "unknown_target"),
    ]
    assert reporter.bodies[1]["evidence"]["jsonrpc_code"] == mcp_types.INVALID_PARAMS


def test_a_protocol_error_keeps_its_code_and_carries_the_envelope_in_its_data(
    reporter: RecordingReporter,
) -> None:
    contract = NextActionContract(reporter, collection="weather")

    async def call() -> MCPError:
        async with Client(low_level_server(contract)) as client:
            try:
                await client.call_tool("get_forecast", {})
            except MCPError as error:
                return error
        raise AssertionError("the call did not fail")

    error = run_async(call)
    assert error.code == mcp_types.INVALID_PARAMS
    assert error.message == "Missing required argument: city"
    assert summary(error.data["envelope"]) == (
        "MISSING_REQUIRED_ARGUMENT", "refresh_inputs_and_replan", "not_started", "failed", False
    )  # fmt: skip


def test_a_tools_own_envelope_is_kept_and_reported_as_it_is(
    reporter: RecordingReporter,
) -> None:
    own = {
        "status": "uncertain",
        "code": "REMOTE_TIMEOUT_AFTER_ACCEPT",
        "retry": {"allowed": False, "reason": "write may have been accepted",
                  "next_action": "query_by_idempotency_key"},
        "execution": {"state": "started_unknown", "idempotency_key": "notify:invoice-819"},
        "evidence": {"request_id": "req_7df1"},
        "user_safe_message": "발송 결과를 확인 중입니다. 재전송하지 않았습니다.",
    }  # fmt: skip
    server = MCPServer("billing", middleware=[contract_for(reporter)])

    @server.tool()
    def send_invoice(invoice_id: str) -> mcp_types.CallToolResult:
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text="checking")],
            structured_content=own,
            is_error=True,
        )

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool("send_invoice", {"invoice_id": "INV-819"})

    result = run_async(call)
    assert result.structured_content == own
    assert len(reporter.bodies) == 1
    assert reporter.bodies[0]["code"] == "REMOTE_TIMEOUT_AFTER_ACCEPT"
    assert reporter.bodies[0]["tool"] == "send_invoice" and "reason" not in reporter.bodies[0]


class BrokenReporter(Reporter):
    def envelope(self, body: Mapping[str, Any], id: str | None = None) -> str:
        raise OSError(28, "No space left on device")


def test_a_reporter_that_cannot_write_never_fails_the_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = BrokenReporter(f"http://127.0.0.1:{free_port()}", "k", spool_dir=str(tmp_path))
    try:
        server = billing.build_server(middleware=[contract_for(broken)])
        with caplog.at_level(logging.ERROR, logger="triage_desk_client"):
            results = run_async(call_seven_plainly, server)
    finally:
        broken.close(timeout=0)
    assert [summary(result.structured_content) for result in results[1:]] == TOLD[1:]
    assert sum("could not be reported" in r.getMessage() for r in caplog.records) == 6


def test_without_the_sdks_log_the_result_text_is_read_and_nothing_is_made_up(
    reporter: RecordingReporter,
) -> None:
    server = MCPServer("billing", middleware=[contract_for(reporter)])

    @server.tool()
    def get_delivery_status(invoice_id: str) -> str:
        raise ToolError("HTTP 503 from the mail gateway")  # text the agent sees

    @server.tool()
    def get_invoice(invoice_id: str) -> str:
        raise KeyError("total")  # a crash: the SDK keeps its text from the agent

    sdk_logger = logging.getLogger(SDK_TOOL_LOGGER)
    sdk_logger.disabled = True
    try:

        async def calls() -> list[Any]:
            async with Client(server) as client:
                return [
                    await client.call_tool(tool, {"invoice_id": "INV-1"})
                    for tool in ("get_delivery_status", "get_invoice")
                ]

        delivery, invoice = run_async(calls)
    finally:
        sdk_logger.disabled = False
    assert summary(envelope_of(delivery))[0] == "HTTP_5XX"
    assert summary(envelope_of(invoice))[0] == "TOOL_ERROR_UNREPORTED"
    assert [b["reason"] for b in reporter.bodies] == ["http_5xx", "tool_error_unreported"]


# --- ReportingClient --------------------------------------------------------------------------


async def call_seven_through_the_helper(server: Any, reporter: Reporter) -> list[Any]:
    async with ReportingClient(
        Client(server), reporter, collection=billing.COLLECTION, tools=billing.TOOLS
    ) as agent:
        return await billing.call_seven(agent)


def test_the_helper_reports_what_a_server_without_the_middleware_did_not(
    reporter: RecordingReporter,
) -> None:
    told = run_async(call_seven_through_the_helper, billing.build_server(), reporter)
    # The server's text is all the caller has. MCPServer keeps a crash's text to itself
    # ("Error executing tool get_delivery_status"), so the four tools that raised are
    # honestly unreported; the argument and target refusals say what they are.
    unreported = (
        "TOOL_ERROR_UNREPORTED", "stop_automation_and_investigate", "started_unknown",
        "uncertain", False,
    )  # fmt: skip
    assert [summary(entry["envelope"]) for entry in told] == [
        None, unreported, unreported, unreported, unreported, TOLD[5], TOLD[6]
    ]  # fmt: skip
    assert len(reporter.bodies) == 6
    assert all("trace_id" not in body for body in reporter.bodies)


def test_the_helper_does_not_report_again_what_the_middleware_reported(
    reporter: RecordingReporter,
) -> None:
    server = billing.build_server(middleware=[contract_for(reporter)])
    told = run_async(call_seven_through_the_helper, server, reporter)
    assert [summary(entry["envelope"]) for entry in told] == TOLD
    assert len(reporter.bodies) == 6


def slow_server() -> MCPServer:
    server = MCPServer("billing")

    @server.tool()
    async def send_invoice(invoice_id: str) -> str:
        await anyio.sleep(5)
        return "sent"

    @server.tool()
    async def get_invoice(invoice_id: str) -> str:
        await anyio.sleep(5)
        return "open"

    return server


def test_a_timeout_waiting_for_the_server_is_started_unknown(
    reporter: RecordingReporter,
) -> None:
    async def calls() -> list[MCPError]:
        errors = []
        async with ReportingClient(
            Client(slow_server(), read_timeout_seconds=0.2),
            reporter,
            collection=billing.COLLECTION,
            tools=billing.TOOLS | {"get_invoice": {"side_effect": "read"}},
        ) as agent:
            for tool in ("get_invoice", "send_invoice"):
                with pytest.raises(MCPError) as raised:
                    await agent.call_tool(tool, {"invoice_id": "INV-819"})
                errors.append(raised.value)
        return errors

    read, write = run_async(calls)
    assert read.code == write.code == mcp_types.REQUEST_TIMEOUT
    assert summary(envelope_of(read)) == (
        "TIMEOUT", "retry_with_backoff", "started_unknown", "uncertain", True
    )  # fmt: skip
    assert summary(envelope_of(write)) == (
        "TIMEOUT", "query_by_idempotency_key", "started_unknown", "uncertain", False
    )  # fmt: skip
    assert [(b["tool"], b["reason"]) for b in reporter.bodies] == [
        ("get_invoice", "timeout"),
        ("send_invoice", "timeout"),
    ]


def test_a_server_gone_under_a_call_is_reported_as_never_sent(
    reporter: RecordingReporter,
) -> None:
    """The SDK's Streamable HTTP client cancels the call when its POST cannot connect and
    raises httpx2's ConnectError when the client exits; the helper reports the call then."""
    stopping = _Stopper(server_context=billing.serving(billing.build_server()))
    url = stopping.start()

    async def calls_until_the_server_is_gone() -> None:
        async with ReportingClient(
            Client(url, read_timeout_seconds=10),
            reporter,
            collection=billing.COLLECTION,
            tools=billing.TOOLS,
        ) as agent:
            assert not (await agent.call_tool("get_invoice", {"invoice_id": "A"})).is_error
            stopping.close()
            await agent.call_tool("send_invoice", {"invoice_id": "A", "idempotency_key": "k"})

    with pytest.raises(BaseException) as raised:
        run_async(calls_until_the_server_is_gone)
    assert "ConnectError" in repr(raised.value) or "ConnectError" in str(raised.value.__cause__)
    assert [(b["tool"], b["reason"]) for b in reporter.bodies] == [
        ("send_invoice", "network_error")
    ]
    body = reporter.bodies[0]
    assert body["execution"]["state"] == "not_started"
    # Never sent: even a write may simply be sent again.
    assert body["retry"] == {
        "allowed": True,
        "reason": body["retry"]["reason"],
        "next_action": "retry_with_backoff",
    }
    assert body["execution"]["idempotency_key"] == "k"


class _Stopper:
    def __init__(self, server_context: Any) -> None:
        self._context = server_context

    def start(self) -> str:
        return str(self._context.__enter__())

    def close(self) -> None:
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None


def test_params_the_sdk_refuses_are_reported_and_the_refusal_stands(
    reporter: RecordingReporter,
) -> None:
    from types import SimpleNamespace

    from pydantic import ValidationError

    contract = contract_for(reporter)

    async def refuse(ctx: Any) -> Any:
        # What the SDK's runner raises for tools/call params that are not its shape.
        return mcp_types.CallToolRequestParams.model_validate(ctx.params)

    ctx = SimpleNamespace(method="tools/call", params={"name": "send_invoice", "arguments": 5})
    with pytest.raises(ValidationError):
        run_async(contract, ctx, refuse)
    assert [(b["tool"], b["reason"], b["evidence"]) for b in reporter.bodies] == [
        ("send_invoice", "argument_coercion_failed", {"jsonrpc_code": -32602})
    ]
