"""Map graph-tool-call ``PlanRunner`` events to normalized failure records.

A runtime forwards every runner event as ``dataclasses.asdict(event)`` (JSON; usually
scrubbed; sometimes with extra fields; sometimes from an older engine whose ``stage`` is
``"execute"`` instead of ``"runner"``). :func:`failure_from_runner_event` returns the seed's
normalized failure record for events that describe a failure and ``None`` for the rest,
which only count toward success rates. Pure Python: no Django, no graph_tool_call import.

Which events become records (read from ``graph_tool_call/plan/runner.py``, 0.47.0)
---------------------------------------------------------------------------------
* ``step.failed``: the step's final failure. Emitted for error kind ``binding`` (a
  ``${sN.path}`` that does not resolve; the call was never made) and kind ``tool``
  (``call_tool`` raised; after retries are exhausted in ``retry``/``recover`` mode).
* ``plan.aborted``: the runner yields it *immediately after* a ``step.failed`` carrying
  the very same ``error`` dict for kinds ``binding`` and ``tool``, so a runtime that
  forwards all events would count those failures twice. It is therefore a record only
  when no ``step.failed`` precedes it: error kind ``output_binding`` (the plan's
  ``output_binding`` does not resolve after every step succeeded; ``failed_step`` is the
  sentinel ``"<output_binding>"``), or an unknown / missing kind (a newer or older engine
  we cannot match, better counted than lost). One exception: in ``recover`` mode a
  terminal step whose output nothing consumes is *skipped*, and then the final-answer
  lookup aborts with kind ``output_binding``. That abort is a consequence of the skip,
  which already produced the record, so it is ignored when the last entry of its
  ``trace_steps`` carries an error. (Synthesized plans always bind the output to the
  target step, so their terminal step is never skipped.) A runtime that drops
  ``trace_steps`` gets a second ``bind_request`` record in that corner case.
* ``step.skipped`` (``recover`` mode): the tool failed, nothing downstream needed its
  output, and the run went on. It is a real failure that was tolerated: a record with
  ``evidence.tolerated = true``. No ``step.failed`` is emitted for it.
* Not failures: ``plan.started``, ``step.started``, ``step.completed``,
  ``plan.completed``, ``step.retrying`` (an attempt that will be retried; the final
  outcome arrives as ``step.failed`` or ``step.completed``), ``args.coerced``,
  ``binding.repaired``, ``plan.repaired`` (the failure that triggered a repair emits no
  ``step.failed`` and ``plan.repaired`` carries no error dict, so it cannot be
  classified), and any event type this module does not know.

``trace_metadata`` is run-level in the engine (the dict given to ``run_stream`` is copied
onto every event), so a ``failure_reason`` on ``plan.started`` does not make it a failure:
the event type decides *whether* there is a failure, the metadata only *which* one.

Classification (DESIGN section 5), first match wins
---------------------------------------------------
1. ``trace_metadata.failure_reason`` (or a top-level ``failure_reason``): the reason as
   sent; the stage from the taxonomy (``triage.vocabulary.taxonomy.reason_info``). For a reason the
   catalog does not know: ``execute`` when
   an HTTP status or a ``tool`` error is present, else the event's own stage if it is a
   real one (not the engine's generic ``"runner"``), else the stage derived in step 3.
   A value that is not a code (letters, digits, ``_ . : -``) is ignored and flagged.
2. ``trace_metadata.auth_readiness.failure_reason`` (the adapter's auth preflight):
   that reason, stage ``auth_preflight`` unless the catalog says otherwise.
3. Derived from the error dict:
   - kind ``binding`` / ``output_binding`` -> ``bind_request``/``binding_failed``;
   - a ``tool`` error raised before any I/O by argument checks ->
     ``bind_request``/``argument_coercion_failed`` or ``missing_required_argument``,
     decided from the exception type name or forwarded diagnostics
     (``OpenAPIRequestValidationError``'s ``missing_required`` / ``invalid_arguments``);
   - an HTTP status >= 400 -> 401/403 ``execute``/``auth_failed``; other 4xx
     ``execute``/``http_4xx`` (429 adds ``evidence.rate_limited``); 5xx
     ``execute``/``http_5xx``;
   - timeouts -> ``execute``/``timeout``; connection failures -> ``execute``/
     ``network_error``;
   - anything else -> ``service``/``uncaught_server_error``.

The HTTP status comes from ``trace_metadata.http_status``, then the error dict
(``status``, ``http_status``, ``status_code``), then a top-level ``http_status``. The
engine keeps only ``str(exc)`` and ``type(exc).__name__`` of what ``call_tool`` raised, so
attributes such as ``exc.status`` never reach us. As a *last resort for adapters that do
not send the status*, the message is read for ``HTTP 404``, ``HTTP 404: Not Found``,
``HTTP Error 404: ...`` (urllib), ``404 Client Error`` (requests), ``Client error '404``
(httpx) and ``status 503`` / ``status_code=503``; such records carry
``evidence.http_status_source = "message"``. For the same reason urllib's ``URLError``
(which wraps refused connections, DNS failures and connect timeouts alike) is refined
by its message; every other decision uses the exception type name.

``execution_state`` is a hint from transport evidence, ``None`` when the event does not
tell (the lane code then applies the taxonomy defaults with the tool's side-effect
grade). A state the runtime sent itself (event, ``trace_metadata`` or error dict) wins.
Connect timeouts, refused connections, DNS and certificate failures -> ``not_started``
(urllib raises a timeout wrapped in ``URLError`` only while connecting/sending the
request, so it counts as a connect timeout); read timeouts, resets, remote disconnects
-> ``started_unknown``; a 4xx response -> ``completed``; a 5xx response -> ``None`` on
purpose, because DESIGN makes it ``started_unknown`` on a write and ``completed`` on a
read and only the lane code knows the grade; binding and argument failures, and any
failure filed under a pre-execution stage without transport evidence, -> ``not_started``.

Evidence keeps compact proof only: ``event_type``, ``error_kind``, ``exception_type``,
``http_status`` (+ ``http_status_source``, ``rate_limited``), ``request_sent`` and
``error_class`` for transport failures (the catalog's evidence keys), ``auth_readiness``
as sent, ``step_index`` / ``step_total`` / ``retries`` when present (0.47.0's
``step.failed`` carries none of them), ``failed_step``, ``tolerated`` and ``skip_reason``
for skips, the adapter's own ``event_stage``, and ``failure_reason_ignored``. It never
copies ``args_resolved``, ``output_preview``, ``output`` or ``trace_steps`` (raw data).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from triage.vocabulary import taxonomy

FAILURE_EVENT_TYPES: frozenset[str] = frozenset({"step.failed", "step.skipped", "plan.aborted"})
"""Event types that can describe a failure. ``step.failed`` and ``step.skipped`` always
yield a record; ``plan.aborted`` only when no ``step.failed`` carried the same failure
(see the module docstring), so forwarding every event yields one record per failure."""

# Failures filed here happen before a request is built or sent.
_PRE_EXECUTION_STAGES = frozenset(
    {"retrieve", "select_target", "synthesize", "bind_request", "auth_preflight"}
)
_EXECUTION_STATES = frozenset(
    {"not_started", "started_unknown", "partially_completed", "completed"}
)
# The engine's generic stage on every event (0.47.0); it says nothing about the failure.
_GENERIC_EVENT_STAGES = frozenset({"", "runner"})
_CODE_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,100}\Z")
_MESSAGE_LIMIT = 2000

# --- exception type names (only type(exc).__name__ reaches us) -------------------------

_CONNECT_TIMEOUT_TYPES = frozenset(
    {"ConnectTimeout", "ConnectTimeoutError", "PoolTimeout"}  # requests/httpx, urllib3, httpx
)
_TIMEOUT_TYPES = frozenset(
    {
        "TimeoutError",  # builtins; also socket.timeout and asyncio.TimeoutError on 3.11
        "timeout",  # socket.timeout before Python 3.10
        "ReadTimeout",  # requests, httpx
        "ReadTimeoutError",  # urllib3
        "WriteTimeout",  # httpx
        "Timeout",  # requests' base class
        "TimeoutException",  # httpx's base class
        "ServerTimeoutError",  # aiohttp
    }
)
_NOT_SENT_NETWORK_TYPES = frozenset(
    {
        "ConnectionRefusedError",
        "gaierror",
        "herror",
        "ConnectError",  # httpx
        "NewConnectionError",  # urllib3
        "NameResolutionError",  # urllib3
        "ClientConnectorError",  # aiohttp
        "ClientConnectorDNSError",  # aiohttp
        "ClientConnectorCertificateError",  # aiohttp
        "SSLCertVerificationError",
        "CertificateError",
    }
)
_STARTED_NETWORK_TYPES = frozenset(
    {
        "ConnectionResetError",
        "ConnectionAbortedError",
        "BrokenPipeError",
        "RemoteDisconnected",  # http.client
        "IncompleteRead",  # http.client
        "BadStatusLine",  # http.client
        "ProtocolError",  # urllib3
        "RemoteProtocolError",  # httpx
        "ReadError",  # httpx
        "WriteError",  # httpx
        "ChunkedEncodingError",  # requests
        "ServerDisconnectedError",  # aiohttp
    }
)
# Transport failures whose type alone does not say whether the request went out.
_OTHER_NETWORK_TYPES = frozenset(
    {
        "URLError",  # urllib wraps refused / DNS / TLS / connect-timeout errors in it
        "ConnectionError",  # builtins and requests
        "NetworkError",  # httpx
        "TransportError",  # httpx
        "ClientConnectionError",  # aiohttp
        "ClientOSError",  # aiohttp
        "SSLError",
        "SSLEOFError",
        "SSLZeroReturnError",
        "ProxyError",
    }
)
_BINDING_TYPES = frozenset({"BindingError"})
_COERCION_TYPES = frozenset(
    {"ArgumentCoercionError", "CoercionError", "ArgumentTypeError", "InvalidArgumentError"}
)
_MISSING_ARGUMENT_TYPES = frozenset(
    {"MissingRequiredArgument", "MissingRequiredArgumentError", "MissingArgumentError"}
)
_REQUEST_VALIDATION_TYPES = frozenset({"OpenAPIRequestValidationError"})

# --- last-resort message reading (older adapters that send no structured status) -------

_STATUS_MESSAGE_PATTERNS = (
    # "HTTP 404", "HTTP 404: Not Found", "HTTP Error 404: Not Found" (urllib), "HTTP/1.1 503"
    re.compile(r"\bHTTP(?:/\d(?:\.\d)?)?(?:\s+Error)?\s*:?\s*(?P<status>[1-5]\d\d)\b", re.I),
    # "404 Client Error: Not Found for url" (requests)
    re.compile(r"\b(?P<status>[1-5]\d\d)\s+(?:Client|Server)\s+Error\b", re.I),
    # "Client error '404 Not Found' for url" (httpx)
    re.compile(r"\b(?:Client|Server)\s+error\s+'(?P<status>[1-5]\d\d)\b", re.I),
    # "status 503", "status code 503", "status_code=503", "Status: 503"
    re.compile(r"\bstatus(?:[\s_-]?code)?\s*[=:]?\s*(?P<status>[1-5]\d\d)\b", re.I),
)
_NOT_SENT_HINTS = (
    "refused",
    "name or service not known",
    "nodename nor servname",
    "getaddrinfo failed",
    "name resolution",
    "no address associated",
    "network is unreachable",
    "no route to host",
    "certificate verify failed",
    "connect timeout",
    "connecttimeout",
    "newconnectionerror",
    "failed to establish a new connection",
)
_STARTED_HINTS = (
    "connection reset",
    "remote end closed",
    "remotedisconnected",
    "broken pipe",
    "connection aborted",
    "read timed out",
    "read timeout",
)
# OpenAPIRequestValidationError's own message markers (graph_tool_call.execute).
_MISSING_INPUTS_MARKER = "missing inputs:"
_INVALID_ARGUMENTS_MARKER = "invalid arguments:"
_MISSING_SECURITY_MARKER = "missing security:"


@dataclass
class _Verdict:
    stage: str
    reason: str
    execution_state: str | None
    evidence: dict[str, Any] = field(default_factory=dict)


def failure_from_runner_event(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The normalized failure record for one forwarded runner event, or ``None``."""
    if not isinstance(event, Mapping):
        return None
    event_type = event.get("type")
    if not isinstance(event_type, str) or event_type not in FAILURE_EVENT_TYPES:
        return None
    error = _error_dict(event.get("error"))
    if event_type == "plan.aborted" and not _abort_is_its_own_failure(event, error):
        return None

    trace_metadata = _mapping(event.get("trace_metadata"))
    kind = _text(error.get("kind"))
    exception_type = _text(error.get("exception_type"))
    message = _text(error.get("message"))
    status, status_source = _http_status(event, error, trace_metadata, message)

    derived = _derive(kind, exception_type, message, error, status)
    evidence = _base_evidence(event, event_type, error, trace_metadata)
    if status is not None:
        evidence["http_status"] = status
        if status_source == "message":
            evidence["http_status_source"] = "message"
    evidence.update(derived.evidence)

    explicit, explicit_ignored = _explicit_reason(event, trace_metadata)
    auth_reason = _auth_readiness_reason(trace_metadata)
    if explicit_ignored:
        evidence["failure_reason_ignored"] = True
    if explicit is not None:
        reason = explicit
        stage = _catalog_stage(explicit) or _stage_for_unknown_reason(event, kind, status, derived)
    elif auth_reason is not None:
        reason = auth_reason
        stage = _catalog_stage(auth_reason) or "auth_preflight"
    else:
        reason, stage = derived.reason, derived.stage

    return {
        "stage": stage,
        "reason": reason,
        "message": _message(message, event_type, reason, status),
        "tool": _tool(event),
        "plan_id": _text(event.get("plan_id")) or None,
        "step_id": _step_id(event),
        "execution_state": _execution_state(event, trace_metadata, error, stage, derived),
        "evidence": evidence,
        "graph_tool_call_version": _text(event.get("graph_tool_call_version")) or None,
    }


