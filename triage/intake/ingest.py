"""The one write path for ingested items: validate, scrub, classify, store exactly once.

The API, the `ingest` command and Quality Lab all call `batch_ingest`. Each item is scrubbed
before anything else sees it; every item ends accepted, duplicate, conflict or rejected, and
the batch, with every rejection, is written to the ledger in the same transaction as the
data, so a failure half way leaves nothing behind and the client's retry stores it once.
A failed call is stored once whichever doors report it: a failure that names the span of
a call already recorded (`trace_id` + `span_id`, as an OTLP span and a runtime's report of
the same call both do) is a `duplicate`, and what it adds is merged into that record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, transaction
from django.db.models import JSONField, Model, Q
from django.utils import timezone

from core.sql import row_sources
from core.storable import identifier_problem, may_hold_unstorable_text, storable_label
from organisation.access import key_collections
from triage.intake.envelope import EXTRA_KEY as ENVELOPE_KEY
from triage.intake.envelope import envelope_contradictions, parse_envelope
from triage.intake.normalize import (
    ITEM_TYPES,
    AuditEventFields,
    FailureFields,
    ItemError,
    ReceiptFields,
    RunnerEventFields,
    parse_audit_event,
    parse_failure,
    parse_receipt,
    parse_runner_event,
)
from triage.intake.storable import storable_item
from triage.models import (
    QUALITY_LAB_SOURCE,
    ApiKey,
    ApiKeyCollectionUse,
    AuditEvent,
    FailureGroup,
    FailureGroupBucket,
    FailureGroupDay,
    FailureGroupFacet,
    FailureReasonBucket,
    FailureRecord,
    GroupEvent,
    GroupStatus,
    IngestBatch,
    IngestItem,
    IngestRejection,
    Receipt,
    RejectionCount,
    Release,
    RunnerEvent,
    ToolPolicy,
)
from triage.releases import Reopening, reopening
from triage.scrub import ScrubError, scrub_payload
from triage.timebins import day_floor, hour_floor
from triage.upkeep.partitions import lock_spans
from triage.upkeep.retention import retention_cutoff
from triage.vocabulary import taxonomy
from triage.vocabulary.lanes import ToolFacts, classify, classify_receipt

ACCEPTED = "accepted"
DUPLICATE = "duplicate"
CONFLICT = "conflict"
REJECTED = "rejected"
MAX_CLIENT_ID_CHARS = 200  # the ledger's client_id columns
_ECHOED_ID_CHARS = 64  # how much of an over-long id the answer and the ledger repeat

# Quality Lab records its own results through batch_ingest under this owner (an idempotency
# namespace) and channel, with this source. They belong to the desk: no API key may be named
# or owned after them, and from any other channel a batch under the owner, or an item that
# claims the source, is refused with a stable code (`reserved_owner`, `reserved_source`).
DESK_OWNER = "quality_lab"
DESK_CHANNEL = "quality_lab"
DESK_SOURCES = frozenset({QUALITY_LAB_SOURCE})
# The per-item code for an item whose collection the batch's API key does not serve
# (ApiKey.collections and ApiKey.team): refused and recorded, the rest of the batch stored.
COLLECTION_NOT_ALLOWED = "collection_not_allowed"


def owner_is_reserved(owner: str) -> bool:
    return owner.strip().casefold() == DESK_OWNER


_PARSERS: dict[str, Callable[..., ParsedFields]] = {
    "failure": parse_failure,
    "runner_event": parse_runner_event,
    "receipt": parse_receipt,
    "audit_event": parse_audit_event,
    "envelope": parse_envelope,
}
ParsedFields = FailureFields | RunnerEventFields | ReceiptFields | AuditEventFields


@dataclass(frozen=True)
class ItemType:
    """An item type another app adds to the ingest API (the learning review's attempts).

    `parse(body, now=...)` gets the scrubbed body and raises ItemError; `store(batch=...,
    items=[(client_id, parsed), ...])` writes them inside the batch's transaction.
    """

    name: str
    parse: Callable[..., Any]
    store: Callable[..., None]
    # The model the parsed fields are written to: checked against it (triage.intake.storable).
    model: type[Model] | None = None


_EXTRA_TYPES: dict[str, ItemType] = {}


def register_item_type(item_type: ItemType) -> None:
    """Called from an app's ready(); the type is then accepted like the built-in ones."""
    if item_type.name in _PARSERS:
        raise ValueError(f"{item_type.name} is a built-in item type")
    _EXTRA_TYPES[item_type.name] = item_type


_COLLECTION_LISTENERS: list[Callable[[set[str]], None]] = []


def on_collections_seen(listener: Callable[[set[str]], None]) -> None:
    """Called with the collection ids of each batch's failures and receipts, inside the
    batch's transaction (the learning app registers collections it does not know yet)."""
    _COLLECTION_LISTENERS.append(listener)


@dataclass(frozen=True)
class BatchCommitted:
    """What a committed batch did to its groups: which it created and which it regressed
    (a record on a resolved group). Ids only; published once per batch, after the commit,
    and only when the batch did either."""

    batch_id: int
    new_group_ids: tuple[int, ...]
    regressed_group_ids: tuple[int, ...]
    committed_at: datetime


_BATCH_LISTENERS: list[Callable[[BatchCommitted], None]] = []


def on_batch_committed(listener: Callable[[BatchCommitted], None]) -> None:
    """Called with a `BatchCommitted` after each batch that created or regressed a group (the
    alerts app listens; ingest never imports it). A listener's error is logged, never the
    batch's: the data is committed by then."""
    _BATCH_LISTENERS.append(listener)


def _publish_batch(event: BatchCommitted) -> None:
    for listener in _BATCH_LISTENERS:
        listener(event)


@dataclass
class _GroupChanges:
    """Groups a batch created and regressed, found where ingest decides it (no rescan)."""

    new: set[int] = field(default_factory=set)
    regressed: set[int] = field(default_factory=set)


def item_types() -> tuple[str, ...]:
    return (*ITEM_TYPES, *_EXTRA_TYPES)


@dataclass
class ItemOutcome:
    index: int
    client_id: str
    status: str
    error: dict[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"index": self.index, "id": self.client_id, "status": self.status}
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass
class BatchOutcome:
    batch_id: int
    items: list[ItemOutcome]

    def count(self, status: str) -> int:
        return sum(1 for item in self.items if item.status == status)

    @property
    def all_stored(self) -> bool:
        return all(item.status in (ACCEPTED, DUPLICATE) for item in self.items)

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "accepted": self.count(ACCEPTED),
            "duplicates": self.count(DUPLICATE),
            "conflicts": self.count(CONFLICT),
            "rejected": self.count(REJECTED) + self.count(CONFLICT),
            "items": [item.as_dict() for item in self.items],
        }


