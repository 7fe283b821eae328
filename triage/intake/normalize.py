"""Turn one scrubbed ingest item body into typed fields, or say exactly what is wrong.

Every item type is parsed here, with the same reader, so the contract lives in one place.
Bodies arrive already scrubbed (triage.scrub); nothing here ever echoes a value back in an
error message, only the field at fault.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime

from core.collection_names import INVALID_COLLECTION_NAME, collection_name_problem
from triage.intake.runner_events import failure_from_runner_event
from triage.models import QUALITY_LAB_SOURCE
from triage.vocabulary import taxonomy
from triage.vocabulary.lanes import Sent

ITEM_TYPES = ("failure", "runner_event", "receipt", "audit_event", "envelope")
_CODE_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,100}\Z")
# Clocks drift; a record claiming to come from further ahead than this is refused.
_MAX_CLOCK_SKEW = timedelta(hours=1)
# Runner events repeat every step's raw output and resolved arguments; the desk keeps the
# compact facts (sizes, ids, errors) and notes which bulky fields it left out.
_BULKY_RUNNER_FIELDS = frozenset({"trace_steps", "output", "output_preview", "args_resolved"})


# What a runtime may send as a failure's source: quality_lab is the desk's own (refused
# as reserved_source by the ingest path), so an error message never offers it.
_RUNTIME_SOURCES = tuple(source for source in taxonomy.SOURCES if source != QUALITY_LAB_SOURCE)


class ItemError(Exception):
    """An item that cannot be stored; code and field are part of the API contract."""

    def __init__(self, code: str, field: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.field = field
        self.message = message


class BodyReader:
    """Reads known fields from a body and remembers which ones it consumed."""

    def __init__(self, body: Mapping[str, Any], *, prefix: str = "body") -> None:
        self.body = body
        self.prefix = prefix
        self.consumed: set[str] = set()

    def _raw(self, name: str) -> Any:
        self.consumed.add(name)
        return self.body.get(name)

    def _path(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def string(self, name: str, *, max_length: int = 200, required: bool = False) -> str:
        value = self._raw(name)
        if value is None or value == "":
            if required:
                raise ItemError("missing_field", self._path(name), f"{name} is required.")
            return ""
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ItemError("invalid_field", self._path(name), f"{name} must be a string.")
        text = str(value)
        if len(text) > max_length:
            raise ItemError(
                "invalid_field", self._path(name), f"{name} is longer than {max_length} chars."
            )
        return text

    def code(self, name: str, *, required: bool = False) -> str:
        value = self.string(name, max_length=100, required=required)
        if value and not _CODE_RE.match(value):
            raise ItemError(
                "invalid_field",
                self._path(name),
                f"{name} must be a code of letters, digits, '_', '.', ':' or '-'.",
            )
        return value

    def choice(
        self, name: str, choices: tuple[str, ...], *, listed: tuple[str, ...] | None = None
    ) -> str | None:
        """One of ``choices``; the error names ``listed`` (what a runtime may send) when given."""
        value = self._raw(name)
        if value is None or value == "":
            return None
        if value not in choices:
            shown = ", ".join(listed or choices)
            raise ItemError("invalid_field", self._path(name), f"{name} must be one of {shown}.")
        return str(value)

    def boolean(self, name: str) -> bool | None:
        value = self._raw(name)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise ItemError("invalid_field", self._path(name), f"{name} must be true or false.")
        return value

    def integer(self, name: str, *, minimum: int = 0, maximum: int = 2**31 - 1) -> int | None:
        value = self._raw(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ItemError("invalid_field", self._path(name), f"{name} must be an integer.")
        if not minimum <= value <= maximum:
            raise ItemError(
                "invalid_field", self._path(name), f"{name} must be in {minimum}..{maximum}."
            )
        return value

    def timestamp(self, name: str, *, now: datetime) -> datetime | None:
        value = self._raw(name)
        if value is None or value == "":
            return None
        try:
            parsed = parse_datetime(value) if isinstance(value, str) else None
        except ValueError:  # well-formed but impossible: year 0, month 13, offset >= 24h
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            raise ItemError(
                "invalid_field",
                self._path(name),
                f"{name} must be an ISO 8601 timestamp with a time zone.",
            )
        if parsed > now + _MAX_CLOCK_SKEW:
            raise ItemError("invalid_field", self._path(name), f"{name} is in the future.")
        return parsed

    def mapping(self, name: str) -> dict[str, Any]:
        value = self._raw(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ItemError("invalid_field", self._path(name), f"{name} must be an object.")
        return value

    def collection(self) -> str:
        """The collection's name ("collection", or "collection_id"), by the one rule."""
        for name in ("collection", "collection_id"):
            value = self._raw(name)
            if value is None or value == "":
                continue
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)  # a numeric collection id
            problem = collection_name_problem(value)
            if problem is not None:
                raise ItemError(INVALID_COLLECTION_NAME, self._path(name), f"{name} {problem}.")
            return str(value)
        return ""

    def rest(self) -> dict[str, Any]:
        """Fields nobody asked for: preserved (scrubbed) in `extra`."""
        return {key: value for key, value in self.body.items() if key not in self.consumed}