# --- which events count -----------------------------------------------------------------


def _abort_is_its_own_failure(event: Mapping[str, Any], error: Mapping[str, Any]) -> bool:
    kind = _text(error.get("kind"))
    if kind in ("binding", "tool"):
        return False  # the runner yielded a step.failed with this same error just before
    if kind == "output_binding":
        steps = event.get("trace_steps")
        if isinstance(steps, list) and steps:
            last = steps[-1]
            if isinstance(last, Mapping) and last.get("error"):
                return False  # recover mode skipped the terminal step: step.skipped counted it
    return True


# --- classification ---------------------------------------------------------------------


def _derive(
    kind: str,
    exception_type: str,
    message: str,
    error: Mapping[str, Any],
    status: int | None,
) -> _Verdict:
    name = exception_type.rsplit(".", 1)[-1]  # "socket.timeout" -> "timeout"
    lowered = message.lower()

    if kind in ("binding", "output_binding") or name in _BINDING_TYPES:
        return _Verdict("bind_request", "binding_failed", "not_started")

    argument_reason = _argument_failure(name, lowered, error)
    if argument_reason is not None:
        stage = _catalog_stage(argument_reason) or "bind_request"
        return _Verdict(stage, argument_reason, "not_started")

    if status is not None and status >= 400:
        if status in (401, 403):
            return _Verdict("execute", "auth_failed", "completed")
        if status < 500:
            extra = {"rate_limited": True} if status == 429 else {}
            return _Verdict("execute", "http_4xx", "completed", extra)
        # 5xx: the remote side answered, but whether it finished depends on the tool's
        # side-effect grade (DESIGN section 3), which only the lane code knows.
        return _Verdict("execute", "http_5xx", None)

    is_timeout, timeout_state = _timeout(name, lowered)
    if is_timeout:
        return _Verdict("execute", "timeout", timeout_state, _transport_evidence(timeout_state))

    is_network, network_state = _network(name, lowered)
    if is_network:
        evidence = {"error_class": name, **_transport_evidence(network_state)}
        return _Verdict("execute", "network_error", network_state, evidence)

    # A response with a non-error status (the adapter rejected a 2xx/3xx body) still
    # proves the remote side completed; the failure itself is the adapter's.
    state = "completed" if status is not None else None
    return _Verdict("service", "uncaught_server_error", state)


