"""Small server-rendered pictures (sparklines, timelines) and formatting for the pages."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from html import escape as escape_text
from typing import Any
from urllib.parse import quote

from django import template
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import get_current_timezone, localtime
from django.utils.translation import get_language, gettext, ngettext, pgettext

from triage.models import GroupAction, GroupStatus
from triage.timezones import (
    MOMENT_FORMATS,
    abbreviation,
    moment_text,
    moment_title,
    moment_writer,
    relative_text,
)
from triage.vocabulary import taxonomy

register = template.Library()


def _html(template: str, /, *args: Any, **kwargs: Any) -> SafeString:
    """format_html, without the lazy-translation checks that Django's format_html and escape
    each make around every call: the triage page's rows call it some ten thousand times a
    page, and those checks were a fifth of the rows' time. The same output: an argument with
    __html__ is taken as it is, any other is escaped as text."""
    return SafeString(
        template.format(
            *(_escaped(arg) for arg in args),
            **{name: _escaped(arg) for name, arg in kwargs.items()},
        )
    )


def _escaped(value: Any) -> str:
    if hasattr(value, "__html__"):
        return str(value.__html__())
    return escape_text(str(value))


def _html_join(separator: str, template: str, rows: Iterable[Iterable[Any]]) -> SafeString:
    """format_html_join, by _html."""
    return SafeString(_escaped(separator).join(_html(template, *row) for row in rows))


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
    return _spark_svg(values, width, height, label or _spark_title(values, _spark_unit_label(unit)))


def _spark_title(values: list[int], unit_label: str) -> str:
    total = sum(values)
    return ngettext(
        "%(total)d record, peak %(peak)d per %(unit)s",
        "%(total)d records, peak %(peak)d per %(unit)s",
        total,
    ) % {"total": total, "peak": max(values) or 1, "unit": unit_label}


def _spark_svg(values: list[int], width: int, height: int, title: str) -> SafeString:
    top = max(values) or 1
    columns, bar_width = _spark_columns(len(values), width)
    bars = []
    for x, value in zip(columns, values, strict=True):
        if value:
            bar = max(1.0, (value / top) * (height - 1))
            bars.append(
                f'<rect x="{x}" y="{height - bar:.1f}" width="{bar_width}" '
                f'height="{bar:.1f}"></rect>'
            )
    title = escape_text(title)
    return mark_safe(
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{title}"><title>{title}</title>{"".join(bars)}</svg>'
    )


def _spark_columns(bins: int, width: int) -> tuple[list[str], str]:
    """Where each bar of a line of `bins` bars starts, and how wide it is, as the SVG writes
    them: the same for every row of a page, so written once."""
    key = (bins, width)
    columns = _SPARK_COLUMNS.get(key)
    if columns is None:
        step = width / bins
        columns = _SPARK_COLUMNS[key] = (
            [f"{index * step:.1f}" for index in range(bins)],
            f"{max(step - 1, 1):.1f}",
        )
    return columns


_SPARK_COLUMNS: dict[tuple[int, int], tuple[list[str], str]] = {}


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
    current = get_current_timezone()
    bar_title, day_label = moment_writer(zone=True), moment_writer("day")
    for index, value in enumerate(values):
        # In the person's time zone: a day starts at their midnight (the bar holding it,
        # at :30 in a zone half an hour off UTC).
        hour = localtime(start + timedelta(hours=index), current)
        if value:
            bar = max(1.0, value / top * (height - 1))
            bars.append(
                f'<rect x="{index * step:.3f}%" y="{height - bar:.1f}" '
                f'width="{max(step, 0.15):.3f}%" height="{bar:.1f}">'
                f"<title>{escape(bar_title(hour))} · {value}</title></rect>"
            )
        if hour.hour == 0:
            alternate = " alternate" if len(days) % 2 else ""
            days.append(
                f'<line class="tick" x1="{index * step:.3f}%" x2="{index * step:.3f}%" '
                f'y1="0" y2="4"></line><text class="day{alternate}" x="{index * step:.3f}%" '
                f'y="15">{escape(day_label(hour))}</text>'
            )
    peak_label = gettext("peak %(count)s per hour") % {"count": f"{top:,}"}
    summary = gettext("Records per hour over the last %(days)s days, %(peak)s") % {
        "days": round(len(values) / 24),
        "peak": peak_label,
    }
    return _html(
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
    return _html(
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
        return _html('<span class="pill lane-{}">{}</span>', lane, lane)
    return _html(
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
    return _html('<span class="status-{}">{}</span>', status, status_label(status))


# A number no group's id reaches, written where the id goes in the group page's address.
_GROUP_ID_MARK = 9_223_372_036_854_775_807


def group_url_writer() -> Callable[[int], str]:
    """A group page's address from its id, reversed once: the triage page writes one per
    row, hundreds in the group view, and each reverse() was about 20 microseconds."""
    head, tail = reverse("triage:group", args=[_GROUP_ID_MARK]).split(str(_GROUP_ID_MARK))
    return lambda pk: f"{head}{pk}{tail}"


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
    about half a millisecond a row on it. Each row is one string, each value in it escaped
    once (formatting every cell with format_html escaped some sixty values a row).
    """
    joiner = "" if narrow_base.endswith("?") else "&"
    texts = _row_texts()
    group_url = group_url_writer()
    # What a phone shows before a cell's value, where the table's header is not shown.
    labels = texts["labels"]
    unit_label = _spark_unit_label(unit)
    html = []
    for row in section.rows:
        stage, reason, groups_count = (
            escape_text(row.stage),
            escape_text(row.reason),
            len(row.groups),
        )
        # A row of one group opens it; a row of several opens the list of its groups (a
        # click and Enter alike), never silently the largest.
        opens = group_url(row.top_group.pk) + back_suffix
        if narrowed:
            groups = _group_list(row, back_suffix)
        elif groups_count > 1:
            link = f"{narrow_base}{joiner}stage={quote(row.stage)}&reason={quote(row.reason)}"
            opens = link
            groups = _html(
                ' · <a href="{}">{}</a>',
                link,
                ngettext(
                    "its %(count)d group, by tool and collection →",
                    "its %(count)d groups, by tool and collection →",
                    groups_count,
                )
                % {"count": groups_count},
            )
        else:
            groups = mark_safe("")
        # A tick chooses the row for the bulk bar (outside its form: form="bulk-form").
        choose = (
            f'<input type="checkbox" class="choose-row" name="rows" value="{stage}/{reason}" '
            f'form="bulk-form" data-groups="{groups_count}" aria-label="{reason}">'
            if choosable
            else ""
        )
        origin = texts["unmapped"] if row.info is None else _origin_pill(row.info, texts)
        before = escape_text(texts["before"] % {"count": thousands(row.previous_count)})
        spark = (
            _spark_svg(row.spark, 120, 20, _spark_title(row.spark, unit_label)) if row.spark else ""
        )
        lanes = " ".join(lane_pill(lane) for lane in row.lanes)
        states = "<br>".join(
            f"{escape_text(state)} {records:,}" for state, records in row.state_mix.items()
        )
        html.append(
            f'<tr class="reason" data-shortcut-row data-stage="{stage}" data-reason="{reason}" '
            f'data-groups="{groups_count}">'
            f'<td>{choose}</td><td class="nowrap reason-cell">'
            f"{_stage_label(row.stage) if section.flat else ''}"
            f'<a class="code" href="{escape_text(opens)}">{reason}</a>'
            f"{origin}{_source_mix(row.source_mix)}{_flags(row, window_label)}</td>"
            f'<td class="num count" title="{before}">{row.count:,}{_sort_value(row, sort)}</td>'
            f'<td class="trend">{spark}</td>'
            f'<td class="small tools" data-label="{labels["tools"]}">'
            f"{_first_two(row.tools, _LONG_NAME)}</td>"
            f'<td class="small collections" data-label="{labels["collections"]}">'
            f'{_first_two(row.collections, _LONG_NAME)}</td><td class="lanes">{lanes}</td>'
            f'<td class="small nowrap execution" data-label="{labels["execution"]}">{states}</td>'
            f'<td class="small retryable" data-label="{labels["retryable"]}">'
            f"{_retry_verdict(row, texts)}</td>"
            f'<td class="nowrap status">{_row_status(row)}</td></tr>\n'
            f'<tr class="advice"><td></td><td colspan="9">{_advice(row.info)}{groups}</td></tr>\n'
        )
    return mark_safe("".join(html))


