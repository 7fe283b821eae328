"""Item type `envelope`: seed 004's error envelope, as a tool runtime answered its agent.

The body is the envelope as the seed writes it, with the failed call's `tool` and
`collection` beside it::

    {"status": "uncertain", "code": "REMOTE_TIMEOUT_AFTER_ACCEPT",
     "retry": {"allowed": false, "reason": "...", "next_action": "query_by_idempotency_key"},
     "execution": {"state": "started_unknown", "idempotency_key": "notify:invoice-819"},
     "evidence": {"request_id": "req_7df1"}, "user_safe_message": "...",
     "tool": "send_invoice", "collection": "billing"}

Optional beside it: `reason` and `stage` (the desk's codes; an explicit reason wins over the
code table), `message`, `trace_id` + `span_id`, `occurred_at`, and any field a `failure`
item takes. The envelope becomes one failure record: its `code` names the reason through
the code table (`envelope_codes()`: the built-in table below plus the operators'
TRIAGE_ENVELOPE_CODES), and a code nobody mapped is stored as the reason itself and listed
with the unmapped reasons. Its claims (`status`, `retry.allowed`, `execution.state`) are
the runtime's: kept, and checked against the desk's own derivation like a runtime-sent
lane (`envelope_contradictions`). The envelope itself is kept in `extra["envelope"]`,
scrubbed like every body, so the group page shows what the agent was told.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.conf import settings

from core.http import strong_etag
from core.storable import identifier_problem
from triage.intake.normalize import FailureFields, ItemError, parse_failure
from triage.vocabulary import taxonomy
from triage.vocabulary.lanes import Classification, most_cautious_lane

ENVELOPE_STATUSES: tuple[str, ...] = ("failed", "uncertain", "blocked")
# Where an envelope item keeps the envelope in the record's `extra`.
EXTRA_KEY = "envelope"

# Codes runtimes commonly put in an envelope, each to the catalog reason whose lane and
# execution state fit what the code says happened. Operators add or override codes with
# TRIAGE_ENVELOPE_CODES; a code spelled like a desk reason (any case) needs no entry.
BUILTIN_ENVELOPE_CODES: dict[str, str] = {
    # Seed 004's own example: a write timed out after the remote side accepted it. timeout
    # is the reason whose state is started_unknown; the lane module sends a write that
    # timed out after send to reconcile_first, as the envelope's next_action says.
    "REMOTE_TIMEOUT_AFTER_ACCEPT": "timeout",
    "TIMEOUT": "timeout",
    "REQUEST_TIMEOUT": "timeout",
    "DEADLINE_EXCEEDED": "timeout",
    # Seed 004's receipt: approval required, nothing started. The taxonomy has no approval
    # reason; auth_context_required is the closest policy reason: refused in the auth
    # preflight before anything is sent (not_started), lane policy_blocked (stop, never
    # work around it), which is what the seed asks of a missing approval. auth_failed is
    # not: it says the downstream API was called and answered 401/403.
    "POLICY_APPROVAL_REQUIRED": "auth_context_required",
    "APPROVAL_REQUIRED": "auth_context_required",
    # A rate limit is a 4xx the desk retries with backoff on reads (the lane module treats
    # http_4xx with rate_limited evidence like a transient failure; see RATE_LIMIT_CODES).
    "RATE_LIMITED": "http_4xx",
    "TOO_MANY_REQUESTS": "http_4xx",
    # The remote side refused the caller's credentials or permissions: auth_failed, lane
    # policy_blocked (seed 004: a permission refusal is never worked around).
    "UNAUTHENTICATED": "auth_failed",
    "UNAUTHORIZED": "auth_failed",
    "PERMISSION_DENIED": "auth_failed",
    "FORBIDDEN": "auth_failed",
    "CREDENTIALS_EXPIRED": "auth_failed",
    # A definitive rejection of the request as sent: http_4xx, lane input_stale (seed 004:
    # a 409 revision mismatch means reading fresh input and re-planning).
    "INVALID_REQUEST": "http_4xx",
    "NOT_FOUND": "http_4xx",
    "CONFLICT": "http_4xx",
    "PRECONDITION_FAILED": "http_4xx",
    # The remote side failed: http_5xx (retry_safe on reads, started_unknown on writes).
    "UPSTREAM_ERROR": "http_5xx",
    "SERVICE_UNAVAILABLE": "http_5xx",
    "BAD_GATEWAY": "http_5xx",
    # No meaningful answer from the transport: network_error (execution state maybe).
    "CONNECTION_RESET": "network_error",
    "CONNECTION_FAILED": "network_error",
    "UNAVAILABLE": "network_error",
    # Refused before the call, by the tool runtime's own argument checks (MCP's -32602).
    "INVALID_ARGUMENT": "argument_coercion_failed",
    "INVALID_PARAMS": "argument_coercion_failed",
    "MISSING_ARGUMENT": "missing_required_argument",
    # The agent named a tool the runtime does not have (MCP's -32601 / unknown tool).
    "UNKNOWN_TOOL": "unknown_target",
    "TOOL_NOT_FOUND": "unknown_target",
    # The tool runtime itself raised: a bug to fix, manual_investigation.
    "INTERNAL_ERROR": "uncaught_server_error",
}
# Codes that say the call was rate limited: the record's evidence gets rate_limited: true
# (unless it says otherwise), which is what lets the lane module retry an http_4xx.
RATE_LIMIT_CODES = frozenset({"RATE_LIMITED", "TOO_MANY_REQUESTS"})

# Limits of what an envelope may carry; bigger or deeper envelopes are refused, not cut.
MAX_ENVELOPE_BYTES = 32 * 1024  # the envelope's members as canonical JSON (UTF-8)
MAX_ENVELOPE_DEPTH = 8  # arrays and objects inside one member (evidence, retry, execution)
# Under the scrubber's cut of every string (triage.scrub.MAX_STRING_CHARS, applied before
# this module sees the body), so a longer message is refused rather than cut short.
MAX_USER_MESSAGE_CHARS = 1000
MAX_RETRY_REASON_CHARS = 500
MAX_IDEMPOTENCY_KEY_CHARS = 300  # FailureRecord.idempotency_key

_MEMBERS = ("status", "code", "retry", "execution", "evidence", "user_safe_message")
# A failure item's fields for what an envelope says in its own members: both at once would
# be two answers to one question, so the envelope's spelling is the only one taken.
_SAID_BY_MEMBERS = {
    "execution_state": "execution.state",
    "idempotency_key": "execution.idempotency_key",
    "retryable": "retry.allowed",
    EXTRA_KEY: "the envelope's own members",
}
_CODE_RE = re.compile(r"[A-Za-z0-9_.:\-]{1,100}")
# Text meant for people keeps line breaks and tabs; every other control character (C0, DEL,
# C1, line and paragraph separators) is refused: it hides text or breaks what shows it.
_CONTROL_IN_TEXT_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")


def envelope_codes() -> dict[str, str]:
    """The code table in force: the built-in codes, then the operators' (which win)."""
    return {**BUILTIN_ENVELOPE_CODES, **settings.TRIAGE_ENVELOPE_CODES}


