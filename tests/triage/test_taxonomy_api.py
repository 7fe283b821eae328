"""GET /api/v1/taxonomy, `triage.vocabulary.taxonomy.public_document()` and `manage.py taxonomy`."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from triage.intake.envelope import BUILTIN_ENVELOPE_CODES
from triage.models import ApiKey
from triage.vocabulary import taxonomy

URL = "/api/v1/taxonomy"
pytestmark = pytest.mark.django_db


def client_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


# --- the document ---------------------------------------------------------------------------


def test_the_document_lists_every_stage_reason_and_lane_in_order() -> None:
    document: dict[str, Any] = taxonomy.public_document()
    assert set(document) == {"version", "stages", "reasons", "lanes"}
    assert document["version"] == taxonomy.TAXONOMY_VERSION
    assert [stage["code"] for stage in document["stages"]] == list(taxonomy.STAGES)
    assert [reason["code"] for reason in document["reasons"]] == list(taxonomy.REASONS)
    assert [lane["code"] for lane in document["lanes"]] == list(taxonomy.LANES)
    timeout = next(reason for reason in document["reasons"] if reason["code"] == "timeout")
    assert timeout == {
        "code": "timeout",
        "stage": "execute",
        "lane": "retry_safe",
        "retryable": True,
        "api_called": "maybe",
        "execution_state": "started_unknown",
        "meaning": timeout["meaning"],
        "advice": timeout["advice"],
    }
    assert timeout["meaning"]["en"] == "The request exceeded its timeout."
    lanes = {lane["code"]: lane["next_action"] for lane in document["lanes"]}
    assert lanes == {
        "retry_safe": "retry_with_backoff",
        "reconcile_first": "query_by_idempotency_key",
        "input_stale": "refresh_inputs_and_replan",
        "policy_blocked": "request_approval",
        "manual_investigation": "stop_automation_and_investigate",
    }


def test_every_text_is_there_in_english_and_korean() -> None:
    document: dict[str, Any] = taxonomy.public_document()
    texts = [stage["title"] for stage in document["stages"]]
    texts += [reason[part] for reason in document["reasons"] for part in ("meaning", "advice")]
    texts += [lane["meaning"] for lane in document["lanes"]]
    for text in texts:
        assert set(text) == {"en", "ko"}
        assert text["en"] and text["ko"]
        # A missing Korean entry falls back to the English text: each must be its own.
        assert text["ko"] != text["en"], text["en"]
        assert any("\uac00" <= char <= "\ud7a3" for char in text["ko"]), text["ko"]


def test_the_document_does_not_depend_on_the_active_language() -> None:
    from django.utils import translation

    with translation.override("ko"):
        korean_request = taxonomy.public_document()
    assert korean_request == taxonomy.public_document()


def test_the_document_is_plain_json() -> None:
    document: dict[str, Any] = taxonomy.public_document()
    assert json.loads(json.dumps(document)) == document


# --- the endpoint ---------------------------------------------------------------------------


def test_an_ingest_key_reads_the_document_with_the_envelope_codes(
    make_api_key: Callable[..., str],
) -> None:
    response = client_with(make_api_key("runtime", scopes=("ingest",))).get(URL)
    assert response.status_code == 200
    body = response.json()
    assert {key: body[key] for key in ("version", "stages", "reasons", "lanes")} == (
        taxonomy.public_document()
    )
    assert body["envelope_codes"] == BUILTIN_ENVELOPE_CODES
    assert response["ETag"].startswith('"') and response["ETag"].endswith('"')
    assert "max-age=" in response["Cache-Control"] and "private" in response["Cache-Control"]


def test_a_read_key_and_a_signed_in_reader_may_read_it(
    make_api_key: Callable[..., str], client_as: Callable[[str], Client]
) -> None:
    assert client_with(make_api_key("reader", scopes=("read",))).get(URL).status_code == 200
    assert client_as("viewer").get(URL).status_code == 200
    nobody = client_as("").get(URL)
    assert nobody.status_code == 403 and nobody.json()["error"]["code"] == "missing_role"


def test_an_unchanged_document_is_answered_304_without_a_body(
    make_api_key: Callable[..., str],
) -> None:
    client = client_with(make_api_key())
    etag = client.get(URL)["ETag"]
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        response = client.get(URL, HTTP_IF_NONE_MATCH=header)
        assert response.status_code == 304, header
        assert response.content == b""
        assert response["ETag"] == etag and "max-age=" in response["Cache-Control"]
    assert client.get(URL, HTTP_IF_NONE_MATCH='"stale"').status_code == 200


def test_the_etag_follows_the_operators_code_table(make_api_key: Callable[..., str]) -> None:
    client = client_with(make_api_key())
    before = client.get(URL)["ETag"]
    with override_settings(TRIAGE_ENVELOPE_CODES={"VENDOR_BUSY": "http_5xx"}):
        response = client.get(URL, HTTP_IF_NONE_MATCH=before)
        assert response.status_code == 200
        assert response.json()["envelope_codes"]["VENDOR_BUSY"] == "http_5xx"
        assert response["ETag"] != before
    assert client.get(URL, HTTP_IF_NONE_MATCH=before).status_code == 304


def test_without_a_key_it_is_401(db: Any) -> None:
    response = APIClient().get(URL)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "missing_api_key"
    assert "WWW-Authenticate" in response


def test_a_key_without_ingest_or_read_scope_is_403(make_api_key: Callable[..., str]) -> None:
    key = make_api_key("scopeless")
    ApiKey.objects.filter(name="scopeless").update(scopes=[])
    response = client_with(key).get(URL)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "missing_scope"


def test_a_revoked_key_is_401(make_api_key: Callable[..., str]) -> None:
    key = make_api_key("gone")
    ApiKey.objects.filter(name="gone").update(revoked_at=timezone.now())
    response = client_with(key).get(URL)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "revoked_api_key"


def test_the_ingest_pool_serves_it_too(make_api_key: Callable[..., str]) -> None:
    with override_settings(ROOT_URLCONF="config.urls_ingest"):
        response = client_with(make_api_key()).get(URL)
    assert response.status_code == 200


def test_the_openapi_schema_describes_it_and_the_envelope_item(admin_client: Client) -> None:
    schema = admin_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/taxonomy"]["get"]
    assert operation["operationId"] == "taxonomy"
    assert {"200", "304", "401", "403"} <= set(operation["responses"])
    components = schema["components"]["schemas"]
    assert {"version", "stages", "reasons", "lanes", "envelope_codes"} <= set(
        components["Taxonomy"]["properties"]
    )
    item_types = json.dumps(components)
    assert '"envelope"' in item_types


# --- the command ----------------------------------------------------------------------------


def test_the_command_prints_what_the_endpoint_answers(make_api_key: Callable[..., str]) -> None:
    response = client_with(make_api_key()).get(URL)
    out = StringIO()
    call_command("taxonomy", stdout=out)
    assert json.loads(out.getvalue()) == response.json()
    compact, etag = StringIO(), StringIO()
    call_command("taxonomy", "--compact", stdout=compact)
    call_command("taxonomy", "--etag", stdout=etag)
    assert compact.getvalue().count("\n") == 1
    assert etag.getvalue().strip() == response["ETag"]
