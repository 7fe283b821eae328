"""Classify a failed tool call on the runtime's side, as the desk would, and build the
envelope of seed 004 that tells the agent what to do next.

Standard library only: HTTP client exceptions (httpx, httpx2, requests, urllib, aiohttp)
are read by their attributes and class names, never imported.

- ``ToolPolicy``: what a tool declares (seed 004's field names): ``side_effect``,
  ``idempotency{required, lookup, key_argument}``, ``timeout_policy{on_before_send,
  on_after_send}``, ``authority{approval_required}``.
- ``classify_exception`` / ``classify_text`` / ``classify_jsonrpc`` / ``failure_for``:
  a ``Failure`` (reason, stage, execution state, evidence) from what the runtime saw.
- ``derive``: the lane, state, retryable and next action, the same derivation as the
  desk's ``triage/vocabulary/lanes.py`` (a test checks every combination against it).
- ``envelope``: seed 004's envelope for the agent; ``envelope_item``: the desk's
  ``envelope`` ingest item for the same failure.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from triage_desk_client.taxonomy import EXECUTION_STATES, DeskDocument, Taxonomy

SIDE_EFFECTS = ("read", "internal_write", "external_write", "privileged")
LANES = ("retry_safe", "reconcile_first", "input_stale", "policy_blocked", "manual_investigation")
ENVELOPE_STATUSES = ("failed", "uncertain", "blocked")
# What this module can conclude: the derivation test walks each of them.
REASONS = (
    "http_4xx",
    "http_5xx",
    "auth_failed",
    "timeout",
    "network_error",
    "missing_required_argument",
    "argument_coercion_failed",
    "unknown_target",
    "uncaught_server_error",
    "tool_error_unreported",
)
# The desk's lane rules (triage/vocabulary/lanes.py) that the taxonomy document does not carry.
_TRANSIENT_REASONS = frozenset({"timeout", "network_error", "http_5xx"})
_WRITE_GRADES = frozenset({"internal_write", "external_write", "privileged"})
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# JSON-RPC codes (MCP's tools/call): the method or tool is unknown, or the params are bad.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

# Class names (anywhere in the exception's MRO) by what they say about the request.
# A connection that was never made: nothing reached the remote side.
_NOT_SENT_TYPES = frozenset(
    {
        "ConnectTimeout",  # httpx, httpx2, requests
        "PoolTimeout",  # httpx: no connection from the pool
        "ConnectError",  # httpx
        "ConnectionRefusedError",
        "NewConnectionError",  # urllib3
        "NameResolutionError",  # urllib3
        "gaierror",  # socket: DNS
        "ClientConnectorError",  # aiohttp
    }
)
_TIMEOUT_TYPES = frozenset(
    {
        "TimeoutError",
        "timeout",  # socket.timeout before Python 3.10
        "TimeoutException",  # httpx
        "ReadTimeout",
        "WriteTimeout",
        "Timeout",  # requests
        "ReadTimeoutError",  # urllib3
        "ServerTimeoutError",  # aiohttp
    }
)
_NETWORK_TYPES = frozenset(
    {
        "ConnectionError",  # the builtin and requests'
        "NetworkError",  # httpx
        "ReadError",
        "WriteError",
        "RemoteProtocolError",
        "ProtocolError",
        "RemoteDisconnected",
        "IncompleteRead",
        "ChunkedEncodingError",  # requests
        "URLError",  # urllib: its reason says more, read below
        "ClientConnectionError",  # aiohttp
        "ServerDisconnectedError",
    }
)
_HTTP_STATUS_TEXT = re.compile(r"\bHTTP(?:/\d(?:\.\d)?)?(?: Error)?[ :]+([45]\d\d)\b")
_UNKNOWN_TOOL_TEXT = re.compile(r"\bunknown tool\b|\btool\b.*\bnot found\b", re.IGNORECASE)
_MISSING_TEXT = re.compile(r"\b(?:missing|required)\b", re.IGNORECASE)
# pydantic's ValidationError text, as the MCP SDK puts it in an isError result: a field
# path on its own line, then its message ending in "[type=<error type>, ...". The error
# types are pydantic's documented codes (`missing`, `int_parsing`, ...); the input values
# on the same line are never kept.
_VALIDATION_TEXT = re.compile(r"\d+ validation errors? for \S+")
_VALIDATION_ERROR = re.compile(r"^(\S[^\n]*)\n +[^\n]*?\[type=([a-z_]+)", re.MULTILINE)
_MAX_CHAIN = 8  # causes and contexts followed from one exception
_MAX_MESSAGE = 300


@dataclass(frozen=True)
class ToolPolicy:
    """What a tool declares about itself (seed 004). Undeclared: "" side effect, which the
    desk treats as a possible write, so nothing undeclared is ever retried blindly."""

    side_effect: str = ""
    idempotency_required: bool = False
    idempotency_lookup: str = ""
    idempotency_key_argument: str = ""
    timeout_before_send_lane: str = "retry_safe"
    timeout_after_send_lane: str = "reconcile_first"
    approval_required: bool = False

    @classmethod
    def from_declaration(cls, tool: str, declaration: Mapping[str, Any]) -> ToolPolicy:
        """Read a declaration in seed 004's field names; ``ValueError`` names what is wrong
        (a typo in a policy would otherwise silently make a write look undeclared)."""
        where = f"tools[{tool!r}]"
        _only(declaration, ("side_effect", "idempotency", "timeout_policy", "authority"), where)
        side_effect = declaration.get("side_effect", "")
        if side_effect not in ("", *SIDE_EFFECTS):
            raise ValueError(f"{where}.side_effect must be one of {', '.join(SIDE_EFFECTS)}")
        idempotency = _section(declaration, "idempotency", where)
        _only(idempotency, ("required", "lookup", "key_argument"), f"{where}.idempotency")
        timeouts = _section(declaration, "timeout_policy", where)
        _only(timeouts, ("on_before_send", "on_after_send"), f"{where}.timeout_policy")
        authority = _section(declaration, "authority", where)
        _only(authority, ("approval_required",), f"{where}.authority")
        for name, lane in timeouts.items():
            if lane not in LANES:
                raise ValueError(f"{where}.timeout_policy.{name} must be one of {', '.join(LANES)}")
        for section, name, value in (
            ("idempotency", "required", idempotency.get("required", False)),
            ("authority", "approval_required", authority.get("approval_required", False)),
        ):
            if not isinstance(value, bool):
                raise ValueError(f"{where}.{section}.{name} must be true or false")
        for name in ("lookup", "key_argument"):
            if not isinstance(idempotency.get(name, ""), str):
                raise ValueError(f"{where}.idempotency.{name} must be a string")
        return cls(
            side_effect=side_effect,
            idempotency_required=idempotency.get("required", False),
            idempotency_lookup=idempotency.get("lookup", ""),
            idempotency_key_argument=idempotency.get("key_argument", ""),
            timeout_before_send_lane=timeouts.get("on_before_send", "retry_safe"),
            timeout_after_send_lane=timeouts.get("on_after_send", "reconcile_first"),
            approval_required=authority.get("approval_required", False),
        )

    def idempotency_key(self, arguments: Mapping[str, Any] | None) -> str:
        """The call's idempotency key: the argument the declaration names, else none."""
        if not self.idempotency_key_argument or not arguments:
            return ""
        value = arguments.get(self.idempotency_key_argument)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return ""
        return str(value)[:300]

    def is_write(self, evidence: Mapping[str, Any] | None = None) -> bool:
        return _is_write(effective_side_effect(self, evidence or {}))


