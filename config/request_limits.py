"""Page requests whose declared body is larger than any page's form takes: 413, unread.

Django streams every file part of a multipart body to a temporary file whatever the view
expects, and the CSRF check reads the form of every POST, so without a ceiling one request
(even a signed-out one, with the sign-in page's cookie) could write gigabytes to the
worker's disk. The largest form a page takes is its fields (``DATA_UPLOAD_MAX_MEMORY_SIZE``)
plus one file no larger than that (a cases file is at most 5 MB).

Views exempt from the CSRF check read their own bodies and bound them themselves: the
ingest doors (``TRIAGE_INGEST_MAX_BODY_BYTES``) and the spec uploads
(``QUALITYLAB_MAX_SPEC_BYTES``, qualitylab/uploads.py). They are left to do so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _

# Multipart boundaries and part headers, on top of the fields' and the file's own bytes.
_MULTIPART_OVERHEAD_BYTES = 64 * 1024


def page_body_ceiling() -> int:
    """The largest body a page's form may declare."""
    return 2 * int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0) + _MULTIPART_OVERHEAD_BYTES


class PageBodyLimitMiddleware:
    """Refuses an over-long declared body before the CSRF check (or a view) reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any
    ) -> HttpResponse | None:
        if getattr(view_func, "csrf_exempt", False):
            return None  # bounds its own body (see the module docstring)
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None  # Django reads no body it cannot measure
        ceiling = page_body_ceiling()
        if declared <= ceiling:
            return None
        message = _(
            "The request body (%(declared)d bytes) is larger than any form of this page "
            "takes (%(ceiling)d bytes); nothing was read."
        ) % {"declared": declared, "ceiling": ceiling}
        return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
