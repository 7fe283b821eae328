from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.models import FailureGroup, FailureGroupBucket, FailureRecord, IngestItem
from triage.services import api_key_create


@pytest.mark.services("postgres")
@pytest.mark.django_db(transaction=True)
def test_one_batch_sent_three_times_by_ten_threads_is_stored_once(settings: Any) -> None:
    # Ten batches at once in the database: this process's slots (triage.intake.capacity) must not
    # serialize them, or the race this test is about would never happen.
    settings.TRIAGE_INGEST_CONCURRENT_BATCHES = 10
    _, key = api_key_create(name="concurrent", scopes=["ingest"])
    items = [
        failure_item(
            f"c-{n}",
            reason=("http_5xx", "timeout", "unsatisfied_field")[n % 3],
            stage=("execute", "execute", "synthesize")[n % 3],
            tool=f"tool{n % 4}",
            occurred_at=f"2026-11-01T{n % 24:02d}:00:00Z",
        )
        for n in range(60)
    ]
    payload = json.dumps({"items": items})
    statuses: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(10)

    def send() -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
            barrier.wait()
            for _ in range(3):
                response = client.post(
                    "/api/v1/ingest", data=payload, content_type="application/json"
                )
                assert response.status_code == 200, response.content
                statuses.extend(item["status"] for item in response.json()["items"])
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert statuses.count("accepted") == 60
    assert statuses.count("duplicate") == 60 * 29
    assert FailureRecord.objects.count() == 60
    assert IngestItem.objects.count() == 60
    per_group: dict[Any, int] = {}
    for record in FailureRecord.objects.all():
        per_group[record.group_id] = per_group.get(record.group_id, 0) + 1
    for group in FailureGroup.objects.all():
        assert group.count == per_group[group.pk]
        assert sum(group.buckets.values_list("count", flat=True)) == group.count
    assert sum(FailureGroupBucket.objects.values_list("count", flat=True)) == 60
