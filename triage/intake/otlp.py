"""The OTLP door: `POST /v1/traces` (OTLP/HTTP, protobuf or JSON) into batch_ingest.

Same key and `ingest` scope, body limits, gzip-bomb and nesting rules, quota and
database-down answer as the native door (`triage.intake.native`), through the same code;
only the encodings differ. Answers are the ones OTLP exporters act on: 200 with an
`ExportTraceServiceResponse` whose `partial_success` counts the spans refused and says why;
400 for a body that does not decode; 401/403; 413; 429 and 503 with `Retry-After` (the
statuses exporters retry). Errors carry a `google.rpc.Status` in the request's encoding,
its message starting with the desk's stable error code. What a span becomes is decided in
one place, `triage.intake.otlp_spans`: one table of conventions (GenAI `execute_tool`, MCP
`tools/call`, OpenInference `TOOL`, OpenLLMetry `tool` spans) and one way to read a failure.
A failed span and a runtime's report of the same call are stored once (batch_ingest matches
them by trace and span id).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from rest_framework import exceptions
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.views import APIView

from core.json_limits import JSONTooDeep, loads_bounded
from triage.intake.auth import ApiKeyAuthentication, HasIngestScope
from triage.intake.capacity import ingest_slot
from triage.intake.errors import (
    InvalidBatch,
    PayloadTooLarge,
    QuotaExceeded,
    exception_handler,
)
from triage.intake.ingest import CONFLICT, REJECTED, batch_ingest
from triage.intake.otlp_spans import count_spans, map_export
from triage.intake.parsers import read_body, receive_body
from triage.intake.quota import quota_consume
from triage.models import ApiKey

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CHANNEL = "otlp"
# google.rpc.Code for each HTTP status the door answers with (OTLP/HTTP carries a Status).
_RPC_CODES = {400: 3, 401: 16, 403: 7, 411: 3, 413: 8, 415: 3, 429: 8, 503: 14}


class OtlpProtobufParser(BaseParser):
    media_type = PROTOBUF

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> ExportTraceServiceRequest:
        raw = read_body(stream, parser_context)
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(bytes(raw))
        except (DecodeError, RuntimeError):  # RuntimeError: nested past upb's limit
            raise InvalidBatch(
                "The body is not an OTLP ExportTraceServiceRequest.", code="invalid_protobuf"
            ) from None
        return request


class OtlpJSONParser(BaseParser):
    """OTLP's JSON mapping: hex trace and span ids, enums as numbers, 64-bit ints as text."""

    media_type = JSON

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> ExportTraceServiceRequest:
        raw = read_body(stream, parser_context)
        try:
            data = loads_bounded(raw, max_depth=settings.TRIAGE_JSON_MAX_DEPTH)
        except JSONTooDeep as exc:
            raise InvalidBatch(
                f"The body is {exc} (TRIAGE_JSON_MAX_DEPTH).", code="json_too_deep"
            ) from None
        except ValueError:  # JSONDecodeError, UnicodeDecodeError, a 4300-digit integer
            raise InvalidBatch("The body is not valid JSON.", code="invalid_json") from None
        if not isinstance(data, dict):
            raise InvalidBatch("The body must be a JSON object.", code="invalid_otlp_json")
        _hex_ids_to_base64(data)
        request = ExportTraceServiceRequest()
        try:
            json_format.ParseDict(data, request, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError, RecursionError):
            raise InvalidBatch(
                "The body is not an OTLP ExportTraceServiceRequest in JSON.",
                code="invalid_otlp_json",
            ) from None
        return request


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """OTLP JSON writes ids in hex where protobuf's JSON mapping expects base64. An id that
    is not hex becomes empty, so that span alone is refused (invalid_span_id)."""
    for resource_spans in _list(data.get("resourceSpans", data.get("resource_spans"))):
        for scope_spans in _list(_get(resource_spans, "scopeSpans", "scope_spans")):
            for span in _list(_get(scope_spans, "spans")):
                if not isinstance(span, dict):
                    continue
                _convert_ids(span)
                for link in _list(span.get("links")):
                    if isinstance(link, dict):
                        _convert_ids(link)


def _convert_ids(holder: dict[str, Any]) -> None:
    for camel, snake in (
        ("traceId", "trace_id"),
        ("spanId", "span_id"),
        ("parentSpanId", "parent_span_id"),
    ):
        for key in (camel, snake):
            if key in holder:
                holder[key] = _hex_to_base64(holder[key])


