"""What an OpenTelemetry span means to the desk: the one mapping from OTLP spans to items.

The OTLP door (`triage.intake.otlp`) decodes a request into an `ExportTraceServiceRequest`;
`map_export` turns each span into one of three things:

* a native item for `batch_ingest`: a tool-call span (see the conventions below) with status
  ERROR becomes a `failure` (source `otlp`); one that did not fail becomes a `runner_event`
  of type `step.completed`, which counts toward success rates as a runner's event does;
* a skip: any other span (chat, LLM, chain, agent, retriever, embedding, HTTP server...) is
  counted, never stored;
* a refusal: a span the desk will not read (ids of the wrong length, more than
  `MAX_SPAN_ATTRIBUTES` attributes, an `AnyValue` nested deeper than `MAX_VALUE_DEPTH`
  or holding more than `MAX_SPAN_VALUES` values) is recorded in the ledger with its code.

Which spans are tool calls: one table, `CONVENTIONS`
----------------------------------------------------
Each convention names the attribute that says what kind of span it is, the values of that
attribute that mean "a tool call", and where the tool's name is. The first convention whose
kind attribute the span carries decides (MCP before GenAI, because an MCP server span
carries both); a span that carries none is a tool call only when it is named
`execute_tool <tool>` (GenAI's span name).

=============  ==========================================  ===========================
convention     a tool call when                            tool name
=============  ==========================================  ===========================
mcp            `mcp.method.name = tools/call`, span kind   `gen_ai.tool.name`, else
               not CLIENT                                  the name after `tools/call `
gen_ai         `gen_ai.operation.name = execute_tool`      `gen_ai.tool.name`, else
                                                           the name after `execute_tool `
openinference  `openinference.span.kind = TOOL`            `tool.name`, else the span name
openllmetry    `traceloop.span.kind = tool`                `traceloop.entity.name`, else
                                                           the span name without `.tool`
=============  ==========================================  ===========================

An MCP CLIENT span (the MCP SDK's `MCP send tools/call <tool>`) is the caller's view of a
call whose SERVER span carries the outcome: reading both would count every call twice, so
it is skipped like any other span.

Every convention's failure is then read the same way, first match wins:

1. `tool_call.failure.reason` / `tool_call.failure.stage` / `tool_call.execution_state`
   (what a tool's own code sets on its span): as sent; the stage from
   the catalog when only the reason is sent. `tool_call.failure.message` is the message
   when the span has no status message and no exception event.
2. A JSON-RPC error code (`rpc.response.status_code`, `error.type` or the older
   `rpc.jsonrpc.error_code`; an MCP server span carries it when the handler raised a
   protocol error): -32601 (method not found) `unknown_target`; -32602 (invalid params)
   `unknown_target` when the message says "unknown tool", `missing_required_argument` when
   it says an argument is required or missing, else `argument_coercion_failed`; -32001 (the
   MCP SDK's request timeout) reads as a timeout. Other codes fall through to step 4 and
   are kept as `evidence.jsonrpc_code`.
3. `error.type = tool_error` and nothing else (no exception event, no HTTP status, no status
   message that classifies): the MCP SDK turns a tool's exception into an `isError` result
   before its span sees it, so the span cannot say why. It becomes `tool_error_unreported`
   rather than pretending to know more.
4. As a graph-tool-call runner's `step.failed` (`triage.intake.runner_events`): the HTTP
   status from `http.response.status_code` (or `http.status_code`, or an `error.type` of
   three digits: 401/403 `auth_failed`, other 4xx `http_4xx`, 5xx `http_5xx`), the
   exception type from the `exception` event's `exception.type` or from `error.type`
   (timeouts `timeout`, connection and DNS errors `network_error`, with the execution state
   they imply), the message from the status message or the exception event; anything else
   `service/uncaught_server_error`.

`tool_call.side_effect` (`read`, `internal_write`, `external_write`, `privileged`: the
tool's own declaration, which the MCP middleware sets) says what the call may change;
without it, `http.request.method` tells reads (GET, HEAD, OPTIONS) from writes
(`external_write`). A tool policy on the desk says otherwise over both. The collection is
`tool_call.collection`, else the resource's `service.name`; `service.version`, the
instrumentation scope and the convention are kept in `extra.otlp`.

Identity: the item id is `<trace id hex>:<span id hex>`, so an exporter's retry of the same
spans is a duplicate and a span re-sent with another body is a conflict. A failure also
carries `trace_id` and `span_id`, which `batch_ingest` uses to store a failed call once
when a runtime reports the same call natively. Every attribute value goes into the item
body, which `batch_ingest` scrubs before anything stores it, except the raw arguments and
results of a call (`input.value`, `output.value`, `gen_ai.tool.call.arguments`,
`traceloop.entity.input`...), which are named in `extra.otlp.omitted_attributes` and never
stored. The exception's stack trace is not kept (it is raw program text, not evidence).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from triage.intake.normalize import ItemError
from triage.intake.runner_events import failure_from_runner_event
from triage.vocabulary import taxonomy

SOURCE = "otlp"
MAX_SPAN_ATTRIBUTES = 256  # twice the OpenTelemetry SDK's default attribute count limit
MAX_VALUE_DEPTH = 8  # arrays and key-value lists inside one attribute value
MAX_SPAN_VALUES = 4096  # every value of a span's attributes and events, nested ones too

STAGE_ATTRIBUTE = "tool_call.failure.stage"
REASON_ATTRIBUTE = "tool_call.failure.reason"
EXECUTION_STATE_ATTRIBUTE = "tool_call.execution_state"
COLLECTION_ATTRIBUTE = "tool_call.collection"
SIDE_EFFECT_ATTRIBUTE = "tool_call.side_effect"
MESSAGE_ATTRIBUTE = "tool_call.failure.message"
TOOL_ERROR = "tool_error"  # MCP's error.type for a CallToolResult with isError = true
UNREPORTED_REASON = "tool_error_unreported"


@dataclass(frozen=True)
class Convention:
    """How one instrumentation convention marks a tool-call span and names its tool."""

    name: str
    kind_attribute: str  # the attribute that says what kind of span this is
    tool_kinds: frozenset[str]  # its values (casefolded) that mean a tool call
    tool_attributes: tuple[str, ...]  # where the tool's name is; the first set one wins
    name_prefix: str = ""  # the span name is "<prefix><tool>" when no attribute names it
    name_suffix: str = ""  # ... or "<tool><suffix>"
    # The caller's span of a call the server's span reports too (MCP): skipped.
    skip_client_spans: bool = False


MCP = Convention(
    "mcp",
    "mcp.method.name",
    frozenset({"tools/call"}),
    ("gen_ai.tool.name",),
    name_prefix="tools/call ",
    skip_client_spans=True,
)
GEN_AI = Convention(
    "gen_ai",
    "gen_ai.operation.name",
    frozenset({"execute_tool"}),
    ("gen_ai.tool.name",),
    name_prefix="execute_tool ",
)
OPENINFERENCE = Convention(
    "openinference", "openinference.span.kind", frozenset({"tool"}), ("tool.name",)
)
OPENLLMETRY = Convention(
    "openllmetry",
    "traceloop.span.kind",
    frozenset({"tool"}),
    ("traceloop.entity.name",),
    name_suffix=".tool",
)
# Order matters: the first convention whose kind attribute a span carries decides, and an
# MCP server span carries gen_ai.operation.name too.
CONVENTIONS: tuple[Convention, ...] = (MCP, GEN_AI, OPENINFERENCE, OPENLLMETRY)
_KIND_ATTRIBUTES = frozenset(convention.kind_attribute for convention in CONVENTIONS)

# The call's raw arguments and results (DESIGN section 6: never stored, even scrubbed).
PAYLOAD_ATTRIBUTES = frozenset(
    {
        "input.value",  # OpenInference
        "output.value",
        "gen_ai.tool.call.arguments",  # GenAI (opt-in)
        "gen_ai.tool.call.result",
        "traceloop.entity.input",  # OpenLLMetry
        "traceloop.entity.output",
    }
)
# Read by the mapping (each convention's own, and these for all); the rest of the
# attributes are kept in extra.otlp.
_CONSUMED_BY_ALL = frozenset(
    {
        "gen_ai.operation.name",
        STAGE_ATTRIBUTE,
        REASON_ATTRIBUTE,
        EXECUTION_STATE_ATTRIBUTE,
        COLLECTION_ATTRIBUTE,
    }
)
_CONSUMED = {
    convention.name: frozenset(
        {convention.kind_attribute, *convention.tool_attributes} | _CONSUMED_BY_ALL
    )
    for convention in CONVENTIONS
}
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# error.type values that name a condition rather than an exception class.
_ERROR_TYPE_ALIASES = {"timeout": "TimeoutError", "connection_refused": "ConnectionRefusedError"}

# JSON-RPC error codes (the spec's, and the MCP SDK's own in mcp_types.jsonrpc).
_METHOD_NOT_FOUND = -32601
_INVALID_PARAMS = -32602
_MCP_REQUEST_TIMEOUT = -32001
_JSONRPC_ATTRIBUTES = ("rpc.response.status_code", "error.type", "rpc.jsonrpc.error_code")
_UNKNOWN_TOOL = re.compile(r"\bunknown\s+tool\b|\btool\b.*\bnot\s+found\b", re.I)
_MISSING_ARGUMENT = re.compile(r"\brequired\b|\bmissing\b", re.I)


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
    convention = convention_of(span)
    if convention is None:
        mapped.skipped += 1
        return
    failed = span.status.code == Status.STATUS_CODE_ERROR
    item_type = "failure" if failed else "runner_event"
    try:
        budget = [MAX_SPAN_VALUES]
        attributes, omitted = _attributes(span.attributes, budget=budget, path="attributes")
        exception = _exception_event(span, budget=budget)
    except _Refuse as refusal:
        mapped.refused.append(RefusedSpan(index, item_type, client_id, refusal.error))
        return
    body = _common_body(
        span, attributes, convention, omitted=omitted, resource=resource, scope=scope
    )
    if failed:
        body.update(_failure_fields(span, attributes, exception))
        body["trace_id"], body["span_id"] = trace_id, span_id
    else:
        body["type"] = "step.completed"
    mapped.items.append({"type": item_type, "id": client_id, "body": body})
    mapped.item_indexes.append(index)


def _refusal(index: int, client_id: str, code: str, name: str, length: str) -> RefusedSpan:
    return RefusedSpan(index, "", client_id, ItemError(code, name, f"{name} must be {length}."))


def convention_of(span: Span) -> Convention | None:
    """The convention by which `span` is a tool call, or None when it is no tool call."""
    kinds: dict[str, str] = {}
    for attribute in span.attributes:
        if attribute.key in _KIND_ATTRIBUTES:
            kinds[attribute.key] = attribute.value.string_value
    for convention in CONVENTIONS:
        kind = kinds.get(convention.kind_attribute)
        if kind is None:
            continue
        if kind.casefold() not in convention.tool_kinds:
            return None
        if convention.skip_client_spans and span.kind == Span.SpanKind.SPAN_KIND_CLIENT:
            return None
        return convention
    prefix = GEN_AI.name_prefix
    if span.name == prefix.strip() or span.name.startswith(prefix):
        return GEN_AI
    return None


def _tool_name(span: Span, attributes: dict[str, Any], convention: Convention) -> str:
    for name in convention.tool_attributes:
        value = attributes.get(name)
        if isinstance(value, str) and value:
            return value
    tool = span.name
    prefix = convention.name_prefix
    if prefix and tool.startswith(prefix):
        tool = tool[len(prefix) :]
    elif prefix and tool == prefix.strip():
        tool = ""  # the operation alone, no tool named
    if convention.name_suffix and tool.endswith(convention.name_suffix):
        tool = tool[: -len(convention.name_suffix)]
    return tool.strip()


def _common_body(
    span: Span,
    attributes: dict[str, Any],
    convention: Convention,
    *,
    omitted: list[str],
    resource: dict[str, Any],
    scope: dict[str, str],
) -> dict[str, Any]:
    collection = attributes.get(COLLECTION_ATTRIBUTE) or resource.get("service.name") or ""
    ended = span.end_time_unix_nano or span.start_time_unix_nano
    consumed = _CONSUMED[convention.name]
    otlp: dict[str, Any] = {
        "convention": convention.name,
        "span_name": span.name,
        "span_kind": Span.SpanKind.Name(span.kind) if span.kind in _SPAN_KINDS else span.kind,
        "service_version": resource.get("service.version", ""),
        "scope": scope,
        "attributes": {k: v for k, v in attributes.items() if k not in consumed},
    }
    if omitted:
        otlp["omitted_attributes"] = omitted
    body: dict[str, Any] = {
        "source": SOURCE,
        "collection": collection,
        "tool": _tool_name(span, attributes, convention),
        "plan_id": span.trace_id.hex(),
        "step_id": span.span_id.hex(),
        "otlp": otlp,
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
    jsonrpc_code = _jsonrpc_code(attributes)
    named = attributes.get(MESSAGE_ATTRIBUTE)
    message = (
        span.status.message or exception.get("message") or (named if isinstance(named, str) else "")
    )[:_MESSAGE_LIMIT]
    # error.type names an exception class only when it is no code: an HTTP status, a
    # JSON-RPC code and MCP's tool_error say nothing about the exception's type.
    names_a_type = (
        isinstance(error_type, str)
        and error_type != TOOL_ERROR
        and _status_code(error_type) is None
        and _integer(error_type) is None
    )
    exception_type: str = exception.get("type") or (
        error_type if names_a_type and isinstance(error_type, str) else ""
    )
    if jsonrpc_code == _MCP_REQUEST_TIMEOUT and not exception_type:
        exception_type = "TimeoutError"
    exception_type = _ERROR_TYPE_ALIASES.get(exception_type, exception_type)
    short_type = exception_type.rsplit(".", 1)[-1]
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
    if jsonrpc_code is not None:
        evidence["jsonrpc_code"] = jsonrpc_code
    call_id = attributes.get("gen_ai.tool.call.id")
    if isinstance(call_id, str) and call_id:
        evidence["tool_call_id"] = call_id
    derived_reason = derived.get("reason") or "uncaught_server_error"
    state = derived.get("execution_state")
    protocol_reason = _jsonrpc_reason(jsonrpc_code, message)
    if protocol_reason is not None:
        derived_reason, state = protocol_reason, None  # the taxonomy's default: not_started
    elif (
        error_type == TOOL_ERROR
        and not attributes.get(REASON_ATTRIBUTE)
        and not exception
        and status is None
        and derived_reason == "uncaught_server_error"
    ):
        derived_reason, state = UNREPORTED_REASON, None
        message = message or (
            "tools/call returned isError; the span does not say why "
            "(the tool can set tool_call.failure.reason on its span)"
        )
    reason = attributes.get(REASON_ATTRIBUTE) or derived_reason
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
    state = attributes.get(EXECUTION_STATE_ATTRIBUTE) or state
    if state:
        fields["execution_state"] = state
    declared = attributes.get(SIDE_EFFECT_ATTRIBUTE)
    if declared:
        # The tool's own declaration (the middleware sets it), judged like a native item's.
        fields["side_effect"] = declared
    elif isinstance(method, str) and method.upper() in _READ_METHODS:
        fields["side_effect"] = "read"
    elif isinstance(method, str) and method.upper() in _WRITE_METHODS:
        fields["side_effect"] = "external_write"
    return fields


def _jsonrpc_code(attributes: dict[str, Any]) -> int | None:
    """The JSON-RPC error code the span carries (the spec reserves -32768..-32000 and
    allows any integer for application errors; a code is never a positive HTTP status)."""
    for name in _JSONRPC_ATTRIBUTES:
        code = _integer(attributes.get(name))
        if code is not None and code < 0:
            return code
    return None


def _jsonrpc_reason(code: int | None, message: str) -> str | None:
    if code == _METHOD_NOT_FOUND:
        return "unknown_target"
    if code != _INVALID_PARAMS:
        return None
    # The code says only "invalid params"; the handler's message says which kind, the one
    # place a message refines a code (the code alone still gives an argument reason).
    if _UNKNOWN_TOOL.search(message):
        return "unknown_target"
    if _MISSING_ARGUMENT.search(message):
        return "missing_required_argument"
    return "argument_coercion_failed"


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text.startswith("-") else text
        if digits.isdigit() and len(digits) <= 10:
            return int(text)
    return None


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
            values, _ = _attributes(event.attributes, budget=budget, path="events.exception")
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


def _attributes(
    attributes: Any, *, budget: list[int], path: str
) -> tuple[dict[str, Any], list[str]]:
    """The attributes' values, and the names of the payload attributes left out unread."""
    values: dict[str, Any] = {}
    omitted: list[str] = []
    for attribute in attributes:
        if attribute.key in PAYLOAD_ATTRIBUTES:
            omitted.append(attribute.key)
            continue
        where = f"{path}.{attribute.key[:100]}"
        values[attribute.key] = _value(attribute.value, depth=1, budget=budget, path=where)
    return values, sorted(omitted)


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
