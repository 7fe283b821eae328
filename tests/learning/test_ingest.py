"""learning_attempt items through POST /api/v1/ingest: scrubbed, idempotent, collection-scoped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from graph_tool_call.learning import build_trace_learning_record
from rest_framework.test import APIClient

from learning.models import LearningAttempt, Suggestion
from qualitylab.models import Collection, LearningMode
from tests.learning.conftest import attempt_item

pytestmark = pytest.mark.django_db

URL = "/api/v1/ingest"


def _post(client: APIClient, *items: dict[str, Any]) -> Any:
    return client.post(URL, {"items": list(items)}, format="json")


def test_an_attempt_is_stored_in_the_library_record_shape(
    ingest_client: APIClient, derive_on_commit: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = _post(ingest_client, attempt_item("a-1"))
    assert response.status_code == 200 and response.json()["accepted"] == 1
    attempt = LearningAttempt.objects.select_related("collection").get()
    expected = build_trace_learning_record(
        query="find refund-ready orders", collection_id="bo-dev", attempt_id="a-1",
        selected_target="getRefundableOrders", llm_target="getOrderDetail",
        plan_tools=["searchOrders", "getRefundableOrders"], success=True, latency_ms=1430,
        target_selector={"overrode_llm": True, "reason_codes": ["shape_match"]},
    )  # fmt: skip
    record = attempt.as_record()
    for key in (
        "query",
        "query_family",
        "query_fingerprint",
        "selected_target",
        "llm_target",
        "plan_tools",
        "success",
        "latency_ms",
        "target_selector",
        "collection_id",
    ):
        assert record[key] == expected[key], key  # fmt: skip
    assert attempt.source == "runtime" and attempt.client_id == "a-1"
    assert len(attempt.session_id_hash) == 32 and "session-raw-value" not in json.dumps(record)
    assert not attempt.carried_secret
    assert Suggestion.objects.count() == 2  # derived after commit


def test_an_attempt_with_a_secret_is_stored_scrubbed_and_flagged(
    ingest_client: APIClient, django_capture_on_commit_callbacks: Any, derive_on_commit: Any
) -> None:
    secret = "sk-live-51HqLyjWDarjtT1zdp7dc"
    item = attempt_item(
        query="refund for kim@example.com",
        target_selector={"note": f"Authorization: Bearer {secret}"},
        request_headers={"Authorization": f"Bearer {secret}"},
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(ingest_client, item).status_code == 200
    attempt = LearningAttempt.objects.get()
    # The same family the runtime computes from the raw query (the email is no part of it).
    raw = build_trace_learning_record(query="refund for kim@example.com", collection_id="bo-dev")
    assert attempt.query_fingerprint == raw["query_fingerprint"]
    stored = json.dumps(list(LearningAttempt.objects.values()), default=str)
    assert secret not in stored and "kim@example.com" not in stored
    assert attempt.carried_secret
    assert all(s.sensitive_evidence for s in Suggestion.objects.all())
    assert secret not in json.dumps(list(Suggestion.objects.values("data")), default=str)


def test_the_same_attempt_twice_is_a_duplicate_and_another_body_a_conflict(
    ingest_client: APIClient,
) -> None:
    assert _post(ingest_client, attempt_item("a-1")).json()["accepted"] == 1
    again = _post(ingest_client, attempt_item("a-1")).json()
    assert (again["accepted"], again["duplicates"]) == (0, 1)
    changed = _post(ingest_client, attempt_item("a-1", success=False))
    assert changed.status_code == 207
    assert changed.json()["items"][0]["status"] == "conflict"
    assert LearningAttempt.objects.count() == 1


def test_an_unknown_collection_is_registered_with_the_default_policy(
    ingest_client: APIClient,
) -> None:
    item = attempt_item(collection_id="runtime-only", success=False, failure_reason="timeout")
    assert _post(ingest_client, item).status_code == 200
    collection = Collection.objects.get(name="runtime-only")
    assert collection.learning_allowed and not collection.mutations_allowed
    assert collection.learning_mode == LearningMode.OBSERVE
    assert collection.current_version is None
    assert LearningAttempt.objects.get().collection == collection


def test_a_known_collection_keeps_its_policy(ingest_client: APIClient) -> None:
    Collection.objects.create(name="bo-dev", learning_mode=LearningMode.SHADOW,
                              mutations_allowed=True)  # fmt: skip
    _post(ingest_client, attempt_item())
    collection = Collection.objects.get(name="bo-dev")
    assert (collection.learning_mode, collection.mutations_allowed) == ("shadow", True)


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        ({"query": None}, "missing_field", "body.query"),
        ({"collection_id": None}, "missing_field", "body.collection"),
        ({"collection_id": "shop\nv2"}, "invalid_collection_name", "body.collection_id"),
        ({"collection_id": "x" * 101}, "invalid_collection_name", "body.collection_id"),
        ({"plan_tools": "searchOrders"}, "invalid_field", "body.plan_tools"),
        ({"success": "yes"}, "invalid_field", "body.success"),
        ({"latency_ms": -5}, "invalid_field", "body.latency_ms"),
        ({"trace_edges": {"source": "a"}}, "invalid_field", "body.trace_edges"),
        ({"query_fingerprint": "not hex!"}, "invalid_field", "body.query_fingerprint"),
        ({"created_at": "yesterday"}, "invalid_field", "body.created_at"),
    ],
)
def test_a_bad_attempt_is_rejected_naming_the_field(
    ingest_client: APIClient, change: dict[str, Any], code: str, field: str
) -> None:
    item = attempt_item()
    for key, value in change.items():
        if value is None:
            item["body"].pop(key)
        else:
            item["body"][key] = value
    response = _post(ingest_client, item, attempt_item())
    assert response.status_code == 207
    error = response.json()["items"][0]["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert LearningAttempt.objects.count() == 1  # the good one of the batch is stored


def test_only_quality_lab_may_say_an_attempt_came_from_quality_lab(
    ingest_client: APIClient,
) -> None:
    _post(ingest_client, attempt_item(source="quality_lab"))
    assert LearningAttempt.objects.get().source == "runtime"


def test_a_plan_stands_in_for_plan_tools_and_the_rest_is_kept(ingest_client: APIClient) -> None:
    item = attempt_item(plan={"steps": [{"tool": "searchOrders"}, {"tool": "getRefundableOrders"}]},
                        graph_tool_call_version="0.47.0")  # fmt: skip
    item["body"].pop("plan_tools")
    _post(ingest_client, item)
    attempt = LearningAttempt.objects.get()
    assert attempt.plan_tools == ["searchOrders", "getRefundableOrders"]
    assert attempt.extra["graph_tool_call_version"] == "0.47.0"
