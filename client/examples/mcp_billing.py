"""An agent runtime beside the desk: an MCP server (the official SDK's ``MCPServer``) with
triage-desk-client's ``NextActionContract`` middleware, called over Streamable HTTP by an
MCP client wrapped in ``ReportingClient``. It reaches the desk only as any runtime does:
its failures through the ``Reporter`` (``POST /api/v1/ingest``) and, when the
OpenTelemetry SDK is installed, its spans through the OTLP/HTTP exporter (``/v1/traces``).

    python client/examples/mcp_billing.py --desk http://127.0.0.1:8000 --key "$INGEST_KEY"

makes seven calls (a success, a 503, a 403, a read timeout, a write timing out after it
sent, a missing argument, an unknown tool) and prints what each agent call was told.
``manage.py demo`` runs it; the tests and ``bench/mcp_middleware.py`` import its server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from triage_desk_client import Reporter
from triage_desk_client.mcp import NextActionContract, ReportingClient, envelope_of

COLLECTION = "billing-mcp"
BILLING_API = "https://billing.example/api"
# Seed 004's declarations, one per tool that has something to declare.
TOOLS: dict[str, dict[str, Any]] = {
    "get_invoice": {"side_effect": "read"},
    "get_delivery_status": {"side_effect": "read"},
    "get_customer": {"side_effect": "read"},
    "search_payments": {"side_effect": "read"},
    "send_invoice": {
        "side_effect": "external_write",
        "idempotency": {
            "required": True,
            "key_argument": "idempotency_key",
            "lookup": "GET /invoices/deliveries/by-key/{key}",
        },
        "timeout_policy": {"on_before_send": "retry_safe", "on_after_send": "reconcile_first"},
        "authority": {"approval_required": False},
    },
}
# Seven calls, one per way a call ends (a success and six failures): (tool, arguments).
SEVEN_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_invoice", {"invoice_id": "INV-819"}),
    ("get_delivery_status", {"invoice_id": "INV-819"}),
    ("get_customer", {"customer_id": "C-17"}),
    ("search_payments", {"query": "INV-819"}),
    ("send_invoice", {"invoice_id": "INV-819", "idempotency_key": "notify:invoice-819"}),
    ("send_invoice", {"idempotency_key": "notify:invoice-820"}),
    ("refund_invoice", {"invoice_id": "INV-819"}),
]


def build_server(*, middleware: list[Any] | None = None) -> MCPServer:
    """The billing tools. Their downstream calls fail the way real ones do: the HTTP
    client's own exceptions, as the tool would let them rise."""
    server = MCPServer("billing", middleware=middleware or [])

    @server.tool()
    def get_invoice(invoice_id: str) -> str:
        """Read one invoice."""
        return f"{invoice_id}: 120.00 EUR, open"

    @server.tool()
    def get_delivery_status(invoice_id: str) -> str:
        """Where the invoice's mail is."""
        raise RuntimeError("HTTP 503: Service Unavailable from the mail gateway")

    @server.tool()
    def get_customer(customer_id: str) -> str:
        """Read the customer the invoice is for."""
        request = httpx2.Request("GET", f"{BILLING_API}/customers/{customer_id}")
        response = httpx2.Response(403, request=request)
        raise httpx2.HTTPStatusError("HTTP 403 Forbidden", request=request, response=response)

    @server.tool()
    def search_payments(query: str) -> str:
        """Search the payments ledger."""
        request = httpx2.Request("GET", f"{BILLING_API}/payments")
        raise httpx2.ReadTimeout("read timed out", request=request)

    @server.tool()
    def send_invoice(invoice_id: str, idempotency_key: str) -> str:
        """Send the invoice to the customer (an external write)."""
        # The request went out; its answer did not come back in time.
        request = httpx2.Request("POST", f"{BILLING_API}/invoices/{invoice_id}/send")
        raise httpx2.ReadTimeout("read timed out", request=request)

    return server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(server: MCPServer, port: int | None = None) -> Iterator[str]:
    """Serve over Streamable HTTP on loopback in a thread; yields the endpoint's URL."""
    port = port or free_port()
    config = uvicorn.Config(
        server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning"
    )
    web = uvicorn.Server(config)
    thread = threading.Thread(target=web.run, name="mcp-billing", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not web.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the MCP server did not start on 127.0.0.1:{port}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        web.should_exit = True
        thread.join(10)


async def call_seven(client: ReportingClient) -> list[dict[str, Any]]:
    """The seven calls; for each, what the agent was told."""
    told = []
    for tool, arguments in SEVEN_CALLS:
        try:
            result = await client.call_tool(tool, arguments)
        except MCPError as error:
            told.append({"tool": tool, "error": error.code, "envelope": envelope_of(error)})
        else:
            told.append(
                {"tool": tool, "is_error": result.is_error, "envelope": envelope_of(result)}
            )
    return told


def export_spans_to(desk: str, key: str) -> Any:
    """The SDK's spans to the desk's OTLP door, when the OpenTelemetry SDK is installed."""
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": COLLECTION}))
    exporter = OTLPSpanExporter(
        endpoint=f"{desk.rstrip('/')}/v1/traces", headers={"Authorization": f"Bearer {key}"}
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--desk", required=True, help="the desk's base URL (ingest door)")
    parser.add_argument("--key", required=True, help="an API key with the ingest scope")
    parser.add_argument("--spool", help="the reporter's spool directory (default: a temp dir)")
    parser.add_argument("--no-spans", action="store_true", help="do not export OTLP spans")
    options = parser.parse_args(argv)
    provider = None if options.no_spans else export_spans_to(options.desk, options.key)
    spool = options.spool or tempfile.mkdtemp(prefix="mcp-billing-spool-")
    reporter = Reporter(options.desk, options.key, spool_dir=spool)
    contract = NextActionContract(
        reporter, collection=COLLECTION, tools=TOOLS, desk_url=options.desk, api_key=options.key
    )

    async def run(url: str) -> list[dict[str, Any]]:
        async with ReportingClient(
            Client(url, read_timeout_seconds=10), reporter, collection=COLLECTION, tools=TOOLS
        ) as agent:
            return await call_seven(agent)

    with serving(build_server(middleware=[contract])) as url:
        told = asyncio.run(run(url))
    if provider is not None:
        provider.force_flush(30_000)
    delivered = reporter.flush(timeout=30)
    reporter.close()
    contract.close()
    for entry in told:
        print(json.dumps(entry, ensure_ascii=False))
    return 0 if delivered else 1


if __name__ == "__main__":
    sys.exit(main())
