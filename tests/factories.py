"""Builders for ingest items and model rows used across the tests."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import factory

from triage.models import ToolPolicy

if TYPE_CHECKING:
    from qualitylab.models import Collection

_ids = itertools.count(1)


def failure_item(item_id: str | None = None, **body: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "stage": "execute",
        "reason": "http_5xx",
        "message": "downstream returned 503",
        "tool": "getOrderDetail",
        "collection": "shop",
        "plan_id": "plan_01",
        "step_id": "s1",
        "evidence": {"http_status": 503, "http_method": "GET"},
    }
    fields.update(body)
    return {"type": "failure", "id": item_id or f"f-{next(_ids)}", "body": fields}


def receipt_item(item_id: str | None = None, **body: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "tool_run_id": f"tr_{next(_ids)}",
        "tool": "publish_changelog",
        "collection": "shop",
        "authority_scope": "repo:docs / write:release-note",
        "target_fingerprint": "sha256:" + "ab" * 32,
        "attempt": 1,
        "result": "blocked",
        "code": "POLICY_APPROVAL_REQUIRED",
        "execution_state": "not_started",
        "next_action": "request_approval",
        "evidence_ref": "policy://release-note/approval-required/v3",
    }
    fields.update(body)
    return {"type": "receipt", "id": item_id or f"r-{next(_ids)}", "body": fields}


def audit_item(item_id: str | None = None, **body: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "tool_run_id": "tr_1",
        "method": "POST",
        "host": "api.example.com",
        "path": "/release-notes",
        "status": 201,
        "occurred_at": "2026-11-01T10:00:00Z",
    }
    fields.update(body)
    return {"type": "audit_event", "id": item_id or f"a-{next(_ids)}", "body": fields}


def runner_event_item(item_id: str | None = None, **body: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "type": "step.failed",
        "stage": "runner",
        "plan_id": "plan_01",
        "step_id": "s1",
        "tool": "getOrderDetail",
        "error": {"kind": "tool", "message": "HTTP 500: Internal Server Error"},
        "duration_ms": 12,
        "graph_tool_call_version": "0.47.0",
        "trace_metadata": {},
    }
    fields.update(body)
    return {"type": "runner_event", "id": item_id or f"e-{next(_ids)}", "body": fields}


class ToolPolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ToolPolicy

    collection = "shop"
    tool = factory.Sequence(lambda n: f"tool{n}")
    side_effect = "read"


def demo_collection() -> Collection:
    """The demo collection `shop`, built right here (no build task), with the demo cases."""
    import pytest

    from qualitylab import demo, services

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "_send", lambda task, **kwargs: None)
        collection, version = services.collection_create(
            name="shop", spec_text=demo.SPEC_PATH.read_text(encoding="utf-8")
        )
    built = services.version_build(version_id=version.pk)
    assert built is not None and built.status == "ready", built and built.error
    report = services.cases_import(collection=collection, documents=demo.load_case_data())
    assert not report.errors, report.errors
    collection.refresh_from_db()
    return collection


def run_settled(run_id: int) -> bool:
    """The run is finished and its learning attempts are merged, which the worker does just
    after marking it done: only then is the worker idle for the next test's flush."""
    from learning.models import LearningAttempt
    from qualitylab.models import CaseRun

    if not CaseRun.objects.get(pk=run_id).is_finished:
        return False
    pending = LearningAttempt.objects.filter(
        client_id__startswith=f"run-{run_id}/", derived_at__isnull=True
    )
    return not pending.exists()


def case_post(**changes: Any) -> dict[str, Any]:
    """The Quality Lab case form, filled in for a plan case; `changes` override fields
    (None drops one)."""
    data = {
        "case_id": "plan-order-detail",
        "mode": "plan",
        "query": "show me the order detail",
        "expected_target": "getOrderDetail",
        "expected_top_k": "5",
        "mutation_safety": "read_only",
        "timeout_sec": "10",
        "assertions": '[{"type": "selected_target", "equals": "getOrderDetail"}]',
        "provided_entities": '{"orderNo": "ORD-1001"}',
        "cleanup": "",
        "active": "on",
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}
