"""The kinds the beat task judges every minute from counters: each fires once for its
condition and not again within the rule's minimum interval; a muted group never fires."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone

from alerts import services
from alerts.models import Channel, Delivery, RuleKind
from alerts.sinks import WebhookReceiver
from learning import services as learning_services
from qualitylab import services as lab
from qualitylab.models import CaseResult, CaseRun
from qualitylab.selectors import run_scope
from tests.factories import demo_collection, failure_item, receipt_item
from tests.learning.conftest import attempt_item
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, batch_ingest
from triage.models import FailureGroup
from triage.services import group_act

pytestmark = pytest.mark.django_db


@pytest.fixture
def quiet_queue(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Deliveries are queued here (and sent by the test when it wants)."""
    queued: list[int] = []
    monkeypatch.setattr(services, "publish", lambda task, **kw: queued.append(kw["delivery_id"]))
    return queued


def _evaluate_twice_within_the_interval(receiver: WebhookReceiver) -> list[Any]:
    """The beat twice, a minute apart, delivering what it queued; the bodies received."""
    now = timezone.now()
    for moment in (now, now + timedelta(minutes=1)):
        for delivery_id in services.rules_evaluate(now=moment).queued:
            services.delivery_attempt(delivery_id=delivery_id, now=moment)
    return [request.json() for request in receiver.wait_for(2, timeout=0.5)]


def _records(n: int, prefix: str, **body: Any) -> None:
    now = timezone.now().isoformat()
    batch_ingest(
        owner="beat",
        items=[failure_item(f"{prefix}{i}", occurred_at=now, **body) for i in range(n)],
    )


def test_a_spike_fires_once_and_a_muted_group_never(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any
) -> None:
    make_rule(RuleKind.SPIKE, [webhook], spike_count=5, spike_factor=2, spike_window_hours=1)
    _records(6, "hot", tool="hot")
    _records(6, "hushed", tool="hushed")
    _records(2, "calm", tool="calm")  # under N
    group_act(group=FailureGroup.objects.get(tool="hushed"), actor=None, action="mute",
              mute_count=1000)  # fmt: skip
    [body] = _evaluate_twice_within_the_interval(receiver)
    assert body["kind"] == "spike"
    assert body["group"]["id"] == FailureGroup.objects.get(tool="hot").pk
    assert body["count"] == 6


def test_a_spike_of_quality_lab_records_pages_nobody_by_default(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any
) -> None:
    make_rule(RuleKind.SPIKE, [webhook], spike_count=5, spike_factor=2, spike_window_hours=1)
    now = timezone.now().isoformat()
    batch_ingest(
        owner=DESK_OWNER,
        channel=DESK_CHANNEL,
        items=[
            failure_item(f"lab{i}", occurred_at=now, source="quality_lab", tool="lab")
            for i in range(6)
        ],
    )
    _records(6, "prod", tool="prod")
    [body] = _evaluate_twice_within_the_interval(receiver)
    assert body["group"]["id"] == FailureGroup.objects.get(tool="prod").pk