def _argument_failure(name: str, lowered: str, error: Mapping[str, Any]) -> str | None:
    if name in _COERCION_TYPES:
        return "argument_coercion_failed"
    if name in _MISSING_ARGUMENT_TYPES:
        return "missing_required_argument"
    if name not in _REQUEST_VALIDATION_TYPES:
        return None
    diagnostics = _mapping(error.get("diagnostics")) or _mapping(error.get("preflight"))
    if diagnostics:
        if diagnostics.get("missing_required"):
            return "missing_required_argument"
        if diagnostics.get("invalid_arguments"):
            return "argument_coercion_failed"
        if diagnostics.get("missing_security"):
            return "auth_header_resolution_failed"
    # Last resort: the engine's own message layout for this exception.
    if _MISSING_INPUTS_MARKER in lowered:
        return "missing_required_argument"
    if _INVALID_ARGUMENTS_MARKER in lowered:
        return "argument_coercion_failed"
    if _MISSING_SECURITY_MARKER in lowered:
        return "auth_header_resolution_failed"
    return "binding_failed"


def _timeout(name: str, lowered: str) -> tuple[bool, str | None]:
    """Whether this is a timeout, and the execution state it implies."""
    if name in _CONNECT_TIMEOUT_TYPES:
        return True, "not_started"
    if name == "URLError" and "timed out" in lowered:
        return True, "not_started"  # urllib wraps only connect/send-phase errors in URLError
    if name in _TIMEOUT_TYPES:
        return True, _state_from_message(lowered) or "started_unknown"
    if "timed out" in lowered:
        return True, _state_from_message(lowered)
    return False, None


