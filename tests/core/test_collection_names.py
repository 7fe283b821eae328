"""One rule for collection names wherever they enter, and pages that carry any stored name."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any
from unittest import mock
from urllib.parse import unquote

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import resolve, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from core.collection_names import (
    COLLECTION_NAME_MAX_LENGTH,
    INVALID_COLLECTION_NAME,
    CollectionNameError,
    check_collection_name,
    collection_name_problem,
)
from learning.models import LearningAttempt
from qualitylab import demo
from qualitylab import services as lab
from qualitylab.admin import CollectionAdmin
from qualitylab.models import Collection
from tests.factories import failure_item, receipt_item
from tests.learning.conftest import attempt_item
from triage.models import FailureGroup, FailureRecord, Receipt, ToolPolicy

REAL_IDS = ("checkout.v2", "team a", "체크아웃", "shop", "a/b", "50%off", "..", "x" * 100)
REFUSED = ("", " shop", "shop ", "a\x00b", "a\nb", "tab\there", "rtl\u202eevil", "zero\u200bwidth",
           "x" * 101, "\ud800")  # fmt: skip


@pytest.mark.parametrize("name", REAL_IDS)
def test_real_ids_are_names(name: str) -> None:
    assert collection_name_problem(name) is None
    assert check_collection_name(name) == name


@pytest.mark.parametrize("name", [*REFUSED, None, 5, ["shop"]])
def test_what_cannot_be_stored_or_shown_is_refused(name: Any) -> None:
    assert collection_name_problem(name)
    with pytest.raises(CollectionNameError) as refused:
        check_collection_name(name)
    assert refused.value.code == INVALID_COLLECTION_NAME


def test_the_rule_needs_nothing_of_django() -> None:
    """The client and the doors can use it as it is: it loads without Django."""
    check = (
        "import sys, core.collection_names as rule; "
        "assert rule.check_collection_name('team a') == 'team a'; "
        "assert not [m for m in sys.modules if m.startswith('django')], 'django loaded'"
    )
    subprocess.run([sys.executable, "-c", check], check=True, cwd=settings.BASE_DIR)


# --- ingest ----------------------------------------------------------------------------------


def _post(client: APIClient, *items: dict[str, Any]) -> Any:
    return client.post(
        "/api/v1/ingest", data=json.dumps({"items": list(items)}), content_type="application/json"
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("length", [101, 150, 200])
def test_an_over_long_name_in_a_batch_is_rejected_alone(
    ingest_client: APIClient, length: int
) -> None:
    """On PostgreSQL a 101-200 character name used to overflow the collection column inside
    the batch's transaction: a 500 for every item of the batch."""
    long_name = "c" * length
    response = _post(
        ingest_client,
        failure_item("ok-1", collection="team a"),
        failure_item("long", collection=long_name),
        receipt_item("long-receipt", collection=long_name),
        attempt_item("long-attempt", collection_id=long_name),
        failure_item("ok-2", collection="체크아웃"),
    )
    assert response.status_code == 207
    body = response.json()
    assert [item["status"] for item in body["items"]] == [
        "accepted", "rejected", "rejected", "rejected", "accepted",
    ]  # fmt: skip
    for item in body["items"][1:4]:
        assert item["error"]["code"] == INVALID_COLLECTION_NAME
        assert item["error"]["field"] in ("body.collection", "body.collection_id")
        assert long_name not in item["error"]["message"]
    assert set(FailureRecord.objects.values_list("collection", flat=True)) == {"team a", "체크아웃"}
    assert set(Collection.objects.values_list("name", flat=True)) == {"team a", "체크아웃"}
    assert not Receipt.objects.exists() and not LearningAttempt.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", [name for name in REFUSED[:-1] if name])
def test_every_item_type_refuses_a_bad_name_with_the_same_code(
    ingest_client: APIClient, name: str
) -> None:
    response = _post(
        ingest_client,
        failure_item("f", collection=name),
        receipt_item("r", collection=name),
        attempt_item("a", collection_id=name),
        {"type": "runner_event", "id": "e", "body": {"type": "step.failed", "collection": name,
                                                    "plan_id": "p", "step_id": "s"}},
    )  # fmt: skip
    codes = [item.get("error", {}).get("code") for item in response.json()["items"]]
    assert codes == [INVALID_COLLECTION_NAME] * 4


# --- pages -----------------------------------------------------------------------------------


@pytest.fixture
def named_by_runtimes(ingest_client: APIClient) -> list[str]:
    """Collections registered by a failure and by a learning attempt, with real ids."""
    with mock.patch("learning.tasks.derive_suggestions.apply_async"):
        response = _post(
            ingest_client,
            failure_item("f1", collection="team a"),
            failure_item("f2", collection="checkout.v2"),
            attempt_item("a1", collection_id="체크아웃"),
            failure_item("f3", collection="a/b"),
            failure_item("f4", collection="50%off"),
            failure_item("f5", collection=".."),
        )
    assert response.status_code == 200, response.content
    return ["team a", "checkout.v2", "체크아웃", "a/b", "50%off", ".."]


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["viewer", "operator", "reviewer", "admin"])
def test_pages_list_and_link_collections_of_any_name(
    client_as: Any, named_by_runtimes: list[str], role: str
) -> None:
    client = client_as(role)
    for page in ("/qualitylab/", "/learning/", "/"):
        assert client.get(page).status_code == 200, page
    for name in named_by_runtimes:
        url = reverse("qualitylab:collection", args=[name])
        # The server decodes the path once before resolving it, as a browser's request is.
        assert resolve(unquote(url)).kwargs["name"] == name
        assert "/../" not in url and url.count("/") == 3  # one segment, never a dot segment
        assert client.get(url).status_code == 200, url
        policy = reverse("learning:policy", args=[name])
        assert resolve(unquote(policy)).kwargs["name"] == name
    html = client.get("/qualitylab/").content.decode()
    assert 'href="/qualitylab/team%20a/"' in html
    assert 'href="/qualitylab/%EC%B2%B4%ED%81%AC%EC%95%84%EC%9B%83/"' in html
    assert 'href="/qualitylab/a%252Fb/"' in html


