"""The `learning_attempt` item type of `POST /api/v1/ingest`.

The body is graph-tool-call's trace learning record (``build_trace_learning_record``):
``query`` and ``collection`` (or ``collection_id``) are required; ``attempt_id``,
``session_id`` (arrives hashed as ``session_id_hash``: triage.scrub runs first),
``selected_target``, ``llm_target``, ``plan_tools`` (or a ``plan`` with ``steps``),
``success``, ``failure_reason``, ``latency_ms``, ``target_selector``, ``trace_edges``,
``created_at`` (or ``occurred_at``), ``query_family`` and ``query_fingerprint`` are
optional; anything else is kept, scrubbed, in ``extra``. The query family and fingerprint
are computed with the library's ``normalize_query_family`` / ``stable_hash`` when the
runtime did not send them, so exported suggestions match the runtime's own queries.

A body the scrubber had to change (a ``[REDACTED...]`` marker anywhere) is stored scrubbed
and flagged ``carried_secret``; its suggestions are marked ``sensitive_evidence``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from graph_tool_call.learning import normalize_query_family, stable_hash

from core.storable import replace_unstorable_text
from learning.models import AttemptSource, LearningAttempt
from triage.intake.normalize import BodyReader, ItemError
from triage.models import IngestBatch

ITEM_TYPE = "learning_attempt"
QUALITY_LAB_CHANNEL = "quality_lab"
# Collection ids become Collection names (slugs): Quality Lab pages link to them.
_FINGERPRINT_RE = re.compile(r"^[0-9a-f]{8,64}$")
_SCRUB_MARKER = "[REDACTED"
_SCRUB_MARKER_RE = re.compile(r"\[REDACTED[^\]]{0,40}\]")
_MAX_TOOLS = 50
_MAX_EDGES = 50


@dataclass
class AttemptFields:
    collection: str
    attempt_id: str
    source: str
    query: str
    query_family: str
    query_fingerprint: str
    selected_target: str
    llm_target: str
    plan_tools: list[str]
    success: bool
    failure_reason: str
    latency_ms: int | None
    session_id_hash: str
    target_selector: dict[str, Any]
    trace_edges: list[dict[str, Any]]
    occurred_at: datetime
    carried_secret: bool
    extra: dict[str, Any]
    # Fields where NUL or lone surrogates were replaced (triage.intake.storable).
    replaced_characters: list[str] = field(default_factory=list)


class _AttemptReader(BodyReader):
    def tool_list(self, name: str) -> list[str]:
        value = self._raw(name)
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > _MAX_TOOLS:
            raise ItemError(
                "invalid_field", self._path(name), f"{name} must be a list of tool names."
            )
        if not all(isinstance(item, str) and 0 < len(item) <= 200 for item in value):
            raise ItemError(
                "invalid_field", self._path(name), f"{name} must be a list of tool names."
            )
        return list(value)

    def plan_tools(self) -> list[str]:
        tools = self.tool_list("plan_tools")
        plan = self._raw("plan")
        if tools or not isinstance(plan, Mapping):
            return tools
        steps = plan.get("steps")
        if not isinstance(steps, list):
            return []
        return [
            str(step["tool"])[:200]
            for step in steps[:_MAX_TOOLS]
            if isinstance(step, Mapping) and isinstance(step.get("tool"), str) and step["tool"]
        ]

    def edges(self, name: str) -> list[dict[str, Any]]:
        value = self._raw(name)
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > _MAX_EDGES:
            raise ItemError(
                "invalid_field",
                self._path(name),
                f"{name} must be a list of at most {_MAX_EDGES} {{source, target}} objects.",
            )
        # As the library does: an edge without both ends is no evidence, so it is dropped.
        return [
            dict(edge)
            for edge in value
            if isinstance(edge, Mapping)
            and isinstance(edge.get("source"), str)
            and isinstance(edge.get("target"), str)
            and edge["source"]
            and edge["target"]
        ]

    def latency(self, name: str) -> int | None:
        value = self._raw(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ItemError("invalid_field", self._path(name), f"{name} must be a number.")
        if not 0 <= value <= 86_400_000:
            raise ItemError(
                "invalid_field", self._path(name), f"{name} must be 0..86400000 milliseconds."
            )
        return int(value)


def parse_attempt(body: Mapping[str, Any], *, now: datetime) -> AttemptFields:
    """Typed fields of one scrubbed attempt body, or ItemError naming the field at fault."""
    reader = _AttemptReader(body)
    collection = reader.collection()
    if not collection:
        raise ItemError(
            "missing_field",
            "body.collection",
            "collection (or collection_id) is required: suggestions belong to a collection.",
        )
    query = reader.string("query", max_length=2000, required=True)
    # The family of the query as the runtime typed it: the library drops emails and numbers
    # anyway, so the scrubber's markers are dropped too ("refund for kim@..." -> "refund for").
    family = reader.string("query_family", max_length=2000) or normalize_query_family(
        _SCRUB_MARKER_RE.sub(" ", query)
    )
    if not family:
        raise ItemError("invalid_field", "body.query", "query has no words to group it by.")
    fingerprint = reader.string("query_fingerprint", max_length=64).lower()
    if fingerprint and not _FINGERPRINT_RE.match(fingerprint):
        raise ItemError(
            "invalid_field", "body.query_fingerprint", "query_fingerprint must be a hex digest."
        )
    failure_reason = reader.code("failure_reason")
    success = reader.boolean("success")
    occurred_at = reader.timestamp("created_at", now=now) or reader.timestamp(
        "occurred_at", now=now
    )
    fields = AttemptFields(
        collection=collection,
        attempt_id=reader.string("attempt_id"),
        source=reader.choice("source", tuple(AttemptSource.values)) or AttemptSource.RUNTIME,
        query=query,
        query_family=family,
        # The family is stored with NUL and lone surrogates replaced (triage.intake.storable);
        # its fingerprint is of that text (the library's hash cannot encode surrogates).
        query_fingerprint=fingerprint or stable_hash(replace_unstorable_text(family)),
        selected_target=reader.string("selected_target"),
        llm_target=reader.string("llm_target"),
        plan_tools=reader.plan_tools(),
        success=success if success is not None else not failure_reason,
        failure_reason=failure_reason,
        latency_ms=reader.latency("latency_ms"),
        session_id_hash=reader.string("session_id_hash", max_length=64),
        target_selector=reader.mapping("target_selector"),
        trace_edges=reader.edges("trace_edges"),
        occurred_at=occurred_at or now,
        carried_secret=carries_scrub_marker(body),
        extra={},
    )
    fields.extra = reader.rest()
    return fields


def carries_scrub_marker(value: Any) -> bool:
    """Whether the scrubber replaced anything (a marker in a value or a key)."""
    return _SCRUB_MARKER in json.dumps(value, ensure_ascii=False)


def store_attempts(*, batch: IngestBatch, items: list[tuple[str, AttemptFields]]) -> None:
    """Write the batch's attempts; register unknown collections; derive after commit."""
    from learning.services import collections_for_ids, derivation_enqueue

    collections = collections_for_ids(names={fields.collection for _, fields in items})
    # Only Quality Lab's own channel may say an attempt came from Quality Lab.
    trusted_source = batch.channel == QUALITY_LAB_CHANNEL
    LearningAttempt.objects.bulk_create(
        LearningAttempt(
            collection=collections[fields.collection],
            batch=batch,
            owner=batch.owner,
            client_id=client_id,
            attempt_id=fields.attempt_id or client_id,
            source=fields.source if trusted_source else AttemptSource.RUNTIME,
            query=fields.query,
            query_family=fields.query_family,
            query_fingerprint=fields.query_fingerprint,
            selected_target=fields.selected_target,
            llm_target=fields.llm_target,
            plan_tools=fields.plan_tools,
            success=fields.success,
            failure_reason=fields.failure_reason,
            latency_ms=fields.latency_ms,
            session_id_hash=fields.session_id_hash,
            target_selector=fields.target_selector,
            trace_edges=fields.trace_edges,
            extra=fields.extra,
            replaced_characters=fields.replaced_characters,
            carried_secret=fields.carried_secret,
            occurred_at=fields.occurred_at,
            received_at=batch.received_at,
        )
        for client_id, fields in items
    )
    if trusted_source:
        return  # a Quality Lab run derives right after recording its attempts, in its task
    for collection_id in sorted({collection.pk for collection in collections.values()}):
        transaction.on_commit(partial(derivation_enqueue, collection_id=collection_id), robust=True)