def reason_for_code(code: str, *, table: Mapping[str, str]) -> str | None:
    """The desk reason an envelope code names, or None when nobody mapped it."""
    if code in table:
        return table[code]
    for spelling in (code, code.lower()):
        if spelling in taxonomy.REASONS:
            return spelling
    return None


def envelope_status(*, lane: str, execution_state: str) -> str:
    """The status an envelope should carry for a classified failure (seed 004)."""
    if lane == "policy_blocked":
        return "blocked"
    if execution_state in ("started_unknown", "partially_completed"):
        return "uncertain"
    return "failed"


def parse_envelope(
    body: Mapping[str, Any], *, now: datetime, prefix: str = "body"
) -> FailureFields:
    """The failure an envelope item reports, its envelope kept in `extra["envelope"]`."""
    for name, member in _SAID_BY_MEMBERS.items():
        if name in body:
            raise ItemError(
                "invalid_field",
                f"{prefix}.{name}",
                f"an envelope says this in {member}; send it there, not as {name}.",
            )
    status = body.get("status")
    if status is None or status == "":
        raise ItemError("missing_field", f"{prefix}.status", "status is required.")
    if status not in ENVELOPE_STATUSES:
        raise ItemError(
            "invalid_field",
            f"{prefix}.status",
            f"status must be one of {', '.join(ENVELOPE_STATUSES)}.",
        )
    code = _code(body.get("code"), path=f"{prefix}.code", required=True)
    if body.get("tool") in (None, ""):
        # An envelope is a tool call's answer: without the tool, no group says whose.
        raise ItemError("missing_field", f"{prefix}.tool", "tool is required.")
    retry = _member_object(body, "retry", prefix=prefix)
    execution = _member_object(body, "execution", prefix=prefix)
    evidence = _member_object(body, "evidence", prefix=prefix)
    allowed = retry.get("allowed")
    if allowed is not None and not isinstance(allowed, bool):
        raise ItemError(
            "invalid_field", f"{prefix}.retry.allowed", "retry.allowed must be true or false."
        )
    _text(retry.get("reason"), path=f"{prefix}.retry.reason", limit=MAX_RETRY_REASON_CHARS)
    _code(retry.get("next_action"), path=f"{prefix}.retry.next_action")
    state = execution.get("state")
    if state is not None and state not in taxonomy.EXECUTION_STATES:
        raise ItemError(
            "invalid_field",
            f"{prefix}.execution.state",
            f"execution.state must be one of {', '.join(taxonomy.EXECUTION_STATES)}.",
        )
    key = _identifier(
        execution.get("idempotency_key"),
        path=f"{prefix}.execution.idempotency_key",
        limit=MAX_IDEMPOTENCY_KEY_CHARS,
    )
    for evidence_key in evidence:
        if (problem := identifier_problem(evidence_key)) is not None:
            raise ItemError(
                "invalid_character",
                f"{prefix}.evidence",
                f"an evidence key holds {problem}, which a key may not hold.",
            )
    _text(
        body.get("user_safe_message"),
        path=f"{prefix}.user_safe_message",
        limit=MAX_USER_MESSAGE_CHARS,
        line_breaks=True,
    )
    envelope = {name: body[name] for name in _MEMBERS if body.get(name) is not None}
    _check_size(envelope, prefix=prefix)

    explicit = body.get("reason")
    mapped = reason_for_code(code, table=envelope_codes())
    reason = explicit if explicit not in (None, "") else (mapped or code)
    info = taxonomy.reason_info(reason) if isinstance(reason, str) else None
    # An envelope answers a tool call, so a failure nothing else places happened there.
    stage = body.get("stage") or (info.stage if info is not None else "execute")
    record_evidence = dict(evidence)
    if code in RATE_LIMIT_CODES and reason == mapped == "http_4xx":
        record_evidence.setdefault("rate_limited", True)

    failure_body = {key: value for key, value in body.items() if key not in _MEMBERS}
    failure_body.update(
        stage=stage,
        reason=reason,
        evidence=record_evidence,
        idempotency_key=key,
        # The runtime's claims, checked against the derivation like any sent lane.
        execution_state=state or ("started_unknown" if status == "uncertain" else None),
        retryable=allowed,
    )
    if status == "blocked" and not body.get("lane"):
        failure_body["lane"] = "policy_blocked"
    if not body.get("message"):
        reason_text = retry.get("reason") or ""
        failure_body["message"] = f"{code}: {reason_text}" if reason_text else code
    fields = parse_failure(failure_body, now=now, prefix=prefix)
    fields.extra[EXTRA_KEY] = envelope
    return fields


