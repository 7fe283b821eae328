"""What a span means to the desk (triage.intake.otlp_spans), without HTTP or a database."""

from __future__ import annotations

from typing import Any

import pytest
from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.semconv_ai import SpanAttributes as LLMetry
from opentelemetry.semconv_ai import TraceloopSpanKindValues

from tests.triage.intake.otlp_helpers import (
    FAILING_CALLS,
    SPAN,
    TRACE,
    any_value,
    export_request,
    record,
    request_of,
)
from triage.intake.otlp_spans import CONVENTIONS, MAX_SPAN_VALUES, map_export
from triage.vocabulary import taxonomy


def only_body(request: ExportTraceServiceRequest) -> dict[str, Any]:
    mapped = map_export(request)
    assert not mapped.refused, mapped.refused
    (item,) = mapped.items
    assert item["id"] == f"{TRACE.hex()}:{SPAN.hex()}"
    return dict(item["body"])


def test_a_span_named_execute_tool_is_a_tool_call_even_without_the_operation() -> None:
    body = only_body(request_of(attributes={"http.response.status_code": 502}))
    assert (body["stage"], body["reason"], body["tool"]) == ("execute", "http_5xx", "getOrder")
    assert (body["plan_id"], body["step_id"]) == (TRACE.hex(), SPAN.hex())
    assert body["occurred_at"] == "2023-11-14T22:13:20+00:00"
    assert body["source"] == "otlp" and body["collection"] == "shop-agent"


def test_the_operation_attribute_decides_over_the_name() -> None:
    mapped = map_export(request_of(attributes={"gen_ai.operation.name": "chat"}))
    assert (mapped.items, mapped.skipped, mapped.spans) == ([], 1, 1)


def test_error_type_alone_classifies_a_dotted_exception_name() -> None:
    body = only_body(request_of(attributes={"error.type": "httpx.ConnectError"}))
    assert (body["reason"], body["execution_state"]) == ("network_error", "not_started")
    assert body["evidence"]["request_sent"] is False


def test_the_exception_event_gives_type_and_message_but_never_the_stack() -> None:
    event = Span.Event(name="exception")
    event.attributes.extend(
        [
            KeyValue(key="exception.type", value=any_value("urllib3.exceptions.ReadTimeoutError")),
            KeyValue(key="exception.message", value=any_value("read timed out (30 s)")),
            KeyValue(key="exception.stacktrace", value=any_value("Traceback: secret frames")),
        ]
    )
    body = only_body(request_of(events=[event], attributes={"http.request.method": "post"}))
    assert (body["reason"], body["message"]) == ("timeout", "read timed out (30 s)")
    assert body["side_effect"] == "external_write"
    assert body["evidence"]["http_method"] == "POST"
    assert "Traceback" not in repr(body)


def test_the_status_message_wins_over_the_exception_message() -> None:
    body = only_body(request_of(message="HTTP 404", attributes={"error.type": "404"}))
    assert (body["reason"], body["message"]) == ("http_4xx", "HTTP 404")
    assert body["evidence"]["http_status"] == 404


def test_a_read_is_judged_from_the_method() -> None:
    body = only_body(request_of(attributes={"http.request.method": "GET", "error.type": "503"}))
    assert body["side_effect"] == "read"


def test_a_span_that_names_its_reason_and_message_is_not_called_unreported() -> None:
    named = {
        "error.type": "tool_error",
        "tool_call.failure.reason": "timeout",
        "tool_call.failure.message": "ReadTimeout: read timed out",
    }
    body = only_body(request_of(message="", attributes=named))
    assert (body["reason"], body["message"]) == ("timeout", "ReadTimeout: read timed out")
    body = only_body(request_of(message="", attributes={"error.type": "tool_error"}))
    assert body["reason"] == "tool_error_unreported" and "does not say why" in body["message"]
    # A status message still comes first.
    body = only_body(request_of(message="HTTP 504 upstream", attributes=named))
    assert body["message"] == "HTTP 504 upstream"