def _hex_to_base64(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    try:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    except (ValueError, binascii.Error):
        return ""


def _get(holder: Any, *keys: str) -> Any:
    if not isinstance(holder, dict):
        return None
    for key in keys:
        if key in holder:
            return holder[key]
    return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _wants_json(request: Request) -> bool:
    return request.content_type.split(";")[0].strip().lower() == JSON


def _encoded(message: Any, *, as_json: bool, status: int = 200) -> HttpResponse:
    if as_json:
        body = json_format.MessageToJson(message, indent=None).encode()
        return HttpResponse(body, status=status, content_type=JSON)
    return HttpResponse(message.SerializeToString(), status=status, content_type=PROTOBUF)


def _rpc_status(code: int, message: str) -> bytes:
    """A google.rpc.Status (code = 1, message = 2), written by hand: its two scalar fields
    are all the door sends, and the message type is not in opentelemetry-proto."""
    text = message.encode("utf-8")
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class OtlpTracesApi(APIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasIngestScope]
    parser_classes = [OtlpProtobufParser, OtlpJSONParser]

    @extend_schema(
        operation_id="otlp_traces",
        summary=(
            "OTLP/HTTP traces: tool-call spans (GenAI, MCP, OpenInference, OpenLLMetry) "
            "become failures and success counts"
        ),
        request={PROTOBUF: OpenApiTypes.BINARY, JSON: OpenApiTypes.OBJECT},
        responses={
            (200, PROTOBUF): OpenApiTypes.BINARY,
            (200, JSON): OpenApiTypes.OBJECT,
            400: OpenApiResponse(description="google.rpc.Status"),
            401: OpenApiResponse(description="google.rpc.Status"),
            403: OpenApiResponse(description="google.rpc.Status"),
            413: OpenApiResponse(description="google.rpc.Status"),
            429: OpenApiResponse(description="google.rpc.Status, with Retry-After"),
            503: OpenApiResponse(description="google.rpc.Status, with Retry-After"),
        },
    )
    def post(self, request: Request) -> HttpResponse:
        # Before the slot (see receive_body); OTel's JavaScript exporter sends chunked bodies.
        receive_body(request, chunked=True)
        with ingest_slot():
            return self._export(request)

    def _export(self, request: Request) -> HttpResponse:
        data = request.data
        export = data if isinstance(data, ExportTraceServiceRequest) else None
        if export is None:  # no body at all: DRF hands back an empty mapping
            export = ExportTraceServiceRequest()
        spans = count_spans(export)
        if spans > settings.TRIAGE_INGEST_MAX_ITEMS:
            raise PayloadTooLarge(
                f"A request holds at most {settings.TRIAGE_INGEST_MAX_ITEMS} spans.",
                code="too_many_items",
            )
        api_key = request.auth
        assert isinstance(api_key, ApiKey)  # HasIngestScope let only API keys through
        as_json = _wants_json(request)
        if spans == 0:
            return _encoded(ExportTraceServiceResponse(), as_json=as_json)
        retry_after = quota_consume(
            api_key=api_key,
            items=spans,
            body_bytes=getattr(request, "ingest_decoded_bytes", 0),
        )
        if retry_after is not None:
            raise QuotaExceeded(wait=retry_after)
        mapped = map_export(export)
        outcome = batch_ingest(
            owner=api_key.owner,
            items=mapped.items,
            item_indexes=mapped.item_indexes,
            refused=mapped.refused,
            skipped=mapped.skipped,
            api_key=api_key,
            channel=CHANNEL,
            body_bytes=getattr(request, "ingest_body_bytes", 0),
        )
        codes = Counter(
            item.error["code"]
            for item in outcome.items
            if item.status in (REJECTED, CONFLICT) and item.error is not None
        )
        response = ExportTraceServiceResponse()
        rejected = sum(codes.values())
        if rejected:
            summary = ", ".join(f"{code} ({count})" for code, count in sorted(codes.items()))
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(
                    rejected_spans=rejected,
                    error_message=(
                        f"{rejected} span(s) refused: {summary}; see batch "
                        f"{outcome.batch_id} on the desk's ingestion page."
                    ),
                )
            )
        return _encoded(response, as_json=as_json)

    def handle_exception(self, exc: Exception) -> HttpResponse:  # type: ignore[override]
        """The common error handler's answer, re-encoded as the google.rpc.Status OTLP
        clients read (DRF's finalize_response takes any HttpResponse)."""
        if isinstance(exc, exceptions.UnsupportedMediaType):
            exc = InvalidBatch(
                f"Send {PROTOBUF} or {JSON} (OTLP/HTTP).", code="unsupported_content_type"
            )
        if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
            # As APIView.handle_exception does: a 401 names the scheme to use.
            setattr(exc, "auth_header", self.get_authenticate_header(self.request))  # noqa: B010
        response = exception_handler(exc, self.get_exception_handler_context())
        if response is None:
            raise exc
        error = (response.data or {}).get("error", {}) if isinstance(response.data, dict) else {}
        message = f"{error.get('code', 'error')}: {error.get('message', '')}"
        as_json = _wants_json(self.request)
        status = response.status_code
        code = _RPC_CODES.get(status, 2)  # 2: UNKNOWN
        if as_json:
            answer = HttpResponse(
                json.dumps({"code": code, "message": message}), status=status, content_type=JSON
            )
        else:
            answer = HttpResponse(_rpc_status(code, message), status=status, content_type=PROTOBUF)
        for header in ("Retry-After", "WWW-Authenticate"):
            if header in response:
                answer[header] = response[header]
        wait = getattr(exc, "wait", None)
        if "Retry-After" not in answer and wait:
            answer["Retry-After"] = str(int(wait))
        return answer