def _network(name: str, lowered: str) -> tuple[bool, str | None]:
    """Whether this is a transport failure, and the execution state it implies."""
    if name in _NOT_SENT_NETWORK_TYPES:
        return True, "not_started"
    if name in _STARTED_NETWORK_TYPES:
        return True, "started_unknown"
    if name in _OTHER_NETWORK_TYPES:
        return True, _state_from_message(lowered)
    return False, None


def _transport_evidence(state: str | None) -> dict[str, Any]:
    """The catalog's ``request_sent`` key, when the transport failure tells."""
    if state == "not_started":
        return {"request_sent": False}
    if state == "started_unknown":
        return {"request_sent": True}  # sent in full; the answer never came back
    return {}


def _state_from_message(lowered: str) -> str | None:
    """Last resort for generic transport exception types: read the wrapped cause."""
    if any(hint in lowered for hint in _NOT_SENT_HINTS):
        return "not_started"
    if any(hint in lowered for hint in _STARTED_HINTS):
        return "started_unknown"
    return None


def _stage_for_unknown_reason(
    event: Mapping[str, Any], kind: str, status: int | None, derived: _Verdict
) -> str:
    if status is not None or kind == "tool":
        return "execute"
    event_stage = _text(event.get("stage"))
    if event_stage not in _GENERIC_EVENT_STAGES:
        return event_stage
    return derived.stage


