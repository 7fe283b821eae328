"""Triage Desk for servers and clients built on the official MCP Python SDK (``mcp`` 2.3):
``pip install 'triage-desk-client[mcp]'``.

``NextActionContract``, a server middleware::

    from mcp.server.mcpserver import MCPServer
    from triage_desk_client import Reporter
    from triage_desk_client.mcp import NextActionContract

    reporter = Reporter("https://desk.example", INGEST_KEY, spool_dir="/var/lib/billing/spool")
    contract = NextActionContract(
        reporter,
        collection="billing",
        tools={"send_invoice": {"side_effect": "external_write",
                                "idempotency": {"required": True, "key_argument": "invoice_id",
                                                "lookup": "GET /invoices/{key}/deliveries"}}},
    )
    server = MCPServer("billing", middleware=[contract])

(a low-level ``Server``: ``server.middleware.append(contract)``). On every failed
``tools/call`` (an exception, an ``isError`` result, a protocol error) it classifies the
failure with the desk's taxonomy, answers the agent with seed 004's envelope in the
result's ``structuredContent`` (a protocol error keeps its code and carries the envelope in
its ``data``), reports the failure as an ``envelope`` item through the reporter (spooled:
the call waits for one append, never for the desk), and names the reason on the current
OpenTelemetry span (``tool_call.failure.*``), so an OTLP export says the same thing and the
desk stores the call once.

``ReportingClient``, a client wrapper::

    async with Client("http://127.0.0.1:8000/mcp", read_timeout_seconds=10) as client:
        agent = ReportingClient(client, reporter, collection="billing")
        result = await agent.call_tool("send_invoice", {"invoice_id": "INV-819"})

reports what only the caller sees: a timeout waiting for the server (``started_unknown``),
a transport failure (connection refused: ``not_started``), an ``isError`` result from a
server without the middleware. Results that carry an envelope were reported by the server
and are not reported again. ``envelope_of(result_or_error)`` reads the envelope either way.

Why the middleware reads the SDK's log: ``MCPServer`` turns a tool's exception into an
``isError`` result before any middleware sees it, and for an unexpected exception keeps
only "Error executing tool <name>" in the result. The SDK logs that exception (with its
cause) on ``mcp.server.mcpserver.server`` in the same task, so a logging filter hands it to
the call's middleware. With that logger disabled the middleware still classifies what the
result's text says ("HTTP 503", an unknown tool, argument validation) and otherwise says
honestly that the tool did not say why (``tool_error_unreported``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, Protocol

import anyio
import mcp_types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from triage_desk_client import classify
from triage_desk_client.classify import Failure, ToolPolicy, ToolPolicySource
from triage_desk_client.scrub import scrub_text
from triage_desk_client.taxonomy import Taxonomy, TaxonomySource

try:  # OpenTelemetry is optional (the SDK depends on its API today; nothing here needs it).
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - exercised only without opentelemetry-api
    otel_trace = None  # type: ignore[assignment]

logger = logging.getLogger("triage_desk_client")

__all__ = ["NextActionContract", "ReportingClient", "envelope_of"]

# The span attributes the desk's OTLP door reads before anything else.
STAGE_ATTRIBUTE = "tool_call.failure.stage"
REASON_ATTRIBUTE = "tool_call.failure.reason"
EXECUTION_STATE_ATTRIBUTE = "tool_call.execution_state"
COLLECTION_ATTRIBUTE = "tool_call.collection"
SIDE_EFFECT_ATTRIBUTE = "tool_call.side_effect"
LANE_ATTRIBUTE = "tool_call.lane"
MESSAGE_ATTRIBUTE = "tool_call.failure.message"
# Where MCPServer logs a tool's unexpected exception (mcp/server/mcpserver/server.py).
SDK_TOOL_LOGGER = "mcp.server.mcpserver.server"
# The key of a protocol error's `data` that holds the envelope.
ENVELOPE_KEY = "envelope"
# The envelope on an exception ReportingClient re-raises.
_ERROR_ATTRIBUTE = "triage_envelope"


class EnvelopeReporter(Protocol):
    """What the middleware needs of a reporter (``triage_desk_client.Reporter`` is one)."""

    def envelope(self, body: Mapping[str, Any], id: str | None = None) -> str: ...


# --- the server middleware -------------------------------------------------------------------

_RAISED: ContextVar[list[BaseException] | None] = ContextVar("triage_desk_raised", default=None)


class _KeepToolExceptions(logging.Filter):
    """Hands the exception MCPServer logs for a failed tool to that call's middleware
    (same task, so the context variable is the call's). Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        raised = _RAISED.get()
        if raised is not None and record.exc_info and record.exc_info[1] is not None:
            raised.append(record.exc_info[1])
        return True


_KEEPER = _KeepToolExceptions()


def _watch_sdk_tool_log() -> None:
    sdk_logger = logging.getLogger(SDK_TOOL_LOGGER)
    if _KEEPER not in sdk_logger.filters:
        sdk_logger.addFilter(_KEEPER)


class _Contract:
    """What the middleware and the client helper share: the tools' declarations, the
    taxonomy in force, and how a failure becomes the agent's envelope and the desk's item."""

    def __init__(
        self,
        reporter: EnvelopeReporter,
        *,
        collection: str,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
        desk_url: str | None = None,
        api_key: str | None = None,
        taxonomy: TaxonomySource | None = None,
    ) -> None:
        if not isinstance(collection, str) or not collection:
            raise ValueError("collection must be a non-empty string")
        self._reporter = reporter
        self._collection = collection
        self._policies = classify.policies(tools)
        self._taxonomy = taxonomy or TaxonomySource(desk_url, api_key)
        self._taxonomy.start()
        # The desk's own tool policies, when there is a desk to ask: they win over the code's
        # declarations, as they do in the desk's derivation (the code keeps key_argument).
        self._desk_policies = ToolPolicySource(collection, desk_url, api_key)
        self._desk_policies.start()
        self._started()

    def _started(self) -> None:
        """What a subclass sets up once the rest is in place."""

    def policy(self, tool: str) -> ToolPolicy:
        """The tool's policy: the desk's when it has one (its operators decide), else the
        code's declaration, else undeclared (treated as a possible write)."""
        declared = self._policies.get(tool)
        desk = self._desk_policies.current().get(tool)
        if desk is None:
            return declared or ToolPolicy()
        if declared is None or not declared.idempotency_key_argument:
            return desk
        return dataclasses.replace(desk, idempotency_key_argument=declared.idempotency_key_argument)

    def _current(self) -> Taxonomy:
        return self._taxonomy.current()

    def _failed(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None,
        failure: Failure,
        *,
        on_span: bool = False,
    ) -> dict[str, Any]:
        """Report the failure; returns the envelope for the agent. ``on_span``: name the
        failure on the current span and send its ids (the server's own span only)."""
        taxonomy, policy = self._current(), self.policy(tool)
        verdict = classify.derive(failure, taxonomy=taxonomy, policy=policy)
        answer = classify.envelope(
            failure,
            verdict,
            taxonomy=taxonomy,
            idempotency_key=policy.idempotency_key(arguments),
            lookup=policy.idempotency_lookup,
        )
        trace_id, span_id = _mark_span(failure, verdict, self._collection) if on_span else ("", "")
        body = classify.envelope_item(
            answer,
            failure,
            tool=tool or "(unnamed)",
            collection=self._collection,
            side_effect=policy.side_effect,
            trace_id=trace_id,
            span_id=span_id,
        )
        self._report({**body, **_now()}, tool=tool)
        return answer

    def _report(self, body: dict[str, Any], *, tool: str) -> None:
        try:
            self._reporter.envelope(body)
        except Exception:
            # The agent's answer matters more than the report; the reporter already says
            # why loudly (a full disk, an item that cannot be sent).
            logger.exception("the failure of tool %r could not be reported", tool)

    def close(self) -> None:
        """Stop the taxonomy and policy refresh (the reporter is the caller's to close)."""
        self._taxonomy.close()
        self._desk_policies.close()


class NextActionContract(_Contract):
    """Server middleware: a failed tool call answers the agent with seed 004's envelope and
    reaches the desk classified. See the module docstring.

    ``tools``: each tool's declaration in seed 004's names (``side_effect``,
    ``idempotency{required, lookup, key_argument}``, ``timeout_policy{on_before_send,
    on_after_send}``, ``authority{approval_required}``); a bad declaration raises
    ``ValueError`` here, not at the first failure. ``desk_url`` (and ``api_key``, which
    may be the reporter's): the taxonomy is refreshed from the desk in the background;
    without it the bundled snapshot is used. ``taxonomy``: a ``TaxonomySource`` to share.
    """

    def _started(self) -> None:
        _watch_sdk_tool_log()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params or {}
        name = params.get("name")
        tool = name if isinstance(name, str) else ""
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, Mapping) else None
        raised: list[BaseException] = []
        token = _RAISED.set(raised)
        try:
            result = await call_next(ctx)
        except MCPError as error:
            answer = self._failed(
                tool,
                arguments,
                classify.classify_jsonrpc(
                    error.code, error.message, taxonomy=self._current(), policy=self.policy(tool)
                ),
                on_span=True,
            )
            if error.data is not None:
                raise
            # A protocol error stays one (its code is the protocol's answer); its data says
            # what to do next, for a caller that reads it.
            raise MCPError(error.code, error.message, {ENVELOPE_KEY: answer}) from error
        except ValidationError:
            # The SDK's own refusal of malformed params (the wire answer hides the input).
            failure = classify.failure_for(
                "argument_coercion_failed",
                taxonomy=self._current(),
                policy=self.policy(tool),
                message="tools/call params refused",
                evidence={"jsonrpc_code": classify.INVALID_PARAMS},
            )
            self._failed(tool, arguments, failure, on_span=True)
            raise
        except Exception as error:
            # A low-level Server's handler raised: answered as MCPServer answers a tool's
            # exception (an isError result), with the envelope.
            failure = classify.classify_exception(
                error, taxonomy=self._current(), policy=self.policy(tool)
            )
            answer = self._failed(tool, arguments, failure, on_span=True)
            text = f"{answer['code']}: {answer['user_safe_message']}"
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(type="text", text=text)],
                is_error=True,
                structured_content=answer,
            )
        finally:
            _RAISED.reset(token)
        return self._answered(tool, arguments, result, raised)

    def _answered(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None,
        result: HandlerResult,
        raised: list[BaseException],
    ) -> HandlerResult:
        if isinstance(result, BaseModel):
            wire: Any = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        else:
            wire = result
        if not isinstance(wire, dict) or wire.get("isError") is not True:
            return result
        structured = wire.get("structuredContent")
        if isinstance(structured, Mapping) and classify.is_envelope(structured):
            # The tool answered with its own envelope: reported as it is (the desk maps
            # its code), never rewritten.
            self._report(
                dict(structured, tool=tool, collection=self._collection, **_now()), tool=tool
            )
            return result
        taxonomy, policy = self._current(), self.policy(tool)
        if raised:
            failure = classify.classify_exception(raised[-1], taxonomy=taxonomy, policy=policy)
        else:
            failure = _from_result_text(wire, taxonomy=taxonomy, policy=policy)
        answer = self._failed(tool, arguments, failure, on_span=True)
        return {**wire, "structuredContent": answer}


