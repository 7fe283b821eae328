"""Small formatting for the learning review pages."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()


@register.simple_tag
def suggestion_status(status: str) -> SafeString:
    return format_html('<span class="sg-status sg-{}">{}</span>', status, status)


@register.filter
def signed(value: Any) -> str:
    if value is None or value == "":
        return "-"
    number = int(value)
    return f"+{number}" if number > 0 else str(number)


@register.simple_tag
def shadow_delta(shadow: dict[str, Any] | None) -> SafeString:
    """The shadow evidence in one line: rank delta summed over the cases it touches."""
    if not shadow or not shadow.get("cases"):
        return format_html('<span class="muted small">{}</span>', "no shadow run yet")
    delta = int(shadow.get("rank_delta") or 0)
    tone = "up" if delta > 0 else "down" if delta < 0 else "flat"
    cases = int(shadow["cases"])
    extra = []
    if shadow.get("selected_target_changed"):
        extra.append(f"{shadow['selected_target_changed']} selection changed")
    if shadow.get("failure_reason_changed"):
        extra.append(f"{shadow['failure_reason_changed']} failure changed")
    return format_html(
        '<span class="delta delta-{}" title="{} improved, {} worsened">{}</span> '
        '<span class="small muted">on {} case{}{}</span>',
        tone,
        shadow.get("improved", 0),
        shadow.get("worsened", 0),
        signed(delta),
        cases,
        "" if cases == 1 else "s",
        (" · " + ", ".join(extra)) if extra else "",
    )


@register.filter
def short_hash(value: str) -> str:
    return value[:10] if value else ""
