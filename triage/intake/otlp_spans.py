"""What an OpenTelemetry span means to the desk: the one mapping from OTLP spans to items.

The OTLP door (`triage.intake.otlp`) decodes a request into an `ExportTraceServiceRequest`;
`map_export` turns each span into one of three things:

* a native item for `batch_ingest`: a tool-call span (`gen_ai.operation.name =
  execute_tool`, or a span named `execute_tool <name>`) with status ERROR becomes a
  `failure` (source `otlp`); one that did not fail becomes a `runner_event` of type
  `step.completed`, which counts toward success rates as a runner's event does;
* a skip: any other span (chat, retrieval, HTTP server...) is counted, never stored;
* a refusal: a span the desk will not read (ids of the wrong length, more than
  `MAX_SPAN_ATTRIBUTES` attributes, an `AnyValue` nested deeper than `MAX_VALUE_DEPTH`
  or holding more than `MAX_SPAN_VALUES` values) is recorded in the ledger with its code.

A failure is classified as a graph-tool-call runner's `step.failed` would be
(`triage.intake.runner_events`): the HTTP status from `http.response.status_code`
(401/403 `auth_failed`, other 4xx `http_4xx`, 5xx `http_5xx`), the exception type from the
`exception` event's `exception.type` or from `error.type` (timeouts `timeout`, connection
and DNS errors `network_error`, with the execution state they imply), the message from the
status message or the exception event. Attributes `tool_call.failure.stage`,
`tool_call.failure.reason` and `tool_call.execution_state` win over the derivation.
`http.request.method` tells reads (GET, HEAD, OPTIONS) from writes (`external_write`) when
no tool policy says otherwise. The collection is `tool_call.collection`, else the resource's
`service.name`; `service.version` and the instrumentation scope are kept in `extra.otlp`.

Identity: the item id is `<trace id hex>:<span id hex>`, so an exporter's retry of the same
spans is a duplicate and a span re-sent with another body is a conflict. Every attribute
value goes into the item body, which `batch_ingest` scrubs before anything stores it.
The exception's stack trace is not kept (it is raw program text, not evidence).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from triage import taxonomy
from triage.intake.normalize import ItemError
from triage.intake.runner_events import failure_from_runner_event

SOURCE = "otlp"
MAX_SPAN_ATTRIBUTES = 256  # twice the OpenTelemetry SDK's default attribute count limit
MAX_VALUE_DEPTH = 8  # arrays and key-value lists inside one attribute value
MAX_SPAN_VALUES = 4096  # every value of a span's attributes and events, nested ones too

STAGE_ATTRIBUTE = "tool_call.failure.stage"
REASON_ATTRIBUTE = "tool_call.failure.reason"
EXECUTION_STATE_ATTRIBUTE = "tool_call.execution_state"
COLLECTION_ATTRIBUTE = "tool_call.collection"
_TOOL_OPERATION = "execute_tool"
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# error.type values that name a condition rather than an exception class.
_ERROR_TYPE_ALIASES = {"timeout": "TimeoutError", "connection_refused": "ConnectionRefusedError"}
# Read by the mapping itself; the rest of the attributes are kept in extra.otlp.attributes.
_CONSUMED = frozenset(
    {
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        STAGE_ATTRIBUTE,
        REASON_ATTRIBUTE,
        EXECUTION_STATE_ATTRIBUTE,
        COLLECTION_ATTRIBUTE,
    }
)


@dataclass(frozen=True)
class RefusedSpan:
    """A span the door refuses before the pipeline; recorded in the ledger like any item."""

    index: int
    item_type: str
    client_id: str
    error: ItemError


@dataclass
class MappedExport:
    """What one export request becomes: items for batch_ingest, refusals and skips."""

    items: list[dict[str, Any]] = field(default_factory=list)
    item_indexes: list[int] = field(default_factory=list)  # each item's span position
    refused: list[RefusedSpan] = field(default_factory=list)
    skipped: int = 0
    spans: int = 0


class _Refuse(Exception):
    def __init__(self, code: str, field: str, message: str) -> None:
        super().__init__(message)
        self.error = ItemError(code, field, message)


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans)


def map_export(request: ExportTraceServiceRequest) -> MappedExport:
    mapped = MappedExport()
    index = 0
    for resource_spans in request.resource_spans:
        resource = _resource_facts(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = {"name": scope_spans.scope.name, "version": scope_spans.scope.version}
            for span in scope_spans.spans:
                _map_span(mapped, index, span, resource=resource, scope=scope)
                index += 1
    mapped.spans = index
    return mapped


def _map_span(
    mapped: MappedExport, index: int, span: Span, *, resource: dict[str, Any], scope: dict[str, str]
) -> None:
    trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
    client_id = f"{trace_id}:{span_id}"
    if len(span.trace_id) != 16 or not any(span.trace_id):
        mapped.refused.append(_refusal(index, "", "invalid_span_id", "trace_id", "16 bytes"))
        return
    if len(span.span_id) != 8 or not any(span.span_id):
        mapped.refused.append(_refusal(index, "", "invalid_span_id", "span_id", "8 bytes"))
        return
    if len(span.attributes) > MAX_SPAN_ATTRIBUTES:
        mapped.refused.append(
            RefusedSpan(
                index,
                "",
                client_id,
                ItemError(
                    "too_many_attributes",
                    "attributes",
                    f"the span has {len(span.attributes)} attributes; "
                    f"the limit is {MAX_SPAN_ATTRIBUTES}.",
                ),
            )
        )
        return
    if not _is_tool_call(span):
        mapped.skipped += 1
        return
    failed = span.status.code == Status.STATUS_CODE_ERROR
    item_type = "failure" if failed else "runner_event"
    try:
        budget = [MAX_SPAN_VALUES]
        attributes = _attributes(span.attributes, budget=budget, path="attributes")
        exception = _exception_event(span, budget=budget)
        body = _common_body(span, attributes, resource=resource, scope=scope)
    except _Refuse as refusal:
        mapped.refused.append(RefusedSpan(index, item_type, client_id, refusal.error))
        return
    if failed:
        body.update(_failure_fields(span, attributes, exception))
    else:
        body["type"] = "step.completed"
    mapped.items.append({"type": item_type, "id": client_id, "body": body})
    mapped.item_indexes.append(index)


def _refusal(index: int, client_id: str, code: str, name: str, length: str) -> RefusedSpan:
    return RefusedSpan(index, "", client_id, ItemError(code, name, f"{name} must be {length}."))


def _is_tool_call(span: Span) -> bool:
    for attribute in span.attributes:
        if attribute.key == "gen_ai.operation.name":
            return attribute.value.string_value == _TOOL_OPERATION
    return span.name == _TOOL_OPERATION or span.name.startswith(_TOOL_OPERATION + " ")


def _common_body(
    span: Span, attributes: dict[str, Any], *, resource: dict[str, Any], scope: dict[str, str]
) -> dict[str, Any]:
    tool = attributes.get("gen_ai.tool.name")
    if not isinstance(tool, str) or not tool:
        tool = span.name[len(_TOOL_OPERATION) :].strip()
    collection = attributes.get(COLLECTION_ATTRIBUTE) or resource.get("service.name") or ""
    ended = span.end_time_unix_nano or span.start_time_unix_nano
    body: dict[str, Any] = {
        "source": SOURCE,
        "collection": collection,
        "tool": tool,
        "plan_id": span.trace_id.hex(),
        "step_id": span.span_id.hex(),
        "otlp": {
            "span_name": span.name,
            "span_kind": Span.SpanKind.Name(span.kind) if span.kind in _SPAN_KINDS else span.kind,
            "service_version": resource.get("service.version", ""),
            "scope": scope,
            "attributes": {k: v for k, v in attributes.items() if k not in _CONSUMED},
        },
    }
    if ended:
        body["occurred_at"] = _timestamp(ended)
    return body


_MESSAGE_LIMIT = 2000


_SPAN_KINDS = frozenset(Span.SpanKind.values())


def _failure_fields(
    span: Span, attributes: dict[str, Any], exception: dict[str, Any]
) -> dict[str, Any]:
    status = _status_code(attributes.get("http.response.status_code"))
    if status is None:
        status = _status_code(attributes.get("http.status_code"))  # older conventions
    error_type = attributes.get("error.type")
    if status is None:
        status = _status_code(error_type)  # error.type may be the status code itself
    exception_type = exception.get("type") or (error_type if isinstance(error_type, str) else "")
    exception_type = _ERROR_TYPE_ALIASES.get(exception_type, exception_type)
    short_type = exception_type.rsplit(".", 1)[-1] if isinstance(exception_type, str) else ""
    message = (span.status.message or exception.get("message") or "")[:_MESSAGE_LIMIT]
    error: dict[str, Any] = {"kind": "tool", "exception_type": short_type, "message": message}
    if status is not None:
        error["status"] = status
    derived = failure_from_runner_event({"type": "step.failed", "error": error}) or {}
    evidence = {
        key: value
        for key, value in derived.get("evidence", {}).items()
        if key not in ("event_type", "error_kind")
    }
    method = attributes.get("http.request.method") or attributes.get("http.method")
    if isinstance(method, str) and method:
        evidence["http_method"] = method.upper()
    if isinstance(error_type, str) and error_type:
        evidence["error_type"] = error_type
    call_id = attributes.get("gen_ai.tool.call.id")
    if isinstance(call_id, str) and call_id:
        evidence["tool_call_id"] = call_id
    reason = attributes.get(REASON_ATTRIBUTE) or derived.get("reason") or "uncaught_server_error"
    stage = attributes.get(STAGE_ATTRIBUTE)
    if not stage:
        info = taxonomy.reason_info(reason) if isinstance(reason, str) else None
        stage = info.stage if info is not None else derived.get("stage") or "execute"
    fields: dict[str, Any] = {
        "stage": stage,
        "reason": reason,
        "message": message or derived.get("message", ""),
        "evidence": evidence,
    }
    state = attributes.get(EXECUTION_STATE_ATTRIBUTE) or derived.get("execution_state")
    if state:
        fields["execution_state"] = state
    if isinstance(method, str) and method.upper() in _READ_METHODS:
        fields["side_effect"] = "read"
    elif isinstance(method, str) and method.upper() in _WRITE_METHODS:
        fields["side_effect"] = "external_write"
    return fields


def _status_code(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isdigit() and len(value) == 3:
        value = int(value)
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def _exception_event(span: Span, *, budget: list[int]) -> dict[str, Any]:
    for event in span.events:
        if event.name == "exception":
            values = _attributes(event.attributes, budget=budget, path="events.exception")
            kind, message = values.get("exception.type"), values.get("exception.message")
            return {
                "type": kind if isinstance(kind, str) else "",
                "message": message if isinstance(message, str) else "",
            }
    return {}


def _resource_facts(attributes: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for attribute in attributes:
        if attribute.key in ("service.name", "service.version"):
            value = attribute.value.string_value
            if value:
                facts[attribute.key] = value
    return facts


def _attributes(attributes: Any, *, budget: list[int], path: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for attribute in attributes:
        where = f"{path}.{attribute.key[:100]}"
        values[attribute.key] = _value(attribute.value, depth=1, budget=budget, path=where)
    return values


def _value(value: AnyValue, *, depth: int, budget: list[int], path: str) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise _Refuse(
            "too_many_values", path, f"the span holds more than {MAX_SPAN_VALUES} values."
        )
    kind = value.WhichOneof("value")
    # Scalars first: they are most of any span (this loop is the door's hot path).
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else str(number)  # JSON has no NaN
    if kind == "bytes_value":
        return {"bytes": len(value.bytes_value)}  # raw bytes are never stored
    if kind is None:
        return None
    if depth >= MAX_VALUE_DEPTH:
        raise _Refuse(
            "value_too_deep",
            path,
            f"an attribute value is nested deeper than {MAX_VALUE_DEPTH} levels.",
        )
    if kind == "array_value":
        return [
            _value(item, depth=depth + 1, budget=budget, path=path)
            for item in value.array_value.values
        ]
    pairs: list[KeyValue] = list(value.kvlist_value.values)
    return {
        pair.key: _value(pair.value, depth=depth + 1, budget=budget, path=path) for pair in pairs
    }


def _timestamp(unix_nano: int) -> str:
    # A uint64 of nanoseconds ends in the year 2554, well inside what datetime holds; a
    # moment in the future is refused later by the native rule (occurred_at in the future).
    return datetime.fromtimestamp(unix_nano / 1e9, tz=UTC).isoformat()
