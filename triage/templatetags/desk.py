"""Small server-rendered pictures (sparklines, timelines) and formatting for the pages."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from django import template
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import localtime
from django.utils.translation import get_language, gettext, ngettext, pgettext
from django.utils.translation import gettext as _

from triage.models import GroupAction, GroupStatus
from triage.timezones import (
    MOMENT_FORMATS,
    abbreviation,
    moment_text,
    moment_title,
    relative_text,
)
from triage.vocabulary import taxonomy

register = template.Library()


def _spark_unit_label(unit: str) -> str:
    """A sparkline's bin in words (TriageOverview.spark_unit gives the code)."""
    if unit == "hour":
        return pgettext("sparkline bin", "hour")
    if unit == "day":
        return pgettext("sparkline bin", "day")
    return pgettext("sparkline bin", "bin")


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
    title = escape(
        label
        or ngettext(
            "%(total)d record, peak %(peak)d per %(unit)s",
            "%(total)d records, peak %(peak)d per %(unit)s",
            sum(values),
        )
        % {"total": sum(values), "peak": top, "unit": _spark_unit_label(unit)}
    )
    return mark_safe(
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{title}"><title>{title}</title>{"".join(bars)}</svg>'
    )


@register.simple_tag
def timeline(values: list[int], start: datetime, height: int = 80) -> SafeString:
    """Hourly bars with labelled axes: records per hour up the side (0, half, peak), the
    days along the bottom.

    Bars are placed in percent of the width, not in a stretched viewBox, so the labels keep
    their shape at any width; every other day label hides on a phone (desk.css).
    """
    top = max([*values, 1])
    count = max(len(values), 1)
    step = 100 / count
    bars: list[str] = []
    days: list[str] = []
    zone = abbreviation(start)
    for index, value in enumerate(values):
        # In the person's time zone: a day starts at their midnight (the bar holding it,
        # at :30 in a zone half an hour off UTC).
        hour = localtime(start + timedelta(hours=index))
        if value:
            bar = max(1.0, value / top * (height - 1))
            bars.append(
                f'<rect x="{index * step:.3f}%" y="{height - bar:.1f}" '
                f'width="{max(step, 0.15):.3f}%" height="{bar:.1f}">'
                f"<title>{escape(moment_text(hour, zone=True))} · {value}</title></rect>"
            )
        if hour.hour == 0:
            alternate = " alternate" if len(days) % 2 else ""
            days.append(
                f'<line class="tick" x1="{index * step:.3f}%" x2="{index * step:.3f}%" '
                f'y1="0" y2="4"></line><text class="day{alternate}" x="{index * step:.3f}%" '
                f'y="15">{escape(moment_text(hour, "day"))}</text>'
            )
    peak_label = gettext("peak %(count)s per hour") % {"count": f"{top:,}"}
    summary = gettext("Records per hour over the last %(days)s days, %(peak)s") % {
        "days": round(len(values) / 24),
        "peak": peak_label,
    }
    return format_html(
        '<figure class="timeline-figure">'
        '<div class="timeline-y" aria-hidden="true"><span>{}</span><span>{}</span>'
        "<span>0</span></div>"
        '<svg class="timeline" width="100%" height="{}" role="img" aria-label="{}">'
        '<line class="grid" x1="0" x2="100%" y1="0.5" y2="0.5"></line>'
        '<line class="grid" x1="0" x2="100%" y1="{}" y2="{}"></line>'
        '<line class="axis" x1="0" x2="100%" y1="{}" y2="{}"></line>{}</svg>'
        '<svg class="timeline-x" width="100%" height="18" aria-hidden="true">{}</svg>'
        '<figcaption class="small muted">{}</figcaption></figure>',
        f"{top:,}",
        f"{top // 2:,}" if top > 1 else "",
        height,
        summary,
        height / 2,
        height / 2,
        height - 0.5,
        height - 0.5,
        mark_safe("".join(bars)),
        mark_safe("".join(days)),
        gettext("Up: records per hour (0 to the peak, %(peak)s). Along: days (%(zone)s).")
        % {"peak": f"{top:,}", "zone": zone},
    )


