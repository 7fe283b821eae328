"""The fixes' panels on other apps' pages: the group page (its fixes, the resolve form's fix
fields, the runbook cards' tallies) and a promoted suggestion's page. Loaded by name from
those templates, so no other app imports this one. Each reads at most one query, remembered
on the group for the rest of the page."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import template
from django.db.models import Count, Exists, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse

from fixes import selectors
from fixes.models import Fix, FixKind
from qualitylab.models import QualityCase
from triage.models import FailureGroup, Runbook

register = template.Library()
GROUP_FIXES_SHOWN = 10


def _group_panel(group: FailureGroup) -> tuple[list[Fix], int]:
    """The group's newest fixes and how many active cases were made from its failures (a
    verification runs them): one query for both counts, and the fixes only when there are
    any; remembered on the group for the rest of the page."""
    cached: tuple[list[Fix], int] | None = getattr(group, "_fix_panel", None)
    if cached is None:
        counts = (
            FailureGroup.objects.filter(pk=group.pk)
            .annotate(
                panel_cases=Coalesce(
                    Subquery(
                        QualityCase.objects.filter(failure_group=OuterRef("pk"), active=True)
                        .values("failure_group")
                        .annotate(count=Count("pk"))
                        .values("count")
                    ),
                    0,
                ),
                panel_fixes=Exists(Fix.objects.filter(group=OuterRef("pk"))),
            )
            .values_list("panel_cases", "panel_fixes")
            .first()
        )
        cases, any_fix = counts if counts is not None else (0, False)
        fixes = (
            list(
                Fix.objects.filter(group=group)
                .select_related("runbook", "verification_run")
                .order_by("-fixed_at", "-id")[:GROUP_FIXES_SHOWN]
            )
            if any_fix
            else []
        )
        cached = (fixes, int(cases))
        group._fix_panel = cached  # type: ignore[attr-defined]
    return cached


@register.simple_tag
def group_fixes(group: FailureGroup) -> list[Fix]:
    return _group_panel(group)[0]


@register.simple_tag
def latest_fix(group: FailureGroup) -> Fix | None:
    """The fix of the group's latest resolution (or of the verification deciding it)."""
    fixes = _group_panel(group)[0]
    return fixes[0] if fixes else None


@register.simple_tag
def verifiable_cases(group: FailureGroup) -> int:
    """How many active cases were made from the group's failures (a verification runs them)."""
    return _group_panel(group)[1]


@register.filter
def fix_readings(fix: Fix) -> dict[str, Any]:
    return selectors.readings(fix)


@register.simple_tag(takes_context=True)
def runbook_tallies(context: Any, *runbooks: Runbook | None) -> dict[int, selectors.Tally]:
    # Counted over the fixes of the collections the page's reader sees.
    return selectors.runbook_tallies(
        [runbook.pk for runbook in runbooks if runbook is not None],
        user=context["request"].user,
    )


@register.filter
def tally_for(tallies: dict[int, selectors.Tally], runbook: Runbook | None) -> Any:
    return tallies.get(runbook.pk) if runbook is not None else None


@register.simple_tag
def fixes_url(**filters: Any) -> str:
    query = urlencode({name: value for name, value in filters.items() if value})
    return reverse("fixes:home") + (f"?{query}" if query else "")


@register.simple_tag
def fix_kinds() -> list[tuple[str, str]]:
    return [(value, str(label)) for value, label in FixKind.choices]


@register.filter
def percent(value: float | None) -> str:
    if value is None:
        return "\u2013"  # an en dash: no figure
    return f"{value * 100:.1f}%"