class RefusedItem(Protocol):
    """An entry a door could not turn into an item (an unreadable OTLP span)."""

    @property
    def index(self) -> int: ...
    @property
    def item_type(self) -> str: ...
    @property
    def client_id(self) -> str: ...
    @property
    def error(self) -> ItemError: ...


@dataclass
class _Prepared:
    index: int
    item_type: str
    client_id: str
    body_hash: str
    fields: ParsedFields


@dataclass
class _Rejected:
    index: int
    item_type: str
    client_id: str
    error: ItemError
    status: str = REJECTED

    def __post_init__(self) -> None:
        # Ids, paths and messages may quote a client's text: keep them recordable and
        # renderable (an over-long id is echoed in part, whatever it holds).
        self.client_id = storable_label(self.client_id, limit=MAX_CLIENT_ID_CHARS)
        self.error.field = storable_label(self.error.field, limit=200)
        self.error.message = storable_label(self.error.message, limit=500)


@dataclass
class _GroupDelta:
    count: int = 0
    retryable: int = 0
    contradictions: int = 0
    quality_lab: int = 0
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    lane: str = ""
    # The group's (stage, reason), which its records share: the reason buckets' key.
    line: tuple[str, str] = ("", "")
    hours: Counter[datetime] = field(default_factory=Counter)
    facets: Counter[tuple[str, str]] = field(default_factory=Counter)
    releases: set[str] = field(default_factory=set)  # "" for records without one

    def add(self, record: FailureRecord) -> None:
        self.count += 1
        self.line = (record.stage, record.reason)
        self.retryable += int(record.retryable)
        self.contradictions += int(bool(record.contradictions))
        self.quality_lab += int(record.source == QUALITY_LAB_SOURCE)
        occurred = record.occurred_at
        if self.first_seen is None or occurred < self.first_seen:
            self.first_seen = occurred
        if self.last_seen is None or occurred >= self.last_seen:
            self.last_seen = occurred
            self.lane = record.lane
        self.hours[hour_floor(occurred)] += 1
        self.facets[("source", record.source)] += 1
        self.facets[("lane", record.lane)] += 1
        self.facets[("execution_state", record.execution_state)] += 1
        self.releases.add(record.release)
        if record.release:
            self.facets[("release", record.release)] += 1


def body_hash(body: Any) -> str:
    """A keyed hash of the raw body: compares bodies without storing anything derivable."""
    return _hash_canonical(_canonical(body))


def _canonical(body: Any) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _hash_canonical(canonical: str) -> str:
    # surrogatepass: a lone surrogate is hashed as sent (and then replaced, not refused).
    data = canonical.encode("utf-8", "surrogatepass")
    return hmac.new(settings.TRIAGE_HASH_KEY, data, hashlib.sha256).hexdigest()


def _refuse_desk_claims(item: _Prepared, *, owner: str) -> _Prepared | _Rejected:
    """Refuse what only the desk's own Quality Lab runs may write (see DESK_OWNER)."""
    if owner_is_reserved(owner):
        error = ItemError(
            "reserved_owner", "", f"The owner {DESK_OWNER} is reserved for Quality Lab's runs."
        )
        return _Rejected(item.index, item.item_type, item.client_id, error)
    fields = item.fields
    failure = fields.failure if isinstance(fields, RunnerEventFields) else fields
    if isinstance(failure, FailureFields) and failure.source in DESK_SOURCES:
        error = ItemError(
            "reserved_source",
            "body.source",
            f"source {failure.source} is reserved for Quality Lab's own runs.",
        )
        return _Rejected(item.index, item.item_type, item.client_id, error)
    return item


def item_collection(fields: Any) -> str:
    """The collection name a parsed item is for ("" when it names none)."""
    values = getattr(fields, "values", None)
    if isinstance(values, dict):  # receipts and audit events
        return str(values.get("collection") or "")
    return str(getattr(fields, "collection", "") or "")


def _refuse_unserved_collection(
    item: _Prepared, *, served: frozenset[str]
) -> _Prepared | _Rejected:
    """Refuse an item for a collection the batch's scoped key does not serve; an item that
    names no collection is refused too (it would land among the unowned collections)."""
    collection = item_collection(item.fields)
    if collection in served:
        return item
    message = (
        "this API key serves named collections only: send the item's collection."
        if not collection
        else "this API key does not serve this collection; an admin sets its scope on the "
        "ingestion page."
    )
    error = ItemError(COLLECTION_NOT_ALLOWED, "body.collection", message)
    return _Rejected(item.index, item.item_type, item.client_id, error)


