"""Quality Lab's small server-rendered pictures and formatting: rate charts, progress bars."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, ngettext, pgettext

from qualitylab.models import BuildStatus, RunStatus

register = template.Library()
DASH = "\u2013"  # what a table shows for "not measured"


@register.simple_tag
def rate_chart(
    points: list[tuple[int, float | None]], label: str = "", width: int = 220, height: int = 56
) -> SafeString:
    """A 0-100% line over runs (oldest left); a run that did not measure it leaves a gap."""
    if not any(value is not None for _, value in points):
        return format_html('<span class="muted small">{}</span>', gettext("not measured yet"))
    top, bottom = 4.0, height - 4.0
    step = (width - 8) / max(len(points) - 1, 1)

    def y(value: float) -> float:
        return bottom - max(0.0, min(1.0, value)) * (bottom - top)

    segments: list[list[str]] = [[]]
    dots = []
    for index, (run_id, value) in enumerate(points):
        if value is None:
            if segments[-1]:
                segments.append([])
            continue
        x = 4 + index * step
        segments[-1].append(f"{x:.1f},{y(value):.1f}")
        run_label = gettext("run %(run)d") % {"run": int(run_id)}
        dots.append(
            f'<circle cx="{x:.1f}" cy="{y(value):.1f}" r="2.2">'
            f"<title>{run_label}: {value * 100:.0f}%</title></circle>"
        )
    lines = "".join(
        f'<polyline points="{" ".join(segment)}"></polyline>' for segment in segments if segment
    )
    grid = (
        f'<line class="grid" x1="0" x2="{width}" y1="{top}" y2="{top}"></line>'
        f'<line class="grid" x1="0" x2="{width}" y1="{bottom}" y2="{bottom}"></line>'
    )
    title = format_html(
        "{}",
        ngettext(
            "%(label)s over the last %(count)d run",
            "%(label)s over the last %(count)d runs",
            len(points),
        )
        % {"label": label or gettext("rate"), "count": len(points)},
    )
    return mark_safe(
        f'<svg class="rate-chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{title}">'
        f"<title>{title}</title>{grid}{lines}{''.join(dots)}</svg>"
    )


# The bars are SVG: a rect's width is an attribute, not an inline style, so the
# Content-Security-Policy (style-src 'self') does not drop it.
_BAR = (
    '<svg class="progress" role="progressbar" aria-valuemin="0" aria-valuemax="{}" '
    'aria-valuenow="{}" aria-label="{}" preserveAspectRatio="none">'
    '<rect class="progress-ok" x="0" y="0" width="{}%" height="100%"></rect>'
    '<rect class="progress-failed" x="{}%" y="0" width="{}%" height="100%"></rect></svg>'
)


@register.simple_tag
def progress_bar(done: int, total: int, failed: int = 0, label: str = "") -> SafeString:
    """A bar of done/total; the failed share of what is done is drawn in its own colour."""
    total = max(int(total or 0), 0)
    done = min(max(int(done or 0), 0), total) if total else 0
    failed = min(max(int(failed or 0), 0), done)
    done_share = done / total * 100 if total else 0.0
    failed_share = failed / total * 100 if total else 0.0
    passed_share = f"{done_share - failed_share:.1f}"
    return format_html(
        _BAR,
        total,
        done,
        label or gettext("%(done)d of %(total)d") % {"done": done, "total": total},
        passed_share,
        passed_share,
        f"{failed_share:.1f}",
    )


@register.simple_tag
def fraction_bar(fraction: float | None, label: str = "") -> SafeString:
    """A build's progress (0..1) as a bar."""
    share = max(0.0, min(1.0, float(fraction or 0.0))) * 100
    return format_html(
        _BAR,
        100,
        f"{share:.0f}",
        label or f"{share:.0f}%",
        f"{share:.1f}",
        f"{share:.1f}",
        "0",
    )


