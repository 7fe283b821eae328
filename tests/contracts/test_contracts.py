"""The contracts page's figures, each built from items sent through the ingest API (seed
004's rollout criteria and retry rules), counted once, in the right tool's row."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from contracts import selectors
from contracts.models import ContractFinding
from contracts.scan import contracts_scan
from contracts.selectors import ContractsFilters, contracts_overview
from tests.factories import (
    ToolPolicyFactory,
    audit_item,
    failure_item,
    receipt_item,
    runner_event_item,
)
from triage.models import FailureRecord, Receipt, Reconciliation

pytestmark = pytest.mark.django_db

START = timezone.now().replace(microsecond=0) - timedelta(days=2)


def _at(minutes: float) -> str:
    return (START + timedelta(minutes=minutes)).isoformat()


def _ingest(client: APIClient, *items: dict[str, Any]) -> None:
    for start in range(0, len(items), 500):
        response = client.post(
            "/api/v1/ingest",
            data=json.dumps({"items": list(items[start : start + 500])}),
            content_type="application/json",
        )
        assert response.status_code == 200, response.content


def _scan() -> None:
    # Past the settle line: everything ingested so far is read.
    contracts_scan(now=timezone.now() + timedelta(minutes=5))


def _tools() -> dict[str, selectors.ToolContract]:
    overview = contracts_overview(now=timezone.now(), filters=ContractsFilters())
    return {tool.tool: tool for tool in overview.tools}


def _findings(tool: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind in ContractFinding.objects.filter(tool=tool).values_list("kind", flat=True):
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _successes(tool: str, count: int) -> list[dict[str, Any]]:
    return [
        runner_event_item(
            type="step.completed", tool=tool, collection="shop", occurred_at=_at(index / 100)
        )
        for index in range(count)
    ]


def _receipt(tool: str, key: str, minutes: float, **body: Any) -> dict[str, Any]:
    fields = {
        "tool": tool,
        "idempotency_key": key,
        "result": "failed",
        "reason": "http_5xx",
        "code": "",
        "execution_state": "completed",
        "next_action": "retry_with_backoff",
        "started_at": _at(minutes),
        "ended_at": _at(minutes),
    }
    fields.update(body)
    return receipt_item(**fields)


# --- the criteria --------------------------------------------------------------------------


def test_a_failure_rate_of_exactly_one_percent_meets_the_criterion_and_just_under_does_not(
    ingest_client: APIClient,
) -> None:
    _ingest(
        ingest_client,
        failure_item(tool="atOnePercent", occurred_at=_at(1)),
        *_successes("atOnePercent", 99),
        failure_item(tool="underOnePercent", occurred_at=_at(1)),
        *_successes("underOnePercent", 100),
    )
    _scan()
    tools = _tools()
    at, under = tools["atOnePercent"], tools["underOnePercent"]
    assert at.failure_rate == pytest.approx(0.01)
    assert at.criteria[0].code == "failing" and at.criteria[0].met
    assert "1.0%" in at.criteria[0].figure
    assert under.failure_rate == pytest.approx(1 / 101)
    assert not under.criteria[0].met


def test_without_successes_the_rate_is_not_made_up(ingest_client: APIClient) -> None:
    _ingest(ingest_client, failure_item(tool="noSuccessData", occurred_at=_at(1)))
    _scan()
    tool = _tools()["noSuccessData"]
    assert tool.failure_rate is None
    assert "no success data" in tool.criteria[0].figure
    assert not tool.criteria[0].met


def test_ten_retries_a_month_meet_the_criterion_and_nine_do_not(
    ingest_client: APIClient,
) -> None:
    # Repeated failures of one idempotency key, an hour apart (no stop rule in play).
    _ingest(
        ingest_client,
        *[
            failure_item(tool="tenRetries", idempotency_key="k10", occurred_at=_at(60 * i))
            for i in range(11)
        ],
        *[
            failure_item(tool="nineRetries", idempotency_key="k9", occurred_at=_at(60 * i))
            for i in range(10)
        ],
        *_successes("tenRetries", 10_000),
        *_successes("nineRetries", 10_000),
    )
    _scan()
    tools = _tools()
    assert tools["tenRetries"].retries == 10
    assert tools["nineRetries"].retries == 9
    # 30 days of window: the count is the month's.
    assert tools["tenRetries"].criteria[0].met
    assert not tools["nineRetries"].criteria[0].met


def test_receipts_retry_count_counts_as_retries_once(ingest_client: APIClient) -> None:
    _ingest(
        ingest_client, _receipt("selfCounted", "rc-1", 1, retry_count=3, result="ok", reason="")
    )
    _scan()
    _scan()
    assert _tools()["selfCounted"].retries == 3


def test_side_effect_grade_comes_from_the_policy(ingest_client: APIClient) -> None:
    ToolPolicyFactory(collection="shop", tool="chargeCard", side_effect="external_write")
    _ingest(ingest_client, failure_item(tool="chargeCard", occurred_at=_at(1)))
    _scan()
    stakes = _tools()["chargeCard"].criteria[1]
    assert stakes.met and "external_write" in stakes.figure


# --- the retry rules -----------------------------------------------------------------------


def test_a_third_retry_of_a_read_breaks_the_limit_once(ingest_client: APIClient) -> None:
    ToolPolicyFactory(collection="shop", tool="readThrice", side_effect="read")
    ToolPolicyFactory(collection="shop", tool="readTwice", side_effect="read")
    # Ten minutes apart: the 5-minute stop never applies.
    _ingest(ingest_client, *[_receipt("readThrice", "r3", 10 * i) for i in range(4)])
    _ingest(ingest_client, *[_receipt("readTwice", "r2", 10 * i) for i in range(3)])
    _scan()
    assert _findings("readThrice") == {"read_retry_limit": 1}
    assert _findings("readTwice") == {}
    # A fourth retry later is the same operation's broken rule: still counted once.
    _ingest(ingest_client, _receipt("readThrice", "r3", 60))
    _scan()
    assert _findings("readThrice") == {"read_retry_limit": 1}
    assert _tools()["readThrice"].violations == 1


def test_a_retry_inside_the_five_minute_stop_is_counted(ingest_client: APIClient) -> None:
    # The policy allows many retries: only the stop rule is in play.
    ToolPolicyFactory(collection="shop", tool="stopped", side_effect="read", retry_max_attempts=9)
    ToolPolicyFactory(collection="shop", tool="spaced", side_effect="read", retry_max_attempts=9)
    _ingest(ingest_client, *[_receipt("stopped", "s1", i) for i in range(4)])
    # Three failures within 5 minutes, then the next call 6 minutes after the third: allowed.
    _ingest(ingest_client, *[_receipt("spaced", "s2", m) for m in (0, 1, 2, 8.5)])
    _scan()
    assert _findings("stopped") == {"retry_after_stop": 1}
    assert _findings("spaced") == {}


def test_a_retry_of_reconcile_work_before_its_finding_and_after_it(
    ingest_client: APIClient,
) -> None:
    ToolPolicyFactory(collection="shop", tool="sendInvoice", side_effect="external_write")
    ToolPolicyFactory(collection="shop", tool="sendReceipt", side_effect="external_write")
    uncertain = {"reason": "timeout", "execution_state": "started_unknown"}
    _ingest(
        ingest_client,
        _receipt("sendInvoice", "inv-1", 0, **uncertain),
        _receipt("sendInvoice", "inv-1", 1, result="ok", reason="", execution_state="completed"),
        # The other tool looks the operation up first: the lookup completed is a finding.
        _receipt("sendReceipt", "rcpt-1", 0, **uncertain),
        _receipt(
            "sendReceipt", "rcpt-1", 1, result="lookup", reason="", execution_state="completed"
        ),
        _receipt("sendReceipt", "rcpt-1", 2, result="ok", reason="", execution_state="completed"),
    )
    _scan()
    assert _findings("sendInvoice") == {"reconcile_retry": 1}
    assert _findings("sendReceipt") == {}


def test_a_person_s_finding_allows_the_retry_after_it(ingest_client: APIClient) -> None:
    ToolPolicyFactory(collection="shop", tool="refund", side_effect="external_write")
    _ingest(
        ingest_client,
        _receipt("refund", "ref-1", 0, reason="timeout", execution_state="started_unknown"),
    )
    receipt = Receipt.objects.get(tool="refund")
    found = Reconciliation.objects.create(receipt=receipt, finding="not_applied", note="checked")
    Reconciliation.objects.filter(pk=found.pk).update(created_at=START + timedelta(minutes=5))
    _ingest(
        ingest_client,
        _receipt("refund", "ref-1", 10, result="ok", reason="", execution_state="completed"),
    )
    _scan()
    assert _findings("refund") == {}
    assert _tools()["refund"].reconciliations == 1
    assert _tools()["refund"].criteria[2].met  # checked by hand after a timeout


def test_a_retried_policy_block_is_counted(ingest_client: APIClient) -> None:
    _ingest(
        ingest_client,
        _receipt("publish", "pub-1", 0, result="blocked", reason="", execution_state="not_started"),
        _receipt(
            "publish", "pub-1", 30, result="blocked", reason="", execution_state="not_started"
        ),
        _receipt(
            "publishOnce", "pub-2", 0, result="blocked", reason="", execution_state="not_started"
        ),
    )
    _scan()
    assert _findings("publish") == {"policy_block_retry": 1}
    assert _findings("publishOnce") == {}


def test_a_lookup_timeout_must_be_escalated(ingest_client: APIClient) -> None:
    uncertain = {"reason": "timeout", "execution_state": "started_unknown"}
    lookup_timeout = {"result": "lookup", "reason": "timeout", "execution_state": "started_unknown"}
    _ingest(
        ingest_client,
        _receipt("notify", "n-1", 0, **uncertain),
        _receipt("notify", "n-1", 1, **lookup_timeout),
        _receipt("notifyEscalated", "n-2", 0, **uncertain),
        _receipt("notifyEscalated", "n-2", 1, lane="manual_investigation", **lookup_timeout),
    )
    _scan()
    assert _findings("notify") == {"lookup_not_escalated": 1}
    assert _findings("notifyEscalated") == {}


@pytest.mark.parametrize("receipt_first", [True, False])
def test_a_not_started_receipt_that_the_audit_saw_call_out(
    ingest_client: APIClient, receipt_first: bool
) -> None:
    claim = receipt_item(tool="plugin", tool_run_id="tr_claim", result="failed", code="")
    honest = receipt_item(tool="plugin", tool_run_id="tr_honest", result="failed", code="")
    seen = audit_item(tool_run_id="tr_claim", tool="plugin")
    first, second = ([claim, honest], [seen]) if receipt_first else ([seen], [claim, honest])
    _ingest(ingest_client, *first)
    _scan()
    _ingest(ingest_client, *second)
    _scan()
    _scan()
    assert _findings("plugin") == {"not_started_contradicted": 1}
    tool = _tools()["plugin"]
    assert (tool.not_started_claims, tool.contradicted) == (2, 1)
    assert tool.contradicted_share == pytest.approx(0.5)


def test_a_double_completion_is_a_criterion(ingest_client: APIClient) -> None:
    done = {"result": "ok", "reason": "", "execution_state": "completed"}
    _ingest(
        ingest_client,
        _receipt("payout", "p-1", 0, **done),
        _receipt("payout", "p-1", 30, **done),
    )
    _scan()
    tool = _tools()["payout"]
    assert tool.double_completions == 1
    assert tool.criteria[3].met


# --- what runtimes send ----------------------------------------------------------------------


def test_fields_count_as_sent_not_as_derived(ingest_client: APIClient) -> None:
    # The policy gives the desk a grade; the runtime sent none, so it does not count.
    ToolPolicyFactory(collection="shop", tool="derived", side_effect="external_write")
    _ingest(
        ingest_client,
        failure_item(tool="derived", occurred_at=_at(1)),
        failure_item(
            tool="derived",
            occurred_at=_at(2),
            side_effect="external_write",
            idempotency_key="d-1",
            execution_state="started_unknown",
            next_action="query_by_idempotency_key",
            evidence_ref="req_7df1",
        ),
    )
    _scan()
    tool = _tools()["derived"]
    assert dict(tool.shares) == {
        "side_effect": 0.5,
        "idempotency": 0.5,
        "execution_state": 0.5,
        "next_action": 0.5,
        "evidence_ref": 0.5,
    }
    assert tool.coverage == "some"


def test_the_first_batch_is_the_top_five_that_meet_a_criterion(ingest_client: APIClient) -> None:
    for index in range(7):
        ToolPolicyFactory(collection="shop", tool=f"writer{index}", side_effect="external_write")
    _ingest(
        ingest_client,
        *[failure_item(tool=f"writer{index}", occurred_at=_at(index)) for index in range(7)],
        failure_item(tool="quietReader", occurred_at=_at(1)),
        *_successes("quietReader", 1000),
    )
    _scan()
    tools = _tools()
    batch = [tool for tool in tools.values() if tool.first_batch]
    assert len(batch) == 5
    assert not tools["quietReader"].first_batch
    assert all(tool.state == "first_in_line" for tool in batch)


def test_quality_lab_records_are_not_counted(ingest_client: APIClient) -> None:
    _ingest(
        ingest_client,
        failure_item(tool="testedOnly", occurred_at=_at(1)),
        failure_item(tool="inProduction", occurred_at=_at(1)),
    )
    # Quality Lab stores its runs' records itself (the API refuses the source).
    FailureRecord.objects.filter(tool="testedOnly").update(source="quality_lab")
    _scan()
    tools = _tools()
    assert "testedOnly" not in tools
    assert tools["inProduction"].failures == 1


def test_rows_are_read_once_whatever_the_number_of_scans(ingest_client: APIClient) -> None:
    _ingest(ingest_client, *[failure_item(tool="once", occurred_at=_at(i)) for i in range(3)])
    _scan()
    _scan()
    _ingest(ingest_client, failure_item(tool="once", occurred_at=_at(5)))
    _scan()
    assert _tools()["once"].failures == 4


def test_rows_younger_than_the_settle_line_wait_for_the_next_scan(
    ingest_client: APIClient,
) -> None:
    _ingest(ingest_client, failure_item(tool="fresh", occurred_at=_at(1)))
    contracts_scan(now=timezone.now())
    assert "fresh" not in _tools()
    _scan()
    assert _tools()["fresh"].failures == 1


def test_a_window_of_seven_days_leaves_older_days_out(ingest_client: APIClient) -> None:
    old = (timezone.now() - timedelta(days=20)).isoformat()
    _ingest(
        ingest_client,
        failure_item(tool="old", occurred_at=old),
        failure_item(tool="recent", occurred_at=_at(1)),
    )
    _scan()
    overview = contracts_overview(now=timezone.now(), filters=ContractsFilters(days=7))
    assert [tool.tool for tool in overview.tools] == ["recent"]


def test_envelopes_count_their_fields_and_the_five_fields_they_carry(
    ingest_client: APIClient,
) -> None:
    from tests.triage.test_envelope import envelope_item

    _ingest(
        ingest_client,
        envelope_item(occurred_at=_at(1)),
        envelope_item(occurred_at=_at(2), user_safe_message=None, evidence=None),
    )
    _scan()
    tool = _tools()["send_invoice"]
    assert tool.envelopes == 2
    shares = dict(tool.envelope_shares)
    assert shares["status"] == 1.0 and shares["retry.next_action"] == 1.0
    assert shares["user_safe_message"] == 0.5 and shares["evidence"] == 0.5
    # The envelope's next action and key are the contract's, as sent.
    assert tool.share("next_action") == 1.0
    assert tool.share("idempotency") == 1.0
    assert tool.share("evidence_ref") == 0.5


def test_idle_trails_and_old_counters_are_dropped(ingest_client: APIClient) -> None:
    from contracts.models import OperationTrail, ToolDay

    _ingest(ingest_client, _receipt("aging", "old-1", 1))
    _scan()
    assert OperationTrail.objects.filter(tool="aging").exists()
    contracts_scan(now=timezone.now() + timedelta(days=31))
    assert not OperationTrail.objects.filter(tool="aging").exists()
    assert ToolDay.objects.filter(tool="aging").exists()  # counters stay for a year
    contracts_scan(now=timezone.now() + timedelta(days=400))
    assert not ToolDay.objects.filter(tool="aging").exists()


def test_failed_receipts_count_as_failed_calls_without_counting_a_call_twice(
    ingest_client: APIClient,
) -> None:
    done = {"result": "ok", "reason": "", "execution_state": "completed"}
    _ingest(
        ingest_client,
        # Receipts only: 1 failed run, 3 completed.
        _receipt("receiptsOnly", "a", 1),
        *[_receipt("receiptsOnly", f"b{i}", 2 + i, **done) for i in range(3)],
        # The same failed run reported twice: a failure record and a failed receipt.
        failure_item(tool="bothWays", idempotency_key="c", occurred_at=_at(1)),
        _receipt("bothWays", "c", 1),
        *[_receipt("bothWays", f"d{i}", 2 + i, **done) for i in range(3)],
    )
    _scan()
    tools = _tools()
    assert tools["receiptsOnly"].failure_rate == pytest.approx(0.25)
    assert tools["bothWays"].failure_rate == pytest.approx(0.25)
