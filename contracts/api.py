"""GET /api/v1/contracts: the contracts page's figures, for a read key (of the collections
the key serves, or the person sees)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from contracts import selectors
from contracts.forms import ContractsFilterForm
from contracts.report import overview_document
from core.api import form_refusal
from triage.intake.auth import HasReadScope


class ContractsApi(APIView):
    permission_classes = [HasReadScope]
    session_permission = "triage.view_receipt"

    @extend_schema(
        summary="Which tools to contract first (seed 004) and how well each keeps it",
        parameters=[
            OpenApiParameter("days", int, description="The window, 1-365 days (30)."),
            OpenApiParameter("collection", str),
            OpenApiParameter("tool", str),
        ],
        responses={200: dict[str, Any]},
    )
    def get(self, request: Request) -> Response:
        form = ContractsFilterForm(request.query_params)
        if not form.is_valid():
            raise form_refusal(form)
        overview = selectors.contracts_overview(
            now=timezone.now(), filters=form.filters(), user=request.user
        )
        return Response(overview_document(overview))
