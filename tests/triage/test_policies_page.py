from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import ToolPolicyFactory, failure_item
from triage.forms import ToolPolicyForm
from triage.models import FailureRecord, ToolPolicy

pytestmark = pytest.mark.django_db
URL = "/policies/"
CREATE_URL = "/policies/new"


def make_policy(**fields: Any) -> ToolPolicy:
    policy: ToolPolicy = ToolPolicyFactory.create(**fields)
    return policy


def signed_in(user_with_role: Callable[..., User], role: str) -> Client:
    client = Client()
    client.force_login(user_with_role(role))
    return client


def policy_data(policy: ToolPolicy | None = None, **changes: Any) -> dict[str, Any]:
    """The form's POST data: the policy's current values (or the defaults) with changes."""
    form = ToolPolicyForm(instance=policy or ToolPolicy(tool="sendInvoice"))
    data = {name: form[name].value() for name in form.fields}
    data.update(changes)
    return {key: value for key, value in data.items() if value not in (False, None)}


def ingest_timeout(api_client: APIClient, tool: str) -> FailureRecord:
    item = failure_item(
        stage="execute",
        reason="timeout",
        tool=tool,
        collection="shop",
        message="read timed out",
        evidence={"timeout_ms": 30000},
    )
    response = api_client.post(
        "/api/v1/ingest", data=json.dumps({"items": [item]}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return FailureRecord.objects.get(client_id=item["id"])


def test_a_viewer_sees_the_policies_but_no_way_to_change_them(
    user_with_role: Callable[..., User],
) -> None:
    policy = make_policy(collection="", tool="sendInvoice", side_effect="external_write")
    client = signed_in(user_with_role, "viewer")
    response = client.get(URL)
    assert response.status_code == 200
    assert "triage/policies.html" in [template.name for template in response.templates]
    content = response.content.decode()
    assert "sendInvoice" in content and "all collections" in content
    assert f"/policies/{policy.pk}/edit" not in content and "/policies/new" not in content
    assert client.get(f"/policies/{policy.pk}/edit").status_code == 403
    changed = policy_data(policy, side_effect="read")
    assert client.post(f"/policies/{policy.pk}/edit", changed).status_code == 403
    assert client.post(CREATE_URL, policy_data(tool="other")).status_code == 403
    policy.refresh_from_db()
    assert policy.side_effect == "external_write" and ToolPolicy.objects.count() == 1


def test_anonymous_people_are_sent_to_sign_in(client: Client) -> None:
    for url in (URL, CREATE_URL):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_an_operator_may_edit_but_only_an_admin_may_add(
    user_with_role: Callable[..., User],
) -> None:
    policy = make_policy(tool="sendInvoice")
    operator = signed_in(user_with_role, "operator")
    content = operator.get(URL).content.decode()
    assert f'href="/policies/{policy.pk}/edit"' in content
    assert 'href="/policies/new"' not in content
    assert operator.get(CREATE_URL).status_code == 403
    admin = signed_in(user_with_role, "admin")
    assert 'href="/policies/new"' in admin.get(URL).content.decode()
    assert admin.get(CREATE_URL).status_code == 200


def test_an_edited_policy_classifies_the_next_timeout(
    user_with_role: Callable[..., User], ingest_client: APIClient
) -> None:
    policy = make_policy(collection="shop", tool="sendInvoice", side_effect="read")
    assert ingest_timeout(ingest_client, "sendInvoice").lane == "retry_safe"

    operator = signed_in(user_with_role, "operator")
    form_page = operator.get(f"/policies/{policy.pk}/edit")
    assert form_page.status_code == 200
    assert "triage/policy_form.html" in [template.name for template in form_page.templates]
    response = operator.post(
        f"/policies/{policy.pk}/edit", policy_data(policy, side_effect="external_write")
    )
    assert response.status_code == 302
    assert response["Location"] == "/policies/?q=sendInvoice"
    assert ingest_timeout(ingest_client, "sendInvoice").lane == "reconcile_first"

    policy.refresh_from_db()
    operator.post(
        f"/policies/{policy.pk}/edit",
        policy_data(policy, timeout_after_send_lane="manual_investigation"),
    )
    assert ingest_timeout(ingest_client, "sendInvoice").lane == "manual_investigation"


def test_approval_turns_auth_preflight_failures_into_policy_blocked(
    user_with_role: Callable[..., User], ingest_client: APIClient
) -> None:
    admin = signed_in(user_with_role, "admin")
    data = policy_data(tool="publishRelease", side_effect="external_write", approval_required="on")
    assert admin.post(CREATE_URL, data).status_code == 302
    item = failure_item(
        stage="auth_preflight", reason="auth_profile_missing", tool="publishRelease", evidence={}
    )
    ingest_client.post(
        "/api/v1/ingest", data=json.dumps({"items": [item]}), content_type="application/json"
    )
    assert FailureRecord.objects.get(client_id=item["id"]).lane == "policy_blocked"


@pytest.mark.parametrize("collection", ["shop", ""])
def test_a_duplicate_policy_is_a_form_error_not_a_crash(
    user_with_role: Callable[..., User], collection: str
) -> None:
    existing = make_policy(collection=collection, tool="sendInvoice")
    admin = signed_in(user_with_role, "admin")
    response = admin.post(CREATE_URL, policy_data(collection=collection, tool="sendInvoice"))
    assert response.status_code == 400
    content = response.content.decode()
    assert "Tool policy with this Collection and Tool already exists." in content
    assert f'href="/policies/{existing.pk}/edit"' in content  # where to go instead
    assert ToolPolicy.objects.count() == 1


def test_editing_a_policy_into_another_ones_pair_is_refused(
    user_with_role: Callable[..., User],
) -> None:
    make_policy(collection="shop", tool="sendInvoice")
    other = make_policy(collection="shop", tool="getOrder")
    operator = signed_in(user_with_role, "operator")
    response = operator.post(f"/policies/{other.pk}/edit", policy_data(other, tool="sendInvoice"))
    assert response.status_code == 400
    assert "already exists" in response.content.decode()
    other.refresh_from_db()
    assert other.tool == "getOrder"


def test_invalid_values_are_shown_next_to_their_fields(user_with_role: Any) -> None:
    admin = signed_in(user_with_role, "admin")
    response = admin.post(
        CREATE_URL, policy_data(tool="", timeout_after_send_lane="sideways", retry_max_attempts=-1)
    )
    assert response.status_code == 400
    form = response.context["form"]
    assert set(form.errors) == {"tool", "timeout_after_send_lane", "retry_max_attempts"}
    assert "Select a valid choice." in response.content.decode()
    assert not ToolPolicy.objects.exists()


def test_the_filter_matches_collection_or_tool_and_htmx_gets_the_table(
    user_with_role: Callable[..., User],
) -> None:
    make_policy(collection="shop", tool="sendInvoice")
    make_policy(collection="billing", tool="refund")
    client = signed_in(user_with_role, "viewer")
    content = client.get(URL, {"q": "BILL"}).content.decode()
    assert "refund" in content and "sendInvoice" not in content
    partial = client.get(URL, {"q": "invoice"}, headers={"HX-Request": "true"})
    text = partial.content.decode()
    assert text.lstrip().startswith('<div id="policy-table"')
    assert "sendInvoice" in text and "refund" not in text and "<html" not in text


def test_a_policy_post_without_the_csrf_token_is_refused(
    user_with_role: Callable[..., User],
) -> None:
    policy = make_policy(tool="sendInvoice", side_effect="read")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user_with_role("admin"))
    response = client.post(
        f"/policies/{policy.pk}/edit", policy_data(policy, side_effect="privileged")
    )
    assert response.status_code == 403
    policy.refresh_from_db()
    assert policy.side_effect == "read"