def _from_result_text(
    wire: Mapping[str, Any], *, taxonomy: Taxonomy, policy: ToolPolicy
) -> Failure:
    text = " ".join(
        block.get("text", "")
        for block in wire.get("content") or ()
        if isinstance(block, Mapping) and isinstance(block.get("text"), str)
    )
    found = classify.classify_text(text, taxonomy=taxonomy, policy=policy)
    if found is not None:
        return found
    return classify.failure_for(
        "tool_error_unreported",
        taxonomy=taxonomy,
        policy=policy,
        message=text or "the tool returned isError without text",
        evidence={"error_type": "tool_error"},
    )


def _mark_span(failure: Failure, verdict: classify.Verdict, collection: str) -> tuple[str, str]:
    """Name the failure on the current span; its ids when it is being recorded (a span
    nobody records is never exported, so there is nothing to merge with)."""
    if otel_trace is None:
        return "", ""
    span = otel_trace.get_current_span()
    if not span.is_recording():
        return "", ""
    attributes: dict[str, Any] = {
        STAGE_ATTRIBUTE: failure.stage,
        REASON_ATTRIBUTE: failure.reason,
        EXECUTION_STATE_ATTRIBUTE: verdict.execution_state,
        LANE_ATTRIBUTE: verdict.lane,
        COLLECTION_ATTRIBUTE: collection,
    }
    if verdict.side_effect:
        attributes[SIDE_EFFECT_ATTRIBUTE] = verdict.side_effect
    if failure.message:
        # Scrubbed here: the span may go to other backends than the desk.
        attributes[MESSAGE_ATTRIBUTE] = scrub_text(failure.message)
    span.set_attributes(attributes)
    context = span.get_span_context()
    if not context.is_valid:
        return "", ""
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def _now() -> dict[str, str]:
    # Two failures of one call shape a second apart are two items, not a duplicate.
    return {"occurred_at": datetime.now(timezone.utc).isoformat(timespec="microseconds")}


