"""Identifiers and codes (the values shown in alert headers and subjects, page titles and
URLs) refuse control characters per item, with `invalid_character`, as collection names do;
free text keeps them."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import audit_item, failure_item, receipt_item, runner_event_item
from tests.learning.conftest import attempt_item
from tests.triage.intake.otlp_helpers import ToolCall, export_request, record
from triage.intake.ingest import batch_ingest
from triage.models import FailureRecord, IngestRejection

pytestmark = pytest.mark.django_db

CONTROL_CHARACTERS = ["\r\n", "\n", "\r", "\t", "\x1b[31m", "\x7f", "\x85", "\u2028"]


@pytest.mark.parametrize("character", CONTROL_CHARACTERS)
@pytest.mark.parametrize(
    ("item", "field"),
    [
        (lambda bad: failure_item(tool=f"getOrder{bad}Bcc: x@attacker.example"), "body.tool"),
        (lambda bad: failure_item(plan_id=f"plan{bad}1"), "body.plan_id"),
        (lambda bad: failure_item(step_id=f"s{bad}1"), "body.step_id"),
        (lambda bad: failure_item(idempotency_key=f"k{bad}1"), "body.idempotency_key"),
        (lambda bad: receipt_item(tool=f"publish{bad}"), "body.tool"),
        (lambda bad: audit_item(host=f"api.example.com{bad}"), "body.host"),
        (lambda bad: runner_event_item(tool=f"get{bad}Order"), "body.tool"),
        (lambda bad: attempt_item(selected_target=f"getOrder{bad}"), "body.selected_target"),
    ],
)
def test_a_control_character_in_an_identifier_refuses_that_item_alone(
    item: Any, field: str, character: str
) -> None:
    outcome = batch_ingest(owner="runtime-a", items=[item(character), failure_item("good")])
    refused, good = outcome.items
    assert refused.status == "rejected", refused
    assert refused.error is not None
    assert (refused.error["code"], refused.error["field"]) == ("invalid_character", field)
    assert f"U+{ord(character[0]):04X}" in refused.error["message"]
    assert good.status == "accepted"


def test_an_item_id_with_a_control_character_is_refused() -> None:
    outcome = batch_ingest(owner="runtime-a", items=[failure_item("run-1\r\nX")])
    [refused] = outcome.items
    assert refused.error is not None and refused.error["code"] == "invalid_character"


def test_free_text_keeps_its_line_breaks() -> None:
    message = "step 2 failed:\r\n\tHTTP 503 from the carrier"
    outcome = batch_ingest(owner="runtime-a", items=[failure_item(message=message)])
    assert outcome.all_stored
    assert FailureRecord.objects.get().message == message


@pytest.mark.parametrize("character", CONTROL_CHARACTERS)
@pytest.mark.parametrize(
    ("item", "field"),
    [
        (lambda bad: failure_item(reason=f"http_5xx{bad}"), "body.reason"),
        (lambda bad: receipt_item(code=f"POLICY{bad}"), "body.code"),
    ],
)
def test_codes_have_a_shape_of_their_own_that_control_characters_fail(
    item: Any, field: str, character: str
) -> None:
    [refused] = batch_ingest(owner="runtime-a", items=[item(character)]).items
    assert refused.error is not None
    assert (refused.error["code"], refused.error["field"]) == ("invalid_field", field)


def test_the_otlp_door_refuses_a_tool_name_with_a_control_character_span_by_span(
    ingest_client: APIClient,
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    calls = [ToolCall("getOrder\r\nBcc: x@attacker.example", status=503),
             ToolCall("getOrder", status=503)]  # fmt: skip
    request = export_request(record(calls, chat=False))
    response = ingest_client.post(
        "/v1/traces", data=request.SerializeToString(), content_type="application/x-protobuf"
    )
    assert response.status_code == 200
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 1
    assert list(FailureRecord.objects.values_list("tool", flat=True)) == ["getOrder"]
    [rejection] = IngestRejection.objects.all()
    assert (rejection.code, rejection.field) == ("invalid_character", "body.tool")
