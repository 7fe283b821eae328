"""Request helpers shared by the page views."""

from __future__ import annotations

from django.http import HttpRequest


def is_partial(request: HttpRequest) -> bool:
    """An htmx request that swaps one region (a boosted one wants the whole page)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted  # type: ignore[union-attr]