def policies(declarations: Mapping[str, Mapping[str, Any]] | None) -> dict[str, ToolPolicy]:
    """``tools={name: declaration}`` read into policies (``ValueError`` on a bad one)."""
    if declarations is None:
        return {}
    if not isinstance(declarations, Mapping):
        raise ValueError("tools must map each tool's name to its declaration")
    return {
        name: ToolPolicy.from_declaration(name, declaration)
        for name, declaration in declarations.items()
    }


TOOL_POLICIES_PATH = "/api/v1/tool-policies"


class ToolPolicySource(DeskDocument):
    """The desk's tool policies of one collection (``GET /api/v1/tool-policies``), polled
    like the taxonomy: what the desk's operators decided about each tool. None until the
    first answer (and with no desk URL)."""

    what = "tool policies"

    def __init__(
        self,
        collection: str,
        desk_url: str | None = None,
        api_key: str | None = None,
        *,
        interval: float = 300.0,
        timeout: float = 5.0,
    ) -> None:
        query = urllib.parse.urlencode({"collection": collection})
        super().__init__(
            {}, f"{TOOL_POLICIES_PATH}?{query}", desk_url, api_key, interval=interval,
            timeout=timeout,
        )  # fmt: skip

    def parse(self, document: Any) -> dict[str, ToolPolicy]:
        tools = document.get("tools") if isinstance(document, Mapping) else None
        if not isinstance(tools, Mapping):
            raise ValueError("not a tool policy document")
        return {
            name: ToolPolicy.from_declaration(name, declaration)
            for name, declaration in tools.items()
            if isinstance(name, str) and isinstance(declaration, Mapping)
        }

    def current(self) -> dict[str, ToolPolicy]:
        policies: dict[str, ToolPolicy] = self._current
        return policies