def _prepare(index: int, item: Any, *, now: datetime) -> _Prepared | _Rejected:
    if not isinstance(item, dict):
        return _Rejected(index, "", "", ItemError("invalid_item", "", "item must be an object."))
    raw_id = item.get("id")
    item_type = item.get("type")
    client_id = (
        str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else ""
    )
    known = isinstance(item_type, str) and (item_type in _PARSERS or item_type in _EXTRA_TYPES)
    safe_type = item_type if known and isinstance(item_type, str) else ""
    if len(client_id) > MAX_CLIENT_ID_CHARS:
        return _Rejected(
            index,
            safe_type,
            client_id[:_ECHOED_ID_CHARS] + "...",
            ItemError(
                "id_too_long",
                "id",
                f"id is {len(client_id)} characters long; the limit is {MAX_CLIENT_ID_CHARS}.",
            ),
        )
    if not client_id:
        return _Rejected(
            index, safe_type, "", ItemError("missing_field", "id", "id must be 1-200 characters.")
        )
    if (problem := identifier_problem(client_id)) is not None:
        message = f"id holds {problem}, which an identifier may not hold."
        return _Rejected(index, safe_type, "", ItemError("invalid_character", "id", message))
    if item_type is None:
        return _Rejected(
            index, "", client_id, ItemError("missing_field", "type", "type is required.")
        )
    if not safe_type:
        return _Rejected(
            index,
            "",
            client_id,
            ItemError("unknown_type", "type", f"type must be one of {', '.join(item_types())}."),
        )
    body = item.get("body")
    if not isinstance(body, dict):
        code = "missing_field" if body is None else "invalid_field"
        return _Rejected(
            index, safe_type, client_id, ItemError(code, "body", "body must be an object.")
        )
    try:
        canonical = _canonical(body)
        digest = _hash_canonical(canonical)
        clean = scrub_payload(body, path="body", hash_key=settings.TRIAGE_HASH_KEY)
    except ScrubError as exc:
        return _Rejected(index, safe_type, client_id, ItemError("scrub_failed", exc.path, str(exc)))
    except (TypeError, ValueError):
        return _Rejected(
            index,
            safe_type,
            client_id,
            ItemError("scrub_failed", "body", "body is not plain JSON."),
        )
    try:
        parse = _PARSERS[safe_type] if safe_type in _PARSERS else _EXTRA_TYPES[safe_type].parse
        fields = parse(clean, now=now)
        model = _EXTRA_TYPES[safe_type].model if safe_type in _EXTRA_TYPES else None
        storable_item(fields, model=model, deep=may_hold_unstorable_text(canonical))
        _within_retention(fields, now=now)
    except ItemError as exc:
        return _Rejected(index, safe_type, client_id, exc)
    return _Prepared(index, safe_type, client_id, digest, fields)


def _within_retention(fields: ParsedFields, *, now: datetime) -> None:
    """Refuse a failure or runner event older than retention keeps: the next prune would
    remove it, and its day's partition may be gone already (triage.upkeep.partitions)."""
    days = settings.TRIAGE_RETENTION_DAYS
    if not days or not isinstance(fields, (FailureFields, RunnerEventFields)):
        return
    cutoff = retention_cutoff(days=days, now=now)
    if fields.occurred_at < cutoff:
        raise ItemError(
            "older_than_retention",
            "body.occurred_at",
            f"occurred_at is before {cutoff:%Y-%m-%dT%H:%M:%SZ}: the desk keeps records "
            f"for {days} days (TRIAGE_RETENTION_DAYS).",
        )


def batch_ingest(
    *,
    owner: str,
    items: Sequence[Any],
    api_key: ApiKey | None = None,
    channel: str = "api",
    body_bytes: int = 0,
    item_indexes: Sequence[int] | None = None,
    refused: Sequence[RefusedItem] = (),
    skipped: int = 0,
) -> BatchOutcome:
    """Store a batch. A door that reads its own format (OTLP) passes where each item sat in
    what the client sent (`item_indexes`), the entries it could not read (`refused`,
    recorded like any rejection) and how many it skipped on purpose (`skipped`)."""
    started = time.monotonic()
    now = timezone.now()
    prepared: list[_Prepared] = []
    rejected: list[_Rejected] = [
        _Rejected(r.index, r.item_type, r.client_id, r.error) for r in refused
    ]
    seen_in_batch: dict[tuple[str, str], str] = {}
    duplicates_in_batch: list[_Prepared] = []
    # What the key serves, read once a batch (None: every collection).
    served = key_collections(api_key) if api_key is not None else None
    for position, item in enumerate(items):
        index = position if item_indexes is None else item_indexes[position]
        result = _prepare(index, item, now=now)
        if channel != DESK_CHANNEL and isinstance(result, _Prepared):
            result = _refuse_desk_claims(result, owner=owner)
        if served is not None and isinstance(result, _Prepared):
            result = _refuse_unserved_collection(result, served=served)
        if isinstance(result, _Rejected):
            rejected.append(result)
            continue
        key = (result.item_type, result.client_id)
        if key in seen_in_batch:
            if seen_in_batch[key] == result.body_hash:
                duplicates_in_batch.append(result)
            else:
                rejected.append(_conflict(result))
            continue
        seen_in_batch[key] = result.body_hash
        prepared.append(result)

    # Two batches that carry the same new span do not race for it: the second waits for the
    # first's commit on the span's lock (triage.upkeep.partitions.lock_spans), then merges.
    written = _write_batch(
        owner=owner,
        channel=channel,
        api_key=api_key,
        now=now,
        started=started,
        item_count=len(items) + len(refused) + skipped,
        skipped=skipped,
        body_bytes=body_bytes,
        prepared=prepared,
        rejected=list(rejected),
        duplicates_in_batch=duplicates_in_batch,
    )
    if api_key is not None:
        # Outside the transaction and at most once a minute: every batch of a key would
        # otherwise queue on this one row until the batch commits.
        ApiKey.objects.filter(pk=api_key.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - timedelta(minutes=1))
        ).update(last_used_at=now)
        _note_collection_use(api_key=api_key, items=prepared, now=now)

    merged = {id(item) for item in written.same_call}
    outcomes = [
        ItemOutcome(p.index, p.client_id, DUPLICATE if id(p) in merged else ACCEPTED)
        for p in written.claimed
    ]
    outcomes += [ItemOutcome(p.index, p.client_id, DUPLICATE) for p in written.duplicates]
    outcomes += [ItemOutcome(p.index, p.client_id, DUPLICATE) for p in duplicates_in_batch]
    outcomes += [
        ItemOutcome(
            r.index,
            r.client_id,
            r.status,
            {"code": r.error.code, "message": r.error.message, "field": r.error.field},
        )
        for r in written.rejected
    ]
    outcomes.sort(key=lambda outcome: outcome.index)
    return BatchOutcome(batch_id=written.batch.pk, items=outcomes)


def _note_collection_use(*, api_key: ApiKey, items: list[_Prepared], now: datetime) -> None:
    """The key's last use per collection (the key page): one statement a batch, outside
    its transaction, touching a row at most once a minute, as last_used_at above."""
    collections = sorted({item_collection(item.fields) for item in items})
    if not collections:
        return
    table = ApiKeyCollectionUse._meta.db_table
    rows = [(api_key.pk, collection, now) for collection in collections]
    with connection.cursor() as cursor:
        for source, params in row_sources(("bigint", "text", "timestamptz"), rows):
            cursor.execute(
                f"INSERT INTO {table} (api_key_id, collection, last_used_at) {source} "
                "ON CONFLICT (api_key_id, collection) DO UPDATE "
                f"SET last_used_at = EXCLUDED.last_used_at WHERE {table}.last_used_at < %s",
                [*params, now - timedelta(minutes=1)],
            )


