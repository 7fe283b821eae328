from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import Count
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.models import ApiKey, IngestBatch, IngestRejection, RejectionCount
from triage.pages.ingestion import CURL_EXAMPLE_BODY

pytestmark = pytest.mark.django_db
URL = "/ingestion/"
CREATE_URL = "/ingestion/keys/new"
INGEST_URL = "/api/v1/ingest"
KEY_PATTERN = re.compile(r"td_[0-9a-f]{12}_[A-Za-z0-9_-]{32}")


@pytest.fixture
def viewer_client(client: Client, user_with_role: Callable[..., User]) -> Client:
    client.force_login(user_with_role("viewer"))
    return client


@pytest.fixture
def admin_client(client: Client, user_with_role: Callable[..., User]) -> Client:
    client.force_login(user_with_role("admin"))
    return client


def ingest(api_client: APIClient, items: list[Any]) -> Any:
    return api_client.post(
        INGEST_URL, data=json.dumps({"items": items}), content_type="application/json"
    )


def bearer(key: str) -> APIClient:
    api_client = APIClient()
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return api_client


def template_names(response: Any) -> list[str]:
    return [template.name for template in response.templates]


def make_batches(count: int) -> list[IngestBatch]:
    """Ledger rows straight in the table: the page reads nothing else of a batch."""
    api_key = ApiKey.objects.create(name="bulk", owner="bulk", lookup_id="bulk", secret_hash="x")
    start = timezone.now() - timedelta(hours=1)
    return IngestBatch.objects.bulk_create(
        IngestBatch(
            api_key=api_key,
            owner="bulk",
            received_at=start + timedelta(seconds=index),
            item_count=3,
            accepted=2,
            rejected=1,
            rejected_by_code={"missing_field": 1},
        )
        for index in range(count)
    )


def ledger_ids(content: str) -> list[int]:
    return [int(batch_id) for batch_id in re.findall(r'<tr id="batch-(\d+)"', content)]


# --- the page --------------------------------------------------------------------------------


def test_a_viewer_gets_the_full_page_with_every_section(viewer_client: Client) -> None:
    response = viewer_client.get(URL)
    assert response.status_code == 200
    assert "triage/ingestion.html" in template_names(response)
    content = response.content.decode()
    for anchor in ('id="ledger"', 'id="keys"', 'id="unmapped"', 'href="/policies/"'):
        assert anchor in content


def test_anonymous_people_are_sent_to_sign_in(client: Client) -> None:
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/ingestion/")


def test_the_ledger_shows_batches_ingested_through_the_api(
    viewer_client: Client, ingest_client: APIClient
) -> None:
    bad = {"type": "failure", "id": "bad-1", "body": {"reason": "http_5xx"}}
    assert ingest(ingest_client, [failure_item("good-1"), bad]).status_code == 207
    assert ingest(ingest_client, [failure_item("good-2")]).status_code == 200
    response = viewer_client.get(URL)
    content = response.content.decode()
    first, second = IngestBatch.objects.order_by("id")
    assert ledger_ids(content) == [second.pk, first.pk]  # newest first
    assert "runtime-a" in content
    assert '<span class="code">missing_field</span> 1' in content
    assert "Last 24 h: <strong>2</strong> batches" in content


def test_rejected_by_code_counts_every_rejection_of_every_batch(
    viewer_client: Client, ingest_client: APIClient
) -> None:
    no_stage = {"type": "failure", "body": {"reason": "http_5xx"}}
    ingest(ingest_client, [failure_item("same"), {**no_stage, "id": "bad-1"}])
    ingest(
        ingest_client,
        [
            failure_item("same", message="another body under the same id"),
            {**no_stage, "id": "bad-2"},
            {**no_stage, "id": "bad-3"},
            {"type": "nonsense", "id": "odd-1", "body": {}},
        ],
    )
    stored = dict(
        IngestRejection.objects.values("code").annotate(n=Count("id")).values_list("code", "n")
    )
    assert stored == {"missing_field": 3, "conflict": 1, "unknown_type": 1}
    assert dict(RejectionCount.objects.values_list("code", "count")) == stored
    content = viewer_client.get(URL).content.decode()
    assert (
        '<span class="code">missing_field</span> 3 · <span class="code">conflict</span> 1 · '
        '<span class="code">unknown_type</span> 1' in content
    )


def test_expanding_a_batch_lists_its_rejections_without_bodies(
    viewer_client: Client, ingest_client: APIClient
) -> None:
    bad = {"type": "failure", "id": "bad-1", "body": {"reason": "http_5xx", "tool": "secretTool"}}
    ingest(ingest_client, [failure_item("good-1"), bad])
    batch = IngestBatch.objects.get()
    content = viewer_client.get(URL, {"batch": batch.pk}).content.decode()
    assert 'class="batch-detail"' in content
    assert "bad-1" in content and "body.stage" in content and "stage is required." in content
    assert "secretTool" not in content  # no item body is stored, so none can be shown