@pytest.mark.django_db
def test_a_name_stored_before_the_rule_still_shows(client_as: Any) -> None:
    """The rule did not exist when these were stored: the pages still render and link them."""
    for name in ("tab\there", "trailing ", "rtl\u202eevil"):
        Collection.objects.create(name=name)
    client = client_as("admin")
    for page in ("/qualitylab/", "/learning/"):
        assert client.get(page).status_code == 200
    assert client.get(reverse("qualitylab:collection", args=["trailing "])).status_code == 200


@pytest.mark.django_db
def test_the_quality_lab_form_takes_a_real_id(client_as: Any) -> None:
    client = client_as("operator")
    with mock.patch("qualitylab.services._send"):
        response = client.post(
            "/qualitylab/collections/new",
            {"name": "checkout.v2", "spec_paste": demo.SPEC_PATH.read_text()},
        )
        assert response.status_code == 302
        assert response["Location"] == "/qualitylab/checkout.v2/"
        refused = client.post(
            "/qualitylab/collections/new",
            {"name": "x" * (COLLECTION_NAME_MAX_LENGTH + 1), "spec_paste": "openapi: 3.0.0"},
        )
    assert refused.status_code == 400
    export = client.get("/qualitylab/checkout.v2/cases/export.json")
    assert export["Content-Disposition"] == 'attachment; filename="checkout.v2-cases.json"'


@pytest.mark.django_db
def test_the_tool_policy_form_refuses_what_ingest_refuses(client_as: Any) -> None:
    client = client_as("admin")
    post = {"tool": "getOrder", "side_effect": "read", "timeout_before_send_lane": "retry_safe",
            "timeout_after_send_lane": "reconcile_first", "retry_max_attempts": "2",
            "retry_budget_failures": "3", "retry_budget_window_seconds": "300"}  # fmt: skip
    assert client.post("/policies/new", {**post, "collection": "team\nb"}).status_code == 400
    assert client.post("/policies/new", {**post, "collection": "team a"}).status_code == 302
    assert ToolPolicy.objects.get().collection == "team a"


@pytest.mark.django_db
def test_the_command_line_refuses_what_ingest_refuses(tmp_path: Any) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(demo.SPEC_PATH.read_text())
    with pytest.raises(CommandError, match="not a collection name"):
        call_command("qualitylab", "import-collection", "bad\tname", str(spec))
    with mock.patch("qualitylab.services._send"):
        call_command("qualitylab", "import-collection", "team a", str(spec))
    assert Collection.objects.filter(name="team a").exists()


# --- renaming --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_renaming_moves_everything_that_names_the_collection(
    named_by_runtimes: list[str],
) -> None:
    collection = Collection.objects.get(name="team a")
    ToolPolicy.objects.create(collection="team a", tool="getOrder")
    changed = lab.collection_rename(collection=collection, new_name="team-a")
    assert changed == 3  # a group, its record, a policy
    assert Collection.objects.get(pk=collection.pk).name == "team-a"
    assert FailureGroup.objects.get(collection="team-a").count == 1
    assert not FailureRecord.objects.filter(collection="team a").exists()
    assert ToolPolicy.objects.get().collection == "team-a"
    with pytest.raises(lab.CollectionError, match="exists already"):
        lab.collection_rename(collection=collection, new_name="checkout.v2")
    with pytest.raises(lab.CollectionError):
        lab.collection_rename(collection=collection, new_name="bad\nname")


@pytest.mark.django_db
def test_an_admin_renames_a_collection_stored_before_the_rule(admin_client: Client) -> None:
    """Django's admin (superusers): the rename action asks for the new name, then renames."""
    bad = Collection.objects.create(name="tab\there")
    now = timezone.now()
    FailureGroup.objects.create(
        collection="tab\there", stage="execute", reason="timeout", first_seen=now, last_seen=now
    )
    changelist = "/admin/qualitylab/collection/"
    action = {"action": "rename_collection", "_selected_action": [bad.pk]}
    asked = admin_client.post(changelist, action)
    assert asked.status_code == 200 and b"New name" in asked.content
    refused = admin_client.post(changelist, {**action, "apply": "1", "new_name": "still\tbad"})
    assert refused.status_code == 400
    done = admin_client.post(changelist, {**action, "apply": "1", "new_name": "tab here"})
    assert done.status_code == 302
    assert Collection.objects.get(pk=bad.pk).name == "tab here"
    assert FailureGroup.objects.get().collection == "tab here"
    assert CollectionAdmin.has_add_permission(CollectionAdmin(Collection, None), None) is False  # type: ignore[arg-type]
