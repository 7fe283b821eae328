"""What a span means to the desk (triage.intake.otlp_spans), without HTTP or a database."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.triage.intake.otlp_helpers import FAILING_CALLS, export_request, record
from triage.intake.otlp_spans import MAX_SPAN_VALUES, map_export

TRACE = bytes(range(1, 17))
SPAN = bytes(range(1, 9))


def _value(value: Any) -> AnyValue:
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
) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    for key, value in (resource or {"service.name": "shop-agent"}).items():
        resource_spans.resource.attributes.append(KeyValue(key=key, value=_value(value)))
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = TRACE, SPAN, name
    span.end_time_unix_nano = end
    for key, value in (attributes or {}).items():
        span.attributes.append(KeyValue(key=key, value=_value(value)))
    span.events.extend(events or [])
    if error:
        span.status.code = Status.STATUS_CODE_ERROR
        span.status.message = message
    return request


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
            KeyValue(key="exception.type", value=_value("urllib3.exceptions.ReadTimeoutError")),
            KeyValue(key="exception.message", value=_value("read timed out (30 s)")),
            KeyValue(key="exception.stacktrace", value=_value("Traceback: secret frames")),
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