def _row_texts() -> dict[str, Any]:
    """The fixed words of a reason row in the active language, built once per language
    (the rows are the page's hot loop)."""
    language = get_language() or ""
    texts = _ROW_TEXTS.get(language)
    if texts is None:
        texts = _ROW_TEXTS[language] = {
            "unmapped": _html(
                ' <span class="pill muted" title="{}">{}</span>',
                gettext("not in the taxonomy yet"),
                gettext("unmapped"),
            ),
            "adapter": _html(
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
            "sources_title": escape_text(
                gettext("records by source since the group's first record, not only in the window")
            ),
            "all_time": escape_text(gettext("all time")),
            "labels": {
                "tools": escape_text(gettext("tools")),
                "collections": escape_text(gettext("collections")),
                "execution": escape_text(gettext("execution")),
                "retryable": escape_text(gettext("safe to retry")),
            },
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
    group_url = group_url_writer()
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
            _html(
                ' <span class="pill flag-new" title="{}">{}</span>',
                gettext("first seen in the %(window)s") % {"window": window_label},
                pgettext("reason row", "new"),
            )
            if start is not None and group.first_seen >= start
            else ""
        )
        html.append(
            _html(
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
                group_url(group.pk) + back_suffix,
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
                _html(' <span class="muted small">· {}</span>', group.assignee)
                if group.assignee
                else "",
            )
        )
    hidden = len(overview.groups) - GROUP_VIEW_ROWS
    if hidden > 0:
        html.append(
            _html(
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
        return _html(
            '<br><span class="sort-value small muted" title="{}">&times;{}</span>',
            gettext("%(count)s records, %(before)s in the window before")
            % {"count": thousands(row.count), "before": thousands(row.previous_count)},
            f"{row.trend:.1f}",
        )
    if sort in ("last_seen", "first_seen"):
        seen = row.last_seen if sort == "last_seen" else row.first_seen
        return _html(
            '<br><span class="sort-value small muted">{}</span>',
            moment_html(seen, relative_text(seen)),
        )
    return mark_safe("")


def _retry_verdict(row: Any, texts: dict[str, Any]) -> SafeString:
    """Safe to retry? The lane's answer when the row's groups share one; else the share of
    the window's failures in groups whose lane allows a retry, then each answer with the
    groups that get it (largest first; each name says its collection on hover)."""
    verdicts = texts["verdicts"]
    if len(row.lane_counts) == 1:  # one lane: no group is named (most rows)
        (lane,) = row.lane_counts
        return _html('<span class="verdict verdict-{}">{}</span>', lane, verdicts.get(lane, lane))
    by_lane: dict[str, list[Any]] = {}
    for group_row in row.groups:  # largest first (ReasonRow.groups)
        by_lane.setdefault(group_row.group.lane, []).append(group_row.group)
    share = percent(row.retry_safe_share)
    items = _html_join(
        "",
        '<li><span class="verdict verdict-{}">{}</span> <span class="muted">· {}</span></li>',
        (
            (lane, verdicts.get(lane, lane), _group_names(groups, texts))
            for lane, groups in by_lane.items()
        ),
    )
    return _html(
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
    shown = _html_join(
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
    return _html("{} {}", shown, texts["more"] % {"count": len(tools) - 2})


_ROW_TEXTS: dict[str, dict[str, Any]] = {}


def _origin_pill(info: Any, texts: dict[str, Any]) -> SafeString:
    return texts["adapter"] if info.origin == "adapter" else mark_safe("")


def _stage_label(stage: str) -> SafeString:
    return _html('<span class="muted small stage-label">{}</span> ', stage)


def _flags(row: Any, window_label: str) -> SafeString:
    """'new' for a row first seen in the window; 'spiking' for one far above the window
    before it."""
    if row.new:
        return _html(
            ' <span class="pill flag-new" title="{}">{}</span>',
            gettext("first seen in the %(window)s") % {"window": window_label},
            pgettext("reason row", "new"),
        )
    flags = []
    if row.new_groups:
        # A new group of a reason that already had others: newly broken somewhere else.
        flags.append(
            _html(
                ' <span class="pill flag-new" title="{}">{}</span>',
                gettext("first seen in the %(window)s") % {"window": window_label},
                ngettext("%(count)s new group", "%(count)s new groups", row.new_groups)
                % {"count": row.new_groups},
            )
        )
    if row.spiking:
        flags.append(
            _html(
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
    texts = _row_texts()
    sources = " · ".join(
        f"{escape_text(source)} {count:,}"
        for source, count in sorted(mix.items(), key=lambda item: -item[1])
    )
    return mark_safe(
        f' <span class="small muted source-mix" title="{texts["sources_title"]}">'
        f"{texts['all_time']}: {sources}</span>"
    )


# A name that may be long (an 84-character tool name): cut on one line, whole on hover.
_LONG_NAME = '<span class="code truncate" title="{0}">{0}</span>'


def _first_two(values: list[str], template: str = "{0}") -> SafeString:
    """'a, b +3' for a list of five. Each name keeps its comma on its own line (a wrapped
    line never starts with one)."""
    first = values[:2]
    item = '<span class="nowrap">' + template + "{1}</span>"
    shown = " ".join(
        item.format(escape_text(value), "," if n < len(first) - 1 else "")
        for n, value in enumerate(first)
    )
    if len(values) <= 2:
        return mark_safe(shown)
    return mark_safe(f'{shown} <span class="muted">+{len(values) - 2}</span>')


def _row_status(row: Any) -> SafeString:
    status = status_pill(row.status)
    if row.status == GroupStatus.MUTED:
        status = _html("{}{}", status, mute_end([item.group for item in row.groups]))
    if len(row.groups) > 1:
        status = _html(
            '{} <span class="muted small">{}</span>',
            status,
            ngettext("%(count)d group", "%(count)d groups", len(row.groups))
            % {"count": len(row.groups)},
        )
    if row.assignees:
        status = _html('{} <span class="muted small">· {}</span>', status, ", ".join(row.assignees))
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
    return _html(' <span class="mute-end small muted">{}</span>', mark_safe(text))


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
        return _html(
            gettext(
                "A reason the taxonomy does not know yet: see the group's evidence and the "
                '<a href="{}#unmapped">unmapped reasons</a> list.'
            ),
            reverse("triage:ingestion"),
        )
    return _html(
        gettext("{meaning} · look at: {advice} · usual fix: {fix}"),
        meaning=gettext(info.meaning),
        advice=gettext(info.triage_advice),
        fix=gettext(info.usual_action),
    )


def _group_list(row: Any, back_suffix: str = "") -> SafeString:
    """Every group of the reason, when the page is narrowed to it."""
    group_url = group_url_writer()
    items = (
        _html(
            '<li><a href="{}" title="{}">{}</a> · {} · {}{}</li>',
            group_url(item.group.pk) + back_suffix,
            item.group.tool or gettext("(no tool)"),
            _html(
                gettext('<span class="code truncate">{tool}</span> in {collection}'),
                tool=item.group.tool or gettext("(no tool)"),
                collection=item.group.collection or gettext("(no collection)"),
            ),
            thousands(item.window_count),
            status_pill(item.group.status),
            _html(' <span class="muted small">· {}</span>', item.group.assignee)
            if item.group.assignee
            else "",
        )
        for item in row.groups
    )
    return _html('<ul class="group-list">{}</ul>', mark_safe("".join(items)))
