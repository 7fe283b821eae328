"""A fix verified by Quality Lab, through a real Celery worker on Redis and PostgreSQL: the
cases made from the group's failures run in the worker; every case passing resolves the
group ("verified by run #N"), a failing case keeps it open (or reopens it), with the run
linked."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from fixes.models import Fix, Verification
from qualitylab.models import Collection, QualityCase
from tests.factories import demo_collection, failure_item
from tests.qualitylab.test_worker import Worker, test_queue, workers
from triage.models import FailureGroup, GroupStatus

pytestmark = [
    pytest.mark.services("redis", "postgres"),
    pytest.mark.django_db(transaction=True),
]
__all__ = ["test_queue", "workers"]  # the worker test's fixtures, used here


def group_with_cases(client: APIClient, shop: Collection, *case_ids: str) -> FailureGroup:
    response = client.post(
        "/api/v1/ingest",
        data=json.dumps({"items": [failure_item(tool="getOrderDetail")]}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    group = FailureGroup.objects.get()
    assert QualityCase.objects.filter(collection=shop, case_id__in=case_ids).update(
        failure_group=group
    ) == len(case_ids)
    return group


def concluded(fix_id: int, worker: Worker, timeout: float = 90) -> Fix:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fix = Fix.objects.get(pk=fix_id)
        if fix.verification != Verification.RUNNING:
            return fix
        if worker.process.poll() is not None:
            pytest.fail(f"the worker exited:\n{worker.log()}")
        time.sleep(0.1)
    pytest.fail(f"the verification did not conclude:\n{worker.log()}")


def test_a_verified_fix_resolves_its_group_when_every_case_passes(
    ingest_client: APIClient,
    client_as: Any,
    test_queue: str,
    workers: Callable[[str], Worker],
) -> None:
    shop = demo_collection()
    group = group_with_cases(ingest_client, shop, "search-order-detail-en", "plan-order-detail-ko")
    operator = client_as("operator")
    page = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert "resolve when the 2 cases made from this group pass" in page
    response = operator.post(
        f"/fixes/resolve/{group.pk}",
        {"action": "resolve", "fix_kind": "code_change",
         "fix_url": "https://git.example.com/shop/pull/7", "verify": "1"},
    )  # fmt: skip
    assert response.status_code == 302
    fix = Fix.objects.get()
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN  # the run decides
    assert fix.verification == Verification.RUNNING and fix.resolution is None

    fix = concluded(fix.pk, workers("verify"))
    run = fix.verification_run
    assert run is not None and (run.passed, run.total) == (2, 2)
    assert fix.verification == Verification.PASSED
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED
    event = group.events.get(action="resolve")
    assert fix.resolution_id == event.pk
    assert event.data["verified"] == {"run": run.pk, "passed": 2, "total": 2}
    page = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert f"verified by run #{run.pk} (2/2 passed)" in page


def test_a_failed_verification_keeps_the_group_open_and_reopens_a_resolved_one(
    ingest_client: APIClient,
    client_as: Any,
    test_queue: str,
    workers: Callable[[str], Worker],
) -> None:
    shop = demo_collection()
    group = group_with_cases(
        ingest_client, shop, "search-order-detail-en", "search-receipt-en-miss"
    )
    operator = client_as("operator")
    operator.post(
        f"/fixes/resolve/{group.pk}", {"action": "resolve", "fix_kind": "other", "verify": "1"}
    )
    worker = workers("verify")
    fix = concluded(Fix.objects.get().pk, worker)
    run = fix.verification_run
    assert run is not None and (run.passed, run.total) == (1, 2)
    assert fix.verification == Verification.FAILED
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN
    page = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert f"verification run #{run.pk} failed (1/2 passed)" in page
    assert f"/qualitylab/runs/{run.pk}/" in page

    # Resolved without verifying, then verified: the failing run reopens it, naming the run.
    operator.post(f"/fixes/resolve/{group.pk}", {"action": "resolve", "fix_kind": "other"})
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED
    second = Fix.objects.latest("id")
    assert operator.post(f"/fixes/{second.pk}/verify").status_code == 302
    second = concluded(second.pk, worker)
    assert second.verification == Verification.FAILED
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN
    reopened = group.events.filter(action="reopen").get()
    assert reopened.data["verification_failed"]["run"] == second.verification_run_id