@register.filter
def moment(value: datetime | str | None, style: str = "short") -> str:
    """The one way the pages write a time: in the person's zone and language, inside a <time>
    whose title gives the full date, time and zone.

    `style` is one of triage.timezones.MOMENT_FORMATS ("short", "seconds", "long", "weekday",
    "day", "time"...), or "relative" ('11 minutes ago'), "both" (absolute, then relative) or
    "title" (the hover's plain text, for an attribute). A moment stored as ISO 8601 text (a
    history row's data) is read as such; nothing is written for none.
    """
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is None:
        return ""
    if style == "title":
        return moment_title(value)
    if style == "relative":
        text = relative_text(value)
    elif style == "both":
        text = f"{moment_text(value)} ({relative_text(value)})"
    elif style in MOMENT_FORMATS:
        text = moment_text(value, style)
    else:
        raise template.TemplateSyntaxError(f"moment: unknown style {style!r}")
    return moment_html(value, text)


def moment_html(value: datetime, text: str) -> SafeString:
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        localtime(value).isoformat(timespec="seconds"),
        moment_title(value),
        text,
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
    """A lane's code, with what the lane means on hover and on keyboard focus."""
    if not lane:
        return mark_safe('<span class="muted">-</span>')
    meaning = _lane_meanings().get(lane)
    if meaning is None:
        return format_html('<span class="pill lane-{}">{}</span>', lane, lane)
    return format_html(
        '<span class="pill lane-{0}" tabindex="0" data-tip="{1}" aria-description="{1}">{0}</span>',
        lane,
        meaning,
    )


def _lane_meanings() -> dict[str, str]:
    # One dictionary per language, built on first use: the triage page calls this per row.
    language = get_language() or ""
    meanings = _LANE_MEANINGS.get(language)
    if meanings is None:
        meanings = _LANE_MEANINGS[language] = {
            code: gettext(info.default_action) for code, info in taxonomy.LANE_INFO.items()
        }
    return meanings


_LANE_MEANINGS: dict[str, dict[str, str]] = {}


def status_label(status: str) -> str:
    """What the pages call a group status (the code stays in the markup's class)."""
    labels = _status_labels()
    return labels.get(status, status)


def _status_labels() -> dict[str, str]:
    # One dictionary per language, built on first use: the triage page calls this per row.
    language = get_language() or ""
    labels = _STATUS_LABELS.get(language)
    if labels is None:
        labels = _STATUS_LABELS[language] = {
            str(value): str(label) for value, label in GroupStatus.choices
        }
    return labels


_STATUS_LABELS: dict[str, dict[str, str]] = {}


@register.filter(name="status_label")
def status_label_filter(status: str) -> str:
    return status_label(status)


@register.filter
def event_action(action: str) -> str:
    """What a group's history calls what happened (an action, or what ingest did)."""
    if action == "regressed":
        return pgettext("group history", "regressed")
    if action == "unmuted":
        return pgettext("group history", "unmuted")
    if action in GroupAction.values:
        return str(GroupAction(action).label)
    return action


@register.simple_tag
def status_pill(status: str) -> SafeString:
    return format_html('<span class="status-{}">{}</span>', status, status_label(status))


