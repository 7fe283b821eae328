"""The OTLP door in process: encodings, limits, refusals and answers (see test_otlp_live for
the real exporter over HTTP)."""

from __future__ import annotations

import gzip
import io
import json
from typing import Any
from unittest import mock

import pytest
from django.db import OperationalError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from rest_framework.test import APIClient

from tests.triage.intake.otlp_helpers import (
    FAILING_CALLS,
    ToolCall,
    export_request,
    otlp_json,
    otlp_json_bytes,
    record,
)
from triage.intake.otlp_spans import MAX_VALUE_DEPTH
from triage.models import ApiKey, FailureRecord, IngestBatch, IngestRejection, RunnerEvent

URL = "/v1/traces"
PROTOBUF = "application/x-protobuf"
pytestmark = pytest.mark.django_db


def post(client: APIClient, body: bytes, content_type: str = PROTOBUF, **extra: Any) -> Any:
    return client.post(URL, data=body, content_type=content_type, **extra)


def answer(response: Any) -> ExportTraceServiceResponse:
    return ExportTraceServiceResponse.FromString(response.content)


def a_request(*calls: ToolCall, chat: bool = True) -> ExportTraceServiceRequest:
    return export_request(record(list(calls), chat=chat))


def test_failing_tool_spans_become_failures_and_the_rest_is_counted(
    ingest_client: APIClient,
) -> None:
    calls = [*FAILING_CALLS.values(), ToolCall("getCatalog", status=200, ok=True)]
    response = post(ingest_client, a_request(*calls).SerializeToString())
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == PROTOBUF
    assert not answer(response).HasField("partial_success")
    records = {r.reason: r for r in FailureRecord.objects.all()}
    assert set(records) == set(FAILING_CALLS)
    for reason, call in FAILING_CALLS.items():
        assert (records[reason].stage, records[reason].tool) == ("execute", call.tool)
        assert records[reason].source == "otlp"
        assert records[reason].collection == "shop-agent"
    assert RunnerEvent.objects.get().event_type == "step.completed"  # the success, counted
    batch = IngestBatch.objects.get()
    assert (batch.channel, batch.accepted, batch.skipped) == ("otlp", 6, 2)  # chat + agent


def test_json_is_answered_in_json(ingest_client: APIClient) -> None:
    request = a_request(FAILING_CALLS["http_5xx"])
    response = post(ingest_client, otlp_json_bytes(request), content_type="application/json")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json() == {}
    assert FailureRecord.objects.get().reason == "http_5xx"


def test_gzip_bodies_are_read(ingest_client: APIClient) -> None:
    body = gzip.compress(a_request(FAILING_CALLS["timeout"]).SerializeToString())
    response = post(ingest_client, body, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200
    assert FailureRecord.objects.get().reason == "timeout"


def test_an_exporter_retry_is_a_duplicate_and_a_changed_span_a_conflict(
    ingest_client: APIClient,
) -> None:
    request = a_request(FAILING_CALLS["http_4xx"], chat=False)
    assert post(ingest_client, request.SerializeToString()).status_code == 200
    assert post(ingest_client, request.SerializeToString()).status_code == 200
    assert FailureRecord.objects.count() == 1
    assert IngestBatch.objects.order_by("id").last().duplicates == 1  # type: ignore[union-attr]
    request.resource_spans[0].scope_spans[0].spans[0].status.message = "changed"
    response = post(ingest_client, request.SerializeToString())
    assert answer(response).partial_success.rejected_spans == 1
    assert "conflict (1)" in answer(response).partial_success.error_message
    assert FailureRecord.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        (b"\x0a\xff\xff\xff\x0f", PROTOBUF, "invalid_protobuf"),  # truncated
        (b"not json", "application/json", "invalid_json"),
        (b"[1, 2]", "application/json", "invalid_otlp_json"),
        (b'{"resourceSpans": 3}', "application/json", "invalid_otlp_json"),
        (b"spans", "text/plain", "unsupported_content_type"),
    ],
)
def test_bodies_that_do_not_decode_are_400(
    ingest_client: APIClient, body: bytes, content_type: str, code: str
) -> None:
    response = post(ingest_client, body, content_type=content_type)
    assert response.status_code == 400
    if content_type == "application/json":
        assert response.json()["message"].startswith(code)
    else:
        assert code.encode() in response.content
    assert IngestBatch.objects.count() == 0