# --- the client helper -----------------------------------------------------------------------


class _CallsTools(Protocol):
    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any
    ) -> mcp_types.CallToolResult: ...


def envelope_of(outcome: Any) -> dict[str, Any] | None:
    """The envelope a tool call's outcome carries: a result's ``structuredContent``, a
    protocol error's ``data``, or what ``ReportingClient`` attached to an error it re-raised."""
    candidates = [
        getattr(outcome, _ERROR_ATTRIBUTE, None),
        getattr(outcome, "structured_content", None),
    ]
    if isinstance(outcome, MCPError) and isinstance(outcome.data, Mapping):
        candidates.append(outcome.data.get(ENVELOPE_KEY))
    for candidate in candidates:
        if isinstance(candidate, Mapping) and classify.is_envelope(candidate):
            return dict(candidate)
    return None


class ReportingClient(_Contract):
    """Wraps an MCP ``Client`` (or ``ClientSession``): ``call_tool`` reports the failures
    only the caller sees, with the execution state the caller knows, and answers with the
    same envelope the middleware would. Everything else is the wrapped client's.

    - A timeout waiting for the server (the SDK's ``REQUEST_TIMEOUT``): the request was
      sent, so ``timeout`` / ``started_unknown``; a write then goes to ``reconcile_first``.
    - The connection closed before the answer: ``network_error`` / ``started_unknown``.
    - A transport failure raised by the HTTP client (connection refused: ``not_started``).
    - An ``isError`` result without an envelope (a server without the middleware): what its
      text says, else ``tool_error_unreported``; the envelope is added to the result.

    An error is re-raised as it was, with its envelope readable by ``envelope_of``.
    """

    def __init__(
        self,
        client: _CallsTools,
        reporter: EnvelopeReporter,
        *,
        collection: str,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
        desk_url: str | None = None,
        api_key: str | None = None,
        taxonomy: TaxonomySource | None = None,
    ) -> None:
        """The options are ``NextActionContract``'s."""
        self._client = client
        super().__init__(
            reporter,
            collection=collection,
            tools=tools,
            desk_url=desk_url,
            api_key=api_key,
            taxonomy=taxonomy,
        )
        self._interrupted: list[tuple[str, Mapping[str, Any] | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def __aenter__(self) -> ReportingClient:
        await self._client.__aenter__()  # type: ignore[attr-defined]
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        """Exits the wrapped client. When its transport failed under a call in flight
        (the SDK's Streamable HTTP client cancels the caller and raises the HTTP client's
        error, in an exception group, when the client exits), that call is reported with
        what the error says: connection refused is ``network_error`` / ``not_started``."""
        try:
            exited: bool | None = await self._client.__aexit__(*exc_info)  # type: ignore[attr-defined]
        except BaseException as error:
            cause = _transport_failure(error)
            interrupted, self._interrupted = self._interrupted, []
            if cause is not None:
                for name, arguments in interrupted:
                    failure = classify.classify_exception(
                        cause, taxonomy=self._current(), policy=self.policy(name)
                    )
                    self._failed(name, arguments, failure)
            raise
        return exited

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any
    ) -> mcp_types.CallToolResult:
        taxonomy, policy = self._current(), self.policy(name)
        try:
            result = await self._client.call_tool(name, arguments, *args, **kwargs)
        except anyio.get_cancelled_exc_class():
            # Cancelled: by the caller, or by the transport dying under the call; __aexit__
            # finds out which from what the client raises when it exits.
            self._interrupted.append((name, arguments))
            raise
        except MCPError as error:
            if envelope_of(error) is not None:
                raise  # the server's middleware answered, and reported it
            failure = _failure_of_protocol_error(error, taxonomy=taxonomy, policy=policy)
            setattr(error, _ERROR_ATTRIBUTE, self._failed(name, arguments, failure))
            raise
        except Exception as error:
            failure = classify.classify_exception(error, taxonomy=taxonomy, policy=policy)
            setattr(error, _ERROR_ATTRIBUTE, self._failed(name, arguments, failure))
            raise
        if not result.is_error or classify.is_envelope(result.structured_content):
            return result
        wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        failure = _from_result_text(wire, taxonomy=taxonomy, policy=policy)
        answer = self._failed(name, arguments, failure)
        if result.structured_content is not None:
            # The server's own structured answer stays where it was; the envelope goes
            # with the error instead of replacing it.
            setattr(result, _ERROR_ATTRIBUTE, answer)
            return result
        return result.model_copy(update={"structured_content": answer})


def _transport_failure(error: BaseException) -> BaseException | None:
    """The HTTP client's own error inside what a client raised (exception groups walked),
    when it is a transport failure (a timeout or a connection error by its class name)."""
    pending = [error]
    seen = 0
    while pending and seen < 64:
        current = pending.pop()
        seen += 1
        nested = getattr(current, "exceptions", None)
        if isinstance(nested, (list, tuple)):
            pending.extend(item for item in nested if isinstance(item, BaseException))
            continue
        if classify.is_transport_error(current):
            return current
    return None


def _failure_of_protocol_error(
    error: MCPError, *, taxonomy: Taxonomy, policy: ToolPolicy
) -> Failure:
    # The SDK gave up waiting, or the connection closed under the call: the server has the
    # request and may be running it.
    reason = {mcp_types.REQUEST_TIMEOUT: "timeout", mcp_types.CONNECTION_CLOSED: "network_error"}
    if error.code in reason:
        return classify.failure_for(
            reason[error.code],
            taxonomy=taxonomy,
            policy=policy,
            execution_state="started_unknown",
            message=error.message,
            evidence={"jsonrpc_code": error.code},
        )
    return classify.classify_jsonrpc(error.code, error.message, taxonomy=taxonomy, policy=policy)