@dataclass(frozen=True)
class Failure:
    """What went wrong, before the lane: the reason, where and how far it got."""

    reason: str
    stage: str
    execution_state: str
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """What to do about a failure (the desk's Classification, without contradictions)."""

    lane: str
    execution_state: str
    retryable: bool
    next_action: str
    side_effect: str


# --- what failed ------------------------------------------------------------------------------


def failure_for(
    reason: str,
    *,
    taxonomy: Taxonomy,
    policy: ToolPolicy,
    execution_state: str | None = None,
    message: str = "",
    evidence: Mapping[str, Any] | None = None,
) -> Failure:
    """A failure with this reason: its stage from the catalog, its state as given or the
    one the desk derives (a 5xx on a write may have changed something: started_unknown)."""
    info = taxonomy.reason(reason)
    facts = dict(evidence or {})
    if execution_state is None:
        # A 5xx on a write may have changed something before the server failed.
        if info is None or (reason == "http_5xx" and policy.is_write(facts)):
            execution_state = "started_unknown"
        else:
            execution_state = info.execution_state
    stage = info.stage if info is not None else "execute"
    return Failure(reason, stage, execution_state, message[:_MAX_MESSAGE], facts)


def classify_status(
    status: int, *, taxonomy: Taxonomy, policy: ToolPolicy, **facts: Any
) -> Failure:
    """An HTTP status the tool's downstream call answered."""
    evidence = {"http_status": status, **facts}
    if status in (401, 403):
        reason = "auth_failed"
    elif status >= 500:
        reason = "http_5xx"
    else:
        reason = "http_4xx"
        if status == 429:
            evidence["rate_limited"] = True
    return failure_for(
        reason, taxonomy=taxonomy, policy=policy, message=f"HTTP {status}", evidence=evidence
    )


