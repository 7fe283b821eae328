"""API views: read access to failures and groups, and the taxonomy runtimes classify with
(the doors that write are in triage.intake)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import (
    APIException,
    ErrorDetail,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    ValidationError,
)
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.collection_names import collection_name_problem
from organisation.access import can_see, key_collections
from triage.api.serializers import (
    FailureFilterSerializer,
    FailureGroupSerializer,
    FailureRecordSerializer,
)
from triage.intake.auth import ApiKeyAuthentication, HasIngestScope, HasReadScope
from triage.intake.envelope import taxonomy_document
from triage.models import ApiKey
from triage.selectors import FailureFilters, failures_list, groups_list, tool_policy_document
from triage.services import ReleaseError, release_declare
from triage.vocabulary import taxonomy


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
        # A read key reads its collections; a person, those of their teams.
        return failures_list(filters=self.filters(), user=self.request.user)


@extend_schema(parameters=[FailureFilterSerializer], summary="Failure groups with counters")
class GroupListApi(_FilteredList):
    session_permission = "triage.view_failuregroup"
    serializer_class = FailureGroupSerializer
    pagination_class = _RecentlySeenFirst

    def get_queryset(self) -> Any:
        return groups_list(filters=self.filters(), user=self.request.user)


# --- the taxonomy, for runtimes -------------------------------------------------------------


class _TextsSerializer(serializers.Serializer[Any]):
    en = serializers.CharField()
    ko = serializers.CharField()


class _StageSerializer(serializers.Serializer[Any]):
    code = serializers.CharField()
    title = _TextsSerializer()


class _ReasonSerializer(serializers.Serializer[Any]):
    code = serializers.CharField()
    stage = serializers.CharField()
    lane = serializers.ChoiceField(choices=list(taxonomy.LANES))
    retryable = serializers.BooleanField()
    api_called = serializers.ChoiceField(choices=["no", "yes", "maybe"])
    execution_state = serializers.ChoiceField(choices=list(taxonomy.EXECUTION_STATES))
    meaning = _TextsSerializer()
    advice = _TextsSerializer(help_text="Where to look first (the triage guide's line).")


class _LaneSerializer(serializers.Serializer[Any]):
    code = serializers.CharField(help_text="One of the lanes a reason names.")
    next_action = serializers.CharField(help_text="seed 004's retry.next_action for the lane.")
    meaning = _TextsSerializer()


class TaxonomySerializer(serializers.Serializer[Any]):
    version = serializers.CharField(help_text="TAXONOMY_VERSION; each record stores its own.")
    stages = _StageSerializer(many=True, help_text="In lifecycle order.")
    reasons = _ReasonSerializer(many=True)
    lanes = _LaneSerializer(many=True)
    envelope_codes = serializers.DictField(
        child=serializers.CharField(),
        help_text="Envelope code -> reason: the built-in table plus TRIAGE_ENVELOPE_CODES. "
        "A code spelled like a reason (any case) maps to that reason without an entry.",
    )


class HasIngestOrReadScope(BasePermission):
    """Any API key that may ingest or read (a runtime polls this with its ingest key), or a
    signed-in person who may read the triage page, which shows the same vocabulary."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(request.auth, ApiKey):
            if request.auth.has_scope("ingest") or request.auth.has_scope("read"):
                return True
            raise PermissionDenied(
                "This API key has neither the 'ingest' nor the 'read' scope.",
                code="missing_scope",
            )
        user = request.user
        if user is None or not user.is_authenticated:
            raise NotAuthenticated(
                "Send an API key: Authorization: Bearer <key>.", code="missing_api_key"
            )
        if user.has_perm("triage.view_failuregroup"):
            return True
        raise PermissionDenied("Your account has no role that may read this.", code="missing_role")


# Runtimes poll: they may reuse an answer this long, then ask again with If-None-Match and
# get a bodiless 304 while nothing changed (it changes with a deploy or TRIAGE_ENVELOPE_CODES).
TAXONOMY_CACHE_CONTROL = "private, max-age=300"


class TaxonomyApi(APIView):
    permission_classes = [HasIngestOrReadScope]

    @extend_schema(
        operation_id="taxonomy",
        summary="The failure taxonomy: stages, reasons, lanes and envelope codes (en, ko)",
        responses={
            200: TaxonomySerializer,
            304: OpenApiResponse(description="Not modified: If-None-Match holds the ETag."),
            401: OpenApiResponse(description='{"error": {"code": "missing_api_key", ...}}'),
            403: OpenApiResponse(description='{"error": {"code": "missing_scope", ...}}'),
        },
    )
    def get(self, request: Request) -> Response:
        return _polled_answer(request, *taxonomy_document())


