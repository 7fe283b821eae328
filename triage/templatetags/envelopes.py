"""Template helpers for the envelopes agents received (an envelope item's extra["envelope"])."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from triage.intake.envelope import EXTRA_KEY
from triage.vocabulary import taxonomy

register = template.Library()


@register.filter
def newest_with_envelope(records: Iterable[Any]) -> Any:
    """The first record (the page lists the newest first) that carries an envelope, or None:
    a report without an envelope, newer than the last envelope, must not hide it."""
    for record in records:
        if isinstance((record.extra or {}).get(EXTRA_KEY), dict):
            return record
    return None


@register.filter
def newest_envelope_code(records: Iterable[Any]) -> str:
    """The code of that record's envelope, "" without one (comparable in an {% if %})."""
    record = newest_with_envelope(records)
    code = record.extra[EXTRA_KEY].get("code") if record is not None else None
    return code if isinstance(code, str) else ""


@register.filter
def lane_next_action(lane: str) -> str:
    """What an agent does next in a lane, as seed 004's envelope spells it ("" if unknown)."""
    return taxonomy.LANE_NEXT_ACTION.get(lane, "")


@register.filter
def breakable_code(code: Any) -> SafeString:
    """A code with a line-break opportunity after each underscore: REMOTE_TIMEOUT_AFTER_ACCEPT
    wraps between its words in a narrow card instead of spilling over the next one."""
    # Safe: the code is escaped first, and only <wbr> is added.
    return mark_safe(conditional_escape(code).replace("_", "_<wbr>"))