@dataclass
class _Written:
    """What a batch wrote."""

    batch: IngestBatch
    claimed: list[_Prepared]
    duplicates: list[_Prepared]
    same_call: list[_Prepared]
    rejected: list[_Rejected]


def _write_batch(
    *,
    owner: str,
    channel: str,
    api_key: ApiKey | None,
    now: datetime,
    started: float,
    item_count: int,
    skipped: int,
    body_bytes: int,
    prepared: list[_Prepared],
    rejected: list[_Rejected],
    duplicates_in_batch: list[_Prepared],
) -> _Written:
    """The batch's one transaction: the ledger row, the claims, the data, the rejections."""
    with transaction.atomic():
        batch = IngestBatch.objects.create(
            api_key=api_key,
            owner=owner,
            channel=channel,
            received_at=now,
            item_count=item_count,
            skipped=skipped,
            body_bytes=body_bytes,
        )
        claimed, duplicates, conflicts = _claim(batch=batch, owner=owner, prepared=prepared)
        rejected.extend(_conflict(item) for item in conflicts)
        same_call: list[_Prepared] = []
        changes = _store(batch=batch, items=claimed, now=now, same_call=same_call)
        if _BATCH_LISTENERS and (changes.new or changes.regressed):
            event = BatchCommitted(
                batch_id=batch.pk,
                new_group_ids=tuple(sorted(changes.new)),
                regressed_group_ids=tuple(sorted(changes.regressed)),
                committed_at=now,
            )
            transaction.on_commit(partial(_publish_batch, event), robust=True)
        IngestRejection.objects.bulk_create(
            IngestRejection(
                batch=batch,
                index=item.index,
                item_type=item.item_type,
                client_id=item.client_id,
                code=item.error.code,
                field=item.error.field,
                message=item.error.message[:500],
            )
            for item in rejected
        )
        rejected_by_code = Counter(item.error.code for item in rejected)
        _upsert_increments(
            RejectionCount._meta.db_table, ("code",), ("text", "bigint"),
            sorted(rejected_by_code.items()),
        )  # fmt: skip
        batch.accepted = len(claimed) - len(same_call)
        batch.duplicates = len(duplicates) + len(duplicates_in_batch) + len(same_call)
        batch.conflicts = sum(1 for item in rejected if item.status == CONFLICT)
        batch.rejected = len(rejected) - batch.conflicts
        batch.rejected_by_code = dict(rejected_by_code)
        batch.duration_ms = int((time.monotonic() - started) * 1000)
        batch.save(
            update_fields=[
                "accepted",
                "duplicates",
                "conflicts",
                "rejected",
                "rejected_by_code",
                "duration_ms",
            ]
        )
    return _Written(batch, claimed, duplicates, same_call, rejected)


def _conflict(item: _Prepared) -> _Rejected:
    return _Rejected(
        item.index,
        item.item_type,
        item.client_id,
        ItemError("conflict", "id", "this id was already stored with a different body."),
        status=CONFLICT,
    )


def _claim(
    *, batch: IngestBatch, owner: str, prepared: list[_Prepared]
) -> tuple[list[_Prepared], list[_Prepared], list[_Prepared]]:
    """Insert the item ids; those already present are duplicates or conflicts.

    INSERT ... ON CONFLICT DO NOTHING RETURNING makes the claim atomic: of concurrent
    senders of one id exactly one gets it back, the others wait for its commit and then
    see the stored row. Sorting keeps lock order equal across concurrent batches.
    """
    if not prepared:
        return [], [], []
    ordered = sorted(prepared, key=lambda p: (p.item_type, p.client_id))
    table = IngestItem._meta.db_table
    now = timezone.now()
    claimed_keys: set[tuple[str, str]] = set()
    rows = [(owner, p.item_type, p.client_id, p.body_hash, batch.pk, now) for p in ordered]
    with connection.cursor() as cursor:
        for source, params in row_sources(
            ("text", "text", "text", "text", "bigint", "timestamptz"), rows
        ):
            cursor.execute(
                f"INSERT INTO {table} (owner, item_type, client_id, body_hash, batch_id, "
                f"created_at) {source} "
                "ON CONFLICT (owner, item_type, client_id) DO NOTHING "
                "RETURNING item_type, client_id",
                params,
            )
            claimed_keys.update((row[0], row[1]) for row in cursor.fetchall())
    claimed = [p for p in ordered if (p.item_type, p.client_id) in claimed_keys]
    others = [p for p in ordered if (p.item_type, p.client_id) not in claimed_keys]
    if not others:
        return claimed, [], []
    stored_hashes = {
        (row["item_type"], row["client_id"]): row["body_hash"]
        for row in IngestItem.objects.filter(
            owner=owner, client_id__in=[p.client_id for p in others]
        ).values("item_type", "client_id", "body_hash")
    }
    duplicates = [p for p in others if stored_hashes.get((p.item_type, p.client_id)) == p.body_hash]
    conflicts = [p for p in others if stored_hashes.get((p.item_type, p.client_id)) != p.body_hash]
    return claimed, duplicates, conflicts