def test_htmx_gets_only_the_ledger_and_a_plain_request_the_whole_page(
    viewer_client: Client, ingest_client: APIClient
) -> None:
    ingest(ingest_client, [failure_item()])
    partial = viewer_client.get(URL, headers={"HX-Request": "true"})
    content = partial.content.decode()
    assert partial.status_code == 200
    assert content.lstrip().startswith('<section id="ledger">')
    assert 'id="keys"' not in content and "<html" not in content
    full = viewer_client.get(URL).content.decode()
    assert "<html" in full and 'id="ledger"' in full


def test_the_ledger_pages_by_cursor_from_newest_to_oldest(viewer_client: Client) -> None:
    batches = make_batches(120)
    newest_first = [batch.pk for batch in reversed(batches)]
    seen: list[int] = []
    url = URL
    for _ in range(3):
        content = viewer_client.get(url).content.decode()
        seen += ledger_ids(content)
        older = re.search(r'href="/ingestion/\?before=(\d+)#ledger"', content)
        if older is None:
            break
        url = f"{URL}?before={older.group(1)}"
    assert seen == newest_first
    assert len(ledger_ids(viewer_client.get(f"{URL}?before={newest_first[49]}").content.decode()))
    assert "older →" not in content  # the last page


def test_a_cursor_that_is_not_a_number_is_a_form_error_over_the_first_page(
    viewer_client: Client,
) -> None:
    make_batches(3)
    for junk in ("1' OR 1=1", "²", "9" * 40, "0", "-5"):
        response = viewer_client.get(URL, {"before": junk, "batch": junk})
        assert response.status_code == 400
        html = response.content.decode()
        assert len(ledger_ids(html)) == 3
        assert "cannot show what the address asks for" in html and "Showing the newest" in html


@pytest.mark.parametrize("count", [5, 300])
def test_the_page_costs_the_same_queries_at_5_and_300_batches(
    viewer_client: Client, count: int, django_assert_max_num_queries: Any, make_api_key: Any
) -> None:
    make_batches(count)
    make_api_key("second", scopes=("read",))
    # 12: the keys' last use per collection is one more query, whatever the number of keys.
    with django_assert_max_num_queries(12):
        response = viewer_client.get(URL)
    assert len(ledger_ids(response.content.decode())) == min(count, 50)


# --- API keys --------------------------------------------------------------------------------


def test_an_admin_creates_a_key_that_is_shown_once_and_works(admin_client: Client) -> None:
    response = admin_client.post(CREATE_URL, {"name": "shop-runtime", "scopes": ["ingest"]})
    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    content = response.content.decode()
    keys = set(KEY_PATTERN.findall(content))
    assert len(keys) == 1
    (key,) = keys
    assert "Copy this key now" in content
    assert f"Authorization: Bearer {key}" in content  # the curl example uses it
    stored = ApiKey.objects.get(name="shop-runtime")
    _, lookup_id, secret = key.split("_", 2)
    assert stored.lookup_id == lookup_id
    assert stored.secret_hash == ApiKey.hash_secret(secret)
    assert secret not in json.dumps(list(ApiKey.objects.values()), default=str)
    assert key not in admin_client.get(URL).content.decode()  # once means once

    answer = bearer(key).post(INGEST_URL, data=CURL_EXAMPLE_BODY, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["accepted"] == 1


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"name": "taken", "scopes": ["ingest"]}, "already exists"),
        ({"name": "no-scope"}, "Scopes: This field is required."),
        ({"name": "not a slug!", "scopes": ["read"]}, "Name: Enter a valid"),
        (
            {"name": "zero-days", "scopes": ["read"], "expires_days": "0"},
            "Expires in (days): Ensure",
        ),
    ],
)
def test_bad_key_input_shows_the_form_errors_and_creates_nothing(
    admin_client: Client, make_api_key: Any, data: dict[str, Any], error: str
) -> None:
    make_api_key("taken")
    response = admin_client.post(CREATE_URL, data)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert ApiKey.objects.count() == 1
    assert not KEY_PATTERN.search(response.content.decode())


def test_revoking_a_key_makes_the_api_refuse_it(admin_client: Client, make_api_key: Any) -> None:
    key = make_api_key("old-runtime")
    assert ingest(bearer(key), [failure_item()]).status_code == 200
    api_key = ApiKey.objects.get(name="old-runtime")
    response = admin_client.post(f"/ingestion/keys/{api_key.pk}/revoke")
    assert response.status_code == 302
    assert response["Location"] == "/ingestion/#keys"
    api_key.refresh_from_db()
    assert api_key.revoked_at is not None
    refused = ingest(bearer(key), [failure_item()])
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "revoked_api_key"
    page = admin_client.get(URL).content.decode()
    assert f"/ingestion/keys/{api_key.pk}/revoke" not in page  # no button on a revoked key


