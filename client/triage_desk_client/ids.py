"""Stable item ids: the same item reported twice gets the same id, so the desk answers
``duplicate`` instead of storing it twice; a different item never shares one (which the
desk would refuse as a ``conflict``).

An id is a readable prefix (what the item is about: plan, step, event type, sequence) and
16 hex digits of the SHA-256 of the item's canonical JSON. A receipt is identified by its
``tool_run_id`` (and ``attempt``), as the runtime gave them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

MAX_ID_LENGTH = 200  # the desk's limit
_DIGEST_LENGTH = 16


def digest(canonical: bytes) -> str:
    return hashlib.sha256(canonical).hexdigest()[:_DIGEST_LENGTH]


def _text(value: Any) -> str:
    return str(value) if value not in (None, "") else "-"


def _join(*parts: str, canonical: bytes) -> str:
    tail = digest(canonical)
    prefix = "/".join(parts)
    room = MAX_ID_LENGTH - len(tail) - 1
    return f"{prefix[:room]}/{tail}"


def failure_id(body: Mapping[str, Any], canonical: bytes) -> str:
    return _join(
        "failure",
        _text(body.get("plan_id")),
        _text(body.get("step_id")),
        _text(body.get("stage")),
        _text(body.get("reason")),
        canonical=canonical,
    )


def runner_event_id(
    body: Mapping[str, Any], canonical: bytes, *, sequence: int | None = None
) -> str:
    parts = [
        _text(body.get("plan_id")),
        _text(body.get("step_id") or body.get("failed_step")),
        _text(body.get("type")),
    ]
    if sequence is not None:
        parts.append(str(sequence))
    return _join(*parts, canonical=canonical)


def receipt_id(body: Mapping[str, Any], canonical: bytes) -> str:
    """The receipt's ``tool_run_id`` (``tool_run_id#attempt`` when it names its attempt):
    one tool run, one receipt."""
    tool_run_id = body.get("tool_run_id")
    attempt = body.get("attempt")
    if isinstance(tool_run_id, str) and tool_run_id:
        receipt = f"{tool_run_id}#{attempt}" if attempt not in (None, "") else tool_run_id
        if len(receipt) <= MAX_ID_LENGTH:
            return receipt
    return _join("receipt", _text(body.get("tool")), canonical=canonical)


def audit_event_id(body: Mapping[str, Any], canonical: bytes) -> str:
    return _join(
        "audit",
        _text(body.get("tool_run_id") or body.get("idempotency_key")),
        _text(body.get("method")),
        canonical=canonical,
    )


def learning_attempt_id(body: Mapping[str, Any], canonical: bytes) -> str:
    """The record's ``attempt_id`` and its digest: ``build_trace_learning_record`` derives
    the same ``attempt_id`` for every attempt at one query when it is given no
    ``created_at``, and two attempts must not share an id."""
    return _join(
        "attempt",
        _text(body.get("attempt_id")),
        canonical=canonical,
    )