def _polled_answer(request: Request, body: dict[str, Any], etag: str) -> Response:
    """A document runtimes poll: its ETag and cache time, or a bodiless 304 when the
    request's If-None-Match holds the ETag."""
    headers = {"ETag": etag, "Cache-Control": TAXONOMY_CACHE_CONTROL}
    tags = _if_none_match(request.headers.get("If-None-Match", ""))
    if etag in tags or "*" in tags:
        return Response(status=304, headers=headers)
    return Response(body, headers=headers)


def _if_none_match(header: str) -> set[str]:
    """The entity tags of an If-None-Match header (`*` matches any, RFC 9110); a weak tag
    is compared as strong: the answer is the same JSON either way."""
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}


class ToolPoliciesApi(APIView):
    """The tool policies of one collection in seed 004's field names, for a runtime's
    middleware to classify with what the desk's operators decided (a policy for the
    collection wins over the one for every collection), with an ETag like the taxonomy."""

    permission_classes = [HasIngestOrReadScope]

    @extend_schema(
        operation_id="tool_policies",
        summary="A collection's tool policies, in seed 004's field names",
        responses={
            200: OpenApiResponse(
                description='{"collection": "billing", "tools": {"send_invoice": '
                '{"side_effect": "external_write", "idempotency": {"required": true, '
                '"lookup": "GET /invoices/{key}"}, "timeout_policy": {"on_before_send": '
                '"retry_safe", "on_after_send": "reconcile_first"}, "authority": '
                '{"approval_required": false}}}, "truncated": false}'
            ),
            304: OpenApiResponse(description="Not modified: If-None-Match holds the ETag."),
            400: OpenApiResponse(description='{"error": {"code": "invalid_field", ...}}'),
            404: OpenApiResponse(
                description='{"error": {"code": "collection_not_allowed", ...}}: a key scoped '
                "to other collections, or a person who does not see this one"
            ),
        },
    )
    def get(self, request: Request) -> Response:
        collection = request.query_params.get("collection", "")
        if not collection:
            raise ValidationError({"collection": ["Name the collection."]}, code="missing_field")
        problem = collection_name_problem(collection)
        if problem is not None:
            raise ValidationError(
                {"collection": [f"The collection name {problem}."]}, code="invalid_field"
            )
        _require_collection(request, collection)
        return _polled_answer(request, *tool_policy_document(collection=collection))


def _require_collection(request: Request, collection: str) -> None:
    """Refuse a collection the key does not serve (or the person does not see) as if it
    did not exist (404, whether or not it does), so names do not leak; the code says why."""
    if not can_see(request.user, collection):
        raise NotFound(
            "No collection of this name is served to this key or person.",
            code="collection_not_allowed",
        )


class ReleaseConflict(APIException):
    status_code = 409
    default_detail = "This release was declared with another deployed_at or url."
    default_code = "release_conflict"


class ReleaseSerializer(serializers.Serializer[Any]):
    """What POST /api/v1/releases takes and answers (the checks are release_declare's)."""

    collection = serializers.CharField()
    version = serializers.CharField()
    deployed_at = serializers.DateTimeField()
    url = serializers.CharField(required=False, allow_blank=True)


class ReleasesApi(APIView):
    """Declare a release of a collection: runtimes and CI send it when they deploy."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasIngestScope]

    @extend_schema(
        operation_id="release_declare",
        summary="Declare a release of a collection (idempotent)",
        request=ReleaseSerializer,
        responses={
            200: OpenApiResponse(ReleaseSerializer, description="already declared, the same"),
            201: ReleaseSerializer,
            400: OpenApiResponse(description='{"error": {"code", "message", "field"}}'),
            401: OpenApiResponse(description='{"error": {"code": "invalid_api_key", ...}}'),
            403: OpenApiResponse(description='{"error": {"code": "missing_scope", ...}}'),
            409: OpenApiResponse(description='{"error": {"code": "release_conflict", ...}}'),
        },
    )
    def post(self, request: Request) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise ValidationError(
                {"body": [ErrorDetail("The body must be a JSON object.", code="invalid_body")]}
            )
        try:
            release, created = release_declare(
                collection=body.get("collection"),
                version=body.get("version"),
                deployed_at=body.get("deployed_at"),
                url=body.get("url"),
                served=key_collections(request.auth),
            )
        except ReleaseError as exc:
            if exc.code == "release_conflict":
                raise ReleaseConflict(exc.message) from None
            raise ValidationError({exc.field: [ErrorDetail(exc.message, code=exc.code)]}) from None
        return Response(
            {
                "collection": release.collection,
                "version": release.version,
                "deployed_at": release.deployed_at.isoformat(),
                "url": release.url,
            },
            status=201 if created else 200,
        )
