from __future__ import annotations

from typing import Any

from django import template

from organisation.access import is_admin

register = template.Library()


@register.filter
def desk_admin(user: Any) -> bool:
    """Whether ``user`` manages teams and reads the audit (the header's link to them)."""
    return is_admin(user)