def _store(
    *, batch: IngestBatch, items: list[_Prepared], now: datetime, same_call: list[_Prepared]
) -> _GroupChanges:
    """Write the claimed items. A failure item whose span already has a record stored
    nothing of its own: it is added to `same_call` (a `duplicate` in the ledger)."""
    failures: list[tuple[_Prepared, FailureFields, RunnerEvent | None]] = []
    runner_events: list[tuple[_Prepared, RunnerEventFields, RunnerEvent]] = []
    receipts: list[tuple[_Prepared, ReceiptFields]] = []
    audits: list[AuditEvent] = []
    extras: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for item in items:
        fields = item.fields
        if item.item_type in _EXTRA_TYPES:
            extras[item.item_type].append((item.client_id, fields))
        elif isinstance(fields, FailureFields):
            failures.append((item, fields, None))
        elif isinstance(fields, RunnerEventFields):
            event = RunnerEvent(
                batch=batch,
                collection=fields.collection,
                event_type=fields.event_type,
                plan_id=fields.plan_id,
                step_id=fields.step_id,
                tool=fields.tool,
                stage=fields.stage,
                occurred_at=fields.occurred_at,
                graph_tool_call_version=fields.graph_tool_call_version,
                payload=fields.payload,
                replaced_characters=fields.replaced_characters,
            )
            runner_events.append((item, fields, event))
        elif isinstance(fields, ReceiptFields):
            receipts.append((item, fields))
        else:
            audits.append(AuditEvent(batch=batch, client_id=item.client_id, **fields.values))

    RunnerEvent.objects.bulk_create([event for _, _, event in runner_events])
    failures += [(item, f.failure, event) for item, f, event in runner_events if f.failure]
    policies = _policies_for(
        [(f.collection, f.tool) for _, f, _ in failures]
        + [(r.values["collection"], r.values["tool"]) for _, r in receipts]
    )
    changes = _GroupChanges()
    failures = _one_record_per_span(failures, same_call=same_call)
    if failures:
        changes = _store_failures(batch=batch, failures=failures, policies=policies, now=now)
    if receipts:
        Receipt.objects.bulk_create(
            _receipt(batch, item, fields, policies) for item, fields in receipts
        )
    AuditEvent.objects.bulk_create(audits)
    for name, parsed in extras.items():
        _EXTRA_TYPES[name].store(batch=batch, items=parsed)
    seen = {f.collection for _, f, _ in failures} | {r.values["collection"] for _, r in receipts}
    seen.discard("")
    if seen:
        for listener in _COLLECTION_LISTENERS:
            listener(seen)
    return changes


def _policies_for(keys: list[tuple[str, str]]) -> dict[tuple[str, str], ToolPolicy]:
    tools = {tool for _, tool in keys if tool}
    if not tools:
        return {}
    return {(p.collection, p.tool): p for p in ToolPolicy.objects.filter(tool__in=tools)}


def _tool_facts(
    policies: dict[tuple[str, str], ToolPolicy], collection: str, tool: str, declared: str
) -> ToolFacts:
    policy = policies.get((collection, tool)) or policies.get(("", tool))
    if policy is None:
        return ToolFacts(side_effect=declared)
    return ToolFacts(
        side_effect=policy.side_effect,
        timeout_before_send_lane=policy.timeout_before_send_lane,
        timeout_after_send_lane=policy.timeout_after_send_lane,
        approval_required=policy.approval_required,
    )


def _receipt(
    batch: IngestBatch,
    item: _Prepared,
    fields: ReceiptFields,
    policies: dict[tuple[str, str], ToolPolicy],
) -> Receipt:
    values = fields.values
    tool = _tool_facts(policies, values["collection"], values["tool"], fields.declared_side_effect)
    lane, contradictions = classify_receipt(
        result=values["result"],
        reason=values["reason"],
        execution_state=values["execution_state"],
        retryable=values["retryable"],
        idempotency_key=values["idempotency_key"],
        sent_lane=fields.sent_lane,
        tool=tool,
    )
    return Receipt(
        batch=batch,
        client_id=item.client_id,
        side_effect=tool.side_effect,
        sent_side_effect=fields.declared_side_effect,
        lane=lane,
        sent_lane=fields.sent_lane or "",
        contradictions=contradictions,
        **values,
    )


def _store_failures(
    *,
    batch: IngestBatch,
    failures: list[tuple[_Prepared, FailureFields, RunnerEvent | None]],
    policies: dict[tuple[str, str], ToolPolicy],
    now: datetime,
) -> _GroupChanges:
    records: list[FailureRecord] = []
    for item, fields, event in failures:
        tool = _tool_facts(policies, fields.collection, fields.tool, fields.declared_side_effect)
        derived = classify(
            reason=fields.reason, tool=tool, sent=fields.sent, evidence=fields.evidence
        )
        if item.item_type == "envelope":
            derived.contradictions += envelope_contradictions(
                fields.extra[ENVELOPE_KEY], derived, reason=fields.reason
            )
        records.append(
            FailureRecord(
                batch=batch,
                client_id=item.client_id,
                runner_event=event,
                collection=fields.collection,
                source=fields.source,
                stage=fields.stage,
                reason=fields.reason,
                reason_mapped=fields.reason_mapped,
                message=fields.message,
                tool=fields.tool,
                side_effect=derived.side_effect,
                sent_side_effect=fields.declared_side_effect,
                plan_id=fields.plan_id,
                step_id=fields.step_id,
                retryable=derived.retryable,
                operator_action=derived.operator_action,
                lane=derived.lane,
                execution_state=derived.execution_state,
                sent_retryable=fields.sent.retryable,
                sent_lane=fields.sent.lane or "",
                sent_execution_state=fields.sent.execution_state or "",
                contradictions=derived.contradictions,
                evidence=fields.evidence,
                extra=fields.extra,
                replaced_characters=fields.replaced_characters,
                idempotency_key=fields.idempotency_key,
                occurred_at=fields.occurred_at,
                received_at=now,
                graph_tool_call_version=fields.graph_tool_call_version,
                taxonomy_version=taxonomy.TAXONOMY_VERSION,
                trace_id=fields.trace_id or None,
                span_id=fields.span_id or None,
                release=fields.release,
            )
        )
    changes = _GroupChanges()
    groups = _groups_for(records, created=changes.new)
    deltas: dict[int, _GroupDelta] = defaultdict(_GroupDelta)
    for record in records:
        group_id = groups[_group_key(record)]
        record.group_id = group_id
        deltas[group_id].add(record)
    _insert_records(records)
    _apply_group_deltas(deltas, now=now, regressed=changes.regressed)
    return changes


_FailureEntry = tuple[_Prepared, FailureFields, RunnerEvent | None]


