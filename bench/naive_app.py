"""The naive ingest path that bench/ingest.py measures the real one against.

Not part of the app: gunicorn serves it as ``bench.naive_app:application`` with the project's
settings, database, middleware, API-key authentication, body parser and quota, on the same
URL (``POST /api/v1/ingest``). Only the per-item work differs from ``triage.intake.ingest``: every
failure item is scrubbed, parsed, classified, validated by its own DRF ModelSerializer and
written one statement at a time (claim, tool policy, group, counters, buckets, facets, the
record itself). It is naive but reasonable: the batch runs in one transaction, as the real
path does, and items are written in group order (the real path's lock order too), without
which two concurrent batches deadlock on the group counters.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, cast

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()  # django.setup(); the views below need the app registry

from django.conf import settings  # noqa: E402
from django.db import transaction  # noqa: E402
from django.db.models import Case, F, Value, When  # noqa: E402
from django.db.models.functions import Greatest, Least  # noqa: E402
from django.http import HttpRequest, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.utils import timezone  # noqa: E402
from rest_framework import serializers  # noqa: E402
from rest_framework.request import Request  # noqa: E402
from rest_framework.response import Response  # noqa: E402
from rest_framework.views import APIView  # noqa: E402

from triage.api.serializers import FailureRecordSerializer  # noqa: E402
from triage.intake.auth import ApiKeyAuthentication, HasIngestScope  # noqa: E402
from triage.intake.errors import InvalidBatch, QuotaExceeded  # noqa: E402
from triage.intake.ingest import body_hash  # noqa: E402
from triage.intake.normalize import FailureFields, ItemError, parse_failure  # noqa: E402
from triage.intake.parsers import IngestJSONParser, receive_body  # noqa: E402
from triage.intake.quota import quota_consume  # noqa: E402
from triage.models import (  # noqa: E402
    QUALITY_LAB_SOURCE,
    ApiKey,
    FailureGroup,
    FailureGroupBucket,
    FailureGroupFacet,
    FailureReasonBucket,
    FailureRecord,
    GroupStatus,
    IngestBatch,
    IngestItem,
    ToolPolicy,
)
from triage.scrub import ScrubError, scrub_payload  # noqa: E402
from triage.vocabulary import taxonomy  # noqa: E402
from triage.vocabulary.lanes import ToolFacts, classify  # noqa: E402


class NaiveFailureSerializer(serializers.ModelSerializer[FailureRecord]):
    """Validates one normalized record; save() is its INSERT."""

    class Meta:
        model = FailureRecord
        # The API's record fields, less the ones the database assigns.
        fields = [f for f in FailureRecordSerializer.Meta.fields if f not in ("id", "group")]


def _outcome(index: int, client_id: str, status: str, code: str = "") -> dict[str, Any]:
    data: dict[str, Any] = {"index": index, "id": client_id, "status": status}
    if code:
        data["error"] = {"code": code, "message": code, "field": ""}
    return data


def _tool_facts(fields: FailureFields) -> ToolFacts:
    policy = None
    if fields.tool:
        policy = (
            ToolPolicy.objects.filter(tool=fields.tool, collection__in=[fields.collection, ""])
            .order_by("-collection")
            .first()
        )
    if policy is None:
        return ToolFacts(side_effect=fields.declared_side_effect)
    return ToolFacts(
        side_effect=policy.side_effect,
        timeout_before_send_lane=policy.timeout_before_send_lane,
        timeout_after_send_lane=policy.timeout_after_send_lane,
        approval_required=policy.approval_required,
    )


def _increment(model: Any, keys: dict[str, Any]) -> None:
    """count + 1 on the row with these keys, creating it the first time."""
    if not model.objects.filter(**keys).update(count=F("count") + 1):
        model.objects.create(count=1, **keys)


def _store_one(
    *, batch: IngestBatch, owner: str, client_id: str, raw: dict[str, Any], fields: FailureFields
) -> str:
    now = batch.received_at
    _, created = IngestItem.objects.get_or_create(
        owner=owner,
        item_type="failure",
        client_id=client_id,
        defaults={"body_hash": body_hash(raw), "batch": batch, "created_at": now},
    )
    if not created:
        return "duplicate"
    derived = classify(
        reason=fields.reason, tool=_tool_facts(fields), sent=fields.sent, evidence=fields.evidence
    )
    serializer = NaiveFailureSerializer(
        data={
            "client_id": client_id,
            "collection": fields.collection,
            "source": fields.source,
            "stage": fields.stage,
            "reason": fields.reason,
            "reason_mapped": fields.reason_mapped,
            "message": fields.message,
            "tool": fields.tool,
            "side_effect": derived.side_effect,
            "plan_id": fields.plan_id,
            "step_id": fields.step_id,
            "retryable": derived.retryable,
            "operator_action": derived.operator_action,
            "lane": derived.lane,
            "execution_state": derived.execution_state,
            "sent_retryable": fields.sent.retryable,
            "sent_lane": fields.sent.lane or "",
            "sent_execution_state": fields.sent.execution_state or "",
            "contradictions": derived.contradictions,
            "evidence": fields.evidence,
            "extra": fields.extra,
            "idempotency_key": fields.idempotency_key,
            "occurred_at": fields.occurred_at,
            "received_at": now,
            "graph_tool_call_version": fields.graph_tool_call_version,
            "taxonomy_version": taxonomy.TAXONOMY_VERSION,
        }
    )
    serializer.is_valid(raise_exception=True)
    occurred: datetime = serializer.validated_data["occurred_at"]
    group, _ = FailureGroup.objects.get_or_create(
        collection=fields.collection,
        stage=fields.stage,
        reason=fields.reason,
        tool=fields.tool,
        defaults={
            "reason_mapped": fields.reason_mapped,
            "first_seen": occurred,
            "last_seen": occurred,
            "lane": derived.lane,
        },
    )
    FailureGroup.objects.filter(pk=group.pk).update(
        count=F("count") + 1,
        retryable_count=F("retryable_count") + int(derived.retryable),
        contradiction_count=F("contradiction_count") + int(bool(derived.contradictions)),
        quality_lab_count=F("quality_lab_count") + int(fields.source == QUALITY_LAB_SOURCE),
        first_seen=Least(F("first_seen"), Value(occurred)),
        last_seen=Greatest(F("last_seen"), Value(occurred)),
        lane=Case(When(last_seen__lte=occurred, then=Value(derived.lane)), default=F("lane")),
        status=Case(
            When(status=GroupStatus.RESOLVED, then=Value(GroupStatus.REGRESSED)),
            default=F("status"),
        ),
        status_changed_at=Case(
            When(status=GroupStatus.RESOLVED, then=Value(now)), default=F("status_changed_at")
        ),
    )
    hour = occurred.replace(minute=0, second=0, microsecond=0)
    _increment(FailureGroupBucket, {"group": group, "hour": hour})
    _increment(FailureReasonBucket, {"stage": group.stage, "reason": group.reason, "hour": hour})
    for dimension, value in (
        ("source", fields.source),
        ("lane", derived.lane),
        ("execution_state", derived.execution_state),
    ):
        _increment(FailureGroupFacet, {"group": group, "dimension": dimension, "value": value})
    serializer.save(group=group, batch=batch)
    return "accepted"


class NaiveIngestApi(APIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasIngestScope]
    parser_classes = [IngestJSONParser]

    def post(self, request: Request) -> Response:
        receive_body(request, chunked=False)  # the parser reads what this read, as both doors do
        data = request.data
        items = data.get("items") if isinstance(data, dict) else None
        if not isinstance(items, list) or not items:
            raise InvalidBatch('The body must be {"items": [...]}.', code="invalid_batch")
        api_key = cast(ApiKey, request.auth)
        retry_after = quota_consume(api_key=api_key, items=len(items))
        if retry_after is not None:
            raise QuotaExceeded(wait=retry_after)
        now = timezone.now()
        outcomes: list[dict[str, Any]] = []
        valid: list[tuple[int, str, dict[str, Any], FailureFields]] = []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                outcomes.append(_outcome(index, "", "rejected", "invalid_item"))
                continue
            client_id = str(item.get("id", ""))
            body = item.get("body")
            if item.get("type") != "failure" or not client_id or not isinstance(body, dict):
                outcomes.append(_outcome(index, client_id, "rejected", "invalid_item"))
                continue
            try:
                clean = scrub_payload(body, path="body", hash_key=settings.TRIAGE_HASH_KEY)
                fields = parse_failure(clean, now=now)
            except ScrubError:
                outcomes.append(_outcome(index, client_id, "rejected", "scrub_failed"))
                continue
            except ItemError as exc:
                outcomes.append(_outcome(index, client_id, "rejected", exc.code))
                continue
            valid.append((index, client_id, body, fields))
        valid.sort(key=lambda v: (v[3].collection, v[3].stage, v[3].reason, v[3].tool))
        with transaction.atomic():
            batch = IngestBatch.objects.create(
                api_key=api_key,
                owner=api_key.owner,
                channel="naive",
                received_at=now,
                item_count=len(items),
                body_bytes=getattr(request, "ingest_body_bytes", 0),
            )
            for index, client_id, body, fields in valid:
                status = _store_one(
                    batch=batch, owner=api_key.owner, client_id=client_id, raw=body, fields=fields
                )
                outcomes.append(_outcome(index, client_id, status))
            batch.accepted = sum(1 for o in outcomes if o["status"] == "accepted")
            batch.duplicates = sum(1 for o in outcomes if o["status"] == "duplicate")
            batch.rejected = sum(1 for o in outcomes if o["status"] == "rejected")
            batch.save(update_fields=["accepted", "duplicates", "rejected"])
            ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        outcomes.sort(key=lambda o: o["index"])
        body_out = {
            "batch_id": batch.pk,
            "accepted": batch.accepted,
            "duplicates": batch.duplicates,
            "conflicts": 0,
            "rejected": batch.rejected,
            "items": outcomes,
        }
        return Response(body_out, status=200 if not batch.rejected else 207)


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("healthz", healthz),
    path("api/v1/ingest", NaiveIngestApi.as_view()),
]
# Only this process serves the naive URLconf; nothing is written to the project's settings.
settings.ROOT_URLCONF = __name__
