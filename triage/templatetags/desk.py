"""Small server-rendered pictures (sparklines, timelines) and formatting for the pages."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from django import template
from django.urls import reverse
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import localtime
from django.utils.translation import gettext as _

from triage.timezones import abbreviation

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
    """Hourly bars with a label at each day boundary, both in the person's time zone."""
    plot = height - 14
    top = max([*values, 1])
    step = width / max(len(values), 1)
    zone = abbreviation(start)
    parts = []
    for index, value in enumerate(values):
        moment = localtime(start + timedelta(hours=index))
        if value:
            bar = max(1.0, value / top * plot)
            parts.append(
                f'<rect x="{index * step:.2f}" y="{plot - bar:.1f}" width="{max(step, 1):.2f}" '
                f'height="{bar:.1f}"><title>{moment:%Y-%m-%d %H:%M} {zone} · {value}</title></rect>'
            )
        # The bar holding local midnight (at :30 in a zone half an hour off UTC).
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
def thousands(value: int) -> str:
    """1234567 as 1,234,567: the page's counts, without the cost of localizing each one."""
    return f"{value:,}"


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


@register.simple_tag
def reason_rows(
    section: Any,
    unit: str,
    narrowed: str,
    narrow_base: str,
    window_label: str = "",
    back_suffix: str = "",
) -> SafeString:
    """The rows of one stage on the triage page, two <tr> per reason.

    Written in Python rather than template markup because a busy fleet shows every reason
    of the catalog at once: this is the page's hot loop, and the template language spent
    about half a millisecond a row on it.
    """
    joiner = "" if narrow_base.endswith("?") else "&"
    html = []
    for row in section.rows:
        if narrowed:
            groups = _group_list(row, back_suffix)
        elif len(row.groups) > 1:
            link = f"{narrow_base}{joiner}stage={quote(row.stage)}&reason={quote(row.reason)}"
            groups = format_html(
                ' · <a href="{}">its {} groups, by tool and collection →</a>',
                link,
                len(row.groups),
            )
        else:
            groups = mark_safe("")
        html.append(
            format_html(
                '<tr class="reason"><td></td><td class="nowrap">'
                '{}<a class="code" href="{}">{}</a>{}{}{}</td>'
                '<td class="num" title="{}">{}</td><td>{}</td>'
                '<td class="small">{}</td><td class="small">{}</td><td>{}</td>'
                '<td class="small nowrap">{}</td><td class="num">{}</td>'
                '<td class="nowrap">{}</td></tr>\n'
                '<tr class="advice"><td></td><td colspan="9">{}{}</td></tr>\n',
                _stage_label(row.stage) if section.flat else "",
                reverse("triage:group", args=[row.top_group.pk]) + back_suffix,
                row.reason,
                _UNMAPPED_PILL if row.info is None else _origin_pill(row.info),
                _source_mix(row.source_mix),
                _flags(row, window_label),
                f"{thousands(row.previous_count)} in the window before",
                thousands(row.count),
                sparkline(row.spark, unit=unit),
                _first_two(row.tools, '<span class="code">{}</span>'),
                _first_two(row.collections),
                mark_safe(" ".join(lane_pill(lane) for lane in row.lanes)),
                format_html_join(
                    mark_safe("<br>"),
                    "{} {}",
                    ((s, thousands(n)) for s, n in row.state_mix.items()),
                ),
                percent(row.retryable_share),
                _row_status(row),
                _advice(row.info),
                groups,
            )
        )
    return mark_safe("".join(html))


_UNMAPPED_PILL = mark_safe(
    ' <span class="pill muted" title="not in the taxonomy yet">unmapped</span>'
)


_ADAPTER_PILL = mark_safe(
    ' <span class="pill muted" title="Triage Desk\'s own reason: in the taxonomy, not in the '
    'seed catalog">adapter</span>'
)


def _origin_pill(info: Any) -> SafeString:
    return _ADAPTER_PILL if info.origin == "adapter" else mark_safe("")


def _stage_label(stage: str) -> SafeString:
    return format_html('<span class="muted small stage-label">{}</span> ', stage)


def _flags(row: Any, window_label: str) -> SafeString:
    """'new' for a row first seen in the window; 'spiking' for one far above the window
    before it."""
    if row.new:
        return format_html(
            ' <span class="pill flag-new" title="first seen in the {}">new</span>', window_label
        )
    if row.spiking:
        return format_html(
            ' <span class="pill flag-spiking" title="{} records, {} in the window before">'
            "spiking</span>",
            thousands(row.count),
            thousands(row.previous_count),
        )
    return mark_safe("")


def _source_mix(mix: dict[str, int]) -> SafeString:
    """'runtime 8 · quality_lab 94' when a row's records come from more than one source."""
    if len(mix) < 2:
        return mark_safe("")
    return format_html(
        ' <span class="small muted source-mix" title="{}">{}: {}</span>',
        _("records by source since the group's first record, not only in the window"),
        _("all time"),
        " · ".join(
            f"{source} {thousands(count)}"
            for source, count in sorted(mix.items(), key=lambda item: -item[1])
        ),
    )


def _first_two(values: list[str], template: str = "{}") -> SafeString:
    """'a, b +3' for a list of five."""
    shown = format_html_join(", ", template, ((value,) for value in values[:2]))
    if len(values) <= 2:
        return shown
    return format_html('{} <span class="muted">+{}</span>', shown, len(values) - 2)


def _row_status(row: Any) -> SafeString:
    status = status_pill(row.status)
    if len(row.groups) > 1:
        status = format_html(
            '{} <span class="muted small">{} groups</span>', status, len(row.groups)
        )
    if row.assignees:
        status = format_html(
            '{} <span class="muted small">· {}</span>', status, ", ".join(row.assignees)
        )
    return status


def _advice(info: Any) -> SafeString:
    if info is None:
        return format_html(
            "A reason the taxonomy does not know yet: see the group's evidence and the "
            '<a href="{}#unmapped">unmapped reasons</a> list.',
            reverse("triage:ingestion"),
        )
    return format_html(
        "{} · look at: {} · usual fix: {}", info.meaning, info.triage_advice, info.usual_action
    )


def _group_list(row: Any, back_suffix: str = "") -> SafeString:
    """Every group of the reason, when the page is narrowed to it."""
    items = (
        format_html(
            '<li><a href="{}"><span class="code">{}</span> in {}</a> · {} · {}{}</li>',
            reverse("triage:group", args=[item.group.pk]) + back_suffix,
            item.group.tool or "(no tool)",
            item.group.collection or "(no collection)",
            thousands(item.window_count),
            status_pill(item.group.status),
            format_html(' <span class="muted small">· {}</span>', item.group.assignee)
            if item.group.assignee
            else "",
        )
        for item in row.groups
    )
    return format_html('<ul class="group-list">{}</ul>', mark_safe("".join(items)))