def _catalog_stage(reason: str) -> str | None:
    info = taxonomy.reason_info(reason)
    return info.stage if info is not None else None


def _explicit_reason(
    event: Mapping[str, Any], trace_metadata: Mapping[str, Any]
) -> tuple[str | None, bool]:
    """The runtime's own reason code, and whether one was sent but is not a code."""
    for value in (trace_metadata.get("failure_reason"), event.get("failure_reason")):
        if value is None or value == "":
            continue
        if isinstance(value, str) and _CODE_RE.match(value.strip()):
            return value.strip(), False
        return None, True
    return None, False


def _auth_readiness_reason(trace_metadata: Mapping[str, Any]) -> str | None:
    value = _mapping(trace_metadata.get("auth_readiness")).get("failure_reason")
    if isinstance(value, str) and _CODE_RE.match(value.strip()):
        return value.strip()
    return None


def _execution_state(
    event: Mapping[str, Any],
    trace_metadata: Mapping[str, Any],
    error: Mapping[str, Any],
    stage: str,
    derived: _Verdict,
) -> str | None:
    for source in (event, trace_metadata, error):
        sent = source.get("execution_state")
        if isinstance(sent, str) and sent in _EXECUTION_STATES:
            return sent
    if derived.execution_state is not None:
        return derived.execution_state
    if stage in _PRE_EXECUTION_STAGES and derived.stage != "execute":
        return "not_started"  # filed before the call, and nothing shows a request went out
    return None


