from __future__ import annotations

import json
from typing import Any

from django import template

from organisation.access import is_admin

register = template.Library()


@register.filter
def desk_admin(user: Any) -> bool:
    """Whether ``user`` manages teams and reads the audit (the header's link to them)."""
    return is_admin(user)


@register.filter
def audit_value(value: Any) -> str:
    """A value of an audit entry's detail as a person reads it: a list as its items joined
    by commas, nothing (None, an empty list) as a dash, anything else as JSON writes it."""
    if value is None or value == [] or value == {}:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str | int) for item in value):
        return ", ".join(str(item) for item in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