@register.filter
def rate(value: Any) -> str:
    """0.8333 -> "83%"; a rate nobody measured is a dash."""
    if value is None or value == "":
        return DASH
    try:
        return f"{float(value) * 100:.0f}%"
    except (TypeError, ValueError):
        return DASH


@register.filter
def ms(value: Any) -> str:
    if value is None or value == "":
        return DASH
    try:
        number = float(value)
    except (TypeError, ValueError):
        return DASH
    shown = f"{number:.0f}" if number >= 10 else f"{number:.1f}"
    return gettext("%(value)s ms") % {"value": shown}


@register.filter
def seconds(value: Any) -> str:
    """Elapsed seconds as "4.2 s", "3 min 05 s"."""
    if value is None:
        return DASH
    total = float(value)
    if total < 60:
        return gettext("%(seconds)s s") % {"seconds": f"{total:.1f}"}
    minutes, rest = divmod(int(total), 60)
    if minutes < 60:
        return gettext("%(minutes)d min %(seconds)s s") % {
            "minutes": minutes,
            "seconds": f"{rest:02d}",
        }
    hours, minutes = divmod(minutes, 60)
    return gettext("%(hours)d h %(minutes)s min") % {"hours": hours, "minutes": f"{minutes:02d}"}


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON for a <pre>; empty for nothing."""
    if value in (None, {}, [], ""):
        return ""
    return json.dumps(value, ensure_ascii=False, indent=1)


@register.filter
def inline_json(value: Any) -> str:
    """One line of JSON, for values inside a table cell."""
    if value is None:
        return DASH
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@register.filter
def nonzero_breakdown(breakdown: Any) -> list[tuple[str, Any]]:
    """A score breakdown without its zero and false parts: what actually scored."""
    if not isinstance(breakdown, dict):
        return []
    return [(key, value) for key, value in breakdown.items() if value not in (0, 0.0, False, None)]


@register.filter
def outcome_mark(passed: Any) -> SafeString:
    """An assertion's passed: True, False or None (the stage it reads did not run)."""
    if passed is True:
        return format_html('<span class="ok">{}</span>', pgettext("assertion", "passed"))
    if passed is False:
        return format_html('<span class="bad">{}</span>', pgettext("assertion", "failed"))
    return format_html(
        '<span class="muted" title="{}">{}</span>',
        gettext("not evaluated: the stage it reads did not run"),
        gettext("not run"),
    )


@register.filter
def build_status(status: str) -> str:
    """What the pages call a build's status (the code stays in the markup's class)."""
    return str(BuildStatus(status).label) if status in BuildStatus.values else status


@register.filter
def run_status(status: str) -> str:
    """What the pages call a run's status."""
    return str(RunStatus(status).label) if status in RunStatus.values else status


@register.filter
def severity(value: str) -> str:
    """A readiness issue's severity in words (graph-tool-call's codes)."""
    labels = {
        "blocker": pgettext("severity", "blocker"),
        "error": pgettext("severity", "error"),
        "warning": pgettext("severity", "warning"),
        "info": pgettext("severity", "info"),
    }
    return labels.get(value, value)


@register.filter
def latency_stage(stage: str) -> str:
    """A latency stage's name in words (the keys stay codes)."""
    labels = {
        "search": pgettext("latency stage", "search"),
        "select": pgettext("latency stage", "select"),
        "plan": pgettext("latency stage", "plan"),
        "execute": pgettext("latency stage", "execute"),
        "cleanup": pgettext("latency stage", "cleanup"),
    }
    return labels.get(stage, stage)


LATENCY_STAGES = ("search", "select", "plan", "execute", "cleanup")


@register.filter
def latency_parts(latency: Any) -> list[tuple[str, Any]]:
    """The stages a case went through with their milliseconds, in pipeline order."""
    if not isinstance(latency, dict):
        return []
    return [(stage, latency[stage]) for stage in LATENCY_STAGES if latency.get(stage) is not None]
