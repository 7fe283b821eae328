"""The Quality Lab write path: build a collection, import cases, run them, record failures."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from qualitylab import demo, services
from qualitylab.models import BuildStatus, CaseResult, CaseRun, QualityCase, RunStatus
from qualitylab.sandbox import DEMO_TOKEN, SandboxServer
from triage.models import FailureRecord

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(
    sandbox: SandboxServer, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> Any:
    monkeypatch.setenv("QUALITYLAB_SECRET_SHOP", DEMO_TOKEN)
    monkeypatch.setenv("QUALITYLAB_SECRET_SHOP__EXPIRED", demo.EXPIRED_TOKEN)
    with (
        mock.patch("qualitylab.tasks.build_collection_version.apply_async"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        collection, version = services.collection_create(
            name="shop",
            spec_text=demo.SPEC_PATH.read_text(),
            base_url=sandbox.base_url,
            auth_profile={
                "header_names": ["Authorization"],
                "scheme": "Bearer",
                "secret_env": "QUALITYLAB_SECRET_SHOP",
                "sessions": {"expired": {"secret_env": "QUALITYLAB_SECRET_SHOP__EXPIRED"}},
            },
            mutations_allowed=True,
        )
    services.version_build(version_id=version.pk)
    collection.refresh_from_db()
    report = services.cases_import(collection=collection, documents=demo.load_case_data())
    assert report.errors == [] and report.created == len(demo.load_case_data())
    return collection


@pytest.fixture
def run_now(django_capture_on_commit_callbacks: Any) -> Any:
    """Start a run (checking it is sent to the queue after commit) and execute it here."""

    def start(collection: Any, **kwargs: Any) -> CaseRun:
        with (
            mock.patch("qualitylab.tasks.execute_case_run.apply_async") as send,
            django_capture_on_commit_callbacks(execute=True),
        ):
            run = services.run_start(collection=collection, **kwargs)
        assert send.call_args.kwargs == {"kwargs": {"run_id": run.pk}, "retry": False}
        executed = services.run_execute(run_id=run.pk)
        assert executed is not None
        return executed

    return start


def test_a_built_collection_gets_its_artifact_readiness_and_base_url(shop: Any) -> None:
    version = shop.current_version
    assert version.status == BuildStatus.READY and version.operation_count == 21
    assert version.artifact()["tools"] and version.readiness_summary is not None
    assert shop.allowed_hosts == ["127.0.0.1"]


def test_every_demo_case_stored_and_run_gives_the_outcome_it_is_meant_to_show(
    shop: Any, run_now: Any
) -> None:
    run = run_now(shop)
    assert run.status == RunStatus.DONE and run.done == run.total == 33
    expectations = {case["id"]: case["demo_expectation"] for case in demo.load_case_data()}
    for result in CaseResult.objects.filter(run=run).select_related("case"):
        expected = expectations[result.case.case_id]
        if expected.get("status") == "passed":
            assert result.passed, result.case.case_id
        else:
            assert result.failure_reason == expected.get("reason"), result.case.case_id
    assert run.metrics["hit_at_k"] is not None and run.metrics["latency_p50_ms"]["search"]


def test_failed_cases_become_failure_records_on_the_triage_page(shop: Any, run_now: Any) -> None:
    run = run_now(shop, mode="execute")
    failed = CaseResult.objects.filter(run=run, passed=False)
    assert failed.exists()
    records = FailureRecord.objects.filter(source="quality_lab")
    assert records.count() == failed.count()
    assert all(result.failure_record_id for result in failed)
    assert {r.reason for r in records} >= {"auth_failed", "http_5xx", "timeout"}


def test_a_rerun_of_failed_cases_runs_only_those(shop: Any, run_now: Any) -> None:
    first = run_now(shop, mode="search")
    with mock.patch("qualitylab.tasks.execute_case_run.apply_async"):
        rerun = services.run_rerun_failed(run=first)
    assert rerun.total == first.failed and rerun.rerun_of_id == first.pk


def test_a_resumed_run_skips_cases_that_already_have_results(shop: Any) -> None:
    with mock.patch("qualitylab.tasks.execute_case_run.apply_async"):
        run = services.run_start(collection=shop, mode="search")
    seen: list[str] = []

    def crash_after_three(result: CaseResult) -> None:
        seen.append(result.case.case_id)
        if len(seen) == 3:
            raise KeyboardInterrupt  # the worker dies here

    with pytest.raises(KeyboardInterrupt):
        services.run_execute(run_id=run.pk, on_case=crash_after_three)
    CaseRun.objects.filter(pk=run.pk).update(heartbeat_at="2000-01-01T00:00:00Z")  # silent
    resumed = services.run_execute(run_id=run.pk)
    assert resumed is not None and resumed.status == RunStatus.DONE
    assert CaseResult.objects.filter(run=run).count() == run.total


def test_a_running_run_is_not_taken_over_while_its_worker_reports(shop: Any) -> None:
    with mock.patch("qualitylab.tasks.execute_case_run.apply_async"):
        run = services.run_start(collection=shop, mode="search")
    assert services._claim_run(run.pk)
    assert services.run_execute(run_id=run.pk) is None


def test_cancel_stops_a_queued_run(shop: Any) -> None:
    with mock.patch("qualitylab.tasks.execute_case_run.apply_async"):
        run = services.run_start(collection=shop, mode="search")
    services.run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert services.run_execute(run_id=run.pk) is None


def test_a_broker_that_is_down_fails_the_run_with_a_clear_error(
    shop: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with (
        mock.patch(
            "qualitylab.tasks.execute_case_run.apply_async", side_effect=BrokerError("refused")
        ),
        pytest.raises(services.QueueUnavailable, match="task queue is unreachable"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        services.run_start(collection=shop, mode="search")
    run = CaseRun.objects.get()
    assert run.status == RunStatus.FAILED and "unreachable" in run.error


def test_a_spec_that_is_not_openapi_is_refused_before_anything_is_stored(db: Any) -> None:
    with pytest.raises(services.engine.SpecError):
        services.collection_create(name="bad", spec_text="openapi: [unclosed")
    assert not QualityCase.objects.exists()


def test_stale_runs_are_sent_again(shop: Any) -> None:
    with mock.patch("qualitylab.tasks.execute_case_run.apply_async"):
        lost = services.run_start(collection=shop, mode="search")
        dead = services.run_start(collection=shop, mode="plan")
        alive = services.run_start(collection=shop, mode="execute")
    CaseRun.objects.filter(pk=lost.pk).update(created_at="2000-01-01T00:00:00Z")
    CaseRun.objects.filter(pk=dead.pk).update(status="running", heartbeat_at="2000-01-01T00:00:00Z")
    CaseRun.objects.filter(pk=alive.pk).update(status="running", heartbeat_at=timezone.now())
    with mock.patch("qualitylab.tasks.execute_case_run.apply_async") as send:
        requeued = services.runs_requeue_stale()
    assert sorted(requeued) == sorted([lost.pk, dead.pk])
    assert send.call_count == 2


def test_a_failed_get_is_classified_as_a_read(shop: Any, run_now: Any) -> None:
    run_now(shop, mode="execute")
    record = FailureRecord.objects.get(source="quality_lab", reason="http_5xx")
    assert record.evidence["http_method"] == "GET"
    assert (record.side_effect, record.lane, record.retryable) == ("read", "retry_safe", True)


def test_the_worker_refuses_a_stored_spec_that_is_an_alias_bomb(shop: Any) -> None:
    """A spec stored before the check (or under a looser limit) fails its build, unexpanded."""
    from qualitylab import tasks
    from qualitylab.models import CollectionVersion

    bomb = (
        demo.SPEC_PATH.read_text()
        + 'l0: &l0 ["x","x","x","x","x","x","x","x","x"]\n'
        + "".join(f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
    )
    version = CollectionVersion.objects.create(
        collection=shop, number=2, spec_source=bomb, spec_sha256="0" * 64
    )
    tasks.build_collection_version.run(version_id=version.pk)
    version.refresh_from_db()
    assert version.status == BuildStatus.FAILED
    assert "aliases expand it by more than 1,000,000" in version.error


def test_a_scoped_link_local_base_url_is_refused_though_it_does_not_resolve() -> None:
    from qualitylab.services import CollectionError, collection_create
    from tests.qualitylab.specs import slash_spec_text

    with pytest.raises(CollectionError) as refused:
        collection_create(
            name="scoped", spec_text=slash_spec_text(), base_url="http://[fe80::1%25lo]/"
        )
    assert refused.value.field == "base_url"
    assert "zone id" in str(refused.value)
