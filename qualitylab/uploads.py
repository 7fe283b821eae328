"""The spec size limit applied to uploads before their body is read.

A request whose ``Content-Length`` already says the spec cannot fit is refused without
reading a byte of it. Otherwise :class:`SpecUploadLimit` counts the spec file's bytes while
Django parses the body and stops keeping them once they pass the limit (a chunked body, or
a file that is bigger than the other fields let the length guess).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest

SPEC_FIELD = "spec_file"
# Multipart boundaries and headers around the fields, on top of their own bytes.
_MULTIPART_OVERHEAD_BYTES = 64 * 1024


def body_cannot_fit(request: HttpRequest, *, limit: int) -> int | None:
    """The declared body length when it is over what a spec of ``limit`` bytes plus the
    form's other fields (``DATA_UPLOAD_MAX_MEMORY_SIZE``) can take; else None."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    ceiling = limit + int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0) + _MULTIPART_OVERHEAD_BYTES
    return length if length > ceiling else None


class SpecUploadLimit(FileUploadHandler):
    """Passes the spec file on to Django's own handlers until it exceeds the limit, then
    skips the rest of it (nothing beyond the limit is kept) and says so in ``refused``."""

    def __init__(self, request: HttpRequest, *, limit: int, field_name: str = SPEC_FIELD):
        super().__init__(request)
        self.limit = limit
        self.field_name = field_name
        self.refused = False
        self._counting = False
        self._received = 0

    def new_file(self, field_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, *args, **kwargs)
        self._counting = field_name == self.field_name
        self._received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if self._counting:
            self._received += len(raw_data)
            if self._received > self.limit:
                self.refused = True
                raise SkipFile
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def limit_spec_upload(request: HttpRequest, *, limit: int) -> SpecUploadLimit:
    """Put the counting handler first; call before anything reads ``request.POST``."""
    handler = SpecUploadLimit(request, limit=limit)
    request.upload_handlers = [handler, *request.upload_handlers]
    return handler


def form_fields_too_big(request: HttpRequest) -> bool:
    """Parse the body now; True when its fields other than files (a pasted spec) pass
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``, which Django would answer with a bare 400 page."""
    try:
        request.POST  # noqa: B018 (parsing is the point)
    except (RequestDataTooBig, TooManyFieldsSent):
        return True
    return False