def _one_record_per_span(
    failures: list[_FailureEntry], *, same_call: list[_Prepared]
) -> list[_FailureEntry]:
    """The failures to store: one per (trace_id, span_id).

    A failure whose span already has a record, stored before or earlier in this batch (by
    the order the client sent), is not stored again: whichever arrived first keeps its
    classification, and what only the later one knows (evidence keys, extra keys such as a
    report's envelope or a span's otlp facts, an idempotency key) is added to it. Items
    that stored nothing else go to `same_call`; a runner event is still stored as an event.
    Costs nothing for a batch without spans and one indexed query for a batch with them
    (a second one, and an UPDATE, only when some span is already stored).
    """
    spans: dict[tuple[str, str], datetime] = {}
    for _, fields, _ in failures:
        if fields.trace_id:
            spans.setdefault((fields.trace_id, fields.span_id), fields.occurred_at)
    if not spans:
        return failures
    lock_spans(sorted(spans))
    stored = _records_of_spans(spans)
    first: dict[tuple[str, str], FailureFields] = {}
    updated: dict[int, FailureRecord] = {}
    dropped: set[int] = set()
    for item, fields, event in sorted(failures, key=lambda entry: entry[0].index):
        if not fields.trace_id:
            continue
        key = (fields.trace_id, fields.span_id)
        record = stored.get(key)
        if record is not None:
            if _add_missing(record, fields):
                updated[record.pk] = record
        elif key in first:
            _add_missing(first[key], fields)
        else:
            first[key] = fields
            continue
        dropped.add(id(item))
        if event is None:
            same_call.append(item)
    if updated:
        FailureRecord.objects.bulk_update(
            list(updated.values()), ["evidence", "extra", "idempotency_key"]
        )
    return [entry for entry in failures if id(entry[0]) not in dropped]


_RECORD_TABLE = FailureRecord._meta.db_table


# A span and a report are the same call when both carry its span and their times are this
# close: they describe one moment (a report the runtime's spool sends late keeps its time).
# The bound lets the probe read only the days around it on a table partitioned by day.
SAME_CALL_WINDOW = timedelta(days=1)


def _records_of_spans(
    spans: dict[tuple[str, str], datetime],
) -> dict[tuple[str, str], FailureRecord]:
    """The stored records of these spans: one probe of the span index per pair, in the days
    around its time (a scalar subquery, which no planner turns into a scan of the table,
    whatever its statistics say; the batch's days bound it for the planner too), then,
    usually for none, the fields a merge needs."""
    ids: list[int] = []
    earliest = min(spans.values()) - SAME_CALL_WINDOW
    latest = max(spans.values()) + SAME_CALL_WINDOW
    keys = sorted(spans)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Each probe is bounded by its own span's days, so that only those partitions
            # are read (run-time partition pruning), and the batch's days bound the plan.
            sources = row_sources(
                ("text", "text", "timestamptz"), [(*key, spans[key]) for key in keys]
            )
            window = (
                "AND r.occurred_at >= %s AND r.occurred_at <= %s "
                "AND r.occurred_at >= k.at - %s AND r.occurred_at <= k.at + %s"
            )
            bounds: list[Any] = [earliest, latest, SAME_CALL_WINDOW, SAME_CALL_WINDOW]
            columns = "trace_id, span_id, at"
        else:
            sources = row_sources(("text", "text"), keys)
            window, bounds, columns = "", [], "trace_id, span_id"
        for source, params in sources:
            cursor.execute(
                f"WITH k({columns}) AS ({source}) "
                f"SELECT found.id FROM (SELECT (SELECT r.id FROM {_RECORD_TABLE} r "
                f"WHERE r.trace_id = k.trace_id AND r.span_id = k.span_id {window}) AS id "
                "FROM k) found WHERE found.id IS NOT NULL",
                [*params, *bounds],
            )
            ids.extend(row[0] for row in cursor.fetchall())
    if not ids:
        return {}
    found = FailureRecord.objects.filter(
        pk__in=ids, occurred_at__gte=earliest, occurred_at__lte=latest
    ).only("pk", "trace_id", "span_id", "evidence", "extra", "idempotency_key", "occurred_at")
    return {
        key: row
        for row in found
        if abs(row.occurred_at - spans[key := (row.trace_id or "", row.span_id or "")])
        <= SAME_CALL_WINDOW
    }


def _add_missing(target: FailureRecord | FailureFields, later: FailureFields) -> bool:
    """Add to `target` what only `later` knows; return whether anything was added."""
    added = False
    for name in ("evidence", "extra"):
        held: dict[str, Any] = getattr(target, name) or {}
        new = {key: value for key, value in getattr(later, name).items() if key not in held}
        if new:
            setattr(target, name, {**held, **new})
            added = True
    if later.idempotency_key and not target.idempotency_key:
        target.idempotency_key = later.idempotency_key
        added = True
    return added


_RECORD_FIELDS = [f for f in FailureRecord._meta.concrete_fields if not f.primary_key]
_RECORD_COPY = "COPY {} ({}) FROM STDIN".format(
    FailureRecord._meta.db_table, ", ".join(f.column for f in _RECORD_FIELDS)
)


def _insert_records(records: list[FailureRecord]) -> None:
    """Insert a batch's records; on PostgreSQL with COPY, about four times faster than
    bulk_create's parameter arrays (measured by bench/ingest.py). Nothing reads their ids."""
    if connection.vendor != "postgresql":
        FailureRecord.objects.bulk_create(records, batch_size=500)
        return
    # Only JSON columns need adapting for COPY; every other value goes as it is.
    json_columns = {
        index: field for index, field in enumerate(_RECORD_FIELDS) if isinstance(field, JSONField)
    }
    attnames = [field.attname for field in _RECORD_FIELDS]
    adapt_json = connection.ops.adapt_json_value
    # The driver's own COPY is outside Django's error wrapping: wrapped here, a refused row
    # is an IntegrityError like any other.
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.cursor.copy(_RECORD_COPY) as copy,
    ):
        for record in records:
            row = [getattr(record, name) for name in attnames]
            for index, field in json_columns.items():
                row[index] = adapt_json(row[index], field.encoder)
            copy.write_row(row)


def _group_key(record: FailureRecord) -> tuple[str, str, str, str]:
    return (record.collection, record.stage, record.reason, record.tool)


_GROUP_KEY = ("collection", "stage", "reason", "tool")
_GROUP_KEY_TYPES = ("text", "text", "text", "text")
# A new group's columns: its key, then what its first record says, then counters at zero
# (the batch's UPDATE adds them, as for every other group).
_GROUP_NEW = (*_GROUP_KEY, "reason_mapped", "first_seen", "last_seen", "lane", "count",
              "retryable_count", "contradiction_count", "quality_lab_count", "pruned_count",
              "status")  # fmt: skip
