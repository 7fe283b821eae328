"""API views: batch ingest and read access to failures and groups."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from triage.api_auth import ApiKeyAuthentication, HasIngestScope, HasReadScope
from triage.api_errors import InvalidBatch, LengthRequired, PayloadTooLarge, QuotaExceeded
from triage.api_parsers import IngestJSONParser
from triage.capacity import ingest_slot
from triage.ingest import batch_ingest
from triage.models import ApiKey
from triage.quota import quota_consume
from triage.selectors import FailureFilters, failures_list, groups_list
from triage.serializers import (
    FailureFilterSerializer,
    FailureGroupSerializer,
    FailureRecordSerializer,
    IngestRequestSerializer,
    IngestResponseSerializer,
)

_ERROR = OpenApiResponse(description='{"error": {"code": ..., "message": ...}}')


class IngestApi(APIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasIngestScope]
    parser_classes = [IngestJSONParser]

    @extend_schema(
        operation_id="ingest_batch",
        summary="Ingest a batch of failures, runner events, receipts and audit events",
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
        with ingest_slot():
            return self._ingest(request)

    def _ingest(self, request: Request) -> Response:
        if (
            not request.META.get("CONTENT_LENGTH")
            and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        ):
            # Django reads a body only as far as its Content-Length; without one, a chunked
            # batch would look empty and get a misleading "invalid batch".
            raise LengthRequired()
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


class _NewestFirst(CursorPagination):
    page_size = 100
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = ("-occurred_at", "-id")

    def decode_cursor(self, request: Request) -> Cursor | None:
        """A cursor is the client's to echo back, not to write: its position must be a
        moment the database can compare, or the cursor is refused like any bad one."""
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None:
            try:
                moment = parse_datetime(str(cursor.position))
                valid = moment is not None and moment.astimezone(UTC) is not None
            except (ValueError, OverflowError):
                valid = False
            if not valid:
                raise NotFound(self.invalid_cursor_message)
        return cursor


class _RecentlySeenFirst(_NewestFirst):
    ordering = ("-last_seen", "-id")


class _FilteredList(generics.ListAPIView):
    permission_classes = [HasReadScope]

    def filters(self) -> FailureFilters:
        serializer = FailureFilterSerializer(data=self.request.query_params)
        serializer.is_valid(raise_exception=True)
        return FailureFilters(**serializer.validated_data)


@extend_schema(parameters=[FailureFilterSerializer], summary="Normalized failure records")
class FailureListApi(_FilteredList):
    session_permission = "triage.view_failurerecord"
    serializer_class = FailureRecordSerializer
    pagination_class = _NewestFirst

    def get_queryset(self) -> Any:
        return failures_list(filters=self.filters())


@extend_schema(parameters=[FailureFilterSerializer], summary="Failure groups with counters")
class GroupListApi(_FilteredList):
    session_permission = "triage.view_failuregroup"
    serializer_class = FailureGroupSerializer
    pagination_class = _RecentlySeenFirst

    def get_queryset(self) -> Any:
        return groups_list(filters=self.filters())
