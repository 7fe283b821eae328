"""Small formatting for the learning review pages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, ngettext

from learning.gate import evidence_text
from learning.models import SuggestionStatus

register = template.Library()


@register.simple_tag
def suggestion_status(status: str) -> SafeString:
    label = SuggestionStatus(status).label if status in SuggestionStatus.values else status
    return format_html('<span class="sg-status sg-{}">{}</span>', status, label)


@register.filter
def suggestion_status_label(status: str) -> str:
    return str(SuggestionStatus(status).label) if status in SuggestionStatus.values else status


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
        return format_html('<span class="muted small">{}</span>', gettext("no shadow run yet"))
    delta = int(shadow.get("rank_delta") or 0)
    tone = "up" if delta > 0 else "down" if delta < 0 else "flat"
    cases = int(shadow["cases"])
    extra = []
    if shadow.get("selected_target_changed"):
        count = int(shadow["selected_target_changed"])
        extra.append(gettext("%(count)d selection changed") % {"count": count})
    if shadow.get("failure_reason_changed"):
        count = int(shadow["failure_reason_changed"])
        extra.append(gettext("%(count)d failure changed") % {"count": count})
    return format_html(
        '<span class="delta delta-{}" title="{}">{}</span> <span class="small muted">{}{}</span>',
        tone,
        gettext("%(improved)s improved, %(worsened)s worsened")
        % {"improved": shadow.get("improved", 0), "worsened": shadow.get("worsened", 0)},
        signed(delta),
        ngettext("on %(cases)d case", "on %(cases)d cases", cases) % {"cases": cases},
        (" · " + ", ".join(extra)) if extra else "",
    )


@register.filter
def short_hash(value: str) -> str:
    return value[:10] if value else ""


# The promotion gate's checks, written from their numbers in the reader's language
# (learning/gate.py stores the same sentence in English as "detail").
_GATE_TEXTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "repeated_success": evidence_text,
    "failure_ratio": lambda p: (
        ngettext(
            "%(failures)d of %(total)d recent attempt with this target failed "
            "(%(ratio)s; at most %(limit)s)",
            "%(failures)d of %(total)d recent attempts with this target failed "
            "(%(ratio)s; at most %(limit)s)",
            p["total"],
        )
        % p
    ),
    "stable_target": lambda p: (
        gettext(
            "%(agreeing)d of %(successes)d recent successes of the query family agree "
            "(%(agreement)s; needs %(needed)s)"
        )
        % p
    ),
    "scrubbed_evidence": lambda p: (
        gettext("an attempt behind it carried a secret (stored scrubbed)")
        if p["sensitive"]
        else gettext("no attempt behind it carried a secret")
    ),
    "same_collection": lambda p: (
        gettext("suggestion and attempts belong to this collection")
        if p["same_collection"]
        else gettext("evidence from another collection")
    ),
    "collection_allows_learning": lambda p: (
        gettext("the collection's policy allows learning")
        if p["learning_allowed"]
        else gettext("the collection's policy does not allow learning")
    ),
}


@register.filter
def gate_detail(check: dict[str, Any]) -> str:
    """One gate check in words: from its numbers when it has them (checks stored before
    they did keep their English sentence)."""
    text = _GATE_TEXTS.get(str(check.get("name")))
    params = check.get("params")
    if text is None or not isinstance(params, dict):
        return str(check.get("detail", ""))
    try:
        return text(params)
    except (KeyError, TypeError, ValueError):
        return str(check.get("detail", ""))
