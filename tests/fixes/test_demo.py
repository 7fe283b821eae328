"""The demo's fixes: two releases, a fix that held, one that did not, one verified."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from fixes import demo
from fixes.models import Fix, Verification
from qualitylab import services as quality_services
from qualitylab.models import QualityCase
from tests.factories import demo_collection, failure_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, Release

pytestmark = pytest.mark.django_db


def ingest(items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 500):
        batch_ingest(owner=demo.OWNER, items=items[start : start + 500])


def test_the_demo_has_two_releases_a_fix_that_held_and_one_that_did_not(
    user_with_role: Any,
) -> None:
    fixes = demo.install(now=timezone.now(), ingest=ingest, actor=user_with_role("operator"))
    assert {(fix.tool, fix.kind, fix.verdict) for fix in fixes} == {
        ("getCart", "code_change", "held"),
        ("applyCoupon", "runbook_step", "not_held"),
    }
    assert set(Release.objects.values_list("version", flat=True)) == {"2.3", "2.4"}
    assert set(
        FailureGroup.objects.filter(collection="checkout").values_list(
            "status", "resolved_in_release"
        )
    ) == {("resolved", "2.4")}
    assert Fix.objects.get(tool="applyCoupon").runbook is not None


def test_the_demo_verifies_the_shops_detail_fix_with_a_case_made_from_it(
    user_with_role: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quality_services, "_send", lambda task, **kwargs: None)
    shop = demo_collection()
    batch_ingest(owner="demo", items=[failure_item(tool="getOrderDetail")])
    run = demo.verify(collection=shop, actor=user_with_role("operator"))
    assert run is not None
    fix = Fix.objects.get(verification_run=run)
    assert fix.verification == Verification.RUNNING
    case = QualityCase.objects.get(collection=shop, case_id=demo.VERIFIED_CASE)
    assert case.failure_group_id == fix.group_id
    quality_services.run_execute(run_id=run.pk)  # the worker's work, here
    fix.refresh_from_db()
    assert fix.verification == Verification.PASSED
    assert fix.group is not None and fix.group.status == "resolved"