def classify_exception(error: BaseException, *, taxonomy: Taxonomy, policy: ToolPolicy) -> Failure:
    """What an exception a tool raised says: an HTTP status (by attribute, then "HTTP nnn"
    in its text), a timeout or a connection failure (by class name, with whether the
    request was sent), else an uncaught server error. Causes and contexts are read too,
    so a wrapper (the MCP SDK's UnexpectedToolError) says what it wraps."""
    chain = list(_chain(error))
    evidence: dict[str, Any] = {"error_type": type(chain[-1] if len(chain) > 1 else error).__name__}
    method = _first(_http_method(link) for link in chain)
    if method:
        evidence["http_method"] = method
    message = _describe(error)
    status = _first(_http_status(link) for link in chain)
    if status is not None:
        failure = classify_status(status, taxonomy=taxonomy, policy=policy, **evidence)
        return _with_message(failure, message)
    for link in chain:
        names = _type_names(link)
        sent = not (names & _NOT_SENT_TYPES) and not _refused(link)
        state = "started_unknown" if sent else "not_started"
        evidence["error_type"] = type(link).__name__
        wrapped = getattr(link, "reason", None)
        timed_out = bool(names & (_TIMEOUT_TYPES | {"ConnectTimeout", "PoolTimeout"})) or (
            # urllib's URLError holds a socket timeout as its reason.
            "URLError" in names
            and isinstance(wrapped, BaseException)
            and bool(_type_names(wrapped) & _TIMEOUT_TYPES)
        )
        if timed_out or names & (_NETWORK_TYPES | _NOT_SENT_TYPES):
            return failure_for(
                "timeout" if timed_out else "network_error",
                taxonomy=taxonomy,
                policy=policy,
                execution_state=state,
                message=message,
                evidence=evidence,
            )
    evidence["error_type"] = type(chain[-1] if len(chain) > 1 else error).__name__
    for link in chain:
        found = classify_text(str(link), taxonomy=taxonomy, policy=policy)
        if found is not None:
            return Failure(
                found.reason,
                found.stage,
                found.execution_state,
                message,
                {**evidence, **found.evidence},
            )
    return failure_for(
        "uncaught_server_error",
        taxonomy=taxonomy,
        policy=policy,
        message=message,
        evidence=evidence,
    )


def classify_text(text: str, *, taxonomy: Taxonomy, policy: ToolPolicy) -> Failure | None:
    """What an error's text says, when it says one of the few things that are stable
    enough to read: "HTTP nnn", an unknown tool, pydantic's argument validation errors."""
    if not text:
        return None
    if _VALIDATION_TEXT.search(text):
        errors = _VALIDATION_ERROR.findall(text)
        fields = sorted({path.strip() for path, _ in errors})
        kinds = sorted({kind for _, kind in errors})
        reason = "missing_required_argument" if "missing" in kinds else "argument_coercion_failed"
        return failure_for(
            reason,
            taxonomy=taxonomy,
            policy=policy,
            message=f"arguments refused: {', '.join(fields) or 'see the tool input schema'}",
            evidence={"fields": fields, "validation_errors": kinds},
        )
    match = _HTTP_STATUS_TEXT.search(text)
    if match:
        failure = classify_status(int(match.group(1)), taxonomy=taxonomy, policy=policy)
        return _with_message(failure, text)
    if _UNKNOWN_TOOL_TEXT.search(text):
        return failure_for("unknown_target", taxonomy=taxonomy, policy=policy, message=text)
    return None


def classify_jsonrpc(code: int, message: str, *, taxonomy: Taxonomy, policy: ToolPolicy) -> Failure:
    """A JSON-RPC error a tools/call got (MCP's protocol errors)."""
    evidence = {"jsonrpc_code": code}
    if code == METHOD_NOT_FOUND or (code == INVALID_PARAMS and _UNKNOWN_TOOL_TEXT.search(message)):
        reason = "unknown_target"
    else:
        found = classify_text(message, taxonomy=taxonomy, policy=policy)
        arguments = ("missing_required_argument", "argument_coercion_failed")
        # Invalid params are always an argument reason: the message only says which.
        if found is not None and (code != INVALID_PARAMS or found.reason in arguments):
            return Failure(
                found.reason,
                found.stage,
                found.execution_state,
                found.message,
                {**evidence, **found.evidence},
            )
        if code != INVALID_PARAMS:
            reason = "uncaught_server_error"
        elif _MISSING_TEXT.search(message):
            reason = "missing_required_argument"
        else:
            reason = "argument_coercion_failed"
    return failure_for(reason, taxonomy=taxonomy, policy=policy, message=message, evidence=evidence)