_GROUP_NEW_TYPES = (*_GROUP_KEY_TYPES, "boolean", "timestamptz", "timestamptz", "text",
                    "bigint", "bigint", "bigint", "bigint", "bigint", "text")  # fmt: skip


def _groups_for(
    records: list[FailureRecord], *, created: set[int]
) -> dict[tuple[str, str, str, str], int]:
    """The group id of each key among the records: one SELECT joined to exactly the batch's
    keys, then one INSERT of those missing (a batch's cost follows its groups, not every
    group that shares a collection, stage, reason or tool with one of them). The ids this
    batch's INSERT created are added to `created`."""
    first: dict[tuple[str, str, str, str], FailureRecord] = {}
    for record in records:
        first.setdefault(_group_key(record), record)
    keys = sorted(first)
    found = _group_ids(keys)
    missing = [key for key in keys if key not in found]
    if not missing:
        return found
    adapt = connection.ops.adapt_datetimefield_value
    rows = [
        (*key, first[key].reason_mapped, adapt(first[key].occurred_at),
         adapt(first[key].occurred_at), first[key].lane, 0, 0, 0, 0, 0, GroupStatus.OPEN.value)
        for key in missing
    ]  # fmt: skip
    with connection.cursor() as cursor:
        for source, params in row_sources(_GROUP_NEW_TYPES, rows):
            cursor.execute(
                f"INSERT INTO {_GROUP_TABLE} ({', '.join(_GROUP_NEW)}) {source} "
                f"ON CONFLICT ({', '.join(_GROUP_KEY)}) DO NOTHING "
                f"RETURNING id, {', '.join(_GROUP_KEY)}",
                params,
            )
            inserted = {tuple(row[1:]): row[0] for row in cursor.fetchall()}
            found.update(inserted)
            created.update(inserted.values())
    # A concurrent batch created these after the SELECT: its INSERT waited for that batch
    # to commit, so a new statement sees them.
    raced = [key for key in missing if key not in found]
    if raced:
        found.update(_group_ids(raced))
    return found


def _group_ids(keys: list[tuple[str, str, str, str]]) -> dict[tuple[str, str, str, str], int]:
    found: dict[tuple[str, str, str, str], int] = {}
    if not keys:
        return found
    match = " AND ".join(f"g.{column} = k.{column}" for column in _GROUP_KEY)
    with connection.cursor() as cursor:
        for source, params in row_sources(_GROUP_KEY_TYPES, keys):
            cursor.execute(
                f"WITH k({', '.join(_GROUP_KEY)}) AS ({source}) "
                f"SELECT g.id, {', '.join(f'g.{column}' for column in _GROUP_KEY)} "
                f"FROM {_GROUP_TABLE} g JOIN k ON {match}",
                params,
            )
            found.update({tuple(row[1:]): row[0] for row in cursor.fetchall()})
    return found


_GROUP_TABLE = FailureGroup._meta.db_table
# One UPDATE for all the groups of a batch, joined to the batch's deltas (on PostgreSQL one
# array per column, elsewhere VALUES, as core.sql.row_sources gives them). The same text runs on
# PostgreSQL and SQLite (UPDATE ... FROM, a CTE with named columns); only the names of the
# two-argument min/max differ. Every SET expression reads the row as it was.
_GROUP_UPDATE = """
WITH d(id, n, r, c, q, fs, ls, lane, reopen, release) AS ({{source}})
UPDATE {table} SET
    count = {table}.count + d.n,
    retryable_count = {table}.retryable_count + d.r,
    contradiction_count = {table}.contradiction_count + d.c,
    quality_lab_count = {table}.quality_lab_count + d.q,
    first_seen = {least}({table}.first_seen, d.fs),
    last_seen = {greatest}({table}.last_seen, d.ls),
    lane = CASE WHEN {table}.last_seen <= d.ls THEN d.lane ELSE {table}.lane END,
    status = CASE
        WHEN {table}.status = 'resolved' AND d.reopen THEN 'regressed'
        WHEN {unmute} THEN 'open'
        ELSE {table}.status END,
    status_changed_at = CASE
        WHEN ({table}.status = 'resolved' AND d.reopen) OR {unmute} THEN %s
        ELSE {table}.status_changed_at END,
    regressed_in_release = CASE
        WHEN {table}.status = 'resolved' AND d.reopen THEN d.release
        ELSE {table}.regressed_in_release END,
    mute_remaining_count = CASE
        WHEN {unmute} THEN NULL
        WHEN {table}.status = 'muted' AND {table}.mute_remaining_count IS NOT NULL
            THEN {table}.mute_remaining_count - d.n
        ELSE {table}.mute_remaining_count END,
    muted_until = CASE WHEN {unmute} THEN NULL ELSE {table}.muted_until END
FROM d WHERE {table}.id = d.id
"""
_UNMUTE = (
    "({table}.status = 'muted' AND ({table}.mute_remaining_count <= d.n "
    "OR {table}.muted_until <= %s))"
)