def test_odd_values_are_kept_in_a_storable_shape() -> None:
    body = only_body(
        request_of(attributes={"ratio": float("nan"), "blob": b"\x00\x01\x02", "on": True})
    )
    attributes = body["otlp"]["attributes"]
    assert attributes == {"ratio": "nan", "blob": {"bytes": 3}, "on": True}


def test_the_resource_names_the_collection_unless_the_span_does() -> None:
    resource = {"service.name": "billing", "service.version": "1.2"}
    body = only_body(request_of(resource=resource))
    assert (body["collection"], body["otlp"]["service_version"]) == ("billing", "1.2")
    body = only_body(request_of(resource=resource, attributes={"tool_call.collection": "pay"}))
    assert body["collection"] == "pay"


def test_a_successful_tool_call_is_a_completed_step() -> None:
    mapped = map_export(request_of(error=False))
    (item,) = mapped.items
    assert item["type"] == "runner_event" and item["body"]["type"] == "step.completed"


def test_the_largest_end_time_is_still_a_date() -> None:
    assert only_body(request_of(end=2**64 - 1))["occurred_at"].startswith("2554-")


def test_too_many_values_in_one_span_are_refused() -> None:
    wide = AnyValue()
    wide.array_value.values.extend(AnyValue(int_value=n) for n in range(MAX_SPAN_VALUES))
    request = request_of()
    request.resource_spans[0].scope_spans[0].spans[0].attributes.append(
        KeyValue(key="wide", value=wide)
    )
    mapped = map_export(request)
    assert [r.error.code for r in mapped.refused] == ["too_many_values"]


def test_sdk_spans_keep_their_order_as_indexes() -> None:
    mapped = map_export(export_request(record([FAILING_CALLS["http_5xx"]])))
    assert mapped.spans == 3 and mapped.skipped == 2
    assert len(mapped.item_indexes) == 1 and 0 <= mapped.item_indexes[0] < 3


# --- the conventions: one table (otlp_spans.CONVENTIONS), one way to read a failure -------


def exception_event(kind: str, message: str) -> Span.Event:
    event = Span.Event(name="exception")
    event.attributes.extend(
        [
            KeyValue(key="exception.type", value=any_value(kind)),
            KeyValue(key="exception.message", value=any_value(message)),
        ]
    )
    return event


OPENINFERENCE_TOOL = {
    SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.TOOL.value,
    SpanAttributes.TOOL_NAME: "get_weather",
}
OPENLLMETRY_TOOL = {
    LLMetry.TRACELOOP_SPAN_KIND: TraceloopSpanKindValues.TOOL.value,
    LLMetry.TRACELOOP_ENTITY_NAME: "get_weather",
}
MCP_CALL = {
    "mcp.method.name": "tools/call",
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "get_weather",
    "jsonrpc.request.id": "7",
}


def mcp_request(attributes: dict[str, Any], **kwargs: Any) -> ExportTraceServiceRequest:
    request = request_of(name="tools/call get_weather", attributes=attributes, **kwargs)
    request.resource_spans[0].scope_spans[0].spans[0].kind = Span.SpanKind.SPAN_KIND_SERVER
    return request


@pytest.mark.parametrize(
    ("name", "attributes", "convention"),
    [
        ("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool"}, "gen_ai"),
        ("tools/call get_weather", MCP_CALL, "mcp"),
        ("get_weather", OPENINFERENCE_TOOL, "openinference"),
        ("get_weather.tool", OPENLLMETRY_TOOL, "openllmetry"),
    ],
)
def test_each_convention_reads_its_tool_and_its_exception_event(
    name: str, attributes: dict[str, Any], convention: str
) -> None:
    event = exception_event("requests.exceptions.ReadTimeout", "read timed out (10 s)")
    body = only_body(request_of(name=name, attributes=attributes, events=[event]))
    assert body["otlp"]["convention"] == convention
    assert body["tool"] == "get_weather"
    assert (body["stage"], body["reason"], body["execution_state"]) == (
        "execute",
        "timeout",
        "started_unknown",
    )
    assert body["message"] == "read timed out (10 s)"
    assert (body["trace_id"], body["span_id"]) == (TRACE.hex(), SPAN.hex())
    # The attributes that made it a tool call are read, not repeated.
    assert not set(attributes) & set(body["otlp"]["attributes"]) - {"jsonrpc.request.id"}


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        ("tools/call get_weather", {k: v for k, v in MCP_CALL.items() if k != "gen_ai.tool.name"}),
        ("get_weather", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "TOOL"}),
        ("get_weather.tool", {LLMetry.TRACELOOP_SPAN_KIND: "tool"}),
    ],
)
def test_without_a_tool_attribute_the_span_name_names_the_tool(
    name: str, attributes: dict[str, Any]
) -> None:
    assert only_body(request_of(name=name, attributes=attributes))["tool"] == "get_weather"


