"""GET /api/v1/tool-policies: a collection's tool policies in seed 004's field names, for a
runtime's middleware to classify with what the desk's operators decided."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import ToolPolicyFactory
from triage.models import ToolPolicy
from triage.selectors import TOOL_POLICY_DOCUMENT_LIMIT

URL = "/api/v1/tool-policies"
pytestmark = pytest.mark.django_db


@pytest.fixture
def runtime(make_api_key: Callable[..., str]) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('billing', scopes=('ingest',))}")
    return client


def test_the_collections_own_policy_wins_over_the_one_for_every_collection(
    runtime: APIClient,
) -> None:
    ToolPolicyFactory(collection="", tool="send_invoice", side_effect="internal_write")
    ToolPolicyFactory(
        collection="billing",
        tool="send_invoice",
        side_effect="external_write",
        idempotency_required=True,
        idempotency_lookup="GET /invoices/{key}/deliveries",
        approval_required=True,
    )
    ToolPolicyFactory(collection="", tool="get_invoice", side_effect="read")
    ToolPolicyFactory(collection="shop", tool="get_order", side_effect="read")  # not billing's
    response = runtime.get(URL, {"collection": "billing"})
    assert response.status_code == 200
    body = response.json()
    assert body["collection"] == "billing" and body["truncated"] is False
    assert set(body["tools"]) == {"send_invoice", "get_invoice"}
    assert body["tools"]["send_invoice"] == {
        "side_effect": "external_write",
        "idempotency": {"required": True, "lookup": "GET /invoices/{key}/deliveries"},
        "timeout_policy": {"on_before_send": "retry_safe", "on_after_send": "reconcile_first"},
        "authority": {"approval_required": True},
    }
    assert body["tools"]["get_invoice"]["side_effect"] == "read"


def test_an_unchanged_answer_is_304_and_a_changed_policy_changes_the_etag(
    runtime: APIClient,
) -> None:
    ToolPolicyFactory(collection="billing", tool="send_invoice", side_effect="read")
    etag = runtime.get(URL, {"collection": "billing"})["ETag"]
    assert runtime.get(URL, {"collection": "billing"}, HTTP_IF_NONE_MATCH=etag).status_code == 304
    ToolPolicy.objects.filter(tool="send_invoice").update(side_effect="external_write")
    changed = runtime.get(URL, {"collection": "billing"}, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({}, "missing_field"),
        ({"collection": "a\nb"}, "invalid_field"),
        ({"collection": "x" * 300}, "invalid_field"),
    ],
)
def test_a_missing_or_impossible_collection_is_a_400(
    runtime: APIClient, query: dict[str, str], code: str
) -> None:
    response = runtime.get(URL, query)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, "collection")


def test_without_a_key_it_is_401_and_viewers_may_read_it(db: Any, client_as: Any) -> None:
    assert APIClient().get(URL, {"collection": "billing"}).status_code == 401
    assert client_as("viewer").get(URL, {"collection": "billing"}).status_code == 200


def test_the_answer_is_bounded(runtime: APIClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("triage.selectors.TOOL_POLICY_DOCUMENT_LIMIT", 3)
    for n in range(5):
        ToolPolicyFactory(collection="billing", tool=f"tool_{n}")
    body = runtime.get(URL, {"collection": "billing"}).json()
    assert len(body["tools"]) == 3 and body["truncated"] is True
    assert TOOL_POLICY_DOCUMENT_LIMIT >= 1000
