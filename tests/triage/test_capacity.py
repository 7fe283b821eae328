"""triage.capacity: a process works on a bounded number of batches; a flood beyond it is
answered 503 ingest_busy with Retry-After, stored nowhere, and served again once a slot frees."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.capacity import ingest_slot
from triage.models import FailureRecord, IngestBatch

pytestmark = pytest.mark.django_db


def _post(client: APIClient) -> Any:
    return client.post("/api/v1/ingest", {"items": [failure_item()]}, format="json")


def test_a_saturated_process_answers_503_with_retry_after_then_recovers(
    settings: Any, ingest_client: APIClient
) -> None:
    settings.TRIAGE_INGEST_CONCURRENT_BATCHES = 1
    settings.TRIAGE_INGEST_SLOT_WAIT_SECONDS = 0.2
    taken, release = threading.Event(), threading.Event()

    def hold_the_slot() -> None:
        with ingest_slot():
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_slot)
    holder.start()
    try:
        assert taken.wait(5)
        busy = _post(ingest_client)
    finally:
        release.set()
        holder.join()
    assert busy.status_code == 503
    assert busy.json()["error"]["code"] == "ingest_busy"
    assert busy["Retry-After"] == "1"
    assert not FailureRecord.objects.exists() and not IngestBatch.objects.exists()
    assert _post(ingest_client).status_code == 200
    assert FailureRecord.objects.count() == 1


def test_slots_bound_concurrent_batches_not_requests_in_sequence(
    settings: Any, ingest_client: APIClient
) -> None:
    settings.TRIAGE_INGEST_CONCURRENT_BATCHES = 2
    settings.TRIAGE_INGEST_SLOT_WAIT_SECONDS = 0
    for _ in range(5):
        assert _post(ingest_client).status_code == 200
    taken, release = threading.Barrier(3), threading.Event()

    def hold() -> None:
        with ingest_slot():
            taken.wait(5)
            release.wait(10)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for holder in holders:
        holder.start()
    try:
        taken.wait(5)
        assert _post(ingest_client).status_code == 503  # both slots held
    finally:
        release.set()
        for holder in holders:
            holder.join()
    assert _post(ingest_client).status_code == 200