def envelope_contradictions(
    envelope: Mapping[str, Any], derived: Classification, *, reason: str
) -> list[dict[str, Any]]:
    """Where an envelope's own claims contradict the desk's classification of its failure,
    beyond what the lane module already checks (its lane, state and retryable claims): its
    status, and a next action that belongs to a less cautious lane than the failure's."""
    found: list[dict[str, Any]] = []
    expected = envelope_status(lane=derived.lane, execution_state=derived.execution_state)
    sent_status = envelope.get("status")
    if isinstance(sent_status, str) and sent_status != expected:
        found.append(
            {
                "code": f"status_contradicts_{reason}",
                "field": "status",
                "sent": sent_status,
                "derived": expected,
            }
        )
    retry = envelope.get("retry")
    next_action = retry.get("next_action") if isinstance(retry, Mapping) else None
    lane_of_action = _LANE_OF_NEXT_ACTION.get(next_action) if next_action else None
    if (
        lane_of_action is not None
        and lane_of_action != derived.lane
        and most_cautious_lane(lane_of_action, derived.lane) == derived.lane
    ):
        found.append(
            {
                "code": f"next_action_in_{derived.lane}",
                "field": "retry.next_action",
                "sent": next_action,
                "derived": taxonomy.LANE_NEXT_ACTION[derived.lane],
            }
        )
    return found


