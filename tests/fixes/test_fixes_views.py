"""The fixes list and API, and the group page's resolve with a fix, as each role would use
them and with hostile values: errors are form errors or 400s with a stable code, never a 500
and never a half-recorded fix."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.messages import get_messages
from rest_framework.test import APIClient

from fixes.models import Fix
from tests.factories import failure_item
from triage.models import FailureGroup, GroupStatus, Release
from triage.services import runbook_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(ingest_client: APIClient) -> FailureGroup:
    response = ingest_client.post(
        "/api/v1/ingest",
        data=json.dumps({"items": [failure_item()]}),
        content_type="application/json",
    )
    assert response.status_code == 200
    return FailureGroup.objects.get()


def resolve(client: Any, group: FailureGroup, **fields: Any) -> tuple[Any, list[str]]:
    response = client.post(f"/fixes/resolve/{group.pk}", {"action": "resolve", **fields})
    return response, [str(message) for message in get_messages(response.wsgi_request)]


def test_a_plain_resolve_from_the_group_page_records_no_fix_and_can_be_undone(
    client_as: Any, group: FailureGroup
) -> None:
    operator = client_as("operator")
    response, said = resolve(operator, group)
    assert response.status_code == 302 and said == ["Resolve: done."]
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED and not Fix.objects.exists()
    page = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert 'id="group-undo"' in page


def test_a_resolve_in_a_release_with_a_fix_keeps_both(client_as: Any, group: FailureGroup) -> None:
    Release.objects.create(collection="shop", version="1.4", deployed_at="2026-03-02T09:00Z")
    response, said = resolve(
        client_as("operator"), group, resolve_in="release:1.4", fix_kind="tool_policy",
        note="budget 2 → 1",
    )  # fmt: skip
    assert response.status_code == 302, said
    group.refresh_from_db()
    assert (group.status, group.resolved_in_release) == (GroupStatus.RESOLVED, "1.4")
    fix = Fix.objects.get()
    assert fix.resolution is not None
    assert (fix.kind, fix.note, fix.resolution.data) == (
        "tool_policy",
        "budget 2 → 1",
        {"resolved_in_release": "1.4"},
    )


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"fix_kind": "code_change"}, "A code change needs its link"),
        ({"fix_kind": "code_change", "fix_url": "javascript:alert(1)"}, "full web address"),
        ({"fix_kind": "code_change", "fix_url": "https://me:pw@git.example.com/1"}, "password"),
        ({"fix_kind": "code_change", "fix_url": "https://x.example/" + "a" * 3000}, "Link"),
        ({"fix_kind": "drop_tables"}, "The fix"),
        ({"fix_kind": "runbook_step"}, "save the group's runbook first"),
        ({"fix_kind": "runbook_step", "runbook": "999999"}, "one of this group's runbooks"),
        ({"fix_kind": "runbook_step", "runbook": "9" * 40}, "Runbook"),
        ({"fix_kind": "other", "verify": "1"}, "No Quality Lab case was made from this group"),
        ({"verify": "1"}, "Say what the fix was"),
        ({"fix_kind": "other", "resolve_in": "release:9.9"}, "no release 9.9"),
        ({"fix_kind": "other", "verify": "1", "resolve_in": "release:9.9"}, "no release 9.9"),
    ],
)
def test_a_refused_fix_changes_nothing_and_says_why(
    client_as: Any, group: FailureGroup, fields: dict[str, str], error: str
) -> None:
    runbook_set(
        subject="tool", reason="", tool="someOtherTool", collection="", url="https://w/x",
        note="", actor=None,
    )  # fmt: skip
    response, said = resolve(client_as("operator"), group, **fields)
    assert response.status_code == 302
    assert any(error in message for message in said), said
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN and not Fix.objects.exists()


def test_a_runbook_step_names_the_groups_runbook(client_as: Any, group: FailureGroup) -> None:
    runbook_set(
        subject="reason", reason=group.reason, tool="", collection="", url="https://wiki/5xx",
        note="", actor=None,
    )  # fmt: skip
    response, said = resolve(client_as("operator"), group, fix_kind="runbook_step")
    assert response.status_code == 302, said
    fix = Fix.objects.get()
    assert fix.runbook is not None and fix.runbook.reason == group.reason


def test_people_who_may_not_act_cannot_resolve_or_verify(
    client_as: Any, group: FailureGroup
) -> None:
    for role in ("viewer", "reviewer"):
        response, _ = resolve(client_as(role), group, fix_kind="other")
        assert response.status_code == 403
    fix = Fix.objects.create(group=group, kind="other")
    assert client_as("viewer").post(f"/fixes/{fix.pk}/verify").status_code == 403
    assert client_as("operator").post("/fixes/99999999/verify").status_code == 404


def test_the_fixes_page_lists_and_tallies_and_refuses_bad_filters(
    client_as: Any, group: FailureGroup
) -> None:
    operator = client_as("operator")
    resolve(operator, group, fix_kind="code_change", fix_url="https://git.example.com/pr/1")
    viewer = client_as("viewer")
    page = viewer.get("/fixes/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "https://git.example.com/pr/1" in html and 'id="by-kind"' in html
    assert "measuring" in html
    for bad in (
        "days=0",
        "days=401",
        "days=x",
        "kind=nope",
        "verdict=nope",
        "runbook=-1",
        "group=" + "9" * 30,
        "collection=" + "%00",
        "tool=" + "a" * 300,
    ):
        assert viewer.get(f"/fixes/?{bad}").status_code == 400, bad
    assert viewer.get("/fixes/?kind=other").content.decode().count('id="fix-') == 0
    # Too short or too long, the message names both ends.
    for days in ("0", "401"):
        assert "The window is 1 to 400 days." in viewer.get(f"/fixes/?days={days}").content.decode()


def test_the_api_answers_the_same_and_refuses_with_codes(
    client_as: Any, group: FailureGroup, make_api_key: Any
) -> None:
    resolve(client_as("operator"), group, fix_kind="other", note="restart")
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('reader', scopes=('read',))}")
    body = reader.get("/api/v1/fixes").json()
    assert body["total"] == 1
    (fix,) = body["fixes"]
    assert (fix["kind"], fix["group"], fix["verdict"], fix["note"]) == (
        "other",
        group.pk,
        "measuring",
        "restart",
    )
    assert set(fix["spans"]) == {"day", "week"}
    assert body["by_kind"] == [
        {
            "kind": "other",
            "fixes": 1,
            "measuring": 1,
            "held": 0,
            "partly_held": 0,
            "not_held": 0,
            "unmeasurable": 0,
        }
    ]
    refused = reader.get("/api/v1/fixes?days=1000")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "max_value"
    assert refused.json()["error"]["field"] == "days"


def test_a_refused_resolve_keeps_the_release_chosen(client_as: Any, group: FailureGroup) -> None:
    Release.objects.create(collection="shop", version="1.4", deployed_at="2026-03-02T09:00Z")
    operator = client_as("operator")
    response, said = resolve(operator, group, resolve_in="release:1.4", fix_kind="code_change")
    assert response.status_code == 302 and any("needs its link" in message for message in said)
    page = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert '<option value="release:1.4" selected>' in page
