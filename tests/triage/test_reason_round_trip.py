"""Every reason code of the catalog goes through ingest and comes out with its lane and action."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from triage.models import FailureRecord
from triage.vocabulary import taxonomy

pytestmark = pytest.mark.django_db


def test_every_catalog_reason_round_trips_with_its_lane_and_action(
    ingest_client: APIClient,
) -> None:
    items = [
        {
            "type": "failure",
            "id": f"rt-{code}",
            "body": {
                "stage": info.stage,
                "reason": code,
                "tool": "getOrderDetail",
                "side_effect": "read",
                "evidence": {},
            },
        }
        for code, info in taxonomy.REASONS.items()
    ]
    response = ingest_client.post(
        "/api/v1/ingest", data=json.dumps({"items": items}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    stored = {r.reason: r for r in FailureRecord.objects.all()}
    assert set(stored) == set(taxonomy.REASONS)
    for code, info in taxonomy.REASONS.items():
        record = stored[code]
        assert record.reason_mapped, code
        assert record.stage == info.stage
        assert record.lane == info.lane, code
        assert record.operator_action == info.operator_action, code
        assert record.execution_state == info.default_execution_state, code
        assert record.retryable == (info.lane == "retry_safe"), code
        assert record.taxonomy_version == taxonomy.TAXONOMY_VERSION
        assert record.contradictions == [], code
