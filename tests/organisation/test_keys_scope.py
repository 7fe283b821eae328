"""API keys scoped to collections or to a team (issue #31, point 3): every ingest door
refuses, item by item, what the key does not serve (`collection_not_allowed`, recorded in
the ledger) and stores the rest; a read key reads its collections only; the key page shows
each key's scope and its last use per collection."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from learning.models import LearningAttempt
from organisation.models import OwnedCollection, Team
from tests.factories import audit_item, failure_item, receipt_item, runner_event_item
from tests.learning.conftest import attempt_item
from triage.intake.ingest import COLLECTION_NOT_ALLOWED, batch_ingest
from triage.models import (
    ApiKey,
    ApiKeyCollectionUse,
    AuditEvent,
    FailureRecord,
    IngestBatch,
    IngestRejection,
    Receipt,
    Release,
    RunnerEvent,
)
from triage.services import api_key_create

pytestmark = pytest.mark.django_db


def key_client(**scope: Any) -> tuple[APIClient, ApiKey]:
    api_key, secret = api_key_create(name="scoped", scopes=["ingest", "read"], **scope)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client, api_key


def post(client: APIClient, *items: dict[str, Any]) -> Any:
    return client.post("/api/v1/ingest", {"items": list(items)}, format="json")


def refused(response: Any) -> dict[str, str]:
    """Item id -> error code of every item the answer refused."""
    return {
        item["id"]: item["error"]["code"]
        for item in response.json()["items"]
        if item["status"] != "accepted"
    }


def recorded_refusals() -> list[tuple[str, str, str]]:
    return sorted(IngestRejection.objects.values_list("client_id", "code", "field"))


def test_an_unscoped_key_serves_every_collection() -> None:
    client, api_key = key_client()
    response = post(client, failure_item("a", collection="shop"), failure_item("b", collection=""))
    assert response.status_code == 200
    assert api_key.collections == [] and api_key.team_id is None


@pytest.mark.services("postgres")
def test_on_postgresql_a_mixed_batch_stores_exactly_the_allowed_items() -> None:
    client, _ = key_client(collections=["shop", "billing"])
    items = [
        failure_item("f-shop", collection="shop"),
        failure_item("f-search", collection="search"),
        receipt_item("r-billing", collection="billing"),
        receipt_item("r-search", collection="search"),
        runner_event_item("e-search", collection="search"),
        audit_item("a-shop", collection="shop"),
        audit_item("a-none"),
        failure_item("f-billing", collection="billing", tool="charge"),
    ]
    response = post(client, *items)

    assert response.status_code == 207
    assert refused(response) == dict.fromkeys(
        ["f-search", "r-search", "e-search", "a-none"], COLLECTION_NOT_ALLOWED
    )
    assert set(FailureRecord.objects.values_list("collection", flat=True)) == {"shop", "billing"}
    assert FailureRecord.objects.count() == 2
    assert list(Receipt.objects.values_list("collection", flat=True)) == ["billing"]
    assert not RunnerEvent.objects.exists()
    assert list(AuditEvent.objects.values_list("collection", flat=True)) == ["shop"]
    assert recorded_refusals() == [
        ("a-none", COLLECTION_NOT_ALLOWED, "body.collection"),
        ("e-search", COLLECTION_NOT_ALLOWED, "body.collection"),
        ("f-search", COLLECTION_NOT_ALLOWED, "body.collection"),
        ("r-search", COLLECTION_NOT_ALLOWED, "body.collection"),
    ]
    batch = IngestBatch.objects.get()
    assert (batch.accepted, batch.rejected) == (4, 4)
    assert batch.rejected_by_code == {COLLECTION_NOT_ALLOWED: 4}


def test_each_door_refuses_a_collection_the_key_does_not_serve() -> None:
    """failure, envelope, runner event, receipt, audit event and learning attempt alike."""
    client, _ = key_client(collections=["shop"])
    envelope = {
        "type": "envelope",
        "id": "env-search",
        "body": {"status": "failed", "code": "TIMEOUT", "tool": "find", "collection": "search"},
    }
    response = post(
        client,
        failure_item("f-search", collection="search"),
        envelope,
        runner_event_item("e-search", collection="search"),
        receipt_item("r-search", collection="search"),
        audit_item("a-search", collection="search"),
        attempt_item("la-search", collection_id="search"),
        failure_item("f-shop", collection="shop"),
        attempt_item("la-shop", collection_id="shop"),
    )
    assert response.status_code == 207
    assert refused(response) == dict.fromkeys(
        ["f-search", "env-search", "e-search", "r-search", "a-search", "la-search"],
        COLLECTION_NOT_ALLOWED,
    )
    assert list(FailureRecord.objects.values_list("collection", flat=True)) == ["shop"]
    assert list(LearningAttempt.objects.values_list("collection__name", flat=True)) == ["shop"]
    assert len(recorded_refusals()) == 6


def test_the_otlp_door_refuses_a_span_of_another_collection() -> None:
    client, _ = key_client(collections=["shop"])

    def span(service: str, span_id: str) -> dict[str, Any]:
        return {
            "resource": {
                "attributes": [{"key": "service.name", "value": {"stringValue": service}}]
            },
            "scopeSpans": [{"spans": [{
                "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": span_id,
                "name": "execute_tool getOrder", "status": {"code": 2, "message": "HTTP 503"},
                "attributes": [{"key": "http.response.status_code", "value": {"intValue": "503"}}],
            }]}],
        }  # fmt: skip

    body = {"resourceSpans": [span("search", "b7ad6b7169203331"), span("shop", "b7ad6b7169203332")]}
    response = client.post("/v1/traces", json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    assert int(response.json()["partialSuccess"]["rejectedSpans"]) == 1
    assert COLLECTION_NOT_ALLOWED in response.json()["partialSuccess"]["errorMessage"]
    assert list(FailureRecord.objects.values_list("collection", flat=True)) == ["shop"]
    assert IngestRejection.objects.get().code == COLLECTION_NOT_ALLOWED


def test_a_release_of_another_collection_is_refused() -> None:
    client, _ = key_client(collections=["shop"])
    body = {"collection": "search", "version": "1.0", "deployed_at": "2026-03-02T09:00:00Z"}
    response = client.post("/api/v1/releases", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == COLLECTION_NOT_ALLOWED
    assert not Release.objects.exists()
    allowed = client.post("/api/v1/releases", {**body, "collection": "shop"}, format="json")
    assert allowed.status_code == 201


def test_a_team_key_serves_what_the_team_owns_now_and_later() -> None:
    team = Team.objects.create(name="checkout")
    OwnedCollection.objects.create(team=team, collection="shop")
    client, _ = key_client(team=team)
    first = post(
        client, failure_item("f1", collection="shop"), failure_item("f2", collection="cart")
    )
    assert refused(first) == {"f2": COLLECTION_NOT_ALLOWED}
    OwnedCollection.objects.create(team=team, collection="cart")
    second = post(client, failure_item("f3", collection="cart"))
    assert second.status_code == 200
    assert sorted(FailureRecord.objects.values_list("collection", flat=True)) == ["cart", "shop"]


def test_a_team_with_a_scoped_key_cannot_be_deleted() -> None:
    from organisation.teams import TeamError, team_delete

    team = Team.objects.create(name="checkout")
    key_client(team=team)
    with pytest.raises(TeamError, match="scoped"):
        team_delete(team=team, actor=None)
    assert Team.objects.filter(pk=team.pk).exists()
    assert ApiKey.objects.get().team_id == team.pk


def test_the_scope_is_read_once_per_batch(django_assert_max_num_queries: Any) -> None:
    team = Team.objects.create(name="checkout")
    OwnedCollection.objects.create(team=team, collection="shop")
    _, api_key = key_client(team=team)
    items = [failure_item(f"f{n}", collection="search") for n in range(30)]
    with django_assert_max_num_queries(12):
        outcome = batch_ingest(owner=api_key.owner, items=items, api_key=api_key)
    assert {item.error["code"] for item in outcome.items if item.error} == {COLLECTION_NOT_ALLOWED}


def test_a_read_key_reads_only_its_collections() -> None:
    batch_ingest(
        owner="runtime",
        items=[
            failure_item("f-shop", collection="shop"),
            failure_item("f-search", collection="search", tool="find"),
        ],
    )
    client, _ = key_client(collections=["shop"])
    groups = client.get("/api/v1/groups").json()["results"]
    failures = client.get("/api/v1/failures").json()["results"]
    assert {group["collection"] for group in groups} == {"shop"}
    assert {failure["collection"] for failure in failures} == {"shop"}


def test_last_use_is_kept_per_collection_and_touched_at_most_once_a_minute() -> None:
    client, api_key = key_client(collections=["shop", "billing"])
    post(client, failure_item("f1", collection="shop"), failure_item("f2", collection="search"))
    uses = dict(ApiKeyCollectionUse.objects.values_list("collection", "last_used_at"))
    assert set(uses) == {"shop"}  # a refused item is no use of its collection
    post(client, failure_item("f3", collection="shop"), receipt_item("r1", collection="billing"))
    again = dict(ApiKeyCollectionUse.objects.values_list("collection", "last_used_at"))
    assert again["shop"] == uses["shop"]
    earlier = timezone.now() - timedelta(minutes=5)
    ApiKeyCollectionUse.objects.update(last_used_at=earlier)
    post(client, failure_item("f4", collection="shop"))
    assert ApiKeyCollectionUse.objects.get(collection="shop").last_used_at > earlier
    assert ApiKeyCollectionUse.objects.get(collection="billing").last_used_at == earlier
    assert ApiKeyCollectionUse.objects.filter(api_key=api_key).count() == 2


def test_an_admin_creates_a_scoped_key_and_the_page_shows_scope_and_last_use(
    admin_client: Client,
) -> None:
    team = Team.objects.create(name="checkout")
    response = admin_client.post(
        "/ingestion/keys/new",
        {"name": "checkout-runtime", "scopes": ["ingest"], "collections": "shop\r\nbilling\r\n",
         "team": team.pk},
    )  # fmt: skip
    assert response.status_code == 201
    api_key = ApiKey.objects.get(name="checkout-runtime")
    assert (api_key.collections, api_key.team_id) == (["billing", "shop"], team.pk)
    ApiKeyCollectionUse.objects.create(
        api_key=api_key, collection="shop", last_used_at=timezone.now() - timedelta(hours=2)
    )
    html = admin_client.get("/ingestion/").content.decode()
    row = html[html.index("checkout-runtime") :].split("</tr>")[0].replace("\xa0", " ")
    assert "checkout" in row and "billing" in row and "shop" in row
    assert "key-uses" in row and "2 hours ago" in row


def test_the_key_form_refuses_a_bad_collection_name(admin_client: Client) -> None:
    response = admin_client.post(
        "/ingestion/keys/new", {"name": "k", "scopes": ["ingest"], "collections": "shop\x00x"}
    )
    assert response.status_code == 400
    assert not ApiKey.objects.exists()


def test_an_admin_changes_a_keys_scope_and_it_is_audited(admin_client: Client) -> None:
    from organisation.models import ActivityEntry

    _, api_key = key_client(collections=["shop"])
    response = admin_client.post(f"/ingestion/keys/{api_key.pk}/scope", {"collections": "cart"})
    assert response.status_code == 302
    api_key.refresh_from_db()
    assert api_key.collections == ["cart"]
    entry = ActivityEntry.objects.get(action="key.scope_changed")
    assert entry.actor_name == "admin"
    assert entry.detail == {
        "before": {"collections": ["shop"], "team": None},
        "after": {"collections": ["cart"], "team": None},
    }


def test_the_command_creates_a_scoped_key() -> None:
    Team.objects.create(name="checkout")
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "create_api_key", "cli-key", "--collection", "shop", "--collection", "cart",
        "--team", "checkout", stdout=out, stderr=err,
    )  # fmt: skip
    api_key = ApiKey.objects.get(name="cli-key")
    assert api_key.collections == ["cart", "shop"] and api_key.team is not None
    assert "serves: team checkout, cart, shop" in err.getvalue()
    assert out.getvalue().startswith("td_")


def test_the_command_refuses_an_unknown_team() -> None:
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="No team"):
        call_command("create_api_key", "cli-key", "--team", "nobody", stderr=io.StringIO())
    assert not ApiKey.objects.exists()