_LANE_OF_NEXT_ACTION = {action: lane for lane, action in taxonomy.LANE_NEXT_ACTION.items()}


def _member_object(body: Mapping[str, Any], name: str, *, prefix: str) -> dict[str, Any]:
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ItemError("invalid_field", f"{prefix}.{name}", f"{name} must be an object.")
    return value


def _code(value: Any, *, path: str, required: bool = False) -> str:
    name = path.rsplit(".", 1)[-1]
    if value is None or value == "":
        if required:
            raise ItemError("missing_field", path, f"{name} is required.")
        return ""
    if not isinstance(value, str):
        raise ItemError("invalid_field", path, f"{name} must be a string.")
    if (problem := identifier_problem(value)) is not None:
        raise ItemError("invalid_character", path, f"{name} holds {problem}.")
    if not _CODE_RE.fullmatch(value):
        raise ItemError(
            "invalid_field",
            path,
            f"{name} must be 1-100 letters, digits, '_', '.', ':' or '-'.",
        )
    return value


def _identifier(value: Any, *, path: str, limit: int) -> str:
    name = path.rsplit(".", 1)[-1]
    if value is None or value == "":
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ItemError("invalid_field", path, f"{name} must be a string.")
    text = str(value)
    if (problem := identifier_problem(text)) is not None:
        raise ItemError("invalid_character", path, f"{name} holds {problem}.")
    if len(text) > limit:
        raise ItemError("value_too_large", path, f"{name} is longer than {limit} characters.")
    return text


def _text(value: Any, *, path: str, limit: int, line_breaks: bool = False) -> str:
    name = path.rsplit(".", 1)[-1]
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ItemError("invalid_field", path, f"{name} must be a string.")
    refused = _CONTROL_IN_TEXT_RE if line_breaks else _CONTROL_IN_ONE_LINE_RE
    if refused.search(value) is not None:
        what = "a control character" if line_breaks else "a control character or line break"
        raise ItemError("invalid_character", path, f"{name} holds {what}.")
    if len(value) > limit:
        raise ItemError("value_too_large", path, f"{name} is longer than {limit} characters.")
    return value


_CONTROL_IN_ONE_LINE_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _check_size(envelope: dict[str, Any], *, prefix: str) -> None:
    for name, value in envelope.items():
        if _depth(value) > MAX_ENVELOPE_DEPTH:
            raise ItemError(
                "value_too_deep",
                f"{prefix}.{name}",
                f"{name} nests deeper than {MAX_ENVELOPE_DEPTH} levels of arrays and objects.",
            )
    sizes = {
        name: len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        for name, value in envelope.items()
    }
    if sum(sizes.values()) > MAX_ENVELOPE_BYTES:
        largest = max(sizes, key=sizes.__getitem__)
        raise ItemError(
            "value_too_large",
            f"{prefix}.{largest}",
            f"the envelope is larger than {MAX_ENVELOPE_BYTES // 1024} KiB as JSON "
            f"({largest} is the largest member).",
        )


def _depth(value: Any) -> int:
    """Levels of arrays and objects in a JSON value (the scrubber already bounds it)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


def taxonomy_document() -> tuple[dict[str, Any], str]:
    """What GET /api/v1/taxonomy answers (`triage.vocabulary.taxonomy.public_document()` plus the
    code table in force as `envelope_codes`), and its strong ETag (a hash of it)."""
    return _taxonomy_document(tuple(sorted(envelope_codes().items())))


# The document changes only with a deploy (code, catalogs) or the code table, which is its
# key here: a poll then costs a dictionary lookup instead of about 3 ms of translating.
@functools.lru_cache(maxsize=4)
def _taxonomy_document(codes: tuple[tuple[str, str], ...]) -> tuple[dict[str, Any], str]:
    body: dict[str, Any] = {**taxonomy.public_document(), "envelope_codes": dict(codes)}
    return body, strong_etag(body)
