"""Small server-rendered pictures (sparklines, timelines) and formatting for the pages."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.simple_tag
def sparkline(
    values: list[int], width: int = 120, height: int = 20, label: str = "", unit: str = "bin"
) -> SafeString:
    """Bars, one per bin, scaled to the largest; an empty bin is a 1px baseline."""
    if not values:
        return mark_safe("")
    top = max(values) or 1
    step = width / len(values)
    bars = []
    for index, value in enumerate(values):
        bar = max(1.0, (value / top) * (height - 1)) if value else 0.0
        if bar:
            bars.append(
                f'<rect x="{index * step:.1f}" y="{height - bar:.1f}" '
                f'width="{max(step - 1, 1):.1f}" height="{bar:.1f}"></rect>'
            )
    title = escape(label or f"{sum(values)} records, peak {top} per {unit}")
    return mark_safe(
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{title}"><title>{title}</title>{"".join(bars)}</svg>'
    )


@register.simple_tag
def timeline(values: list[int], start: datetime, width: int = 720, height: int = 90) -> SafeString:
    """Hourly bars with a label at each day boundary."""
    plot = height - 14
    top = max([*values, 1])
    step = width / max(len(values), 1)
    parts = []
    for index, value in enumerate(values):
        if value:
            bar = max(1.0, value / top * plot)
            hour = start + timedelta(hours=index)
            parts.append(
                f'<rect x="{index * step:.2f}" y="{plot - bar:.1f}" width="{max(step, 1):.2f}" '
                f'height="{bar:.1f}"><title>{hour:%Y-%m-%d %H}:00 · {value}</title></rect>'
            )
        moment = start + timedelta(hours=index)
        if moment.hour == 0:
            parts.append(f'<text x="{index * step:.1f}" y="{height - 2}">{moment:%m-%d}</text>')
    return mark_safe(
        f'<svg class="timeline" width="100%" height="{height}" viewBox="0 0 {width} {height}" '
        f'preserveAspectRatio="none" role="img" aria-label="records per hour, peak {top}">'
        f"{''.join(parts)}</svg>"
    )


@register.filter
def compact_json(value: Any) -> str:
    """One line per top-level key, nested values as compact JSON: dense but scannable."""
    if value in (None, {}, []):
        return ""
    if not isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return "\n".join(
        f"{key}: {json.dumps(item, ensure_ascii=False, separators=(', ', ': '))}"
        for key, item in sorted(value.items())
    )


@register.filter
def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


@register.simple_tag
def lane_pill(lane: str) -> SafeString:
    if not lane:
        return mark_safe('<span class="muted">-</span>')
    return format_html('<span class="pill lane-{}">{}</span>', lane, lane)


@register.simple_tag
def status_pill(status: str) -> SafeString:
    return format_html('<span class="status-{}">{}</span>', status, status)
