"""`GET /api/v1/audit`: the audit of people's actions, for admins signed in. API keys never
read it: a runtime's credential has no business knowing who changed what on the desk."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.generics import ListAPIView
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from organisation import selectors
from organisation.access import api_key_of, is_admin
from organisation.forms import AuditQueryForm
from organisation.models import ActivityEntry


class IsSignedInAdmin(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False  # DRF answers 401: nobody said who they are
        if request.method not in SAFE_METHODS:
            return True  # the view answers GET only: anything else is a 405, for anyone
        if api_key_of(request.user) is not None:
            raise PermissionDenied(
                "The audit is read by admins signed in; API keys cannot read it.",
                code="missing_role",
            )
        if not is_admin(request.user):
            raise PermissionDenied("Only admins read the audit.", code="missing_role")
        return True


class _NewestFirst(CursorPagination):
    page_size = 100
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = ("-at", "-id")


class ActivityEntrySerializer(serializers.ModelSerializer[ActivityEntry]):
    actor = serializers.CharField(source="actor_name")

    class Meta:
        model = ActivityEntry
        fields = ["id", "at", "actor", "action", "subject", "collection", "detail"]


class AuditListApi(ListAPIView[ActivityEntry]):
    """Entries newest first, filtered like the audit page (`person`, `action`, `since`,
    `until` as YYYY-MM-DD); the `next` link carries the cursor."""

    permission_classes = [IsSignedInAdmin]
    serializer_class = ActivityEntrySerializer
    pagination_class = _NewestFirst

    @extend_schema(
        operation_id="audit_list",
        summary="The audit of people's actions (admins only)",
        parameters=[
            OpenApiParameter("person", str, description="the name the entry kept"),
            OpenApiParameter("action", str, description="a code such as group.muted"),
            OpenApiParameter("since", str, description="YYYY-MM-DD, included"),
            OpenApiParameter("until", str, description="YYYY-MM-DD, included"),
        ],
        responses={
            200: ActivityEntrySerializer(many=True),
            400: OpenApiResponse(description='{"error": {"code", "message", "field"}}'),
            403: OpenApiResponse(description='{"error": {"code": "missing_role", ...}}'),
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        form = AuditQueryForm(self.request.query_params)
        if not form.is_valid():
            field, errors = next(iter(form.errors.as_data().items()))
            raise ValidationError({field: [errors[0].messages[0]]}, code="invalid_filter")
        data = form.cleaned_data
        return selectors.audit_entries(
            person=data["person"], action=data["action"], since=data["since"], until=data["until"]
        )
