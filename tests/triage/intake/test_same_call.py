"""Each failed call is stored once: an OTLP span and a runtime's report of the same call
(matched by trace id and span id) become one record, whichever arrives first."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import failure_item
from tests.triage.intake.otlp_helpers import request_of
from triage.intake.ingest import SAME_CALL_WINDOW, batch_ingest
from triage.models import FailureGroup, FailureRecord, IngestBatch, RunnerEvent

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db]


TRACE = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")
SPAN = bytes.fromhex("00f067aa0ba902b7")
OTHER_SPAN = bytes.fromhex("53995c3f42cd8ad8")
ENVELOPE = {
    "status": "failed",
    "code": "UPSTREAM_UNAVAILABLE",
    "retry": {"allowed": True, "reason": "transient", "next_action": "retry_with_backoff"},
    "execution": {"state": "completed", "idempotency_key": "idem-77"},
}


def post_span(client: APIClient, *, span_id: bytes = SPAN, **attributes: Any) -> Any:
    request = request_of(
        name="tools/call get_delivery",
        attributes={
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": "get_delivery",
            "error.type": "tool_error",
            **attributes,
        },
        trace_id=TRACE,
        span_id=span_id,
        resource={"service.name": "shop"},
        # Now, as the report's time is: a span and a report are one call when they say
        # the same moment (within ingest.SAME_CALL_WINDOW).
        end=time.time_ns(),
    )
    response = client.post(
        "/v1/traces", data=request.SerializeToString(), content_type="application/x-protobuf"
    )
    assert response.status_code == 200, response.content
    return response


def report(item_id: str = "report-1", *, span: bytes = SPAN, **body: Any) -> dict[str, Any]:
    """What a runtime reports for the same call: the real reason,
    the envelope the agent got, an idempotency key."""
    fields: dict[str, Any] = {
        "tool": "get_delivery",
        "collection": "shop",
        "evidence": {"http_status": 503, "attempt": 1},
        "idempotency_key": "idem-77",
        "envelope": ENVELOPE,
        "trace_id": TRACE.hex(),
        "span_id": span.hex(),
        **body,
    }
    return failure_item(item_id, **fields)


def post_items(client: APIClient, *items: dict[str, Any]) -> dict[str, Any]:
    response = client.post(
        "/api/v1/ingest", data=json.dumps({"items": list(items)}), content_type="application/json"
    )
    assert response.status_code in (200, 207), response.content
    return dict(response.json())


def test_a_span_then_the_report_of_the_same_call_is_one_record(ingest_client: APIClient) -> None:
    post_span(ingest_client)
    answer = post_items(ingest_client, report())
    assert (answer["accepted"], answer["duplicates"]) == (0, 1)
    assert answer["items"][0]["status"] == "duplicate"

    record = FailureRecord.objects.get()
    # The span came first: its classification stands ...
    assert (record.reason, record.source) == ("tool_error_unreported", "otlp")
    assert (record.trace_id, record.span_id) == (TRACE.hex(), SPAN.hex())
    # ... and what only the report knew is added to it.
    assert record.extra["envelope"] == ENVELOPE
    assert record.extra["otlp"]["convention"] == "mcp"
    assert record.evidence == {"error_type": "tool_error", "http_status": 503, "attempt": 1}
    assert record.idempotency_key == "idem-77"
    assert FailureGroup.objects.get().count == 1
    second = IngestBatch.objects.order_by("id").last()
    assert second is not None and (second.accepted, second.duplicates) == (0, 1)


def test_a_report_then_the_span_of_the_same_call_is_one_record(ingest_client: APIClient) -> None:
    assert post_items(ingest_client, report())["accepted"] == 1
    post_span(ingest_client)

    record = FailureRecord.objects.get()
    assert (record.reason, record.lane, record.source) == ("http_5xx", "reconcile_first", "runtime")
    assert record.extra["envelope"] == ENVELOPE
    assert record.extra["otlp"]["span_name"] == "tools/call get_delivery"  # added by the span
    assert record.evidence["error_type"] == "tool_error"
    assert record.evidence["http_status"] == 503  # the report's, kept
    span_batch = IngestBatch.objects.get(channel="otlp")
    assert (span_batch.accepted, span_batch.duplicates) == (0, 1)
    assert FailureGroup.objects.get().count == 1


def test_the_same_call_twice_in_one_batch_is_stored_once_first_sent_first(
    ingest_client: APIClient,
) -> None:
    # "z-..." sorts after "a-..." by id; the order the client sent decides which is first.
    first = report("z-envelope", reason="timeout", evidence={"timeout_ms": 3000})
    second = report("a-report", reason="http_5xx", envelope=None, evidence={"http_status": 503})
    answer = post_items(ingest_client, first, second)
    assert [item["status"] for item in answer["items"]] == ["accepted", "duplicate"]
    record = FailureRecord.objects.get()
    assert record.reason == "timeout"
    assert record.evidence == {"timeout_ms": 3000, "http_status": 503}
    assert record.extra["envelope"] == ENVELOPE
    assert FailureGroup.objects.get().count == 1


def test_two_spans_of_one_trace_stay_two_records(ingest_client: APIClient) -> None:
    post_span(ingest_client)
    post_span(ingest_client, span_id=OTHER_SPAN)
    answer = post_items(ingest_client, report("r-1"), report("r-2", span=OTHER_SPAN))
    assert answer["duplicates"] == 2
    stored = FailureRecord.objects.order_by("span_id").values_list("span_id", flat=True)
    assert list(stored) == sorted([SPAN.hex(), OTHER_SPAN.hex()])


def test_a_retried_report_is_a_duplicate_by_its_id_as_before(ingest_client: APIClient) -> None:
    post_items(ingest_client, report())
    again = post_items(ingest_client, report())
    assert again["items"][0]["status"] == "duplicate"
    changed = report(reason="timeout")
    assert post_items(ingest_client, changed)["items"][0]["status"] == "conflict"
    assert FailureRecord.objects.count() == 1


def test_a_runner_events_failure_of_a_stored_span_keeps_the_event(
    ingest_client: APIClient,
) -> None:
    post_span(ingest_client)
    event = {
        "type": "runner_event",
        "id": "ev-1",
        "body": {
            "type": "step.failed",
            "tool": "get_delivery",
            "collection": "shop",
            "error": {"kind": "tool", "message": "HTTP 503", "exception_type": "HTTPError"},
            "trace_id": TRACE.hex(),
            "span_id": SPAN.hex(),
        },
    }
    answer = post_items(ingest_client, event)
    assert answer["items"][0]["status"] == "accepted"  # the event itself is stored
    assert RunnerEvent.objects.filter(event_type="step.failed").count() == 1
    assert FailureRecord.objects.get().reason == "tool_error_unreported"


def test_failures_without_a_span_are_untouched(ingest_client: APIClient) -> None:
    answer = post_items(ingest_client, failure_item("a"), failure_item("b"))
    assert answer["accepted"] == 2
    assert list(FailureRecord.objects.values_list("trace_id", "span_id")) == [(None, None)] * 2


def test_uppercase_ids_are_read_as_lowercase(ingest_client: APIClient) -> None:
    post_span(ingest_client)
    upper = report(trace_id=TRACE.hex().upper(), span_id=SPAN.hex().upper())
    assert post_items(ingest_client, upper)["duplicates"] == 1


@pytest.mark.parametrize(
    ("ids", "field"),
    [
        ({"trace_id": "4bf92f35", "span_id": SPAN.hex()}, "body.trace_id"),
        ({"trace_id": TRACE.hex(), "span_id": "00f067aa0ba902b7ff"}, "body.span_id"),
        ({"trace_id": "g" * 32, "span_id": SPAN.hex()}, "body.trace_id"),
        ({"trace_id": TRACE.hex(), "span_id": SPAN.hex() + "\n"}, "body.span_id"),
        ({"trace_id": "0" * 32, "span_id": SPAN.hex()}, "body.trace_id"),
        ({"trace_id": TRACE.hex(), "span_id": "0" * 16}, "body.span_id"),
        ({"trace_id": 12345, "span_id": SPAN.hex()}, "body.trace_id"),
        ({"trace_id": TRACE.hex(), "span_id": None}, "body.span_id"),
        ({"trace_id": "", "span_id": SPAN.hex()}, "body.trace_id"),
    ],
)
def test_a_malformed_span_identity_refuses_that_item_alone(
    ingest_client: APIClient, ids: dict[str, Any], field: str
) -> None:
    answer = post_items(ingest_client, report("bad", **ids), failure_item("good"))
    bad, good = answer["items"]
    assert bad["status"] == "rejected"
    assert (bad["error"]["code"], bad["error"]["field"]) == ("invalid_span_id", field)
    assert good["status"] == "accepted"
    assert FailureRecord.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_call_sent_by_two_batches_at_once_is_stored_once(settings: Any) -> None:
    settings.TRIAGE_INGEST_CONCURRENT_BATCHES = 10
    statuses: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def send(number: int) -> None:
        try:
            barrier.wait()
            outcome = batch_ingest(owner=f"runtime-{number}", items=[report(f"r-{number}")])
            statuses.extend(item.status for item in outcome.items)
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert sorted(statuses) == ["accepted"] + ["duplicate"] * 5
    assert FailureRecord.objects.count() == 1
    assert FailureGroup.objects.get().count == 1


def test_a_report_of_the_same_span_ids_days_apart_is_another_call(
    ingest_client: APIClient,
) -> None:
    """One call is one moment: the same span ids more than a day (SAME_CALL_WINDOW) from the
    stored record's time are another record, and the probe reads only the days around."""
    post_span(ingest_client)
    then = (timezone.now() - SAME_CALL_WINDOW - timedelta(minutes=5)).isoformat()
    answer = post_items(ingest_client, report(occurred_at=then))
    assert (answer["accepted"], answer["duplicates"]) == (1, 0)
    assert FailureRecord.objects.filter(trace_id=TRACE.hex(), span_id=SPAN.hex()).count() == 2
