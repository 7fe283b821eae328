"""Fixes recorded with a resolution, measured from records sent through the ingest API with
their times set explicitly, on PostgreSQL: whether a fix held, why a drop in traffic is no
fix, efficacy per runbook adding up over its fixes, promoted suggestions measured in
production, and verdicts that retention leaves exact."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from fixes import measure
from fixes.models import Fix, Verdict
from learning.models import Suggestion, SuggestionStatus
from tests.factories import demo_collection, failure_item, receipt_item, runner_event_item
from triage.models import FailureGroup, FailureRecord, GroupStatus, Runbook, RunnerEvent
from triage.services import runbook_set
from triage.upkeep.retention import records_prune

pytestmark = [pytest.mark.django_db, pytest.mark.services("postgres")]

TOOL = "getOrderDetail"


def ingest(client: APIClient, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 1000):
        response = client.post(
            "/api/v1/ingest",
            data=json.dumps({"items": items[start : start + 1000]}),
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
        assert response.json()["rejected"] == 0, response.content


def spread(count: int, start: datetime, hours: float) -> list[str]:
    """`count` moments spread over `hours` from `start` (inside a 24-hour window)."""
    return [(start + timedelta(hours=hours * (n + 0.5) / count)).isoformat() for n in range(count)]


def traffic(
    fixed_at: datetime,
    *,
    failures: tuple[int, int],
    successes: tuple[int, int],
    tool: str = TOOL,
    reason: str = "http_5xx",
) -> list[dict[str, Any]]:
    """Failures and runner successes in the 20 hours before and the 20 hours after."""
    items = []
    starts = (fixed_at - timedelta(hours=21), fixed_at + timedelta(minutes=30))
    for (fail, ok), start in zip(zip(failures, successes, strict=True), starts, strict=True):
        items += [
            failure_item(tool=tool, reason=reason, occurred_at=moment)
            for moment in spread(fail, start, 20)
        ]
        items += [
            runner_event_item(type="step.completed", tool=tool, collection="shop", occurred_at=m)
            for m in spread(ok, start, 20)
        ]
    return items


def resolve(client: Client, group: FailureGroup, **fields: Any) -> Any:
    return client.post(f"/fixes/resolve/{group.pk}", {"action": "resolve", **fields})


def fix_of(group: FailureGroup, fixed_at: datetime) -> Fix:
    fix = Fix.objects.get(group=group)
    Fix.objects.filter(pk=fix.pk).update(fixed_at=fixed_at)
    fix.refresh_from_db()
    return measure.fix_measure(fix)


@pytest.fixture
def week_ago() -> datetime:
    """A fix eight days ago: its day and its week after have both closed."""
    return (timezone.now() - timedelta(days=8)).replace(microsecond=0)


def test_a_fix_whose_failures_drop_95_percent_with_steady_successes_held(
    ingest_client: APIClient, client_as: Any, week_ago: datetime
) -> None:
    ingest(ingest_client, traffic(week_ago, failures=(40, 2), successes=(360, 398)))
    group = FailureGroup.objects.get()
    response = resolve(
        client_as("operator"),
        group,
        fix_kind="code_change",
        fix_url="https://git.example.com/shop/pull/42",
        note="retry budget on the detail call",
    )
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED
    fix = fix_of(group, week_ago)
    assert fix.figures("day") == {
        "failures_before": 40,
        "successes_before": 360,
        "failures_after": 2,
        "successes_after": 398,
    }
    assert fix.figures("week") == fix.figures("day")
    assert (fix.verdict, fix.verdict_span, fix.settled) == (Verdict.HELD, "week", True)
    assert fix.resolution is not None and fix.resolution.action == "resolve"
    assert (fix.url, fix.actor_label) == ("https://git.example.com/shop/pull/42", "operator-user")


def test_a_drop_in_failures_that_is_a_drop_in_traffic_did_not_hold(
    ingest_client: APIClient, client_as: Any, week_ago: datetime
) -> None:
    # 40 of 400 calls failed before, 2 of 20 after: 10% either side.
    ingest(ingest_client, traffic(week_ago, failures=(40, 2), successes=(360, 18)))
    group = FailureGroup.objects.get()
    resolve(client_as("operator"), group, fix_kind="other", note="restarted it")
    fix = fix_of(group, week_ago)
    assert fix.verdict == Verdict.NOT_HELD
    reading = efficacy_of(fix)
    assert reading.rate_before == pytest.approx(0.1) and reading.rate_after == pytest.approx(0.1)


def efficacy_of(fix: Fix) -> Any:
    from fixes.selectors import readings

    return readings(fix)["week"]


def test_receipts_count_as_successes_once_with_runner_events(
    ingest_client: APIClient, client_as: Any, week_ago: datetime
) -> None:
    """A call reported both as a receipt and a runner event counts once (the larger)."""
    items = traffic(week_ago, failures=(10, 1), successes=(90, 90))
    items += [
        receipt_item(
            tool=TOOL, result="ok", execution_state="completed", code="", next_action="",
            started_at=moment, ended_at=moment,
        )
        for moment in spread(95, week_ago + timedelta(minutes=30), 20)
    ]  # fmt: skip
    ingest(ingest_client, items)
    group = FailureGroup.objects.get()
    resolve(client_as("operator"), group, fix_kind="other")
    fix = fix_of(group, week_ago)
    assert (fix.successes_before_day, fix.successes_after_day) == (90, 95)


def test_a_fix_an_hour_old_is_measuring_and_reads_no_verdict(
    ingest_client: APIClient, client_as: Any
) -> None:
    now = timezone.now()
    ingest(ingest_client, [failure_item(occurred_at=now.isoformat())])
    group = FailureGroup.objects.get()
    resolve(client_as("operator"), group, fix_kind="tool_policy")
    fix = measure.fix_measure(Fix.objects.get(), now=now + timedelta(hours=1))
    assert (fix.verdict, fix.settled) == (Verdict.MEASURING, False)
    day_later = measure.fix_measure(fix, now=now + timedelta(hours=26))
    assert day_later.verdict_span == "day" and not day_later.settled


def test_efficacy_per_runbook_adds_up_over_its_fixes(
    ingest_client: APIClient, client_as: Any, week_ago: datetime
) -> None:
    shapes = {
        "getOrderDetail": ((40, 2), (360, 398)),  # held
        "getMemberPoints": ((40, 15), (360, 385)),  # partly held
        "trackDelivery": ((40, 40), (360, 360)),  # did not hold
    }
    for tool, (failures, successes) in shapes.items():
        ingest(
            ingest_client,
            traffic(week_ago, failures=failures, successes=successes, tool=tool, reason="timeout"),
        )
    runbook_set(
        subject="reason", reason="timeout", tool="", collection="", url="https://wiki/t",
        note="", actor=None,
    )  # fmt: skip
    runbook = Runbook.objects.get()
    operator = client_as("operator")
    for group in FailureGroup.objects.all():
        response = resolve(operator, group, fix_kind="runbook_step", runbook=str(runbook.pk))
        assert response.status_code == 302
        fix_of(group, week_ago)
    verdicts = sorted(Fix.objects.values_list("verdict", flat=True))
    assert verdicts == ["held", "not_held", "partly_held"]
    assert set(Fix.objects.values_list("runbook_id", flat=True)) == {runbook.pk}

    body = client_as("viewer").get("/api/v1/fixes", {"runbook": runbook.pk}).json()
    (tally,) = body["by_runbook"]
    assert tally["runbook"] == runbook.pk
    assert tally["fixes"] == 3 == len(body["fixes"])
    assert (tally["held"], tally["partly_held"], tally["not_held"]) == (1, 1, 1)
    assert sum(tally[v] for v in Verdict.values) == tally["fixes"]
    # The group page's runbook card says the same, linked to the list.
    page = operator.get(f"/triage/groups/{FailureGroup.objects.earliest('id').pk}/")
    assert f"/fixes/?runbook={runbook.pk}" in page.content.decode()
    assert "1 of 3 fixes with it held" in page.content.decode()


def test_retention_leaves_the_verdicts_exact(
    ingest_client: APIClient, client_as: Any, week_ago: datetime
) -> None:
    ingest(ingest_client, traffic(week_ago, failures=(40, 2), successes=(360, 398)))
    group = FailureGroup.objects.get()
    resolve(client_as("operator"), group, fix_kind="other")
    fix = Fix.objects.get()
    Fix.objects.filter(pk=fix.pk).update(fixed_at=week_ago)
    fix.refresh_from_db()
    before = measure.fix_counts(fix)
    # A prune whose cutoff falls inside the after window: every record and runner event
    # before it goes (the fix is still unsettled: it was never measured).
    cutoff_days = 8
    run = records_prune(
        days=cutoff_days, batch_size=25, channel="cli",
        now=week_ago + timedelta(days=cutoff_days, hours=10),
    )  # fmt: skip
    assert run.status == "done", run.error
    assert run.records_deleted > 0 and run.runner_events_deleted > 0
    assert FailureRecord.objects.count() < 42 and RunnerEvent.objects.count() < 758
    fix.refresh_from_db()
    assert measure.fix_counts(fix) == before
    assert measure.fix_measure(fix).verdict == Verdict.HELD


def test_a_promoted_suggestion_is_measured_on_its_tool_in_production(
    ingest_client: APIClient, week_ago: datetime
) -> None:
    shop = demo_collection()
    suggestion = Suggestion.objects.create(
        collection=shop,
        suggestion_id="edge:abc",
        type="edge",
        target=TOOL,
        query_family="order detail",
        query_fingerprint="f" * 64,
        status=SuggestionStatus.PROMOTED,
        promoted_at=week_ago,
        promoted_by_label="reviewer",
    )
    ingest(ingest_client, traffic(week_ago, failures=(40, 2), successes=(360, 398)))
    assert measure.suggestions_track() == 1
    assert measure.suggestions_track() == 0  # once
    fix = measure.fix_measure(Fix.objects.get(suggestion=suggestion))
    assert (fix.kind, fix.group_id, fix.tool, fix.fixed_at) == (
        "promoted_suggestion",
        None,
        TOOL,
        week_ago,
    )
    assert fix.verdict == Verdict.HELD


def test_the_beat_task_measures_each_unsettled_fix_about_every_quarter_hour(
    ingest_client: APIClient, client_as: Any, week_ago: datetime
) -> None:
    from fixes.tasks import measure_fixes

    ingest(ingest_client, traffic(week_ago, failures=(40, 2), successes=(360, 398)))
    resolve(client_as("operator"), FailureGroup.objects.get(), fix_kind="other")
    fix = Fix.objects.get()
    assert fix.measured_at is not None  # measured when it was recorded
    assert measure_fixes() == 0  # measured a moment ago
    Fix.objects.update(measured_at=timezone.now() - timedelta(minutes=16))
    assert measure_fixes() == 1
    Fix.objects.update(fixed_at=week_ago, measured_at=None)
    assert measure_fixes() == 1
    assert Fix.objects.get().settled  # the week after closed: never measured again
    Fix.objects.update(measured_at=None)
    assert measure_fixes() == 0