@pytest.mark.parametrize(
    "attributes",
    [
        {SpanAttributes.OPENINFERENCE_SPAN_KIND: kind.value}
        for kind in OpenInferenceSpanKindValues
        if kind is not OpenInferenceSpanKindValues.TOOL
    ]
    + [
        {LLMetry.TRACELOOP_SPAN_KIND: kind.value}
        for kind in TraceloopSpanKindValues
        if kind is not TraceloopSpanKindValues.TOOL
    ]
    + [{"mcp.method.name": method} for method in ("tools/list", "initialize", "prompts/get")],
)
def test_llm_chain_agent_retriever_and_other_spans_are_skipped_and_counted(
    attributes: dict[str, Any],
) -> None:
    mapped = map_export(request_of(name="execute_tool looks_like_one", attributes=attributes))
    assert (mapped.items, mapped.refused, mapped.skipped) == ([], [], 1)


def test_a_successful_tool_span_of_any_convention_counts_as_a_completed_step() -> None:
    for attributes in (OPENINFERENCE_TOOL, OPENLLMETRY_TOOL, MCP_CALL):
        (item,) = map_export(request_of(name="x", attributes=attributes, error=False)).items
        assert item["type"] == "runner_event" and item["body"]["type"] == "step.completed"
        assert item["body"]["tool"] == "get_weather"
        assert "trace_id" not in item["body"]  # only failures are matched to reports


def test_an_mcp_client_span_is_the_callers_view_and_is_skipped() -> None:
    request = request_of(name="MCP send tools/call get_weather", attributes=MCP_CALL)
    request.resource_spans[0].scope_spans[0].spans[0].kind = Span.SpanKind.SPAN_KIND_CLIENT
    assert map_export(request).skipped == 1


def test_mcp_tool_error_alone_is_unreported_not_guessed() -> None:
    body = only_body(mcp_request({**MCP_CALL, "error.type": "tool_error"}))
    assert (body["stage"], body["reason"]) == ("execute", "tool_error_unreported")
    assert "execution_state" not in body  # the taxonomy's default: started_unknown
    assert body["evidence"] == {"error_type": "tool_error"}
    assert "exception_type" not in body["evidence"]
    assert "tool_call.failure.reason" in body["message"]
    assert taxonomy.REASONS["tool_error_unreported"].default_execution_state == "started_unknown"


def test_tool_error_with_an_exception_event_is_classified_by_the_exception() -> None:
    event = exception_event("httpx.ConnectError", "connection refused")
    body = only_body(mcp_request({**MCP_CALL, "error.type": "tool_error"}, events=[event]))
    assert (body["reason"], body["execution_state"]) == ("network_error", "not_started")


def test_tool_error_with_an_http_status_is_classified_by_the_status() -> None:
    attributes = {**MCP_CALL, "error.type": "tool_error", "http.response.status_code": 403}
    assert only_body(mcp_request(attributes))["reason"] == "auth_failed"


def test_the_middlewares_attributes_win_over_tool_error() -> None:
    attributes = {
        **MCP_CALL,
        "error.type": "tool_error",
        "tool_call.failure.reason": "timeout",
        "tool_call.execution_state": "started_unknown",
    }
    body = only_body(mcp_request(attributes))
    assert (body["stage"], body["reason"], body["execution_state"]) == (
        "execute",
        "timeout",
        "started_unknown",
    )