@dataclass
class FailureFields:
    collection: str
    source: str
    stage: str
    reason: str
    message: str
    tool: str
    plan_id: str
    step_id: str
    evidence: dict[str, Any]
    extra: dict[str, Any]
    idempotency_key: str
    occurred_at: datetime
    graph_tool_call_version: str
    declared_side_effect: str
    sent: Sent
    # Fields where NUL or lone surrogates were replaced (triage.intake.storable).
    replaced_characters: list[str] = field(default_factory=list)
    # The failed call's OpenTelemetry span ("" when not sent): one record per span.
    trace_id: str = ""
    span_id: str = ""
    # The runtime's release ("" when not sent): Release.version in the same collection.
    release: str = ""

    @property
    def reason_mapped(self) -> bool:
        return taxonomy.reason_info(self.reason) is not None


@dataclass
class RunnerEventFields:
    collection: str
    event_type: str
    plan_id: str
    step_id: str
    tool: str
    stage: str
    occurred_at: datetime
    graph_tool_call_version: str
    payload: dict[str, Any]
    failure: FailureFields | None = None
    replaced_characters: list[str] = field(default_factory=list)


@dataclass
class ReceiptFields:
    values: dict[str, Any] = field(default_factory=dict)
    sent_lane: str | None = None
    declared_side_effect: str = ""


@dataclass
class AuditEventFields:
    values: dict[str, Any] = field(default_factory=dict)


def parse_failure(body: Mapping[str, Any], *, now: datetime, prefix: str = "body") -> FailureFields:
    reader = BodyReader(body, prefix=prefix)
    stage = reader.code("stage", required=True)
    reason = reader.code("reason", required=True)
    trace_id, span_id = _span_identity(reader)
    sent = Sent(
        lane=reader.choice("lane", taxonomy.LANES),
        execution_state=reader.choice("execution_state", taxonomy.EXECUTION_STATES),
        retryable=reader.boolean("retryable"),
        operator_action=reader.code("operator_action") or None,
    )
    return FailureFields(
        collection=reader.collection(),
        source=reader.choice("source", taxonomy.SOURCES, listed=_RUNTIME_SOURCES) or "runtime",
        stage=stage,
        reason=reason,
        message=reader.string("message", max_length=4000),
        tool=reader.string("tool"),
        plan_id=reader.string("plan_id"),
        step_id=reader.string("step_id"),
        evidence=reader.mapping("evidence"),
        idempotency_key=reader.string("idempotency_key", max_length=300),
        occurred_at=reader.timestamp("occurred_at", now=now) or now,
        graph_tool_call_version=reader.string("graph_tool_call_version", max_length=40),
        declared_side_effect=reader.choice("side_effect", taxonomy.SIDE_EFFECT_GRADES) or "",
        sent=sent,
        trace_id=trace_id,
        span_id=span_id,
        # Control characters and length are checked against the column (triage.intake.storable).
        release=reader.string("release", max_length=10_000),
        extra=reader.rest(),
    )


_TRACE_ID_RE = re.compile(r"[0-9a-f]{32}")
_SPAN_ID_RE = re.compile(r"[0-9a-f]{16}")


def _span_identity(reader: BodyReader) -> tuple[str, str]:
    """The (trace_id, span_id) of the failed call's span, both or neither, in W3C's spelling:
    lowercase hex, 32 and 16 digits, not all zero (uppercase is read as lowercase)."""
    ids = []
    for name, pattern, digits in (("trace_id", _TRACE_ID_RE, 32), ("span_id", _SPAN_ID_RE, 16)):
        value = reader._raw(name)
        if value is None or value == "":
            ids.append("")
            continue
        text = value.lower() if isinstance(value, str) else ""
        if not pattern.fullmatch(text) or not text.strip("0"):
            raise ItemError(
                "invalid_span_id",
                reader._path(name),
                f"{name} must be {digits} hex digits, not all zero.",
            )
        ids.append(text)
    trace_id, span_id = ids
    if bool(trace_id) != bool(span_id):
        missing = "span_id" if trace_id else "trace_id"
        raise ItemError(
            "invalid_span_id", reader._path(missing), "trace_id and span_id are sent together."
        )
    return trace_id, span_id


