from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.models import FailureGroup, GroupStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def loaded(ingest_client: APIClient) -> APIClient:
    items = [
        failure_item(occurred_at="2026-11-01T10:00:00Z"),
        failure_item(occurred_at="2026-11-02T10:00:00Z", tool="getDelivery"),
        failure_item(
            stage="synthesize",
            reason="enum_required",
            tool="requestRefund",
            collection="refunds",
            occurred_at="2026-11-03T10:00:00Z",
            source="log",
        ),
    ]
    response = ingest_client.post(
        "/api/v1/ingest", data=json.dumps({"items": items}), content_type="application/json"
    )
    assert response.status_code == 200
    return ingest_client


def test_failures_are_listed_newest_first(loaded: APIClient) -> None:
    body = loaded.get("/api/v1/failures").json()
    assert [r["reason"] for r in body["results"]] == ["enum_required", "http_5xx", "http_5xx"]
    first = body["results"][0]
    assert first["lane"] == "input_stale" and first["taxonomy_version"]
    assert "next" in body and "previous" in body


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("stage=execute", 2),
        ("reason=enum_required", 1),
        ("collection=refunds", 1),
        ("tool=getDelivery", 1),
        ("lane=input_stale", 1),
        ("source=log", 1),
        ("execution_state=completed", 2),
        ("since=2026-11-02T00:00:00Z", 2),
        ("since=2026-11-02T00:00:00Z&until=2026-11-03T00:00:00Z", 1),
        ("status=open", 3),
    ],
)
def test_failures_can_be_filtered(loaded: APIClient, query: str, count: int) -> None:
    assert len(loaded.get(f"/api/v1/failures?{query}").json()["results"]) == count


def test_groups_can_be_filtered_by_status_and_facets(loaded: APIClient) -> None:
    assert len(loaded.get("/api/v1/groups").json()["results"]) == 3
    FailureGroup.objects.filter(reason="enum_required").update(status=GroupStatus.RESOLVED)
    resolved = loaded.get("/api/v1/groups?status=resolved").json()["results"]
    assert [g["reason"] for g in resolved] == ["enum_required"]
    by_source = loaded.get("/api/v1/groups?source=log").json()["results"]
    assert [g["tool"] for g in by_source] == ["requestRefund"]


def test_pages_are_cursor_paginated(loaded: APIClient) -> None:
    page = loaded.get("/api/v1/failures?page_size=2").json()
    assert len(page["results"]) == 2 and page["next"]
    rest = loaded.get(page["next"]).json()
    assert len(rest["results"]) == 1


def test_a_bad_filter_is_400_with_the_field(loaded: APIClient) -> None:
    response = loaded.get("/api/v1/failures?lane=sideways")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "lane"
    response = loaded.get("/api/v1/groups?since=yesterday")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "since"


def test_reading_needs_the_read_scope(make_api_key: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('writer', scopes=('ingest',))}")
    response = client.get("/api/v1/failures")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "missing_scope"
    assert APIClient().get("/api/v1/groups").status_code == 401


def test_a_signed_in_person_can_read_but_not_ingest(user_with_role: Any) -> None:
    client = APIClient()
    client.force_login(user_with_role("viewer"))
    assert client.get("/api/v1/groups").status_code == 200
    response = client.post("/api/v1/ingest", data={"items": []}, format="json")
    assert response.status_code == 401
    client.force_login(user_with_role(""))  # signed in, but no role: reads nothing
    response = client.get("/api/v1/groups")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "missing_role"


def test_schema_and_offline_docs_are_served(client: Any) -> None:
    schema = client.get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert {"/api/v1/ingest", "/api/v1/failures", "/api/v1/groups"} <= set(paths)
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "cdn" not in html.lower() and "/static/drf_spectacular_sidecar/" in html


def test_healthz(client: Any) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