@pytest.mark.parametrize(
    ("code", "message", "reason", "stage"),
    [
        ("-32601", "Method not found", "unknown_target", "synthesize"),
        ("-32602", "Unknown tool: get_wether", "unknown_target", "synthesize"),
        (
            "-32602",
            "Missing required argument: city",
            "missing_required_argument",
            "bind_request",
        ),
        ("-32602", "'city' is a required property", "missing_required_argument", "bind_request"),
        ("-32602", "Invalid request parameters", "argument_coercion_failed", "bind_request"),
        ("-32603", "Internal error", "uncaught_server_error", "service"),
    ],
)
def test_jsonrpc_codes_give_the_target_and_argument_reasons(
    code: str, message: str, reason: str, stage: str
) -> None:
    attributes = {**MCP_CALL, "error.type": code, "rpc.response.status_code": code}
    body = only_body(mcp_request(attributes, message=message))
    assert (body["stage"], body["reason"]) == (stage, reason)
    assert body["evidence"]["jsonrpc_code"] == int(code)
    assert "exception_type" not in body["evidence"]  # a code is no exception class
    assert body["message"] == message


def test_the_mcp_sdks_request_timeout_code_reads_as_a_timeout() -> None:
    body = only_body(mcp_request({**MCP_CALL, "error.type": "-32001"}, message="timed out"))
    assert (body["reason"], body["execution_state"]) == ("timeout", "started_unknown")


def test_an_older_rpc_error_code_attribute_is_read_too() -> None:
    body = only_body(request_of(attributes={"rpc.jsonrpc.error_code": -32601}))
    assert body["reason"] == "unknown_target"


def test_a_calls_raw_arguments_and_results_are_named_but_never_kept() -> None:
    attributes = {
        **OPENINFERENCE_TOOL,
        SpanAttributes.INPUT_VALUE: '{"card": "4111 1111 1111 1111"}',
        SpanAttributes.OUTPUT_VALUE: "the weather",
        "gen_ai.tool.call.arguments": '{"city": "Seoul"}',
        LLMetry.TRACELOOP_ENTITY_INPUT: '{"city": "Seoul"}',
        "tool.description": "the weather in a city",
    }
    body = only_body(request_of(name="get_weather", attributes=attributes))
    assert body["otlp"]["omitted_attributes"] == sorted(
        [
            SpanAttributes.INPUT_VALUE,
            SpanAttributes.OUTPUT_VALUE,
            "gen_ai.tool.call.arguments",
            LLMetry.TRACELOOP_ENTITY_INPUT,
        ]
    )
    assert "4111" not in repr(body) and "Seoul" not in repr(body)
    assert body["otlp"]["attributes"] == {"tool.description": "the weather in a city"}


def test_the_conventions_are_one_table() -> None:
    assert [convention.name for convention in CONVENTIONS] == [
        "mcp",
        "gen_ai",
        "openinference",
        "openllmetry",
    ]
    # Spelled as the conventions' own packages spell them.
    by_name = {convention.name: convention for convention in CONVENTIONS}
    assert by_name["openinference"].kind_attribute == SpanAttributes.OPENINFERENCE_SPAN_KIND
    assert by_name["openinference"].tool_attributes == (SpanAttributes.TOOL_NAME,)
    assert by_name["openllmetry"].kind_attribute == LLMetry.TRACELOOP_SPAN_KIND
    assert by_name["openllmetry"].tool_attributes == (LLMetry.TRACELOOP_ENTITY_NAME,)


def test_the_unreported_reason_says_what_is_known_and_how_to_learn_more() -> None:
    info = taxonomy.REASONS["tool_error_unreported"]
    assert (info.stage, info.lane, info.api_called, info.origin) == (
        "execute",
        "manual_investigation",
        "maybe",
        "adapter",
    )
    assert info.default_execution_state == "started_unknown" and not info.retryable
    assert "tool_call.failure.reason" in info.triage_advice
    assert "NextActionContract" in info.triage_advice and "NextActionContract" in info.usual_action
