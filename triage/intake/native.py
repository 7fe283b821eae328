"""The native door: `POST /api/v1/ingest`, a JSON batch of typed items into batch_ingest."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from triage.intake.auth import ApiKeyAuthentication, HasIngestScope
from triage.intake.capacity import ingest_slot
from triage.intake.errors import InvalidBatch, PayloadTooLarge, QuotaExceeded
from triage.intake.ingest import batch_ingest
from triage.intake.parsers import IngestJSONParser, receive_body
from triage.intake.quota import quota_consume
from triage.intake.serializers import IngestRequestSerializer, IngestResponseSerializer
from triage.models import ApiKey

_ERROR = OpenApiResponse(description='{"error": {"code": ..., "message": ...}}')


class IngestApi(APIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasIngestScope]
    parser_classes = [IngestJSONParser]

    @extend_schema(
        operation_id="ingest_batch",
        summary="Ingest a batch of failures, runner events, receipts, audit events, envelopes",
        request=IngestRequestSerializer,
        responses={
            200: IngestResponseSerializer,
            207: IngestResponseSerializer,
            400: _ERROR,
            401: _ERROR,
            403: _ERROR,
            411: _ERROR,
            413: _ERROR,
            429: _ERROR,
            503: _ERROR,
        },
    )
    def post(self, request: Request) -> Response:
        receive_body(request, chunked=False)  # before the slot: see receive_body
        with ingest_slot():
            return self._ingest(request)

    def _ingest(self, request: Request) -> Response:
        data = request.data
        if not isinstance(data, dict) or "items" not in data:
            raise InvalidBatch('The body must be {"items": [...]}.', code="invalid_batch")
        items = data["items"]
        if not isinstance(items, list):
            raise InvalidBatch("items must be a list.", code="invalid_batch")
        if not items:
            raise InvalidBatch("items is empty.", code="empty_batch")
        if len(items) > settings.TRIAGE_INGEST_MAX_ITEMS:
            raise PayloadTooLarge(
                f"A batch holds at most {settings.TRIAGE_INGEST_MAX_ITEMS} items.",
                code="too_many_items",
            )
        api_key = request.auth
        assert isinstance(api_key, ApiKey)  # HasIngestScope let only API keys through
        retry_after = quota_consume(
            api_key=api_key,
            items=len(items),
            body_bytes=getattr(request, "ingest_decoded_bytes", 0),
        )
        if retry_after is not None:
            raise QuotaExceeded(wait=retry_after)
        outcome = batch_ingest(
            owner=api_key.owner,
            items=items,
            api_key=api_key,
            channel="api",
            body_bytes=getattr(request, "ingest_body_bytes", 0),
        )
        return Response(outcome.as_dict(), status=200 if outcome.all_stored else 207)