def test_an_admin_sees_the_key_forms_and_a_viewer_only_the_table(
    admin_client: Client, make_api_key: Any, user_with_role: Callable[..., User]
) -> None:
    make_api_key("shown")
    api_key = ApiKey.objects.get()
    admin_page = admin_client.get(URL).content.decode()
    assert 'action="/ingestion/keys/new"' in admin_page
    assert f'action="/ingestion/keys/{api_key.pk}/revoke"' in admin_page
    assert 'data-confirm="Revoke shown?' in admin_page
    viewer = Client()
    viewer.force_login(user_with_role("viewer"))
    viewer_page = viewer.get(URL).content.decode()
    assert f"td_{api_key.lookup_id}_…" in viewer_page
    assert "/ingestion/keys/" not in viewer_page


@pytest.mark.parametrize("role", ["viewer", "operator", "reviewer"])
def test_only_admins_create_or_revoke_keys(
    client: Client, user_with_role: Callable[..., User], make_api_key: Any, role: str
) -> None:
    make_api_key("kept")
    api_key = ApiKey.objects.get()
    client.force_login(user_with_role(role))
    assert client.post(CREATE_URL, {"name": "sneaky", "scopes": ["ingest"]}).status_code == 403
    assert client.post(f"/ingestion/keys/{api_key.pk}/revoke").status_code == 403
    api_key.refresh_from_db()
    assert api_key.revoked_at is None and ApiKey.objects.count() == 1


def test_key_actions_need_post(admin_client: Client, make_api_key: Any) -> None:
    make_api_key("kept")
    api_key = ApiKey.objects.get()
    assert admin_client.get(CREATE_URL).status_code == 405
    assert admin_client.get(f"/ingestion/keys/{api_key.pk}/revoke").status_code == 405


def test_a_post_without_the_csrf_token_is_refused(user_with_role: Callable[..., User]) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user_with_role("admin"))
    response = client.post(CREATE_URL, {"name": "forged", "scopes": ["ingest"]})
    assert response.status_code == 403
    assert not ApiKey.objects.exists()


# --- unmapped reasons ------------------------------------------------------------------------


def test_an_unknown_reason_is_listed_with_a_link_to_the_triage_page(
    viewer_client: Client, ingest_client: APIClient
) -> None:
    items = [
        failure_item(reason="vendor_quota_dance", tool="a"),
        failure_item(reason="vendor_quota_dance", tool="b"),
        failure_item(reason="vendor_quota_dance", tool="b"),
    ]
    assert ingest(ingest_client, items).status_code == 200
    content = viewer_client.get(URL).content.decode()
    section = content[content.index('id="unmapped"') : content.index('id="keys"')]
    row = re.search(r"<tr>\s*<td[^>]*>execute</td>\s*<td[^>]*>vendor_quota_dance</td>(.*?)</tr>",
                    section, re.S)  # fmt: skip
    assert row is not None
    numbers = re.findall(r'<td class="num">(\d+)</td>', row.group(1))
    assert numbers == ["2", "3"]  # two groups (tools a and b), three records
    assert 'href="/?q=vendor_quota_dance&amp;status=all&amp;window=30d"' in row.group(1)
    assert "triage/vocabulary/taxonomy.py" in section
    assert "http_5xx" not in section  # known reasons are not in the queue


def test_adapter_reasons_are_listed_apart_from_the_unmapped_queue(viewer_client: Client) -> None:
    content = viewer_client.get(URL).content.decode()
    section = content[content.index('id="unmapped"') : content.index('id="keys"')]
    adapter = section[section.index('id="adapter-reasons"') :]
    assert '<td class="code">base_url_not_configured</td>' in adapter
    assert "its collection has no base URL" in adapter
    assert "lane-policy_blocked" in adapter


def test_an_otlp_batch_shows_its_skipped_spans_and_refused_spans_with_why(
    viewer_client: Client, make_api_key: Callable[..., str]
) -> None:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    from tests.triage.intake.otlp_helpers import FAILING_CALLS, export_request, record

    request = export_request(record([FAILING_CALLS["http_5xx"], FAILING_CALLS["http_4xx"]]))
    span = next(
        s
        for s in request.resource_spans[0].scope_spans[0].spans
        if s.name == "execute_tool getOrder"
    )
    span.attributes.extend(KeyValue(key=f"k{n}", value=AnyValue(int_value=n)) for n in range(1000))
    response = bearer(make_api_key()).post(
        "/v1/traces", data=request.SerializeToString(), content_type="application/x-protobuf"
    )
    assert response.status_code == 200
    batch = IngestBatch.objects.get()
    html = viewer_client.get(URL).content.decode()
    row = html[html.index(f'id="batch-{batch.pk}"') :]
    row = row[: row.index("</tr>")]
    assert ">otlp<" in row
    assert "(2 skipped)" in row  # the chat span and the agent span
    assert "too_many_attributes" in row
    detail = viewer_client.get(f"{URL}?batch={batch.pk}").content.decode()
    assert "2 skipped (spans that are not tool calls)" in detail
    assert f"{span.trace_id.hex()}:{span.span_id.hex()}" in detail
    assert "the limit is 256" in detail