@register.simple_tag
def reason_rows(
    section: Any,
    unit: str,
    narrowed: str,
    narrow_base: str,
    window_label: str = "",
    back_suffix: str = "",
    sort: str = "",
    choosable: bool = False,
) -> SafeString:
    """The rows of one stage on the triage page, two <tr> per reason.

    Written in Python rather than template markup because a busy fleet shows every reason
    of the catalog at once: this is the page's hot loop, and the template language spent
    about half a millisecond a row on it.
    """
    joiner = "" if narrow_base.endswith("?") else "&"
    # What a phone shows before a cell's value, where the table's header is not shown.
    labels = {
        "tools": gettext("tools"),
        "collections": gettext("collections"),
        "execution": gettext("execution"),
        "retryable": gettext("safe to retry"),
    }
    html = []
    texts = _row_texts()
    for row in section.rows:
        # A row of one group opens it; a row of several opens the list of its groups (a
        # click and Enter alike), never silently the largest.
        opens = reverse("triage:group", args=[row.top_group.pk]) + back_suffix
        if narrowed:
            groups = _group_list(row, back_suffix)
        elif len(row.groups) > 1:
            link = f"{narrow_base}{joiner}stage={quote(row.stage)}&reason={quote(row.reason)}"
            opens = link
            groups = format_html(
                ' · <a href="{}">{}</a>',
                link,
                ngettext(
                    "its %(count)d group, by tool and collection →",
                    "its %(count)d groups, by tool and collection →",
                    len(row.groups),
                )
                % {"count": len(row.groups)},
            )
        else:
            groups = mark_safe("")
        html.append(
            format_html(
                '<tr class="reason" data-shortcut-row data-stage="{}" data-reason="{}" '
                'data-groups="{}">'
                '<td>{}</td><td class="nowrap reason-cell">'
                '{}<a class="code" href="{}">{}</a>{}{}{}</td>'
                '<td class="num count" title="{}">{}{}</td><td class="trend">{}</td>'
                '<td class="small tools" data-label="{}">{}</td>'
                '<td class="small collections" data-label="{}">{}</td><td class="lanes">{}</td>'
                '<td class="small nowrap execution" data-label="{}">{}</td>'
                '<td class="small retryable" data-label="{}">{}</td>'
                '<td class="nowrap status">{}</td></tr>\n'
                '<tr class="advice"><td></td><td colspan="9">{}{}</td></tr>\n',
                row.stage,
                row.reason,
                len(row.groups),
                # A tick chooses the row for the bulk bar (outside its form: form="bulk-form").
                format_html(
                    '<input type="checkbox" class="choose-row" name="rows" value="{}/{}" '
                    'form="bulk-form" data-groups="{}" aria-label="{}">',
                    row.stage,
                    row.reason,
                    len(row.groups),
                    row.reason,
                )
                if choosable
                else "",
                _stage_label(row.stage) if section.flat else "",
                opens,
                row.reason,
                texts["unmapped"] if row.info is None else _origin_pill(row.info, texts),
                _source_mix(row.source_mix),
                _flags(row, window_label),
                texts["before"] % {"count": thousands(row.previous_count)},
                thousands(row.count),
                _sort_value(row, sort),
                sparkline(row.spark, unit=unit),
                labels["tools"],
                _first_two(row.tools, _LONG_NAME),
                labels["collections"],
                _first_two(row.collections, _LONG_NAME),
                mark_safe(" ".join(lane_pill(lane) for lane in row.lanes)),
                labels["execution"],
                format_html_join(
                    mark_safe("<br>"),
                    "{} {}",
                    ((s, thousands(n)) for s, n in row.state_mix.items()),
                ),
                labels["retryable"],
                _retry_verdict(row, texts),
                _row_status(row),
                _advice(row.info),
                groups,
            )
        )
    return mark_safe("".join(html))


def _row_texts() -> dict[str, Any]:
    """The fixed words of a reason row in the active language, built once per language
    (the rows are the page's hot loop)."""
    language = get_language() or ""
    texts = _ROW_TEXTS.get(language)
    if texts is None:
        texts = _ROW_TEXTS[language] = {
            "unmapped": format_html(
                ' <span class="pill muted" title="{}">{}</span>',
                gettext("not in the taxonomy yet"),
                gettext("unmapped"),
            ),
            "adapter": format_html(
                ' <span class="pill muted" title="{}">{}</span>',
                gettext("Triage Desk's own reason: in the taxonomy, not in the seed catalog"),
                pgettext("reason origin", "adapter"),
            ),
            "before": gettext("%(count)s in the window before"),
            # Whether to retry, per lane: the first question of a failure at 3 a.m.
            "verdicts": {
                "retry_safe": gettext("yes, with backoff"),
                "reconcile_first": gettext("no: look up the status first"),
                "input_stale": gettext("no: refresh the inputs"),
                "policy_blocked": gettext("no: blocked by policy"),
                "manual_investigation": gettext("no: investigate first"),
            },
            "share": gettext("%(share)s of the window's failures are safe to retry"),
            "more": gettext("+%(count)s more"),
        }
    return texts


