"""The fixes' panels on other apps' pages: the group page (its fixes, the resolve form's fix
fields, the runbook cards' tallies) and a promoted suggestion's page. Loaded by name from
those templates, so no other app imports this one. Each reads at most one query, remembered
on the group for the rest of the page."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import template
from django.urls import reverse

from fixes import selectors
from fixes.models import Fix, FixKind
from qualitylab.models import QualityCase
from triage.models import FailureGroup, Runbook

register = template.Library()
GROUP_FIXES_SHOWN = 10


def _group_fixes(group: FailureGroup) -> list[Fix]:
    cached: list[Fix] | None = getattr(group, "_fixes_shown", None)
    if cached is None:
        cached = list(
            Fix.objects.filter(group=group)
            .select_related("runbook", "verification_run")
            .order_by("-fixed_at", "-id")[:GROUP_FIXES_SHOWN]
        )
        group._fixes_shown = cached  # type: ignore[attr-defined]
    return cached


@register.simple_tag
def group_fixes(group: FailureGroup) -> list[Fix]:
    return _group_fixes(group)


@register.simple_tag
def latest_fix(group: FailureGroup) -> Fix | None:
    """The fix of the group's latest resolution (or of the verification deciding it)."""
    fixes = _group_fixes(group)
    return fixes[0] if fixes else None


@register.simple_tag
def verifiable_cases(group: FailureGroup) -> int:
    """How many active cases were made from the group's failures (a verification runs them)."""
    cached: int | None = getattr(group, "_verifiable_cases", None)
    if cached is None:
        cached = QualityCase.objects.filter(failure_group=group, active=True).count()
        group._verifiable_cases = cached  # type: ignore[attr-defined]
    return cached


@register.filter
def fix_readings(fix: Fix) -> dict[str, Any]:
    return selectors.readings(fix)


@register.simple_tag
def runbook_tallies(*runbooks: Runbook | None) -> dict[int, selectors.Tally]:
    return selectors.runbook_tallies([runbook.pk for runbook in runbooks if runbook is not None])


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