# --- what to do about it ----------------------------------------------------------------------


def effective_side_effect(policy: ToolPolicy, evidence: Mapping[str, Any]) -> str:
    """The declared grade, else one read from the HTTP method; "" when unknown (the desk's
    ``effective_side_effect``)."""
    if policy.side_effect:
        return policy.side_effect
    method = str(evidence.get("http_method") or evidence.get("method") or "").upper()
    if method in _READ_METHODS:
        return "read"
    return "external_write" if method else ""


def derive(failure: Failure, *, taxonomy: Taxonomy, policy: ToolPolicy) -> Verdict:
    """The lane and next action of a failure: ``triage/vocabulary/lanes.py``'s ``classify`` for a
    runtime that sends its own execution state and no lane."""
    info = taxonomy.reason(failure.reason)
    side_effect = effective_side_effect(policy, failure.evidence)
    state = failure.execution_state
    if info is None or state == "partially_completed":
        lane = "manual_investigation"
    else:
        rate_limited = failure.reason == "http_4xx" and (
            failure.evidence.get("http_status") == 429
            or failure.evidence.get("rate_limited") is True
        )
        if failure.reason in _TRANSIENT_REASONS or rate_limited:
            if not _is_write(side_effect):
                lane = "retry_safe"
            elif state == "not_started":
                lane = policy.timeout_before_send_lane
            else:
                lane = policy.timeout_after_send_lane
        else:
            lane = info.lane
        if policy.approval_required and info.stage == "auth_preflight":
            lane = "policy_blocked"
    return Verdict(
        lane=lane,
        execution_state=state,
        retryable=lane == "retry_safe",
        next_action=taxonomy.next_action(lane),
        side_effect=side_effect,
    )


def envelope_status(verdict: Verdict) -> str:
    if verdict.lane == "policy_blocked":
        return "blocked"
    if verdict.execution_state in ("started_unknown", "partially_completed"):
        return "uncertain"
    return "failed"


# What the agent may repeat to its user: no detail of the failure, only what happens now.
_USER_MESSAGES = {
    "retry_safe": "The request failed for now and can be tried again shortly.",
    "reconcile_first": (
        "The request may have gone through. It was not sent again; its result is checked first."
    ),
    "input_stale": "The request could not run as given; its inputs need correcting first.",
    "policy_blocked": (
        "This action is not permitted without approval or other credentials; it was stopped."
    ),
    "manual_investigation": "The request failed in a way a person needs to look at; it was "
    "not retried.",
}
# Evidence keys the agent sees: facts about the call, never its data.
_AGENT_EVIDENCE = (
    "http_status",
    "http_method",
    "error_type",
    "jsonrpc_code",
    "fields",
    "validation_errors",
    "rate_limited",
)


def envelope(
    failure: Failure,
    verdict: Verdict,
    *,
    taxonomy: Taxonomy,
    idempotency_key: str = "",
    lookup: str = "",
) -> dict[str, Any]:
    """Seed 004's envelope: what the agent reads before any prose."""
    evidence = {key: failure.evidence[key] for key in _AGENT_EVIDENCE if key in failure.evidence}
    if lookup and verdict.lane == "reconcile_first":
        evidence["lookup"] = lookup
    execution: dict[str, Any] = {"state": verdict.execution_state}
    if idempotency_key:
        execution["idempotency_key"] = idempotency_key
    return {
        "status": envelope_status(verdict),
        "code": failure.reason.upper(),
        "retry": {
            "allowed": verdict.retryable,
            "reason": taxonomy.lanes[verdict.lane].meaning[:500],
            "next_action": verdict.next_action,
        },
        "execution": execution,
        "evidence": evidence,
        "user_safe_message": _USER_MESSAGES[verdict.lane],
    }


