"""GET /api/v1/learning/suggestions: what runtimes pass to apply_learning_suggestions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from graph_tool_call.learning import apply_learning_suggestions
from rest_framework.test import APIClient

from learning import services
from tests.learning.conftest import attempt_item, suggestion

pytestmark = pytest.mark.django_db

URL = "/api/v1/learning/suggestions"
QUERY = "find refund-ready orders"
# Retrieval put the LLM's guess first and the right target a close second.
CANDIDATES = [
    {"name": "getOrderDetail", "score": 0.72},
    {"name": "getRefundableOrders", "score": 0.71},
    {"name": "listOrders", "score": 0.40},
]


@pytest.fixture
def reader(make_api_key: Callable[..., str]) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('reader', scopes=('read',))}")
    return client


@pytest.fixture
def reviewer(db: Any) -> Any:
    return get_user_model().objects.create(username="rita")


def _ranked(result: dict[str, Any]) -> list[str]:
    rows = sorted(result["candidates"], key=lambda row: -row["score"])
    return [row["name"] for row in rows]


def test_a_promoted_target_preference_moves_its_target_up(
    reader: APIClient, ingest_attempts: Any, reviewer: Any
) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    services.suggestion_approve(suggestion=suggestion(), reviewer=reviewer, reason="wins")
    response = reader.get(URL, {"collection": "bo-dev", "status": "promoted"})
    assert response.status_code == 200
    body = response.json()
    assert (body["registered"], body["status"], body["count"]) == (True, "promoted", 1)
    [exported] = body["suggestions"]
    assert exported["type"] == "target_preference" and exported["status"] == "promoted"
    assert exported["promoted_by"] == "rita" and exported["promotion_reason"] == "wins"
    assert _ranked(apply_learning_suggestions(QUERY, CANDIDATES, [], mode="promoted"))[0] == (
        "getOrderDetail"
    )
    result = apply_learning_suggestions(QUERY, CANDIDATES, body["suggestions"], mode="promoted")
    assert result["applied_count"] == 1
    assert _ranked(result)[:2] == ["getRefundableOrders", "getOrderDetail"]


def test_a_rejected_suggestion_changes_nothing(
    reader: APIClient, ingest_attempts: Any, reviewer: Any
) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    services.suggestion_reject(
        suggestion=suggestion(), reviewer=reviewer, reason="operator_rejected", note="no"
    )
    promoted = reader.get(URL, {"collection": "bo-dev", "status": "promoted"}).json()
    assert promoted["suggestions"] == []
    everything = reader.get(URL, {"collection": "bo-dev"}).json()
    rejected = [s for s in everything["suggestions"] if s["status"] == "rejected"]
    assert [s["rejection_reason"] for s in rejected] == ["operator_rejected"]
    for mode in ("promoted", "shadow"):
        result = apply_learning_suggestions(QUERY, CANDIDATES, rejected, mode=mode)
        assert result["applied_count"] == 0
        assert [row["score"] for row in result["candidates"]] == [0.72, 0.71, 0.40]


def test_without_status_every_suggestion_carries_its_own(
    reader: APIClient, ingest_attempts: Any
) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    ingest_attempts(attempt_item(query="list coupons", selected_target="listCoupons",
                                 plan_tools=["listCoupons"]))  # fmt: skip
    body = reader.get(URL, {"collection": "bo-dev"}).json()
    assert body["status"] is None and body["count"] == 4
    statuses = [s["status"] for s in body["suggestions"]]
    assert statuses == ["promotable", "promotable", "suggested", "suggested"]
    for exported in body["suggestions"]:
        assert {"id", "type", "target", "query_fingerprint", "observations", "evidence"} <= set(
            exported
        )


def test_an_unknown_collection_has_no_suggestions(reader: APIClient) -> None:
    body = reader.get(URL, {"collection": "nobody-knows"}).json()
    assert (body["registered"], body["suggestions"], body["learning_mode"]) == (False, [], None)


@pytest.mark.parametrize(
    ("params", "field"),
    [({}, "collection"), ({"collection": "bo-dev", "status": "active"}, "status")],
)
def test_bad_queries_name_the_field(reader: APIClient, params: dict[str, str], field: str) -> None:
    response = reader.get(URL, params)
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field


def test_the_export_needs_the_read_scope(make_api_key: Callable[..., str]) -> None:
    client = APIClient()
    assert client.get(URL, {"collection": "bo-dev"}).status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('w', scopes=('ingest',))}")
    response = client.get(URL, {"collection": "bo-dev"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "missing_scope"


def test_signed_in_people_can_read_it_in_the_browser(client_as: Any) -> None:
    assert client_as("viewer").get(URL, {"collection": "bo-dev"}).status_code == 200


def test_an_unchanged_answer_is_304_for_its_etag_and_a_change_makes_a_new_one(
    reader: APIClient, ingest_attempts: Any, reviewer: Any
) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    query = {"collection": "bo-dev", "status": "promoted"}
    first = reader.get(URL, query)
    etag = first.headers["ETag"]
    assert first.status_code == 200 and etag.startswith('"') and first.json()["count"] == 0

    again = reader.get(URL, query, HTTP_IF_NONE_MATCH=etag)
    assert (again.status_code, again.headers["ETag"], again.content) == (304, etag, b"")
    listed = reader.get(URL, query, HTTP_IF_NONE_MATCH=f'"other", W/{etag}')
    assert listed.status_code == 304

    services.suggestion_approve(suggestion=suggestion(), reviewer=reviewer, reason="wins")
    changed = reader.get(URL, query, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert changed.json()["count"] == 1


def test_a_stale_or_garbled_if_none_match_gets_the_full_answer(reader: APIClient) -> None:
    for header in ('"0000"', "*not an etag*", ",,,", "W/"):
        response = reader.get(URL, {"collection": "nowhere"}, HTTP_IF_NONE_MATCH=header)
        assert response.status_code == 200 and response.json()["registered"] is False
