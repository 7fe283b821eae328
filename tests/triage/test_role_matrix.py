"""Every POST of the triage screens, by every role: only the right roles succeed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.factories import failure_item, receipt_item
from triage.intake.ingest import batch_ingest
from triage.models import ApiKey, BulkAction, FailureGroup, Receipt, ToolPolicy
from triage.services import api_key_create

pytestmark = pytest.mark.django_db
ROLES = ("", "viewer", "reviewer", "operator", "admin")


def _world() -> dict[str, Any]:
    now = timezone.now().isoformat()
    batch_ingest(
        owner="matrix",
        items=[
            failure_item("f1", occurred_at=now),
            receipt_item("r1", result="uncertain", execution_state="started_unknown"),
        ],
    )
    group = FailureGroup.objects.get()
    bulk = BulkAction.objects.create(action="acknowledge", group_count=0, previous={})
    key, _ = api_key_create(name="matrix-key", scopes=["ingest"])
    policy = ToolPolicy.objects.create(collection="shop", tool="getOrder")
    return {"group": group, "bulk": bulk, "key": key, "policy": policy,
            "receipt": Receipt.objects.get()}  # fmt: skip


# (name, url, form data, roles that may do it)
POSTS: list[tuple[str, Callable[[dict[str, Any]], str], dict[str, str], set[str]]] = [
    ("group act", lambda w: f"/triage/groups/{w['group'].pk}/act", {"action": "acknowledge"},
     {"operator", "admin"}),
    ("bulk act", lambda w: "/triage/bulk", {"action": "acknowledge", "confirm_count": "1",
     "query": "window=24h"}, {"operator", "admin"}),
    ("bulk undo", lambda w: f"/triage/bulk/{w['bulk'].pk}/undo", {}, {"operator", "admin"}),
    ("reconcile", lambda w: f"/receipts/{w['receipt'].pk}/reconcile",
     {"finding": "applied", "note": "found it in the mail log"}, {"operator", "admin"}),
    ("create key", lambda w: "/ingestion/keys/new", {"name": "new-key", "scopes": "ingest"},
     {"admin"}),
    ("revoke key", lambda w: f"/ingestion/keys/{w['key'].pk}/revoke", {}, {"admin"}),
    ("create policy", lambda w: "/policies/new", {"collection": "shop", "tool": "newTool",
     "side_effect": "read", "timeout_before_send_lane": "retry_safe",
     "timeout_after_send_lane": "reconcile_first", "retry_max_attempts": "2",
     "retry_budget_failures": "3", "retry_budget_window_seconds": "300"}, {"admin"}),
    ("edit policy", lambda w: f"/policies/{w['policy'].pk}/edit", {"collection": "shop",
     "tool": "getOrder", "side_effect": "external_write",
     "timeout_before_send_lane": "retry_safe", "timeout_after_send_lane": "reconcile_first",
     "retry_max_attempts": "2", "retry_budget_failures": "3",
     "retry_budget_window_seconds": "300"}, {"operator", "admin"}),
]  # fmt: skip


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("name", "url", "data", "allowed"), POSTS, ids=[p[0] for p in POSTS])
def test_only_the_right_roles_may_post(
    client_as: Any, role: str, name: str, url: Any, data: dict[str, str], allowed: set[str]
) -> None:
    world = _world()
    response = client_as(role).post(url(world), data)
    if role in allowed:
        assert response.status_code in (200, 201, 302), (name, role, response.status_code)
    else:
        assert response.status_code == 403, (name, role, response.status_code)


@pytest.mark.parametrize(("name", "url", "data", "allowed"), POSTS, ids=[p[0] for p in POSTS])
def test_a_post_without_the_csrf_token_is_refused(
    client_as: Any, name: str, url: Any, data: dict[str, str], allowed: set[str]
) -> None:
    world = _world()
    client = client_as("admin", enforce_csrf_checks=True)
    assert client.post(url(world), data).status_code == 403
    assert ApiKey.objects.count() == 1 and ToolPolicy.objects.count() == 1


def test_anonymous_posts_are_sent_to_sign_in(db: Any) -> None:
    world = _world()
    for _, url, data, _ in POSTS:
        response = Client().post(url(world), data)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_failed_sign_ins_are_throttled(db: Any, settings: Any) -> None:
    from django.contrib.auth import get_user_model

    settings.AXES_FAILURE_LIMIT = 3
    get_user_model().objects.create_user("kim", password="the-right-passw0rd")
    client = Client()
    for _ in range(3):
        response = client.post("/accounts/login/", {"username": "kim", "password": "wrong"})
    assert response.status_code in (403, 429)
    assert "Too many failed sign-ins" in response.content.decode()
    locked = client.post("/accounts/login/", {"username": "kim", "password": "the-right-passw0rd"})
    assert "Too many failed sign-ins" in locked.content.decode()
    assert "_auth_user_id" not in client.session
