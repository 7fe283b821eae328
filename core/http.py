"""Request helpers shared by the page views."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.http import HttpRequest


def is_partial(request: HttpRequest) -> bool:
    """An htmx request that swaps one region. A boosted one wants the whole page, and so
    does htmx restoring a page of the history it no longer holds (it swaps the answer into
    the whole body)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted and not htmx.history_restore_request  # type: ignore[union-attr]


def strong_etag(body: Any) -> str:
    """A strong ETag of a JSON answer: a hash of its canonical form (keys sorted)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return '"' + hashlib.sha256(canonical.encode()).hexdigest()[:32] + '"'
