from __future__ import annotations

from django import template
from django.utils.translation import gettext

from contracts.selectors import percent_text

register = template.Library()


@register.filter
def share(value: float | None) -> str:
    return percent_text(value)


@register.filter
def example_label(finding: object) -> str:
    kind = getattr(finding, "example_type", "")
    number = getattr(finding, "example_id", "")
    if kind == "receipt":
        return gettext("receipt %(id)s") % {"id": number}
    return gettext("failure record %(id)s") % {"id": number}