# The group view shows this many rows at most; the rest is counted and the filter narrows it.
GROUP_VIEW_ROWS = 300


@register.simple_tag
def group_rows(
    overview: Any, window_label: str = "", back_suffix: str = "", sort: str = ""
) -> SafeString:
    """The group view of the triage page: one row per group, in the page's sort."""
    texts = _row_texts()
    verdicts = texts["verdicts"]
    start = overview.window_start
    # What a phone shows before a cell's value (the table stacks there).
    labels = {
        "tool": gettext("tool"),
        "collection": gettext("collection"),
        "count": gettext("count"),
        "lane": gettext("lane"),
        "retry": gettext("safe to retry?"),
    }
    html = []
    for row in overview.groups[:GROUP_VIEW_ROWS]:
        group = row.group
        new = (
            format_html(
                ' <span class="pill flag-new" title="{}">{}</span>',
                gettext("first seen in the %(window)s") % {"window": window_label},
                pgettext("reason row", "new"),
            )
            if start is not None and group.first_seen >= start
            else ""
        )
        html.append(
            format_html(
                '<tr class="group-row" data-shortcut-row data-group="{}" data-stage="{}" '
                'data-reason="{}" data-groups="1" data-name="{}">'
                '<td class="nowrap"><span class="muted small">{}</span> '
                '<a class="code" href="{}">{}</a>{}</td>'
                '<td class="small" data-label="{}"><span class="code truncate" title="{}">{}</span>'
                '</td><td class="small" data-label="{}">{}</td>'
                '<td class="num count" data-label="{}">{}{}</td><td data-label="{}">{}</td>'
                '<td class="small" data-label="{}"><span class="verdict verdict-{}">{}</span></td>'
                '<td class="nowrap">{}{}{}</td></tr>\n',
                group.pk,
                group.stage,
                group.reason,
                # What the shortcuts' confirmation calls the group.
                " · ".join(part for part in (group.reason, group.tool, group.collection) if part),
                group.stage,
                reverse("triage:group", args=[group.pk]) + back_suffix,
                group.reason,
                new,
                labels["tool"],
                group.tool or "-",
                group.tool or gettext("(no tool)"),
                labels["collection"],
                group.collection or "-",
                labels["count"],
                thousands(row.window_count),
                _sort_value(row, sort),
                labels["lane"],
                lane_pill(group.lane),
                labels["retry"],
                group.lane,
                verdicts.get(group.lane, group.lane),
                status_pill(group.status),
                mute_end([group]),
                format_html(' <span class="muted small">· {}</span>', group.assignee)
                if group.assignee
                else "",
            )
        )
    hidden = len(overview.groups) - GROUP_VIEW_ROWS
    if hidden > 0:
        html.append(
            format_html(
                '<tr><td colspan="7" class="muted small">{}</td></tr>',
                ngettext(
                    "%(count)s more group: narrow the filter to see it.",
                    "%(count)s more groups: narrow the filter to see them.",
                    hidden,
                )
                % {"count": thousands(hidden)},
            )
        )
    return mark_safe("".join(html))


def _sort_value(row: Any, sort: str) -> SafeString:
    """What the rows are sorted by, under the count, when it is not the count itself: the
    trend's factor, or when the row was last or first seen (relative, exact on hover)."""
    if sort == "trend":
        return format_html(
            '<br><span class="sort-value small muted" title="{}">&times;{}</span>',
            gettext("%(count)s records, %(before)s in the window before")
            % {"count": thousands(row.count), "before": thousands(row.previous_count)},
            f"{row.trend:.1f}",
        )
    if sort in ("last_seen", "first_seen"):
        seen = row.last_seen if sort == "last_seen" else row.first_seen
        return format_html(
            '<br><span class="sort-value small muted">{}</span>',
            moment_html(seen, relative_text(seen)),
        )
    return mark_safe("")