# --- field helpers ------------------------------------------------------------------------


def _http_status(
    event: Mapping[str, Any],
    error: Mapping[str, Any],
    trace_metadata: Mapping[str, Any],
    message: str,
) -> tuple[int | None, str | None]:
    candidates = (
        trace_metadata.get("http_status"),
        error.get("status"),
        error.get("http_status"),
        error.get("status_code"),
        event.get("http_status"),
    )
    for value in candidates:
        status = _status_value(value)
        if status is not None:
            return status, "structured"
    for pattern in _STATUS_MESSAGE_PATTERNS:
        match = pattern.search(message)
        if match:
            return int(match.group("status")), "message"
    return None, None


def _status_value(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def _base_evidence(
    event: Mapping[str, Any],
    event_type: str,
    error: Mapping[str, Any],
    trace_metadata: Mapping[str, Any],
) -> dict[str, Any]:
    evidence: dict[str, Any] = {"event_type": event_type}
    kind = _text(error.get("kind"))
    if kind:
        evidence["error_kind"] = kind
    exception_type = _text(error.get("exception_type"))
    if exception_type:
        evidence["exception_type"] = exception_type
    readiness = trace_metadata.get("auth_readiness")
    if isinstance(readiness, Mapping) and readiness:
        evidence["auth_readiness"] = dict(readiness)
    event_stage = _text(event.get("stage"))
    if event_stage not in _GENERIC_EVENT_STAGES:
        evidence["event_stage"] = event_stage
    for key, target in (("index", "step_index"), ("total", "step_total")):
        number = _count(event.get(key))
        if number is not None:
            evidence[target] = number
    retries = _count(event.get("retries"))
    if retries is None:
        retries = _count(error.get("retries"))
    if retries is not None:
        evidence["retries"] = retries
    if event_type == "plan.aborted":
        failed_step = _text(event.get("failed_step"))
        if failed_step:
            evidence["failed_step"] = failed_step
    if event_type == "step.skipped":
        evidence["tolerated"] = True
        skip_reason = _text(event.get("reason"))
        if skip_reason:
            evidence["skip_reason"] = skip_reason[:200]
    return evidence


def _message(message: str, event_type: str, reason: str, status: int | None) -> str:
    if message:
        return message[:_MESSAGE_LIMIT]
    suffix = f" (HTTP {status})" if status is not None else ""
    return f"{event_type}: {reason}{suffix}"


def _tool(event: Mapping[str, Any]) -> str | None:
    tool = _text(event.get("tool"))
    if tool:
        return tool
    if event.get("type") == "plan.aborted":  # PlanAborted has no tool field
        failed_step = _text(event.get("failed_step"))
        steps = event.get("trace_steps")
        if failed_step and isinstance(steps, list):
            for step in steps:
                if isinstance(step, Mapping) and step.get("id") == failed_step:
                    return _text(step.get("tool")) or None
    return None


def _step_id(event: Mapping[str, Any]) -> str | None:
    step_id = _text(event.get("step_id"))
    if step_id:
        return step_id
    failed_step = _text(event.get("failed_step"))
    if failed_step and not failed_step.startswith("<"):  # "<output_binding>" is no step
        return failed_step
    return None


def _error_dict(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value:
        return {"message": value}  # some older adapters send the message alone
    return {}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