def test_a_rerun_of_failed_cases_is_never_judged_and_says_what_it_ran(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A re-run of only the failed cases has a pass rate of about 0%: that says nothing of
    the suite. It is not judged, and its page says it ran the failed cases of its run."""
    monkeypatch.setattr(lab, "_send", lambda task, **kwargs: None)
    shop = demo_collection()
    run = lab.run_start(collection=shop, mode="search")
    lab.run_execute(run_id=run.pk)
    failed = CaseResult.objects.filter(run=run, passed=False).count()
    assert failed, "the demo's search cases include failures on purpose"
    rerun = lab.run_rerun_failed(run=run)
    lab.run_execute(run_id=rerun.pk)
    rerun.refresh_from_db()
    assert rerun.passed < rerun.done
    make_rule(RuleKind.QUALITYLAB_REGRESSION, [webhook], pass_rate_floor=0.99)
    [body] = _evaluate_twice_within_the_interval(receiver)
    assert body["group"]["url"].endswith(f"/qualitylab/runs/{run.pk}/")  # the run, not its re-run
    summary = Delivery.objects.get().summary
    assert f"Quality Lab run {run.pk} of shop (all active cases, search only)" in summary
    cases = len(rerun.case_ids)
    assert run_scope(rerun) == f"{cases} failed case{'s' if cases > 1 else ''} of run {run.pk}"


def test_no_spike_without_x_times_the_window_before(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any
) -> None:
    make_rule(RuleKind.SPIKE, [webhook], spike_count=3, spike_factor=3, spike_window_hours=1)
    before = (timezone.now() - timedelta(hours=1)).isoformat()
    batch_ingest(owner="beat", items=[failure_item(f"old{i}", occurred_at=before)
                                      for i in range(2)])  # fmt: skip
    _records(4, "now")  # 4 >= 3, but 4 < 3 x 2
    assert _evaluate_twice_within_the_interval(receiver) == []


def test_uncertain_work_waiting_past_t_fires_once(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any
) -> None:
    make_rule(RuleKind.RECONCILE_WAITING, [webhook], wait_minutes=10, collection="shop")
    batch_ingest(owner="beat", items=[
        receipt_item("u1", tool="createRefund", result="uncertain",
                     execution_state="started_unknown", idempotency_key="k1"),
        receipt_item("u2", tool="createRefund", result="partial",
                     execution_state="partially_completed", idempotency_key="k2"),
        receipt_item("done", tool="createRefund", result="ok", execution_state="completed"),
    ])  # fmt: skip
    assert services.rules_evaluate().queued == []  # not waited long enough yet
    now = timezone.now() + timedelta(minutes=11)
    for moment in (now, now + timedelta(minutes=1)):
        for delivery_id in services.rules_evaluate(now=moment).queued:
            services.delivery_attempt(delivery_id=delivery_id, now=moment)
    [request] = receiver.wait_for(2, timeout=0.5)
    body = request.json()
    assert (body["kind"], body["count"], body["group"]["tool"]) == ("reconcile_waiting", 2,
                                                                    "createRefund")  # fmt: skip
    assert body["group"]["url"].endswith("/receipts/#queue")


def test_an_operation_over_its_retry_budget_fires_once(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any
) -> None:
    make_rule(RuleKind.RETRY_BUDGET, [webhook], tool="getDelivery")
    start = timezone.now() - timedelta(seconds=90)
    batch_ingest(owner="beat", items=[
        receipt_item(f"b{n}", tool="getDelivery", result="failed", code="HTTP_503",
                     execution_state="completed", idempotency_key="op-1", attempt=n + 1,
                     started_at=(start + timedelta(seconds=20 * n)).isoformat(),
                     ended_at=(start + timedelta(seconds=20 * n + 1)).isoformat())
        for n in range(3)
    ])  # fmt: skip
    [body] = _evaluate_twice_within_the_interval(receiver)
    assert (body["kind"], body["count"], body["group"]["tool"]) == ("retry_budget", 3,
                                                                    "getDelivery")  # fmt: skip


def test_a_promotable_suggestion_waiting_past_t_fires_once(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any
) -> None:
    make_rule(RuleKind.SUGGESTION_WAITING, [webhook], wait_minutes=60)

    def derive(*, kwargs: dict[str, Any], retry: bool) -> None:
        learning_services.suggestions_derive(**kwargs)

    with mock.patch("learning.tasks.derive_suggestions.apply_async", side_effect=derive):
        from django.db import transaction

        with transaction.atomic():
            batch_ingest(owner="beat", items=[attempt_item("a1"), attempt_item("a2")])
        learning_services.suggestions_derive(collection_id=_collection_id())
    from learning.models import Suggestion

    promotable = Suggestion.objects.filter(status="promotable")
    assert promotable.exists()
    assert services.rules_evaluate().queued == []
    promotable.update(updated_at=timezone.now() - timedelta(hours=2))
    bodies = _evaluate_twice_within_the_interval(receiver)
    assert [body["kind"] for body in bodies] == ["suggestion_waiting"] * promotable.count()
    assert bodies[0]["group"]["url"].endswith(f"/learning/suggestions/{promotable[0].pk}/")


def _collection_id() -> int:
    from qualitylab.models import Collection

    return Collection.objects.get(name="bo-dev").pk


def test_a_quality_lab_case_that_passed_and_now_fails_fires_once_per_run(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(lab, "_send", lambda task, **kwargs: None)
    shop = demo_collection()
    make_rule(RuleKind.QUALITYLAB_REGRESSION, [webhook], collection="shop")
    first = lab.run_start(collection=shop, mode="search")
    lab.run_execute(run_id=first.pk)
    second = lab.run_start(collection=shop, mode="search")
    lab.run_execute(run_id=second.pk)
    # The same results both times: nothing regressed.
    assert services.rules_evaluate().queued == []

    # The second run's first passing case fails now.
    broke = CaseResult.objects.filter(run=second, passed=True, allowed_failure=False).first()
    assert broke is not None
    CaseResult.objects.filter(pk=broke.pk).update(passed=False)
    CaseRun.objects.filter(pk=second.pk).update(finished_at=timezone.now())
    from alerts.models import RuleSubjectState

    RuleSubjectState.objects.all().delete()  # judged before the change: judge it again
    [body] = _evaluate_twice_within_the_interval(receiver)
    assert body["kind"] == "qualitylab_regression"
    assert body["group"]["reason"] == "case_regressed"
    assert body["group"]["url"].endswith(f"/qualitylab/runs/{second.pk}/")
    assert body["count"] == 1


def test_a_quality_lab_pass_rate_under_r_fires(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(lab, "_send", lambda task, **kwargs: None)
    shop = demo_collection()
    make_rule(RuleKind.QUALITYLAB_REGRESSION, [webhook], pass_rate_floor=1.0)
    run = lab.run_start(collection=shop, mode="search")
    lab.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.passed < run.done, "the demo's search cases include failures on purpose"
    [body] = _evaluate_twice_within_the_interval(receiver)
    assert body["group"]["reason"] == "pass_rate_below"


def test_every_kind_has_a_beat_or_ingest_judge() -> None:
    from alerts.models import INGEST_KINDS
    from alerts.selectors import BEAT_MATCHERS

    assert set(BEAT_MATCHERS) | set(INGEST_KINDS) == set(RuleKind.values)


def test_a_broken_contract_rule_fires_once_per_new_finding_of_its_tool(
    receiver: WebhookReceiver, webhook: Channel, make_rule: Callable[..., Any], quiet_queue: Any
) -> None:
    from contracts.scan import contracts_scan

    rule = make_rule(RuleKind.CONTRACT_VIOLATION, [webhook], tool="publish")
    rule.created_at = timezone.now() - timedelta(minutes=30)
    rule.save(update_fields=["created_at"])
    blocked = {"result": "blocked", "code": "", "execution_state": "not_started"}
    started = (timezone.now() - timedelta(minutes=20)).isoformat()
    batch_ingest(
        owner="beat",
        items=[
            receipt_item(f"p{i}", tool=tool, idempotency_key=f"{tool}-1", started_at=started,
                         **blocked)
            for i, tool in enumerate(["publish", "publish", "other", "other"])
        ],
    )  # fmt: skip
    assert services.rules_evaluate().queued == []  # nothing counted yet
    contracts_scan(now=timezone.now() + timedelta(minutes=5))
    bodies = _evaluate_twice_within_the_interval(receiver)
    assert [(body["kind"], body["group"]["tool"]) for body in bodies] == [
        ("contract_violation", "publish")
    ]
    assert "/contracts/findings?" in bodies[0]["group"]["url"]
