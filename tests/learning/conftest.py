"""Fixtures of the learning review: attempt items, derivation run here, suggestions."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest

from learning import services
from learning.models import Suggestion

# The demo collection's engine, built once per session, as tests/qualitylab builds it.
from tests.qualitylab.conftest import demo_built, demo_collection  # noqa: F401
from triage.intake.ingest import batch_ingest

_ids = itertools.count(1)


def attempt_item(item_id: str | None = None, **body: Any) -> dict[str, Any]:
    """One runtime attempt; each item is its own session unless the test names one."""
    item_id = item_id or f"la-{next(_ids)}"
    fields: dict[str, Any] = {
        "query": "find refund-ready orders",
        "collection_id": "bo-dev",
        "session_id": f"session-raw-value-of-{item_id}",
        "selected_target": "getRefundableOrders",
        "llm_target": "getOrderDetail",
        "plan_tools": ["searchOrders", "getRefundableOrders"],
        "success": True,
        "latency_ms": 1430,
        "target_selector": {"overrode_llm": True, "reason_codes": ["shape_match"]},
    }
    fields.update(body)
    return {"type": "learning_attempt", "id": item_id, "body": fields}


@pytest.fixture
def derive_on_commit(django_capture_on_commit_callbacks: Any) -> Iterator[mock.MagicMock]:
    """Run the derivation task in this process when ingest queues it after commit."""

    def run_task(*, kwargs: dict[str, Any], retry: bool) -> None:
        services.suggestions_derive(**kwargs)

    with mock.patch("learning.tasks.derive_suggestions.apply_async", side_effect=run_task) as send:
        yield send


@pytest.fixture
def ingest_attempts(
    db: Any, django_capture_on_commit_callbacks: Any, derive_on_commit: mock.MagicMock
) -> Callable[..., Any]:
    """Ingest attempt items as a runtime would, then run the derivation queued on commit."""

    def ingest(*items: dict[str, Any], owner: str = "runtime-a") -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            outcome = batch_ingest(owner=owner, items=list(items))
        assert outcome.all_stored, outcome.as_dict()
        return outcome

    return ingest


def suggestion(
    collection: str = "bo-dev", type: str = "target_preference", **kw: Any
) -> Suggestion:
    """One suggestion of the collection; by default the attempt_item's target preference."""
    kw.setdefault("target", "getRefundableOrders")
    return Suggestion.objects.select_related("collection").get(
        collection__name=collection, type=type, **kw
    )


@pytest.fixture
def shop(db: Any, django_capture_on_commit_callbacks: Any) -> Any:
    """The demo collection, built (no sandbox: the learning tests run search and plan cases)."""
    from qualitylab import demo
    from qualitylab import services as lab

    with (
        mock.patch("qualitylab.tasks.build_collection_version.apply_async"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        collection, version = lab.collection_create(
            name="shop", spec_text=demo.SPEC_PATH.read_text(), mutations_allowed=True
        )
    lab.version_build(version_id=version.pk)
    collection.refresh_from_db()
    report = lab.cases_import(collection=collection, documents=demo.load_case_data())
    assert report.errors == []
    return collection


@pytest.fixture
def run_cases(
    django_capture_on_commit_callbacks: Any, derive_on_commit: mock.MagicMock
) -> Callable[..., Any]:
    """Run some cases of a collection through Quality Lab's services, here, and derive the
    attempts the run recorded (as the worker and the derivation task would)."""
    from qualitylab import services as lab

    def run(collection: Any, *case_ids: str, repeat: int = 1) -> Any:
        with (
            mock.patch("qualitylab.tasks.execute_case_run.apply_async"),
            django_capture_on_commit_callbacks(execute=True),
        ):
            queued = lab.run_start(collection=collection, case_ids=list(case_ids), repeat=repeat)
        with django_capture_on_commit_callbacks(execute=True):
            done = lab.run_execute(run_id=queued.pk)
        assert done is not None
        return done

    return run
