"""Bodies the ingest parser refuses as a whole, through the real HTTP API."""

from __future__ import annotations

import gzip
import json
import logging
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.models import FailureRecord, IngestBatch, IngestRejection

URL = "/api/v1/ingest"
pytestmark = pytest.mark.django_db


def _nested_evidence(levels: int) -> str:
    item = failure_item("deep-1")
    body = json.dumps({"items": [item]})
    # {"evidence": {"evidence": ... 1 ...}} spliced in as text: json.dumps cannot build it.
    deep = '{"evidence": ' * levels + "1" + "}" * levels
    return body.replace('"evidence": {', f'"evidence": {deep}, "was": {{', 1)


@pytest.mark.parametrize(
    "body",
    [
        _nested_evidence(5_000),
        '{"items": [{"type": "failure", "id": "x", "body": {"evidence": '
        + "[" * 100_000
        + "]" * 100_000
        + "}}]}",
    ],
    ids=["5000-objects", "100000-lists"],
)
def test_deep_json_is_a_400_naming_the_limit(
    ingest_client: APIClient, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        response = ingest_client.post(URL, data=body, content_type="application/json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "json_too_deep"
    assert "deeper than 64 levels" in error["message"]
    assert "TRIAGE_JSON_MAX_DEPTH" in error["message"]
    assert not any(record.exc_info for record in caplog.records)  # no traceback logged
    assert not IngestBatch.objects.exists()


def test_deep_json_is_refused_after_gzip_too(ingest_client: APIClient) -> None:
    response = ingest_client.post(
        URL,
        data=gzip.compress(_nested_evidence(5_000).encode()),
        content_type="application/json",
        HTTP_CONTENT_ENCODING="gzip",
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "json_too_deep"


def test_the_limit_is_a_setting(ingest_client: APIClient, settings: Any) -> None:
    settings.TRIAGE_JSON_MAX_DEPTH = 8
    response = ingest_client.post(URL, data=_nested_evidence(5), content_type="application/json")
    assert response.status_code == 400
    assert "deeper than 8 levels" in response.json()["error"]["message"]


def test_a_body_under_the_limit_but_deeper_than_the_scrubber_keeps_is_refused_alone(
    ingest_client: APIClient,
) -> None:
    deep = json.loads(_nested_evidence(40))
    deep["items"].append(failure_item("shallow-1"))
    response = ingest_client.post(URL, data=json.dumps(deep), content_type="application/json")
    assert response.status_code == 207
    first, second = response.json()["items"]
    assert first["status"] == "rejected" and first["error"]["code"] == "scrub_failed"
    assert "nested deeper than 32 levels" in first["error"]["message"]
    assert second["status"] == "accepted"
    assert FailureRecord.objects.count() == 1


def test_a_number_python_cannot_read_is_invalid_json_not_a_500(ingest_client: APIClient) -> None:
    body = '{"items": [{"type": "failure", "id": ' + "9" * 5_000 + ', "body": {}}]}'
    response = ingest_client.post(URL, data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_an_over_long_id_is_refused_as_too_long_with_the_limit(ingest_client: APIClient) -> None:
    long_id = "run-" + "x" * 4_996
    items = [failure_item(long_id), failure_item("short-1")]
    response = ingest_client.post(
        URL, data=json.dumps({"items": items}), content_type="application/json"
    )
    assert response.status_code == 207
    refused, stored = response.json()["items"]
    assert refused["status"] == "rejected"
    assert refused["error"] == {
        "code": "id_too_long",
        "field": "id",
        "message": "id is 5000 characters long; the limit is 200.",
    }
    assert refused["id"] == long_id[:64] + "..."
    assert stored["status"] == "accepted"
    rejection = IngestRejection.objects.get()
    assert (rejection.code, rejection.client_id) == ("id_too_long", long_id[:64] + "...")


def test_an_id_of_exactly_the_limit_is_accepted(ingest_client: APIClient) -> None:
    response = ingest_client.post(
        URL, data=json.dumps({"items": [failure_item("x" * 200)]}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