def parse_runner_event(body: Mapping[str, Any], *, now: datetime) -> RunnerEventFields:
    reader = BodyReader(body)
    fields = RunnerEventFields(
        event_type=reader.code("type", required=True),
        collection=reader.collection(),
        plan_id=reader.string("plan_id"),
        step_id=reader.string("step_id"),
        tool=reader.string("tool"),
        stage=reader.code("stage"),
        occurred_at=reader.timestamp("occurred_at", now=now)
        or reader.timestamp("timestamp", now=now)
        or now,
        graph_tool_call_version=reader.string("graph_tool_call_version", max_length=40),
        payload=_compact_runner_payload(body),
    )
    failure = failure_from_runner_event(body)
    if failure is not None:
        record = {key: value for key, value in failure.items() if value is not None}
        record.setdefault("collection", fields.collection)
        record["occurred_at"] = fields.occurred_at.isoformat()
        for key in (
            "source",
            "lane",
            "retryable",
            "idempotency_key",
            "side_effect",
            "trace_id",
            "span_id",
            "release",
        ):
            if key in body:
                record.setdefault(key, body[key])
        fields.failure = parse_failure(record, now=now)
    return fields


def _compact_runner_payload(body: Mapping[str, Any]) -> dict[str, Any]:
    payload = {key: value for key, value in body.items() if key not in _BULKY_RUNNER_FIELDS}
    omitted = sorted(key for key in body if key in _BULKY_RUNNER_FIELDS)
    if omitted:
        payload["omitted_fields"] = omitted
    return payload


def parse_receipt(body: Mapping[str, Any], *, now: datetime) -> ReceiptFields:
    reader = BodyReader(body)
    values: dict[str, Any] = {
        "tool_run_id": reader.string("tool_run_id", required=True),
        "tool": reader.string("tool", required=True),
        "collection": reader.collection(),
        "tool_version": reader.string("tool_version", max_length=60),
        "authority_scope": reader.string("authority_scope", max_length=300),
        "target_fingerprint": reader.string("target_fingerprint"),
        "payload_hash": reader.string("payload_hash"),
        "attempt": reader.integer("attempt", minimum=1) or 1,
        "result": reader.code("result", required=True),
        "code": reader.code("code"),
        "reason": reader.code("reason"),
        "execution_state": reader.choice("execution_state", taxonomy.EXECUTION_STATES),
        "next_action": reader.code("next_action"),
        "retryable": reader.boolean("retryable"),
        "idempotency_key": reader.string("idempotency_key", max_length=300),
        "evidence_ref": reader.string("evidence_ref", max_length=500),
        "started_at": reader.timestamp("started_at", now=now),
        "ended_at": reader.timestamp("ended_at", now=now),
        "retry_count": reader.integer("retry_count") or 0,
        "stop_reason": reader.string("stop_reason"),
    }
    if values["execution_state"] is None:
        raise ItemError("missing_field", "body.execution_state", "execution_state is required.")
    sent_lane = reader.choice("lane", taxonomy.LANES)
    side_effect = reader.choice("side_effect", taxonomy.SIDE_EFFECT_GRADES) or ""
    values["extra"] = reader.rest()
    return ReceiptFields(values=values, sent_lane=sent_lane, declared_side_effect=side_effect)


def parse_audit_event(body: Mapping[str, Any], *, now: datetime) -> AuditEventFields:
    reader = BodyReader(body)
    values: dict[str, Any] = {
        "tool_run_id": reader.string("tool_run_id"),
        "idempotency_key": reader.string("idempotency_key", max_length=300),
        "collection": reader.collection(),
        "tool": reader.string("tool"),
        "method": reader.string("method", max_length=10).upper(),
        "host": reader.string("host", max_length=255),
        "path": reader.string("path", max_length=500),
        "status": reader.integer("status", minimum=100, maximum=599),
        "occurred_at": reader.timestamp("occurred_at", now=now) or now,
    }
    if not values["tool_run_id"] and not values["idempotency_key"]:
        raise ItemError(
            "missing_field",
            "body.tool_run_id",
            "an audit event needs tool_run_id or idempotency_key.",
        )
    values["extra"] = reader.rest()
    return AuditEventFields(values=values)
