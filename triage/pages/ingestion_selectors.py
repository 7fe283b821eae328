"""Reads of the ingestion and tool-policy pages: the batch ledger, keys, unmapped reasons."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from organisation.access import is_admin
from organisation.models import Membership, Team
from triage.intake.envelope import EXTRA_KEY as ENVELOPE_KEY
from triage.models import (
    ApiKey,
    FailureGroup,
    FailureRecord,
    IngestBatch,
    IngestRejection,
    RetentionRun,
    ToolPolicy,
)
from triage.selectors import desk_wide_seen_by, seen_by

LEDGER_PAGE_SIZE = 50


def keys_seen_by(user: Any, field: str = "team_id") -> Q:
    """API keys (or, with ``field="api_key__team_id"``, the batches they sent) a person may
    see: a key carries no collection of its own, so it is the team's whose collections it
    serves. Admins see every key, and everyone does while no team exists; a key serving no
    team (every collection, or collections it names) is then an admin's. ``None`` is the
    desk reading for itself."""
    if user is None or is_admin(user):
        return Q()
    teams = Membership.objects.filter(person_id=user.pk).values("team_id")
    return ~Q(Exists(Team.objects.all())) | Q(**{f"{field}__in": teams})


@dataclass
class LedgerPage:
    batches: list[IngestBatch]
    older_cursor: int | None  # the id of the last batch shown, when there are older ones
    is_first_page: bool


def ingest_ledger(
    *, before_id: int | None, size: int = LEDGER_PAGE_SIZE, user: Any = None
) -> LedgerPage:
    """Newest first, by keyset (received_at, id): page 300 costs what page 1 costs.

    The cursor is only a batch id; its received_at is read in the same query, so a URL never
    carries a timestamp that would have to be parsed back.
    """
    batches = (
        IngestBatch.objects.select_related("api_key")
        .filter(keys_seen_by(user, "api_key__team_id"))
        .order_by("-received_at", "-id")
    )
    if before_id is not None:
        anchor = Subquery(IngestBatch.objects.filter(pk=before_id).values("received_at")[:1])
        batches = batches.filter(
            Q(received_at__lt=anchor) | Q(received_at=anchor, id__lt=before_id)
        )
    page = list(batches[: size + 1])
    older = None
    if len(page) > size:
        page = page[:size]
        older = page[-1].pk
    return LedgerPage(batches=page, older_cursor=older, is_first_page=before_id is None)


@dataclass(frozen=True)
class IngestTotals:
    batches: int
    items: int
    accepted: int
    rejected: int


def ingest_totals(*, since: datetime, user: Any = None) -> IngestTotals:
    """Batches and items received since a moment (of the batches ``user`` sees), in one
    aggregate query."""
    batches = IngestBatch.objects.filter(keys_seen_by(user, "api_key__team_id"))
    totals = batches.filter(received_at__gte=since).aggregate(
        batches=Count("id"),
        items=Coalesce(Sum("item_count"), 0),
        accepted=Coalesce(Sum("accepted"), 0),
        rejected=Coalesce(Sum("rejected"), 0) + Coalesce(Sum("conflicts"), 0),
    )
    return IngestTotals(**totals)


@dataclass
class BatchDetail:
    batch: IngestBatch
    rejections: list[IngestRejection]


def ingest_batch_detail(*, batch_id: int, user: Any = None) -> BatchDetail | None:
    """One batch with every item that was not stored (there are no bodies to show); None
    for a batch ``user`` does not see, as for no such batch."""
    batches = IngestBatch.objects.select_related("api_key")
    batch = batches.filter(keys_seen_by(user, "api_key__team_id"), pk=batch_id).first()
    if batch is None:
        return None
    return BatchDetail(batch=batch, rejections=list(batch.rejections.order_by("index")))


def api_keys_list(*, user: Any = None) -> QuerySet[ApiKey]:
    """Every key with its scope (collections, team) and its last use per collection."""
    return (
        ApiKey.objects.filter(keys_seen_by(user))
        .order_by("revoked_at", "name")
        .select_related("team")
        .prefetch_related("collection_uses")
        .only(
            "name",
            "owner",
            "lookup_id",
            "scopes",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "collections",
            "team__name",
        )
    )


def unmapped_reasons_queue(*, user: Any = None) -> list[dict[str, Any]]:
    """Every stored (stage, reason) the taxonomy does not know, most frequent first, in the
    collections ``user`` sees; a row whose newest record is an envelope with that code says
    so (`envelope_code`): it is mapped with TRIAGE_ENVELOPE_CODES, not by a new reason."""
    unmapped = FailureGroup.objects.filter(seen_by(user), reason_mapped=False)
    rows = list(
        unmapped.values("stage", "reason")
        .annotate(
            group_count=Count("id"),
            record_count=Sum("count"),
            last_seen_at=Max("last_seen"),
        )
        .order_by("-record_count", "stage", "reason")
    )
    if not rows:
        return rows
    # One probe of the (group, occurred_at) index per unmapped group, never a scan of its
    # records: an envelope's unmapped code is stored as the reason itself.
    newest_code = Subquery(
        FailureRecord.objects.filter(group=OuterRef("pk"))
        .order_by("-occurred_at", "-id")
        .values(f"extra__{ENVELOPE_KEY}__code")[:1]
    )
    from_envelopes = {
        (stage, reason)
        for stage, reason, code in unmapped.annotate(newest_code=newest_code).values_list(
            "stage", "reason", "newest_code"
        )
        if code == reason
    }
    for row in rows:
        row["envelope_code"] = (row["stage"], row["reason"]) in from_envelopes
    return rows


def policies_seen_by(user: Any) -> Q:
    """A collection's policies are its team's; those for all collections everyone's."""
    seen = seen_by(user)
    return Q(collection="") | seen if seen else Q()  # Q() is every row, and "x | Q()" is x


def retention_runs_recent(*, user: Any = None, limit: int = 5) -> list[RetentionRun]:
    """The newest retention runs, for those who see the desk-wide figures."""
    runs = RetentionRun.objects.filter(desk_wide_seen_by(user)).order_by("-started_at", "-id")
    return list(runs[:limit])


def tool_policies(*, text: str = "", user: Any = None) -> QuerySet[ToolPolicy]:
    """Policies whose collection or tool contains the text, "all collections" first (of the
    collections ``user`` sees)."""
    policies = ToolPolicy.objects.filter(policies_seen_by(user)).order_by("collection", "tool")
    if text:
        policies = policies.filter(Q(collection__icontains=text) | Q(tool__icontains=text))
    return policies


def tool_policy_for(
    *, collection: str, tool: str, other_than: ToolPolicy | None = None, user: Any = None
) -> ToolPolicy | None:
    """The policy already holding exactly this (collection, tool), if ``user`` sees it."""
    if not tool:
        return None
    policies = ToolPolicy.objects.filter(policies_seen_by(user), collection=collection, tool=tool)
    if other_than is not None:
        policies = policies.exclude(pk=other_than.pk)
    return policies.first()
