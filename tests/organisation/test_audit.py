"""The audit of people's actions (issue #31, point 4): who changed roles, keys, group
statuses, learning reviews and alert rules, and when; the admins' page and API; kept
through retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from organisation import audit
from organisation.models import ActivityEntry
from organisation.roles import ensure_role_group
from tests.factories import failure_item
from tests.learning.conftest import attempt_item, derive_on_commit, ingest_attempts
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, GroupAction
from triage.services import (
    api_key_create,
    api_key_revoke,
    bulk_action_undo,
    group_act,
    groups_bulk_act,
)
from triage.upkeep import retention

pytestmark = pytest.mark.django_db
__all__ = ["derive_on_commit", "ingest_attempts"]  # the learning tests' fixtures, used here


def person(name: str) -> Any:
    return get_user_model().objects.create_user(name)


def entries(action: str = "") -> list[tuple[str, str, str, str]]:
    rows = ActivityEntry.objects.order_by("id")
    if action:
        rows = rows.filter(action=action)
    return list(rows.values_list("actor_name", "action", "subject", "collection"))


# --- who changed what ------------------------------------------------------------------------


def test_roles_granted_and_removed_from_either_side_are_audited() -> None:
    kim, lee = person("kim"), person("lee")
    viewer, operator = ensure_role_group("viewer"), ensure_role_group("operator")
    ActivityEntry.objects.all().delete()
    with audit.acting_as(lee):
        kim.groups.add(viewer, operator)
        kim.groups.remove(viewer)
        operator.user_set.add(lee)
        kim.groups.clear()
    assert entries() == [
        ("lee", "role.granted", "kim", ""),
        ("lee", "role.granted", "kim", ""),
        ("lee", "role.removed", "kim", ""),
        ("lee", "role.granted", "lee", ""),
        ("lee", "role.removed", "kim", ""),
    ]
    roles = [entry.detail["role"] for entry in ActivityEntry.objects.order_by("id")]
    assert roles == ["operator", "viewer", "viewer", "operator", "operator"]


def test_a_role_given_on_the_django_admin_is_credited_to_the_admin(admin_client: Client) -> None:
    kim = person("kim")
    reviewer = ensure_role_group("reviewer")
    ActivityEntry.objects.all().delete()
    response = admin_client.post(
        f"/admin/auth/user/{kim.pk}/change/",
        {
            "username": "kim",
            "is_active": "on",
            "groups": [reviewer.pk],
            "date_joined_0": "2026-01-05",
            "date_joined_1": "09:00:00",
            "initial-date_joined_0": "2026-01-05",
            "initial-date_joined_1": "09:00:00",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert entries() == [("admin", "role.granted", "kim", "")]


def test_a_role_changed_by_a_command_has_no_person() -> None:
    kim = person("kim")
    ActivityEntry.objects.all().delete()
    kim.groups.add(Group.objects.create(name="viewer-2"))
    assert entries() == [("", "role.granted", "kim", "")]


def test_keys_created_and_revoked_are_audited() -> None:
    kim = person("kim")
    api_key, _ = api_key_create(name="shop", scopes=["ingest"], collections=["shop"], actor=kim)
    api_key_revoke(api_key=api_key, actor=kim)
    api_key_revoke(api_key=api_key, actor=kim)  # already revoked: nothing more happened
    assert entries() == [
        ("kim", "key.created", "key shop", ""),
        ("kim", "key.revoked", "key shop", ""),
    ]
    created = ActivityEntry.objects.get(action="key.created")
    assert created.detail == {"scopes": ["ingest"], "collections": ["shop"], "team": None}


def test_every_group_of_a_bulk_action_gets_its_entry_and_so_does_the_undo() -> None:
    kim = person("kim")
    batch_ingest(
        owner="runtime",
        items=[failure_item("f1", collection="shop"), failure_item("f2", collection="cart")],
    )
    groups = list(FailureGroup.objects.order_by("collection"))
    group_act(group=groups[0], actor=kim, action=GroupAction.ACKNOWLEDGE)
    group_act(group=groups[0], actor=kim, action=GroupAction.NOTE, note="looking")
    bulk = groups_bulk_act(
        groups=groups,
        actor=kim,
        action=GroupAction.MUTE,
        query="status=open",
        mute_count=5,
    )
    bulk_action_undo(bulk=bulk, actor=kim)
    assert [(action, collection) for _, action, _, collection in entries()] == [
        ("group.acknowledged", "cart"),
        ("group.muted", "cart"),
        ("group.muted", "shop"),
        ("group.action_undone", "cart"),
        ("group.action_undone", "shop"),
    ]
    muted = ActivityEntry.objects.filter(action="group.muted").first()
    assert muted is not None
    assert muted.detail["mute_count"] == 5 and muted.detail["bulk_action"] == bulk.pk


def test_resolve_reopen_and_assign_are_audited() -> None:
    kim, lee = person("kim"), person("lee")
    batch_ingest(owner="runtime", items=[failure_item("f1")])
    group = FailureGroup.objects.get()
    group_act(group=group, actor=kim, action=GroupAction.ASSIGN, assignee=lee)
    group_act(group=group, actor=kim, action=GroupAction.RESOLVE)
    group_act(group=group, actor=kim, action=GroupAction.REOPEN)
    assert [action for _, action, _, _ in entries()] == [
        "group.assigned",
        "group.resolved",
        "group.reopened",
    ]
    assert ActivityEntry.objects.get(action="group.assigned").detail["assignee"] == "lee"


def test_learning_reviews_are_audited_and_the_policys_decisions_are_not(
    ingest_attempts: Any,
) -> None:
    from learning import services
    from learning.models import Suggestion

    reviewer = person("rae")
    ingest_attempts(attempt_item("a1"), attempt_item("a2"))
    policy_entries = ActivityEntry.objects.count()
    suggestion = Suggestion.objects.get(type="plan_path")
    services.suggestion_reject(
        suggestion=suggestion, reviewer=reviewer, reason="unstable_target", note="two paths"
    )
    services.suggestion_reopen(suggestion=suggestion, reviewer=reviewer, reason="stable now")
    assert policy_entries == 0
    assert entries() == [
        ("rae", "suggestion.reviewed", f"suggestion {suggestion.pk}", "bo-dev"),
        ("rae", "suggestion.reviewed", f"suggestion {suggestion.pk}", "bo-dev"),
    ]
    decisions = [entry.detail["decision"] for entry in ActivityEntry.objects.order_by("id")]
    assert decisions == ["reject", "reopen"]


def test_alert_rules_created_changed_and_deleted_are_audited(client_as: Any) -> None:
    from alerts.models import Rule
    from alerts.services import channel_create

    channel, _ = channel_create(name="mail", kind="email", target="oncall@example.com")
    operator = client_as("operator")
    created = operator.post(
        "/alerts/rules/new",
        {"name": "shop-new", "kind": "new_group", "channels": [channel.pk],
         "min_interval_minutes": "60", "collection": "shop"},
    )  # fmt: skip
    assert created.status_code in (200, 302)
    rule = Rule.objects.get(name="shop-new")
    changed = operator.post(
        f"/alerts/rules/{rule.pk}/edit",
        {"name": "shop-new", "kind": "new_group", "channels": [channel.pk],
         "min_interval_minutes": "30", "collection": "shop"},
    )  # fmt: skip
    assert changed.status_code in (200, 302)
    assert operator.post(f"/alerts/rules/{rule.pk}/delete").status_code in (200, 302)
    assert [row for row in entries() if row[1].startswith("alert_rule.")] == [
        ("operator-user", "alert_rule.created", "alert rule shop-new", "shop"),
        ("operator-user", "alert_rule.changed", "alert rule shop-new", "shop"),
        ("operator-user", "alert_rule.deleted", "alert rule shop-new", "shop"),
    ]
    assert ActivityEntry.objects.get(action="alert_rule.changed").detail["changed"] == [
        "min_interval_minutes"
    ]


# --- kept through retention ------------------------------------------------------------------


def test_retention_never_prunes_the_audit() -> None:
    old = timezone.now() - timedelta(days=400)
    ActivityEntry.objects.create(action="group.muted", actor_name="kim", at=old)
    batch_ingest(owner="runtime", items=[failure_item("f1")])
    run = retention.records_prune(
        days=1, batch_size=50, channel="cli", now=timezone.now() + timedelta(days=30)
    )
    assert run.records_deleted == 1
    assert ActivityEntry.objects.filter(at=old, action="group.muted").exists()


# --- the page --------------------------------------------------------------------------------


@pytest.fixture
def many_entries() -> None:
    now = timezone.now()
    ActivityEntry.objects.bulk_create(
        ActivityEntry(
            actor_name="kim" if n % 2 else "lee",
            action="group.muted" if n % 3 else "key.created",
            subject=f"group {n}",
            at=now - timedelta(hours=n),
        )
        for n in range(120)
    )


def test_only_admins_see_the_audit_page(client_as: Any) -> None:
    assert client_as("admin").get("/organisation/audit/").status_code == 200
    for role in ("operator", "viewer", "reviewer", ""):
        assert client_as(role).get("/organisation/audit/").status_code == 403
    assert Client().get("/organisation/audit/").status_code == 302


def test_the_audit_page_filters_and_pages_with_its_filters_in_the_url(
    client_as: Any, many_entries: None
) -> None:
    admin = client_as("admin")
    ActivityEntry.objects.filter(action="role.granted").delete()
    response = admin.get("/organisation/audit/", {"person": "kim", "action": "group.muted"})
    assert response.status_code == 200
    rows = response.context["rows"]
    assert len(rows) == 40  # 60 of kim's, a third of them keys
    assert {(entry.actor_name, entry.action) for entry, _ in rows} == {("kim", "group.muted")}
    everything = admin.get("/organisation/audit/")
    html = everything.content.decode()
    assert "page 1 of 3" in html
    assert 'href="?page=2"' in html
    kim_only = admin.get("/organisation/audit/", {"person": "kim"}).content.decode()
    assert 'href="?person=kim&amp;page=2"' in kim_only
    second = admin.get("/organisation/audit/", {"person": "kim", "page": "2"})
    assert [entry.subject for entry, _ in second.context["rows"]][:1] == ["group 101"]


def test_the_audit_page_filters_by_day(client_as: Any) -> None:
    today = timezone.localdate()
    ActivityEntry.objects.create(action="team.created", subject="today")
    ActivityEntry.objects.create(
        action="team.created", subject="long ago", at=timezone.now() - timedelta(days=10)
    )
    admin = client_as("admin")
    ActivityEntry.objects.filter(action="role.granted").delete()
    response = admin.get("/organisation/audit/", {"since": today.isoformat()})
    assert [entry.subject for entry, _ in response.context["rows"]] == ["today"]
    until = (today - timedelta(days=5)).isoformat()
    response = admin.get("/organisation/audit/", {"until": until})
    assert [entry.subject for entry, _ in response.context["rows"]] == ["long ago"]


def test_the_audit_page_writes_details_as_people_read_them(client_as: Any) -> None:
    ActivityEntry.objects.create(
        action="key.created",
        subject="key runtime",
        detail={"scopes": ["ingest", "read"], "collections": [], "team": None, "limit": 3},
    )
    html = client_as("admin").get("/organisation/audit/", {"action": "key.created"})
    text = html.content.decode()
    assert "=ingest, read</span>" in text
    assert "collections</span>=—" in text and "team</span>=—" in text
    assert "limit</span>=3" in text
    assert "[" not in text.split("<tbody>")[1].split("</tbody>")[0]
    assert "None" not in text


def test_a_bad_filter_is_a_400_that_says_so(client_as: Any) -> None:
    response = client_as("admin").get("/organisation/audit/", {"action": "nope", "since": "x"})
    assert response.status_code == 400
    assert "cannot show what the address asks for" in response.content.decode()


# --- the API ---------------------------------------------------------------------------------


def test_the_audit_api_answers_admins_with_a_cursor(client_as: Any, many_entries: None) -> None:
    admin = client_as("admin")
    ActivityEntry.objects.filter(action="role.granted").delete()
    first = admin.get("/api/v1/audit", {"action": "key.created"})
    assert first.status_code == 200
    body = first.json()
    assert len(body["results"]) == 40
    assert {row["action"] for row in body["results"]} == {"key.created"}
    assert set(body["results"][0]) == {
        "id", "at", "actor", "action", "subject", "collection", "detail",
    }  # fmt: skip
    paged = admin.get("/api/v1/audit", {"page_size": 100}).json()
    assert len(paged["results"]) == 100 and paged["next"]
    rest = admin.get(paged["next"]).json()
    assert len(rest["results"]) == 20 and rest["next"] is None
    seen = [row["id"] for row in paged["results"] + rest["results"]]
    assert len(set(seen)) == 120


def test_the_audit_api_refuses_keys_and_people_who_are_not_admins(client_as: Any) -> None:
    _, secret = api_key_create(name="reader", scopes=["read", "ingest"])
    key = APIClient()
    key.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    refused = key.get("/api/v1/audit")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "missing_role"
    assert client_as("operator").get("/api/v1/audit").status_code == 403
    assert APIClient().get("/api/v1/audit").status_code == 401


def test_the_audit_api_says_which_filter_is_wrong(client_as: Any) -> None:
    response = client_as("admin").get("/api/v1/audit", {"since": "yesterday"})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "since"
