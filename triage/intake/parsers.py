"""Reads an ingest body with hard limits, before and after gzip decompression (both doors)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.parsers import BaseParser

from core.json_limits import JSONTooDeep, loads_bounded
from triage.intake.errors import InvalidBatch, LengthRequired, PayloadTooLarge

_CHUNK = 64 * 1024


def _read_limited(stream: Any, limit: int) -> bytearray:
    # One growing buffer, never joined into a second copy; refused at the first chunk
    # past the limit, so at most `limit` bytes are ever held.
    body = bytearray()
    while chunk := stream.read(_CHUNK):
        if len(body) + len(chunk) > limit:
            raise PayloadTooLarge(f"The body is larger than {limit} bytes.")
        body += chunk
    return body


def _gunzip_limited(data: bytearray, limit: int) -> bytearray:
    # Inflate a chunk of output at a time into one buffer: a gzip bomb costs about `limit`
    # bytes of memory before it is refused, and a good body is not copied again.
    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, detected
    out = bytearray()
    pending: bytes | bytearray = data
    try:
        while True:
            out += inflater.decompress(pending, _CHUNK)
            if len(out) > limit:
                raise PayloadTooLarge(f"The decompressed body is larger than {limit} bytes.")
            pending = inflater.unconsumed_tail
            if not pending:
                break
        out += inflater.flush()
    except zlib.error:
        raise InvalidBatch("The body is not valid gzip.", code="invalid_gzip") from None
    if not inflater.eof:
        raise InvalidBatch(
            "The body is not valid gzip: it ends before the compressed stream does.",
            code="invalid_gzip",
        )
    if len(out) > limit:
        raise PayloadTooLarge(f"The decompressed body is larger than {limit} bytes.")
    return out


def receive_body(request: Any, *, chunked: bool) -> None:
    """Read the raw body now, before the view waits for an ingest slot (triage.intake.capacity);
    every door calls this first, and its parser then reads the body through read_body.

    Reading goes at the client's pace and costs no CPU: read first, a slow upload holds no
    slot of the pool, and a batch refused 503 for want of one has been read whole, so its
    keep-alive connection stays usable (gunicorn drains at most 64 KB of a body the answer
    left unread, then closes the connection, and the sender's next batch meets a closed
    socket, or a reset that loses the 503 itself). `chunked`: a chunked body without a
    Content-Length is taken (the OTLP door) or answered 411 (the native door)."""
    meta = request.META
    if (
        not meta.get("CONTENT_LENGTH")
        and "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower()
    ):
        if not chunked:
            # Django reads a body only as far as its Content-Length; without one, a chunked
            # batch would look empty and get a misleading "invalid batch".
            raise LengthRequired()
        take_chunked_body(request)
        return
    limit = settings.TRIAGE_INGEST_MAX_BODY_BYTES
    declared = meta.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"The body is larger than {limit} bytes.")
    stream = request.stream
    request.ingest_raw_body = _read_limited(stream, limit) if stream is not None else bytearray()


def read_body(stream: Any, parser_context: Mapping[str, Any] | None) -> bytearray:
    """The request body as receive_body read it, decompressed within
    TRIAGE_INGEST_MAX_BODY_BYTES; every door's parser reads it through here. Notes the
    sizes on the request. `stream` is spent by then: DRF hands it over all the same."""
    request = (parser_context or {})["request"]
    raw = request.ingest_raw_body
    request.ingest_body_bytes = len(raw)
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding in ("gzip", "deflate"):
        raw = _gunzip_limited(raw, settings.TRIAGE_INGEST_MAX_BODY_BYTES)
    elif encoding not in ("", "identity"):
        raise InvalidBatch(
            "Content-Encoding must be gzip, deflate or identity.", code="unsupported_encoding"
        )
    request.ingest_decoded_bytes = len(raw)
    return raw


def take_chunked_body(request: Any) -> None:
    """Read a chunked body that came without a Content-Length, within the body limit.

    Django reads a body only as far as its Content-Length, so without one a chunked body
    looks empty. Where the server has taken the chunks apart and ends the input
    (`wsgi.input_terminated`: gunicorn, as deployed), the body is read here, at most the
    limit (413 past it), and parsed as if it had come with its length. Elsewhere (Django's
    development server) the answer is 411. OpenTelemetry's JavaScript exporter sends its
    spans chunked, so the OTLP door takes them; the native door keeps answering 411.
    """
    meta = request.META
    if not meta.get("wsgi.input_terminated"):
        raise LengthRequired()
    raw = _read_limited(meta["wsgi.input"], settings.TRIAGE_INGEST_MAX_BODY_BYTES)
    request.ingest_raw_body = raw
    meta["CONTENT_LENGTH"] = str(len(raw))  # so the parser is called, and reads `raw`


class IngestJSONParser(BaseParser):
    media_type = "application/json"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        raw = read_body(stream, parser_context)
        try:
            return loads_bounded(raw, max_depth=settings.TRIAGE_JSON_MAX_DEPTH)
        except JSONTooDeep as exc:
            raise InvalidBatch(
                f"The body is {exc} (TRIAGE_JSON_MAX_DEPTH).", code="json_too_deep"
            ) from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise InvalidBatch("The body is not valid JSON.", code="invalid_json") from None
        except ValueError:  # an integer of more digits than Python converts (4300)
            raise InvalidBatch(
                "The body holds an integer of more than 4300 digits.", code="invalid_json"
            ) from None