def test_a_truncated_real_request_is_400(ingest_client: APIClient) -> None:
    body = a_request(*FAILING_CALLS.values()).SerializeToString()
    response = post(ingest_client, body[: len(body) // 2])
    assert response.status_code == 400


def test_json_with_invalid_ids_refuses_those_spans(ingest_client: APIClient) -> None:
    data = otlp_json(a_request(FAILING_CALLS["http_5xx"], FAILING_CALLS["http_4xx"], chat=False))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    tool_spans = [s for s in spans if s["name"].startswith("execute_tool")]
    tool_spans[0]["traceId"] = "not-hex!"
    tool_spans[1]["spanId"] = "abc"  # hex, but not 8 bytes
    response = post(ingest_client, json.dumps(data).encode(), content_type="application/json")
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "2"
    assert "invalid_span_id (2)" in partial["errorMessage"]
    assert FailureRecord.objects.count() == 0
    assert set(IngestRejection.objects.values_list("code", flat=True)) == {"invalid_span_id"}


def test_ten_thousand_attributes_refuse_the_span_alone(ingest_client: APIClient) -> None:
    request = a_request(FAILING_CALLS["http_5xx"], FAILING_CALLS["http_4xx"], chat=False)
    span = next(
        s
        for s in request.resource_spans[0].scope_spans[0].spans
        if s.name == "execute_tool getDelivery"
    )
    span.attributes.extend(
        KeyValue(key=f"k{n}", value=AnyValue(string_value="v")) for n in range(10_000)
    )
    response = post(ingest_client, request.SerializeToString())
    assert response.status_code == 200
    assert answer(response).partial_success.rejected_spans == 1
    assert FailureRecord.objects.get().reason == "http_4xx"
    assert IngestRejection.objects.get().code == "too_many_attributes"


def _nested(depth: int) -> AnyValue:
    value = AnyValue(string_value="leaf")
    for _ in range(depth):
        outer = AnyValue()
        outer.array_value.values.append(value)
        value = outer
    return value


def test_deep_nesting_in_an_attribute_value_refuses_the_span(ingest_client: APIClient) -> None:
    request = a_request(FAILING_CALLS["http_5xx"], chat=False)
    span = next(s for s in request.resource_spans[0].scope_spans[0].spans if "tool" in s.name)
    span.attributes.append(KeyValue(key="deep", value=_nested(MAX_VALUE_DEPTH + 1)))
    response = post(ingest_client, request.SerializeToString())
    assert answer(response).partial_success.rejected_spans == 1
    assert IngestRejection.objects.get().code == "value_too_deep"
    assert FailureRecord.objects.count() == 0


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field, written by hand."""
    length, size = bytearray(), len(payload)
    while True:
        length.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            break
    return bytes([number << 3 | 2]) + bytes(length) + payload


def test_nesting_past_the_decoder_limit_is_400(ingest_client: APIClient) -> None:
    value = _field(1, b"leaf")  # AnyValue.string_value
    for _ in range(200):
        value = _field(5, _field(1, value))  # AnyValue.array_value -> ArrayValue.values
    span = _field(9, _field(1, b"deep") + _field(2, value))  # Span.attributes: KeyValue
    deep = _field(1, _field(2, _field(2, span)))  # resource_spans.scope_spans.spans
    body = a_request(FAILING_CALLS["http_5xx"], chat=False).SerializeToString() + deep
    response = post(ingest_client, body)
    assert response.status_code == 400
    assert b"invalid_protobuf" in response.content
    assert FailureRecord.objects.count() == 0


def test_json_nested_past_the_depth_limit_is_400(ingest_client: APIClient) -> None:
    deep = '{"arrayValue": {"values": [' * 100 + '{"stringValue": "x"}' + "]}}" * 100
    body = (
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "execute_tool x", '
        f'"attributes": [{{"key": "deep", "value": {deep}}}]}}]}}]}}]}}'
    )
    response = post(ingest_client, body.encode(), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["message"].startswith("json_too_deep")


def test_no_key_is_401_and_no_scope_403(make_api_key: Any) -> None:
    body = a_request(FAILING_CALLS["http_5xx"]).SerializeToString()
    assert post(APIClient(), body).status_code == 401
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('reader', scopes=('read',))}")
    assert post(reader, body).status_code == 403


def test_over_the_size_limit_is_413(ingest_client: APIClient, settings: Any) -> None:
    settings.TRIAGE_INGEST_MAX_BODY_BYTES = 100
    response = post(ingest_client, a_request(*FAILING_CALLS.values()).SerializeToString())
    assert response.status_code == 413
    settings.TRIAGE_INGEST_MAX_BODY_BYTES = 10**6
    settings.TRIAGE_INGEST_MAX_ITEMS = 2
    response = post(ingest_client, a_request(*FAILING_CALLS.values()).SerializeToString())
    assert response.status_code == 413
    assert b"too_many_items" in response.content


def test_over_quota_is_429_with_retry_after(make_api_key: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key()}")
    ApiKey.objects.update(quota_per_minute=3)
    response = post(client, a_request(*FAILING_CALLS.values()).SerializeToString())
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1


def test_an_unreachable_database_is_503_with_retry_after(ingest_client: APIClient) -> None:
    unreachable = OperationalError("connection refused")
    with mock.patch("triage.intake.otlp.batch_ingest", side_effect=unreachable):
        response = post(ingest_client, a_request(FAILING_CALLS["http_5xx"]).SerializeToString())
    assert response.status_code == 503
    assert response["Retry-After"]


def test_an_empty_export_is_answered_without_a_batch(ingest_client: APIClient) -> None:
    response = post(ingest_client, ExportTraceServiceRequest().SerializeToString())
    assert response.status_code == 200
    assert IngestBatch.objects.count() == 0


def test_runtime_overrides_win_over_the_derivation(ingest_client: APIClient) -> None:
    call = ToolCall(
        "createRefund",
        method="POST",
        status=500,
        attributes={
            "tool_call.failure.reason": "auth_header_resolution_failed",
            "tool_call.execution_state": "not_started",
            "tool_call.collection": "payments",
        },
    )
    assert post(ingest_client, a_request(call).SerializeToString()).status_code == 200
    record_ = FailureRecord.objects.get()
    assert (record_.stage, record_.reason) == ("auth_preflight", "auth_header_resolution_failed")
    assert record_.execution_state == "not_started"
    assert record_.collection == "payments"


def test_the_tools_declared_side_effect_is_read_and_an_odd_one_refused(
    ingest_client: APIClient,
) -> None:
    """tool_call.side_effect (the MCP middleware sets it) wins over the method; a value the
    desk has no grade for refuses that span alone, as a native item's would."""
    declared = ToolCall(
        "sendInvoice", method="GET", status=503, attributes={"tool_call.side_effect": "privileged"}
    )
    odd = ToolCall("getOrder", status=503, attributes={"tool_call.side_effect": "harmless"})
    response = post(ingest_client, a_request(declared, odd, chat=False).SerializeToString())
    assert answer(response).partial_success.rejected_spans == 1
    assert FailureRecord.objects.get().side_effect == "privileged"
    rejection = IngestRejection.objects.get()
    assert (rejection.code, rejection.field) == ("invalid_field", "body.side_effect")


def test_collection_names_follow_the_one_rule(ingest_client: APIClient) -> None:
    """A service name or tool_call.collection is a collection name like any other door's:
    real ids are taken, what cannot be stored or shown refuses the span alone."""
    taken = ToolCall("getOrder", status=503, attributes={"tool_call.collection": "체크아웃"})
    refused = [
        ToolCall("getOrder", status=500, attributes={"tool_call.collection": name})
        for name in ("c" * 101, "shop\nv2", " shop", "a\u202eb")
    ]
    response = post(ingest_client, a_request(taken, *refused, chat=False).SerializeToString())
    assert answer(response).partial_success.rejected_spans == len(refused)
    assert list(FailureRecord.objects.values_list("collection", flat=True)) == ["체크아웃"]
    rejections = IngestRejection.objects.all()
    assert {(r.code, r.field) for r in rejections} == {
        ("invalid_collection_name", "body.collection")
    }
    spaced = export_request(record([FAILING_CALLS["http_5xx"]], chat=False, service="team a"))
    assert post(ingest_client, spaced.SerializeToString()).status_code == 200
    assert FailureRecord.objects.filter(collection="team a").count() == 1


def test_a_span_ending_in_the_future_is_refused_by_the_native_rule(
    ingest_client: APIClient,
) -> None:
    request = a_request(FAILING_CALLS["http_5xx"], chat=False)
    for span in request.resource_spans[0].scope_spans[0].spans:
        span.end_time_unix_nano = 2**64 - 1
    response = post(ingest_client, request.SerializeToString())
    assert answer(response).partial_success.rejected_spans == 1
    assert IngestRejection.objects.get().field == "body.occurred_at"


def test_a_gzip_bomb_is_413_before_it_is_inflated(ingest_client: APIClient, settings: Any) -> None:
    settings.TRIAGE_INGEST_MAX_BODY_BYTES = 64 * 1024
    bomb = gzip.compress(bytes(8 * 1024 * 1024))  # 8 MB of zeros in about 8 KB
    response = post(ingest_client, bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert b"body_too_large" in response.content
    assert IngestBatch.objects.count() == 0


def test_errors_are_a_google_rpc_status_in_the_request_encoding(make_api_key: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer td_000000000000_" + "x" * 32)
    body = a_request(FAILING_CALLS["http_5xx"])
    response = post(client, body.SerializeToString())
    assert response.status_code == 401
    assert response["Content-Type"] == PROTOBUF
    assert response["WWW-Authenticate"].startswith("Bearer")
    # google.rpc.Status: field 1 (code) = 16 UNAUTHENTICATED, field 2 the message.
    assert response.content[:2] == b"\x08\x10"
    assert b"invalid_api_key: Unknown API key." in response.content
    response = post(client, otlp_json_bytes(body), content_type="application/json")
    assert response.status_code == 401
    assert response.json() == {"code": 16, "message": "invalid_api_key: Unknown API key."}


def chunked(body: bytes, *, terminated: bool) -> dict[str, Any]:
    """The WSGI environment of a chunked request without a Content-Length: gunicorn hands
    the body over taken apart and ends it (`wsgi.input_terminated`); runserver does not."""
    environ: dict[str, Any] = {
        "CONTENT_LENGTH": "",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input": io.BytesIO(body),
    }
    if terminated:
        environ["wsgi.input_terminated"] = True
    return environ


def test_a_chunked_body_without_a_length_is_read_where_the_server_ends_it(
    ingest_client: APIClient,
) -> None:
    # OpenTelemetry's JavaScript exporter sends every export this way.
    body = a_request(FAILING_CALLS["http_5xx"], chat=False).SerializeToString()
    response = post(ingest_client, b"", **chunked(body, terminated=True))
    assert response.status_code == 200, response.content
    assert FailureRecord.objects.get().reason == "http_5xx"
    gzipped = gzip.compress(otlp_json_bytes(a_request(FAILING_CALLS["timeout"], chat=False)))
    response = post(
        ingest_client,
        b"",
        content_type="application/json",
        HTTP_CONTENT_ENCODING="gzip",
        **chunked(gzipped, terminated=True),
    )
    assert response.status_code == 200, response.content
    assert FailureRecord.objects.filter(reason="timeout").count() == 1


def test_a_chunked_body_is_bounded_and_refused_where_the_server_cannot_end_it(
    ingest_client: APIClient, settings: Any
) -> None:
    body = a_request(*FAILING_CALLS.values()).SerializeToString()
    unended = post(ingest_client, b"", **chunked(body, terminated=False))
    assert unended.status_code == 411 and b"length_required" in unended.content
    settings.TRIAGE_INGEST_MAX_BODY_BYTES = 100
    too_large = post(ingest_client, b"", **chunked(body, terminated=True))
    assert too_large.status_code == 413 and b"body_too_large" in too_large.content
    assert IngestBatch.objects.count() == 0