def _retry_verdict(row: Any, texts: dict[str, Any]) -> SafeString:
    """Safe to retry? The lane's answer when the row's groups share one; else the share of
    the window's failures in groups whose lane allows a retry, then each answer with the
    groups that get it (largest first; each name says its collection on hover)."""
    verdicts = texts["verdicts"]
    by_lane: dict[str, list[Any]] = {}
    for group_row in sorted(row.groups, key=lambda item: -item.window_count):
        by_lane.setdefault(group_row.group.lane, []).append(group_row.group)
    if len(by_lane) == 1:
        (lane,) = by_lane
        return format_html(
            '<span class="verdict verdict-{}">{}</span>', lane, verdicts.get(lane, lane)
        )
    share = percent(row.retry_safe_share)
    items = format_html_join(
        "",
        '<li><span class="verdict verdict-{}">{}</span> <span class="muted">· {}</span></li>',
        (
            (lane, verdicts.get(lane, lane), _group_names(groups, texts))
            for lane, groups in by_lane.items()
        ),
    )
    return format_html(
        '<span class="num" title="{}">{}</span><ul class="verdicts">{}</ul>',
        texts["share"] % {"share": share},
        share,
        items,
    )


def _group_names(groups: list[Any], texts: dict[str, Any]) -> SafeString:
    """'getOrder (x2), listOrders +3': the first two tools of these groups (a tool in several
    collections once, with how many; the collections on hover)."""
    by_tool: dict[str, list[str]] = {}
    for group in groups:
        by_tool.setdefault(group.tool or gettext("(no tool)"), []).append(group.collection or "-")
    tools = list(by_tool.items())
    shown = format_html_join(
        ", ",
        '<span title="{1}">{0}{2}</span>',
        (
            (
                tool,
                ", ".join(collections),
                f" \u00d7{len(collections)}" if len(collections) > 1 else "",
            )
            for tool, collections in tools[:2]
        ),
    )
    if len(tools) <= 2:
        return shown
    return format_html("{} {}", shown, texts["more"] % {"count": len(tools) - 2})


_ROW_TEXTS: dict[str, dict[str, Any]] = {}


def _origin_pill(info: Any, texts: dict[str, Any]) -> SafeString:
    return texts["adapter"] if info.origin == "adapter" else mark_safe("")


def _stage_label(stage: str) -> SafeString:
    return format_html('<span class="muted small stage-label">{}</span> ', stage)


def _flags(row: Any, window_label: str) -> SafeString:
    """'new' for a row first seen in the window; 'spiking' for one far above the window
    before it."""
    if row.new:
        return format_html(
            ' <span class="pill flag-new" title="{}">{}</span>',
            gettext("first seen in the %(window)s") % {"window": window_label},
            pgettext("reason row", "new"),
        )
    flags = []
    if row.new_groups:
        # A new group of a reason that already had others: newly broken somewhere else.
        flags.append(
            format_html(
                ' <span class="pill flag-new" title="{}">{}</span>',
                gettext("first seen in the %(window)s") % {"window": window_label},
                ngettext("%(count)s new group", "%(count)s new groups", row.new_groups)
                % {"count": row.new_groups},
            )
        )
    if row.spiking:
        flags.append(
            format_html(
                ' <span class="pill flag-spiking" title="{}">{}</span>',
                gettext("%(count)s records, %(before)s in the window before")
                % {"count": thousands(row.count), "before": thousands(row.previous_count)},
                gettext("spiking"),
            )
        )
    return mark_safe("".join(flags))


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


# A name that may be long (an 84-character tool name): cut on one line, whole on hover.
_LONG_NAME = '<span class="code truncate" title="{0}">{0}</span>'


