"""Spans recorded by the real OpenTelemetry SDK, as an instrumented agent would emit them."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.proto.trace.v1.trace_pb2 import Status as SpanStatus
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

SERVICE = "shop-agent"
BEARER = "Bearer sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
EMAIL = "kim.minji@example.com"


@dataclass
class ToolCall:
    """One tool call as a GenAI-instrumented agent records it."""

    tool: str
    method: str = "GET"
    status: int | None = None  # the HTTP answer, when there was one
    exception: BaseException | None = None
    ok: bool = False
    attributes: dict[str, Any] = field(default_factory=dict)


FAILING_CALLS = {
    "http_5xx": ToolCall("getDelivery", status=503),
    "auth_failed": ToolCall("getProfile", status=401),
    "http_4xx": ToolCall("getOrder", status=404),
    "timeout": ToolCall("sendInvoice", method="POST", exception=TimeoutError("read timed out")),
    "network_error": ToolCall(
        "listRefunds", exception=ConnectionRefusedError(111, "Connection refused")
    ),
}


def record(
    calls: list[ToolCall], *, chat: bool = True, service: str = SERVICE
) -> list[ReadableSpan]:
    """Run the calls under one agent span; a chat span beside them unless told otherwise."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.version": "2.3.1"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("shop.agent.tools", "0.9.0")
    with tracer.start_as_current_span("invoke_agent shop"):
        if chat:
            with tracer.start_as_current_span("chat gpt-4o") as span:
                span.set_attribute("gen_ai.operation.name", "chat")
                span.set_status(Status(StatusCode.ERROR, "the model refused"))
        for call in calls:
            with tracer.start_as_current_span(
                f"execute_tool {call.tool}", record_exception=False, set_status_on_exception=False
            ) as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", call.tool)
                span.set_attribute("gen_ai.tool.call.id", f"call-{call.tool}")
                span.set_attribute("http.request.method", call.method)
                for key, value in call.attributes.items():
                    span.set_attribute(key, value)
                if call.status is not None:
                    span.set_attribute("http.response.status_code", call.status)
                if call.ok:
                    span.set_status(Status(StatusCode.OK))
                    continue
                if call.exception is not None:
                    span.record_exception(call.exception)
                    span.set_attribute("error.type", type(call.exception).__qualname__)
                    span.set_status(Status(StatusCode.ERROR, str(call.exception)))
                else:
                    span.set_attribute("error.type", str(call.status))
                    span.set_status(Status(StatusCode.ERROR, f"HTTP {call.status}"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def export_request(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(spans)


def otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP's JSON mapping of a request: protobuf's JSON with ids in hex, not base64."""
    data = json_format.MessageToDict(request)
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return data


def otlp_json_bytes(request: ExportTraceServiceRequest) -> bytes:
    return json.dumps(otlp_json(request)).encode()


TRACE = bytes(range(1, 17))
SPAN = bytes(range(1, 9))


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    return AnyValue(string_value=value)


def request_of(
    *,
    name: str = "execute_tool getOrder",
    attributes: dict[str, Any] | None = None,
    error: bool = True,
    message: str = "",
    events: list[Span.Event] | None = None,
    resource: dict[str, str] | None = None,
    end: int = 1_700_000_000_000_000_000,
    trace_id: bytes = TRACE,
    span_id: bytes = SPAN,
) -> ExportTraceServiceRequest:
    """One span, built field by field (what no SDK would send, too)."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    for key, value in (resource or {"service.name": "shop-agent"}).items():
        resource_spans.resource.attributes.append(KeyValue(key=key, value=any_value(value)))
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = trace_id, span_id, name
    span.end_time_unix_nano = end
    for key, value in (attributes or {}).items():
        span.attributes.append(KeyValue(key=key, value=any_value(value)))
    span.events.extend(events or [])
    if error:
        span.status.code = SpanStatus.STATUS_CODE_ERROR
        span.status.message = message
    return request
