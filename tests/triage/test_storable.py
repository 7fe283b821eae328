"""Values PostgreSQL refuses (SQLite takes them) never fail a batch: each item is stored with
NUL and lone surrogates replaced in its text, or refused alone with a stable code."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import models
from rest_framework.test import APIClient

from core.storable import ReplacedPaths, storable_json
from learning.models import LearningAttempt
from qualitylab.models import Collection
from tests.factories import audit_item, failure_item, receipt_item, runner_event_item
from tests.learning.conftest import attempt_item
from triage.models import (
    AuditEvent,
    FailureRecord,
    IngestRejection,
    Receipt,
    RunnerEvent,
)

URL = "/api/v1/ingest"
pytestmark = pytest.mark.django_db
NUL = "\u0000"
SURROGATE = "\ud800"
FFFD = "\ufffd"


def post(client: APIClient, items: list[Any]) -> Any:
    # json.dumps writes a lone surrogate as the escape "\ud800", as a runtime's JSON would.
    return client.post(URL, data=json.dumps({"items": items}), content_type="application/json")


def outcome(response: Any, index: int = 0) -> dict[str, Any]:
    assert response.status_code in (200, 207), response.content
    return {item["index"]: item for item in response.json()["items"]}[index]


def test_json_keys_and_values_are_replaced_and_their_paths_listed() -> None:
    replaced = ReplacedPaths()
    value = {"a" + NUL: ["ok", "x" + SURROGATE], "a" + FFFD: 1, "clean": {"n": 1}}
    out = storable_json(value, path="body.evidence", replaced=replaced)
    # the replaced key does not overwrite the key it now looks like
    assert out == {"a" + FFFD + FFFD: ["ok", "x" + FFFD], "a" + FFFD: 1, "clean": {"n": 1}}
    assert replaced.as_list() == [
        "body.evidence.a" + FFFD,
        "body.evidence.a" + FFFD + FFFD + "[1]",
    ]
    untouched = {"a": ["b"]}
    assert storable_json(untouched, path="body", replaced=ReplacedPaths()) is untouched


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_a_failure_with_nul_in_message_and_evidence_is_stored_marked(
    ingest_client: APIClient, bad: str
) -> None:
    item = failure_item(
        message=f"a{bad}b", evidence={f"key{bad}": f"value{bad}", "n": 1}, note=f"x{bad}"
    )
    response = post(ingest_client, [item, failure_item("good")])
    assert response.status_code == 200, response.content
    record = FailureRecord.objects.get(client_id=item["id"])
    assert record.message == f"a{FFFD}b"
    assert record.evidence == {f"key{FFFD}": f"value{FFFD}", "n": 1}
    assert record.extra == {"note": f"x{FFFD}"}
    assert record.replaced_characters == [
        "body.message",
        f"body.evidence.key{FFFD}",
        "body.extra.note",
    ]
    assert FailureRecord.objects.filter(client_id="good", replaced_characters=[]).exists()


def test_the_group_page_says_which_fields_were_changed(
    ingest_client: APIClient, client_as: Any
) -> None:
    item = failure_item(message=f"a{NUL}b")
    post(ingest_client, [item])
    record = FailureRecord.objects.get(client_id=item["id"])
    page = client_as("viewer").get(f"/triage/groups/{record.group_id}/")
    assert page.status_code == 200
    assert "characters replaced in" in page.content.decode()
    assert "body.message" in page.content.decode()


@pytest.mark.parametrize(
    ("item", "model", "check"),
    [
        (
            runner_event_item(
                error={"kind": "tool", "message": f"HTTP 500: x{NUL}"}, note={f"k{NUL}": 1}
            ),
            RunnerEvent,
            lambda row: row.payload["note"] == {f"k{FFFD}": 1},
        ),
        (
            receipt_item(note=f"x{SURROGATE}"),
            Receipt,
            lambda row: row.extra == {"note": f"x{FFFD}"},
        ),
        (
            audit_item(note={"deep": [f"x{NUL}"]}),
            AuditEvent,
            lambda row: row.extra == {"note": {"deep": [f"x{FFFD}"]}},
        ),
        (
            attempt_item(query=f"find{NUL} orders", target_selector={f"a{NUL}": f"b{SURROGATE}"}),
            LearningAttempt,
            lambda row: (
                row.query == f"find{FFFD} orders"
                and row.target_selector == {f"a{FFFD}": f"b{FFFD}"}
            ),
        ),
    ],
    ids=["runner_event", "receipt", "audit_event", "learning_attempt"],
)
def test_every_item_type_stores_free_text_replaced_and_marked(
    ingest_client: APIClient, item: dict[str, Any], model: type[models.Model], check: Any
) -> None:
    response = post(ingest_client, [item, failure_item("good")])
    assert response.status_code == 200, response.content
    rows: Any = model._default_manager.all()
    row = rows.get() if model is RunnerEvent else rows.get(client_id=item["id"])
    assert check(row)
    assert row.replaced_characters
    assert FailureRecord.objects.filter(client_id="good").exists()


def test_a_runner_events_failure_record_is_marked_too(ingest_client: APIClient) -> None:
    item = runner_event_item(error={"kind": "tool", "message": f"HTTP 500: x{NUL}"})
    post(ingest_client, [item])
    record = FailureRecord.objects.get(client_id=item["id"])
    assert NUL not in record.message and FFFD in record.message
    assert "body.message" in record.replaced_characters


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (failure_item(tool=f"get{NUL}Order"), "body.tool"),
        (failure_item(collection=f"shop{SURROGATE}"), "body.collection"),
        (failure_item(idempotency_key=f"k{NUL}"), "body.idempotency_key"),
        (failure_item("id-with-\u0000"), "id"),
        (failure_item("id-with-\ud800"), "id"),
        (receipt_item(tool_run_id=f"tr{NUL}"), "body.tool_run_id"),
        (audit_item(host=f"h{SURROGATE}"), "body.host"),
        (runner_event_item(plan_id=f"p{NUL}"), "body.plan_id"),
        (attempt_item(selected_target=f"t{NUL}"), "body.selected_target"),
    ],
)
def test_identifiers_with_nul_or_surrogates_are_refused_alone(
    ingest_client: APIClient, item: dict[str, Any], field: str
) -> None:
    response = post(ingest_client, [item, failure_item("good")])
    assert response.status_code == 207
    error = outcome(response)["error"]
    # A collection name has its own rule (core.collection_names) and code.
    code = "invalid_collection_name" if field == "body.collection" else "invalid_character"
    assert (error["code"], error["field"]) == (code, field)
    assert FailureRecord.objects.filter(client_id="good").exists()
    rejection = IngestRejection.objects.get(index=0)
    assert rejection.code == code
    assert NUL not in rejection.client_id and SURROGATE not in rejection.client_id


def _bounded_body_fields(model: type[models.Model], body_names: set[str]) -> list[tuple[str, int]]:
    return sorted(
        (field.name, field.max_length)
        for field in model._meta.concrete_fields
        if isinstance(field, models.CharField)
        and field.max_length is not None
        and field.name in body_names
    )


_FAILURE_BODY = {
    "collection",
    "stage",
    "reason",
    "tool",
    "plan_id",
    "step_id",
    "idempotency_key",
    "graph_tool_call_version",
}
_RECEIPT_BODY = {
    "tool_run_id",
    "tool",
    "collection",
    "tool_version",
    "authority_scope",
    "target_fingerprint",
    "payload_hash",
    "result",
    "code",
    "reason",
    "next_action",
    "idempotency_key",
    "evidence_ref",
    "stop_reason",
}
_AUDIT_BODY = {"tool_run_id", "idempotency_key", "collection", "tool", "method", "host", "path"}
_EVENT_BODY = {"plan_id", "step_id", "tool", "stage", "graph_tool_call_version"}
_OVER_LONG = (
    [("failure", name, limit) for name, limit in _bounded_body_fields(FailureRecord, _FAILURE_BODY)]
    + [("receipt", name, limit) for name, limit in _bounded_body_fields(Receipt, _RECEIPT_BODY)]
    + [
        ("audit_event", name, limit)
        for name, limit in _bounded_body_fields(AuditEvent, _AUDIT_BODY)
    ]
    + [
        ("runner_event", name, limit)
        for name, limit in _bounded_body_fields(RunnerEvent, _EVENT_BODY)
    ]
    + [("runner_event", "type", 40)]
)
_MAKERS = {
    "failure": failure_item,
    "receipt": receipt_item,
    "audit_event": audit_item,
    "runner_event": runner_event_item,
}


@pytest.mark.parametrize(("item_type", "name", "limit"), _OVER_LONG)
def test_a_value_longer_than_its_column_is_refused_naming_the_field(
    ingest_client: APIClient, item_type: str, name: str, limit: int
) -> None:
    # Letters only, so it passes every code pattern and reaches the column's limit.
    item = _MAKERS[item_type](**{name: "a" * (limit + 1)})
    response = post(ingest_client, [item, failure_item("good")])
    assert response.status_code == 207, response.content
    error = outcome(response)["error"]
    field = "body.event_type" if name == "type" else f"body.{name}"
    assert error["field"] == field
    assert error["code"] in ("value_too_long", "invalid_field", "invalid_collection_name")
    assert FailureRecord.objects.filter(client_id="good").exists()


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (receipt_item(attempt=2**31), "body.attempt"),
        (receipt_item(retry_count=2**63), "body.retry_count"),
        (audit_item(status=70_000), "body.status"),
        (attempt_item(latency_ms=10**30), "body.latency_ms"),
        (attempt_item(latency_ms=1e308), "body.latency_ms"),
    ],
)
def test_numbers_out_of_their_columns_range_are_refused(
    ingest_client: APIClient, item: dict[str, Any], field: str
) -> None:
    response = post(ingest_client, [item, failure_item("good")])
    assert response.status_code == 207
    assert outcome(response)["error"]["field"] == field
    assert FailureRecord.objects.filter(client_id="good").exists()


@pytest.mark.parametrize(
    "raw",
    ["NaN", "Infinity", "-Infinity", "1e999"],
)
def test_json_numbers_python_reads_as_nan_or_infinity_are_refused(
    ingest_client: APIClient, raw: str
) -> None:
    good = json.dumps(failure_item("good"))
    bad = json.dumps(failure_item(evidence={"n": 0})).replace('"n": 0', f'"n": {raw}')
    response = ingest_client.post(
        URL, data=f'{{"items": [{bad}, {good}]}}', content_type="application/json"
    )
    assert response.status_code == 207
    assert outcome(response)["error"]["code"] == "scrub_failed"
    assert FailureRecord.objects.filter(client_id="good").exists()


def test_an_integer_python_cannot_read_is_a_400(ingest_client: APIClient) -> None:
    body = '{"items": [{"type": "failure", "id": "x", "body": {"n": ' + "9" * 5000 + "}}]}"
    response = ingest_client.post(URL, data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


@pytest.mark.parametrize(
    ("item", "field", "code"),
    [
        (failure_item(occurred_at="0000-01-01T00:00:00Z"), "body.occurred_at", "invalid_field"),
        (
            failure_item(occurred_at="2026-01-01T00:00:00+99:00"),
            "body.occurred_at",
            "invalid_field",
        ),
        (
            failure_item(occurred_at="0001-01-01T00:00:00+05:00"),
            "body.occurred_at",
            "timestamp_out_of_range",
        ),
        (
            failure_item(occurred_at="1969-12-31T23:59:59Z"),
            "body.occurred_at",
            "timestamp_out_of_range",
        ),
        (
            failure_item(occurred_at="9999-12-31T23:59:59-23:00"),
            "body.occurred_at",
            "invalid_field",
        ),
        (
            receipt_item(started_at="0001-01-01T00:00:00+01:00"),
            "body.started_at",
            "timestamp_out_of_range",
        ),
        (
            runner_event_item(timestamp="1000-01-01T00:00:00Z"),
            "body.occurred_at",
            "timestamp_out_of_range",
        ),
        (attempt_item(created_at="0000-00-00T00:00:00Z"), "body.created_at", "invalid_field"),
    ],
)
def test_timestamps_the_database_or_python_cannot_hold_are_refused(
    ingest_client: APIClient, item: dict[str, Any], field: str, code: str
) -> None:
    response = post(ingest_client, [item, failure_item("good")])
    assert response.status_code == 207
    error = outcome(response)["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert FailureRecord.objects.filter(client_id="good").exists()


def test_a_rejection_quoting_a_bad_key_is_recorded_and_answered(ingest_client: APIClient) -> None:
    deep: Any = "leaf"
    for _ in range(40):
        deep = {f"k{NUL}{SURROGATE}" + "x" * 60: deep}
    response = post(ingest_client, [failure_item(evidence=deep), failure_item("good")])
    assert response.status_code == 207
    error = outcome(response)["error"]
    assert error["code"] == "scrub_failed"
    rejection = IngestRejection.objects.get(index=0)
    assert len(rejection.field) <= 200 and NUL not in rejection.field
    assert FailureRecord.objects.filter(client_id="good").exists()


def test_a_collection_name_with_a_space_is_registered_and_an_over_long_one_refused(
    ingest_client: APIClient, client_as: Any
) -> None:
    items = [failure_item(collection="shop orders"), failure_item(collection="c" * 150)]
    response = post(ingest_client, items)
    assert response.status_code == 207
    assert response.json()["items"][1]["error"]["code"] == "invalid_collection_name"
    assert Collection.objects.filter(name="shop orders").exists()
    assert not Collection.objects.filter(name="c" * 150).exists()
    assert FailureRecord.objects.filter(collection="shop orders").exists()
    client = client_as("admin")
    assert client.get("/qualitylab/").status_code == 200
    assert client.get("/learning/").status_code == 200


def test_a_body_sent_again_with_its_surrogate_is_a_duplicate(ingest_client: APIClient) -> None:
    item = failure_item(message=f"a{SURROGATE}")
    post(ingest_client, [item])
    again = post(ingest_client, [item])
    assert outcome(again)["status"] == "duplicate"
    other = dict(item, body={**item["body"], "message": "a\udfff"})
    assert outcome(post(ingest_client, [other]))["status"] == "conflict"


def test_an_attempts_query_family_with_a_surrogate_is_stored_replaced(
    ingest_client: APIClient,
) -> None:
    item = attempt_item(query_family=f"refund {SURROGATE}")
    assert outcome(post(ingest_client, [item]))["status"] == "accepted"
    attempt = LearningAttempt.objects.get(client_id=item["id"])
    assert attempt.query_family == f"refund {FFFD}"
    assert attempt.replaced_characters == ["body.query_family"]