def _first_two(values: list[str], template: str = "{0}") -> SafeString:
    """'a, b +3' for a list of five. Each name keeps its comma on its own line (a wrapped
    line never starts with one)."""
    first = values[:2]
    item = '<span class="nowrap">' + template + "{1}</span>"
    shown = format_html_join(
        " ", item, ((value, "," if n < len(first) - 1 else "") for n, value in enumerate(first))
    )
    if len(values) <= 2:
        return shown
    return format_html('{} <span class="muted">+{}</span>', shown, len(values) - 2)


def _row_status(row: Any) -> SafeString:
    status = status_pill(row.status)
    if row.status == GroupStatus.MUTED:
        status = format_html("{}{}", status, mute_end([item.group for item in row.groups]))
    if len(row.groups) > 1:
        status = format_html(
            '{} <span class="muted small">{}</span>',
            status,
            ngettext("%(count)d group", "%(count)d groups", len(row.groups))
            % {"count": len(row.groups)},
        )
    if row.assignees:
        status = format_html(
            '{} <span class="muted small">· {}</span>', status, ", ".join(row.assignees)
        )
    return status


def mute_end(groups: list[Any]) -> SafeString:
    """When the first of these groups' mutes ends: ' until Sat Dec 5 09:00' (a moment, its
    zone on hover), else ' for 5 more records'; nothing when none is muted."""
    muted = [group for group in groups if group.status == GroupStatus.MUTED]
    ends = [group.muted_until for group in muted if group.muted_until is not None]
    if ends:
        first = min(ends)
        text = escape(gettext("until %(until)s")) % {
            "until": moment_html(first, moment_text(first, "weekday"))
        }
    else:
        counts = [group.mute_remaining_count for group in muted if group.mute_remaining_count]
        if not counts:
            return mark_safe("")
        remaining = min(counts)
        text = escape(
            ngettext("for %(remaining)s more record", "for %(remaining)s more records", remaining)
            % {"remaining": thousands(remaining)}
        )
    return format_html(' <span class="mute-end small muted">{}</span>', mark_safe(text))


def _advice(info: Any) -> SafeString:
    """The advice line under a reason row: the catalog's meaning, where to look first and
    the usual fix, in the active language (kept per language and reason: a hot loop)."""
    key = (get_language() or "", info.code if info is not None else "")
    advice = _ADVICE.get(key)
    if advice is None:
        advice = _ADVICE[key] = _advice_text(info)
    return advice


_ADVICE: dict[tuple[str, str], SafeString] = {}


def _advice_text(info: Any) -> SafeString:
    if info is None:
        return format_html(
            gettext(
                "A reason the taxonomy does not know yet: see the group's evidence and the "
                '<a href="{}#unmapped">unmapped reasons</a> list.'
            ),
            reverse("triage:ingestion"),
        )
    return format_html(
        gettext("{meaning} · look at: {advice} · usual fix: {fix}"),
        meaning=gettext(info.meaning),
        advice=gettext(info.triage_advice),
        fix=gettext(info.usual_action),
    )


def _group_list(row: Any, back_suffix: str = "") -> SafeString:
    """Every group of the reason, when the page is narrowed to it."""
    items = (
        format_html(
            '<li><a href="{}" title="{}">{}</a> · {} · {}{}</li>',
            reverse("triage:group", args=[item.group.pk]) + back_suffix,
            item.group.tool or gettext("(no tool)"),
            format_html(
                gettext('<span class="code truncate">{tool}</span> in {collection}'),
                tool=item.group.tool or gettext("(no tool)"),
                collection=item.group.collection or gettext("(no collection)"),
            ),
            thousands(item.window_count),
            status_pill(item.group.status),
            format_html(' <span class="muted small">· {}</span>', item.group.assignee)
            if item.group.assignee
            else "",
        )
        for item in row.groups
    )
    return format_html('<ul class="group-list">{}</ul>', mark_safe("".join(items)))