def _apply_group_deltas(
    deltas: dict[int, _GroupDelta], *, now: datetime, regressed: set[int]
) -> None:
    """Add this batch's counts to its groups in one relative UPDATE (safe under concurrency).

    The groups are locked in id order first, so concurrent batches never deadlock, and their
    status is read under that lock: a resolved group that sees a record is regressed (unless
    it was resolved in a release and every record is from an earlier one: triage.releases)
    and a mute ends when its count of new records or its time runs out, each with a history
    row. The resolved groups this batch regresses are added to `regressed`.
    """
    if not deltas:
        return
    ids = sorted(deltas)
    locked: list[Any] = list(
        FailureGroup.objects.select_for_update(no_key=True)
        .filter(pk__in=ids)
        .order_by("pk")
        .values_list(
            "pk", "status", "mute_remaining_count", "muted_until", "collection",
            "status_changed_at", "resolved_in_release", "resolved_in_next_release", named=True,
        )
    )  # fmt: skip
    deployed = _deployment_times(locked, deltas)
    reopenings: dict[int, Reopening] = {}
    events = []
    for group in locked:
        if group.status == GroupStatus.RESOLVED:
            outcome = reopening(
                resolved_in=group.resolved_in_release,
                resolved_in_next=group.resolved_in_next_release,
                resolved_at=group.status_changed_at,
                seen=deltas[group.pk].releases,
                deployed=deployed.get(group.collection, {}),
            )
            reopenings[group.pk] = outcome
            if outcome.reopens:
                regressed.add(group.pk)
        events.extend(_status_events(group, deltas[group.pk], now=now, reopened=reopenings))
    ops = connection.ops
    postgres = connection.vendor == "postgresql"
    rows = [
        (
            group_id,
            deltas[group_id].count,
            deltas[group_id].retryable,
            deltas[group_id].contradictions,
            deltas[group_id].quality_lab,
            ops.adapt_datetimefield_value(deltas[group_id].first_seen),
            ops.adapt_datetimefield_value(deltas[group_id].last_seen),
            deltas[group_id].lane,
            reopenings.get(group_id, _REOPENS).reopens,
            reopenings.get(group_id, _REOPENS).release,
        )
        for group_id in ids
    ]
    sql = _GROUP_UPDATE.format(
        table=_GROUP_TABLE,
        least="LEAST" if postgres else "MIN",
        greatest="GREATEST" if postgres else "MAX",
        unmute=_UNMUTE.format(table=_GROUP_TABLE),
    )
    stamp = ops.adapt_datetimefield_value(now)
    types = ("bigint", "bigint", "bigint", "bigint", "bigint", "timestamptz", "timestamptz",
             "text", "boolean", "text")  # fmt: skip
    # The placeholders after the source are all `now`: one in each of the four unmute tests
    # and the new status_changed_at.
    with connection.cursor() as cursor:
        for source, params in row_sources(types, rows):
            cursor.execute(sql.format(source=source), [*params, *[stamp] * 5])
    GroupEvent.objects.bulk_create(events)
    _upsert_increments(
        FailureGroupBucket._meta.db_table,
        ("group_id", "hour"),
        ("bigint", "timestamptz", "integer"),
        sorted(
            (group_id, hour, count)
            for group_id, delta in deltas.items()
            for hour, count in delta.hours.items()
        ),
    )
    days: Counter[tuple[int, datetime]] = Counter()
    lines: Counter[tuple[str, str, datetime]] = Counter()
    for group_id, delta in deltas.items():
        for hour, count in delta.hours.items():
            days[(group_id, day_floor(hour))] += count
            lines[(*delta.line, hour)] += count
    _upsert_increments(
        FailureReasonBucket._meta.db_table,
        ("stage", "reason", "hour"),
        ("text", "text", "timestamptz", "integer"),
        sorted((stage, reason, hour, count) for (stage, reason, hour), count in lines.items()),
    )
    _upsert_increments(
        FailureGroupDay._meta.db_table,
        ("group_id", "day"),
        ("bigint", "timestamptz", "integer"),
        sorted((group_id, day, count) for (group_id, day), count in days.items()),
    )
    _upsert_increments(
        FailureGroupFacet._meta.db_table,
        ("group_id", "dimension", "value"),
        ("bigint", "text", "text", "bigint"),
        sorted(
            (group_id, dimension, value, count)
            for group_id, delta in deltas.items()
            for (dimension, value), count in delta.facets.items()
        ),
    )


# A group that is not resolved, or resolved without a release: any record reopens it.
_REOPENS = Reopening(True)


def _deployment_times(
    locked: list[Any], deltas: dict[int, _GroupDelta]
) -> dict[str, dict[str, datetime]]:
    """When each release that matters to this batch's resolved groups was deployed, per
    collection: the releases they were resolved in and those their new records carry. One
    query, and none when no resolved group sees a record with a release or was resolved in
    one (the common batch)."""
    collections: set[str] = set()
    versions: set[str] = set()
    for group in locked:
        if group.status != GroupStatus.RESOLVED:
            continue
        sent = {release for release in deltas[group.pk].releases if release}
        if group.resolved_in_release:
            sent.add(group.resolved_in_release)
        if sent:
            collections.add(group.collection)
            versions.update(sent)
    if not versions:
        return {}
    found: dict[str, dict[str, datetime]] = {}
    for collection, version, deployed_at in Release.objects.filter(
        collection__in=sorted(collections), version__in=sorted(versions)
    ).values_list("collection", "version", "deployed_at"):
        found.setdefault(collection, {})[version] = deployed_at
    return found


def _status_events(
    group: Any, delta: _GroupDelta, *, now: datetime, reopened: dict[int, Reopening]
) -> list[GroupEvent]:
    """History rows for the status changes a batch causes (read before the UPDATE), from
    the group's (pk, status, mute_remaining_count, muted_until) and whether its records
    reopen it when it is resolved (`reopened`)."""
    if group.status == GroupStatus.RESOLVED:
        outcome = reopened[group.pk]
        if not outcome.reopens:
            return []
        note = f"{delta.count} new record(s) after it was resolved"
        if outcome.release:
            note = (
                f"{delta.count} new record(s) from release {outcome.release} after it was resolved"
            )
        return [
            GroupEvent(
                group_id=group.pk,
                action="regressed",
                status_before=GroupStatus.RESOLVED,
                status_after=GroupStatus.REGRESSED,
                note=note,
                data={"release": outcome.release} if outcome.release else {},
                created_at=now,
            )
        ]
    if group.status == GroupStatus.MUTED and (
        (group.mute_remaining_count is not None and group.mute_remaining_count <= delta.count)
        or (group.muted_until is not None and group.muted_until <= now)
    ):
        return [GroupEvent.unmuted(group_id=group.pk, now=now)]
    return []


def _upsert_increments(
    table: str,
    key_columns: tuple[str, ...],
    pg_types: tuple[str, ...],
    rows: Sequence[tuple[Any, ...]],
) -> None:
    """INSERT rows of (*key, count), adding count to rows that already exist.

    Django's bulk_create(update_conflicts=True) can only overwrite, not add, so this is
    written once by hand; the syntax is shared by PostgreSQL and SQLite.
    """
    if not rows:
        return
    columns = ", ".join((*key_columns, "count"))
    with connection.cursor() as cursor:
        for source, params in row_sources(pg_types, rows):
            cursor.execute(
                f"INSERT INTO {table} ({columns}) {source} "
                f"ON CONFLICT ({', '.join(key_columns)}) "
                f"DO UPDATE SET count = {table}.count + EXCLUDED.count",
                params,
            )
