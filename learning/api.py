"""The export API: a collection's suggestions in graph-tool-call's shape, for runtimes.

``GET /api/v1/learning/suggestions?collection=C&status=promoted`` (read scope) returns
``{"collection", "registered", "learning_mode", "learning_allowed", "status", "count",
"suggestions": [...]}``; ``suggestions`` goes straight into graph-tool-call's
``apply_learning_suggestions(query, candidates, suggestions, mode="promoted")``. Without
``status`` it lists every status, each suggestion carrying its own (rejected ones included,
which the library never applies). A collection the desk does not know yet has no
suggestions: 200 with ``registered: false``. A name the reader may not see (another team's,
one outside the key's scope: organisation.access) is 404 ``collection_not_allowed``, whether
or not it exists, so names do not leak.

Every answer carries an ``ETag`` (a hash of its content); a request whose
``If-None-Match`` holds it gets ``304 Not Modified`` without a body, so a fleet of
runtimes polling every minute (``triage_desk_client.gtc.SuggestionCache``) costs the
query and no transfer.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from learning.models import SuggestionStatus
from learning.selectors import export_suggestions
from organisation.access import can_see
from qualitylab.models import Collection
from triage.intake.auth import HasReadScope


class SuggestionExportQuerySerializer(serializers.Serializer[None]):
    collection = serializers.CharField(
        max_length=COLLECTION_NAME_MAX_LENGTH, help_text="The collection id (name)."
    )
    status = serializers.ChoiceField(
        choices=SuggestionStatus.values,
        required=False,
        help_text="Only suggestions in this status; every status when left out.",
    )


class SuggestionExportSerializer(serializers.Serializer[None]):
    collection = serializers.CharField()
    registered = serializers.BooleanField()
    learning_mode = serializers.CharField(allow_null=True)
    learning_allowed = serializers.BooleanField(allow_null=True)
    status = serializers.CharField(allow_null=True)
    count = serializers.IntegerField()
    suggestions = serializers.ListField(
        child=serializers.DictField(),
        help_text="graph-tool-call suggestions: id, type, target, query_family, "
        "query_fingerprint, status, observations, prior_failure_count, evidence, ...",
    )


class SuggestionExportApi(APIView):
    permission_classes = [HasReadScope]
    session_permission = "learning.view_suggestion"

    @extend_schema(
        operation_id="learning_suggestions_export",
        summary="A collection's learning suggestions in graph-tool-call's shape",
        parameters=[SuggestionExportQuerySerializer],
        responses={
            200: SuggestionExportSerializer,
            304: OpenApiResponse(description="Not modified: If-None-Match holds the ETag."),
            400: OpenApiResponse(description='{"error": {"code", "message", "field"}}'),
            404: OpenApiResponse(description="collection_not_allowed: not this reader's."),
        },
    )
    def get(self, request: Request) -> Response:
        query = SuggestionExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        name = query.validated_data["collection"]
        status = query.validated_data.get("status") or None
        if not can_see(request.user, name):
            raise NotFound(
                "No collection of this name is served to this key or person.",
                code="collection_not_allowed",
            )
        collection = Collection.objects.filter(name=name).first()
        suggestions = (
            export_suggestions(collection=collection, status=status or "")
            if collection is not None
            else []
        )
        data = {
            "collection": name,
            "registered": collection is not None,
            "learning_mode": collection.learning_mode if collection else None,
            "learning_allowed": collection.learning_allowed if collection else None,
            "status": status,
            "count": len(suggestions),
            "suggestions": suggestions,
        }
        etag = _etag(data)
        if etag in _if_none_match(request.headers.get("If-None-Match", "")):
            return Response(status=304, headers={"ETag": etag})
        return Response(data, headers={"ETag": etag})


def _etag(data: dict[str, Any]) -> str:
    """A strong ETag: the hash of the answer's content in a canonical form."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return '"' + hashlib.sha256(canonical.encode()).hexdigest()[:32] + '"'


def _if_none_match(header: str) -> set[str]:
    """The entity tags of an If-None-Match header (weak ones compared as strong: the answer
    is the same JSON either way)."""
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
