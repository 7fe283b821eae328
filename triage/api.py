"""API views: read access to failures and groups (the doors that write are in triage.intake)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

from triage.intake.auth import HasReadScope
from triage.selectors import FailureFilters, failures_list, groups_list
from triage.serializers import (
    FailureFilterSerializer,
    FailureGroupSerializer,
    FailureRecordSerializer,
)


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
