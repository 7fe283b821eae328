"""Quality Lab's own records: the owner `quality_lab` and the source `quality_lab` belong to the
desk. No API key may be named or owned after them, and no runtime may claim them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from tests.factories import failure_item, runner_event_item
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, batch_ingest
from triage.models import ApiKey, FailureRecord, IngestRejection
from triage.services import ApiKeyError, api_key_create

pytestmark = pytest.mark.django_db
URL = "/api/v1/ingest"


def post(client: APIClient, items: list[Any]) -> Any:
    return client.post(URL, data=json.dumps({"items": items}), content_type="application/json")


@pytest.mark.parametrize(
    ("name", "owner"),
    [("quality_lab", ""), ("Quality_Lab ", ""), ("my-runtime", "quality_lab")],
)
def test_no_api_key_is_named_or_owned_after_quality_lab(name: str, owner: str) -> None:
    with pytest.raises(ApiKeyError, match="reserved"):
        api_key_create(name=name, owner=owner, scopes=["ingest"])
    assert not ApiKey.objects.exists()


def test_the_cli_refuses_a_quality_lab_key(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CommandError, match="reserved"):
        call_command("create_api_key", "quality_lab", "--scopes", "ingest")
    assert not ApiKey.objects.exists()


def test_a_runtime_claiming_the_quality_lab_source_is_refused_per_item(
    ingest_client: APIClient,
) -> None:
    items = [
        failure_item("claims-ql", source="quality_lab"),
        runner_event_item("event-claims-ql", source="quality_lab"),
        failure_item("plain-runtime"),
        failure_item("says-log", source="log"),
    ]
    response = post(ingest_client, items)
    assert response.status_code == 207, response.content
    answered = {item["id"]: item for item in response.json()["items"]}
    for refused in ("claims-ql", "event-claims-ql"):
        assert answered[refused]["status"] == "rejected"
        assert answered[refused]["error"]["code"] == "reserved_source"
        assert answered[refused]["error"]["field"] == "body.source"
    assert answered["plain-runtime"]["status"] == answered["says-log"]["status"] == "accepted"
    assert set(FailureRecord.objects.values_list("source", flat=True)) == {"runtime", "log"}
    assert not FailureRecord.objects.filter(source="quality_lab").exists()
    recorded = IngestRejection.objects.filter(code="reserved_source")
    assert sorted(recorded.values_list("client_id", flat=True)) == ["claims-ql", "event-claims-ql"]


def test_an_unknown_source_is_told_the_sources_a_runtime_may_send(
    ingest_client: APIClient,
) -> None:
    response = post(ingest_client, [failure_item("shouting", source="QUALITY_LAB")])
    error = response.json()["items"][0]["error"]
    assert (error["code"], error["field"]) == ("invalid_field", "body.source")
    assert error["message"] == "source must be one of runtime, learning, log, otlp."


def test_a_batch_under_the_desks_owner_from_another_channel_is_refused(tmp_path: Path) -> None:
    outcome = batch_ingest(owner="quality_lab", items=[failure_item("x")], channel="cli")
    assert [item.error["code"] for item in outcome.items if item.error] == ["reserved_owner"]
    ndjson = tmp_path / "items.ndjson"
    ndjson.write_text(json.dumps(failure_item("y")) + "\n", encoding="utf-8")
    with pytest.raises(CommandError):
        call_command("ingest", str(ndjson), "--owner", "quality_lab")
    assert not FailureRecord.objects.exists()


def test_quality_labs_own_channel_still_writes_its_records() -> None:
    outcome = batch_ingest(
        owner=DESK_OWNER,
        items=[failure_item("case-1", source="quality_lab")],
        channel=DESK_CHANNEL,
    )
    assert outcome.as_dict()["accepted"] == 1
    assert FailureRecord.objects.get().source == "quality_lab"