def envelope_item(
    answer: Mapping[str, Any],
    failure: Failure,
    *,
    tool: str,
    collection: str,
    side_effect: str = "",
    trace_id: str = "",
    span_id: str = "",
) -> dict[str, Any]:
    """The desk's ``envelope`` item for a failure whose agent got ``answer``: the envelope
    exactly as the agent got it, the reason and stage named (so the desk need not map the
    code), the operator's message, and the call's span when there is one."""
    body: dict[str, Any] = {
        **answer,
        "tool": tool,
        "collection": collection,
        "reason": failure.reason,
        "stage": failure.stage,
    }
    if failure.message:
        body["message"] = failure.message
    if side_effect:
        body["side_effect"] = side_effect
    if trace_id and span_id:
        body["trace_id"] = trace_id
        body["span_id"] = span_id
    return body


def is_transport_error(error: BaseException) -> bool:
    """Whether an exception is a timeout or a connection failure (by class name)."""
    names = _type_names(error)
    return bool(names & (_TIMEOUT_TYPES | _NETWORK_TYPES | _NOT_SENT_TYPES))


def is_envelope(value: Any) -> bool:
    """Whether a structured result already is a seed 004 envelope (someone answered)."""
    return (
        isinstance(value, Mapping)
        and value.get("status") in ENVELOPE_STATUSES
        and isinstance(value.get("code"), str)
        and isinstance(value.get("retry"), Mapping)
        and isinstance(value.get("execution"), Mapping)
        and value["execution"].get("state") in EXECUTION_STATES
    )


# --- helpers ----------------------------------------------------------------------------------


def _is_write(side_effect: str) -> bool:
    # An undeclared tool may write: assume it does, so nothing suggests a blind retry.
    return side_effect in _WRITE_GRADES or side_effect == ""


def _only(section: Mapping[str, Any], names: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(section) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")


def _section(declaration: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    value = declaration.get(name) or {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}.{name} must be a mapping")
    return value


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _type_names(error: BaseException) -> set[str]:
    return {klass.__name__ for klass in type(error).__mro__}


def _refused(error: BaseException) -> bool:
    """A wrapper whose arguments or reason hold a connect-phase failure (requests'
    ConnectionError wraps urllib3's MaxRetryError, whose reason is NewConnectionError;
    urllib's URLError holds ConnectionRefusedError as its reason)."""
    inner = [getattr(error, "reason", None), *getattr(error, "args", ())]
    for value in inner:
        nested = getattr(value, "reason", value)
        for candidate in (value, nested):
            if isinstance(candidate, BaseException) and _type_names(candidate) & _NOT_SENT_TYPES:
                return True
    return False


def _http_status(error: BaseException) -> int | None:
    """An HTTP status by attribute: ``response.status_code`` (httpx, requests),
    ``status_code``, ``status`` (aiohttp), urllib's HTTPError ``code``. Only 100-599: MCP
    errors have a negative ``code`` of their own."""
    response = getattr(error, "response", None)
    candidates = [
        getattr(response, "status_code", None) if response is not None else None,
        getattr(error, "status_code", None),
        getattr(error, "status", None),
    ]
    if "HTTPError" in _type_names(error):
        candidates.append(getattr(error, "code", None))
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value if value >= 400 else None
    return None


def _http_method(error: BaseException) -> str:
    # httpx's `request` is a property that raises when no request is attached.
    try:
        request = getattr(error, "request", None)
    except RuntimeError:
        return ""
    method = getattr(request, "method", None)
    if isinstance(method, bytes):
        method = method.decode("ascii", "replace")
    return method.upper() if isinstance(method, str) else ""


def _first(values: Iterator[Any]) -> Any:
    for value in values:
        if value:
            return value
    return None


def _describe(error: BaseException) -> str:
    chain = list(_chain(error))
    root = chain[-1] if len(chain) > 1 else error
    text = str(root) or str(error)
    return f"{type(root).__name__}: {text}"[:_MAX_MESSAGE] if text else type(root).__name__


def _with_message(failure: Failure, message: str) -> Failure:
    return Failure(
        failure.reason,
        failure.stage,
        failure.execution_state,
        message[:_MAX_MESSAGE],
        failure.evidence,
    )
