"""GET /api/v1/fixes: the fixes list and which fixes hold, per runbook, kind and person, of
the collections the key serves (or the person sees)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import form_refusal
from fixes import selectors
from fixes.forms import FixesFilterForm
from fixes.models import SPANS, Fix
from triage.intake.auth import HasReadScope


def _reading(fix: Fix, span: str) -> dict[str, Any]:
    reading = selectors.readings(fix)[span]
    return {
        **fix.figures(span),
        "normalised": reading.normalised,
        "rate_before": reading.rate_before,
        "rate_after": reading.rate_after,
        "drop": reading.drop,
        "closed": fix.verdict_span == span or (span == "day" and fix.verdict_span == "week"),
    }


def fix_document(fix: Fix) -> dict[str, Any]:
    run = fix.verification_run
    return {
        "id": fix.pk,
        "group": fix.group_id,
        "suggestion": fix.suggestion.suggestion_id if fix.suggestion else None,
        "collection": fix.collection,
        "tool": fix.tool,
        "kind": fix.kind,
        "url": fix.url,
        "note": fix.note,
        "runbook": fix.runbook_id,
        "person": fix.actor_label,
        "fixed_at": fix.fixed_at.isoformat(),
        "verdict": fix.verdict,
        "verdict_span": fix.verdict_span or None,
        "settled": fix.settled,
        "measured_at": fix.measured_at.isoformat() if fix.measured_at else None,
        "verification": fix.verification or None,
        "verification_run": (
            {"id": run.pk, "status": run.status, "passed": run.passed, "total": run.total}
            if run is not None
            else None
        ),
        "spans": {span: _reading(fix, span) for span in SPANS},
    }


def _tallies(tallies: list[selectors.Tally], name: str) -> list[dict[str, Any]]:
    return [{name: tally.key, "fixes": tally.total, **tally.counts} for tally in tallies]


class FixesApi(APIView):
    permission_classes = [HasReadScope]
    session_permission = "triage.view_failuregroup"

    @extend_schema(
        summary="Recorded fixes, whether each held, and the tallies per runbook, kind, person",
        parameters=[
            OpenApiParameter("days", int, description="Fixes of the last 1-400 days (90)."),
            OpenApiParameter("kind", str),
            OpenApiParameter("verdict", str),
            OpenApiParameter("runbook", int),
            OpenApiParameter("group", int),
            OpenApiParameter("person", str),
            OpenApiParameter("collection", str),
            OpenApiParameter("tool", str),
        ],
        responses={200: dict[str, Any]},
    )
    def get(self, request: Request) -> Response:
        form = FixesFilterForm(request.query_params)
        if not form.is_valid():
            raise form_refusal(form)
        overview = selectors.fixes_overview(
            filters=form.filters(), now=timezone.now(), user=request.user
        )
        return Response(
            {
                "filters": overview.filters.as_query(),
                "total": overview.total,
                "limit": selectors.LIST_LIMIT,
                "fixes": [fix_document(fix) for fix in overview.rows],
                "by_runbook": _tallies(overview.by_runbook, "runbook"),
                "by_kind": _tallies(overview.by_kind, "kind"),
                "by_person": _tallies(overview.by_person, "person"),
            }
        )
