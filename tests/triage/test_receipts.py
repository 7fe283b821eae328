"""The receipts page: the reconciliation queue, contradictions, retry budgets, policy blocks."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from organisation.roles import ensure_role_group
from tests.factories import ToolPolicyFactory, audit_item, receipt_item
from triage import receipts
from triage.models import AuditEvent, Receipt, Reconciliation

pytestmark = pytest.mark.django_db

PAGE = reverse("triage:receipts")


def _reconcile_url(receipt: Receipt) -> str:
    return reverse("triage:receipt-reconcile", args=[receipt.pk])


def _record(client: Client, receipt: Receipt, data: dict[str, Any], **headers: str) -> Any:
    """Post a finding and confirm it, as the page asks (two steps)."""
    return client.post(_reconcile_url(receipt), {**data, "step": "confirm"}, headers=headers)


def _ago(**delta: float) -> str:
    return (timezone.now() - timedelta(**delta)).isoformat()


def _ingest(client: APIClient, *items: dict[str, Any]) -> None:
    response = client.post(
        "/api/v1/ingest", data=json.dumps({"items": list(items)}), content_type="application/json"
    )
    assert response.status_code == 200, response.content


def _user(role: str, username: str | None = None) -> Any:
    user = get_user_model().objects.create_user(username=username or role, password="unused-pw")
    user.groups.add(ensure_role_group(role))
    return user


@pytest.fixture
def operator(client: Client) -> Any:
    user = _user("operator")
    client.force_login(user)
    return user


@pytest.fixture
def viewer(client: Client) -> Any:
    user = _user("viewer")
    client.force_login(user)
    return user


def _uncertain(**body: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "tool": "sendInvoiceEmail",
        "side_effect": "external_write",
        "result": "uncertain",
        "code": "REMOTE_TIMEOUT_AFTER_ACCEPT",
        "execution_state": "started_unknown",
        "next_action": "query_by_idempotency_key",
        "idempotency_key": "notify:invoice-819:2026-10-29",
        "evidence_ref": "req_7df1",
    }
    fields.update(body)
    return receipt_item(**fields)


def _failure(key: str = "", *, seconds_ago: float, **body: Any) -> dict[str, Any]:
    moment = _ago(seconds=seconds_ago)
    fields: dict[str, Any] = {
        "tool": "getDelivery",
        "result": "failed",
        "code": "HTTP_503",
        "execution_state": "completed",
        "next_action": "retry_with_backoff",
        "idempotency_key": key,
        "started_at": moment,
        "ended_at": moment,
    }
    fields.update(body)
    return receipt_item(**fields)


def _completed(key: str, **body: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "tool": "createRefund",
        "result": "ok",
        "code": "",
        "execution_state": "completed",
        "next_action": "",
        "idempotency_key": key,
        "payload_hash": "sha256:payload-1",
    }
    fields.update(body)
    return receipt_item(**fields)


# --- the page -------------------------------------------------------------------------------


def test_viewer_sees_the_page(client: Client, viewer: Any) -> None:
    response = client.get(PAGE)
    assert response.status_code == 200
    assert "triage/receipts.html" in [template.name for template in response.templates]
    content = response.content.decode()
    for section in ("queue", "contradictions", "retry-budget", "policy-blocks"):
        assert f'id="{section}"' in content and f'href="#{section}"' in content


def test_an_empty_desk_says_so_in_every_section(client: Client, viewer: Any) -> None:
    content = client.get(PAGE).content.decode()
    assert "Nothing is waiting" in content
    assert "No reconciliation has been recorded yet." in content
    assert content.count("No receipt breaks this rule.") == len(receipts.CONTRADICTION_RULES)
    assert "No operation used up its retry budget" in content
    assert "No run was blocked by policy." in content


def test_anonymous_is_sent_to_login(client: Client) -> None:
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_user_without_a_role_is_refused(client: Client) -> None:
    client.force_login(get_user_model().objects.create_user(username="nobody"))
    assert client.get(PAGE).status_code == 403


# --- 1. uncertain work ----------------------------------------------------------------------


def test_uncertain_work_waits_oldest_first(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        _uncertain(tool_run_id="tr_new", ended_at=_ago(minutes=5)),
        _uncertain(
            tool_run_id="tr_old", execution_state="partially_completed", ended_at=_ago(hours=3)
        ),
        _uncertain(tool_run_id="tr_done", execution_state="completed", result="ok"),
        _uncertain(tool_run_id="tr_never", execution_state="not_started"),
    )
    queue = client.get(PAGE).context["queue"]
    assert [item.receipt.tool_run_id for item in queue.items] == ["tr_old", "tr_new"]
    assert queue.total == 2


def test_the_queue_shows_what_an_operator_needs(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    ToolPolicyFactory(
        collection="shop",
        tool="sendInvoiceEmail",
        side_effect="external_write",
        idempotency_lookup="GET /mails/by-key/{key}",
    )
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail", ended_at=_ago(hours=2)))
    content = client.get(PAGE).content.decode()
    for text in (
        "tr_mail",
        "sendInvoiceEmail",
        "external_write",
        "notify:invoice-819:2026-10-29",
        "REMOTE_TIMEOUT_AFTER_ACCEPT",
        "query_by_idempotency_key",
        "reconcile_first",
        "req_7df1",
        ">2\xa0hours<",
        "GET /mails/by-key/notify:invoice-819:2026-10-29",
    ):
        assert text in content, text


def test_a_viewer_sees_no_reconcile_form(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    content = client.get(PAGE).content.decode()
    assert 'name="finding"' not in content
    assert _reconcile_url(receipt) not in content


def test_reconcile_first_work_offers_no_retry_until_reconciled(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    assert receipt.lane == "reconcile_first"
    content = client.get(PAGE).content.decode()
    assert _reconcile_url(receipt) in content
    assert "No retry until reconciled." in content
    assert not re.search(r"<button[^>]*>[^<]*retry", content, re.IGNORECASE)
    assert "a retry is now safe" not in content


def test_an_operator_records_a_reconciliation(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    receipt = Receipt.objects.get()
    response = _record(
        client, receipt, {"finding": "not_applied", "note": "GET /mails/by-key returned 404"}
    )
    assert response.status_code == 302
    assert response["Location"] == PAGE
    reconciliation = Reconciliation.objects.get()
    assert (reconciliation.receipt, reconciliation.actor) == (receipt, operator)
    assert reconciliation.finding == "not_applied"

    page = client.get(PAGE)
    assert page.context["queue"].items == []
    content = page.content.decode()
    assert "tr_mail reconciled" in content
    assert "GET /mails/by-key returned 404" in content
    assert "a retry is now safe with the same idempotency key" in content
    # The run left the queue; what stays is the form that corrects its finding.
    assert f'id="receipt-{receipt.pk}"' not in content
    assert f'name="corrects" value="{reconciliation.pk}"' in content


def test_applied_work_is_not_called_safe_to_retry(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    _record(client, receipt, {"finding": "applied", "note": "mail-88412 was sent"})
    content = client.get(PAGE).content.decode()
    assert "do not retry" in content
    assert "a retry is now safe" not in content


def test_a_reconciliation_needs_a_note(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    response = client.post(_reconcile_url(receipt), {"finding": "applied", "note": "  "})
    assert response.status_code == 200
    assert "the note is required" in response.content.decode()
    assert not Reconciliation.objects.exists()
    assert [item.receipt for item in response.context["queue"].items] == [receipt]


def test_work_reconciled_already_is_not_recorded_twice(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    for _ in range(2):
        _record(client, receipt, {"finding": "applied", "note": "seen remotely"})
    assert Reconciliation.objects.count() == 1


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_only_operators_may_reconcile(client: Client, ingest_client: APIClient, role: str) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    client.force_login(_user(role))
    response = client.post(_reconcile_url(receipt), {"finding": "applied", "note": "looked"})
    assert response.status_code == 403
    assert not Reconciliation.objects.exists()


def test_reconciling_needs_the_csrf_token(ingest_client: APIClient) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user("operator"))
    response = client.post(_reconcile_url(receipt), {"finding": "applied", "note": "looked"})
    assert response.status_code == 403
    assert not Reconciliation.objects.exists()


def test_htmx_gets_only_the_queue(client: Client, viewer: Any, ingest_client: APIClient) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    response = client.get(PAGE, headers={"HX-Request": "true"})
    assert response.status_code == 200
    content = response.content.decode().strip()
    assert content.startswith('<section id="queue"')
    assert content.endswith("</section>")
    assert "tr_mail" in content
    assert 'id="contradictions"' not in content and "<html" not in content


def test_reconciling_with_htmx_swaps_the_queue(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    receipt = Receipt.objects.get()
    response = _record(
        client,
        receipt,
        {"finding": "partially_applied", "note": "2 of 3 lines written"},
        **{"HX-Request": "true"},
    )
    assert response.status_code == 200
    content = response.content.decode().strip()
    assert content.startswith('<section id="queue"')
    assert "tr_mail reconciled" in content
    assert '<strong id="count-queue" hx-swap-oob="true">0</strong>' in content
    assert "2 of 3 lines written" in content
    assert Reconciliation.objects.get().finding == "partially_applied"


# --- 2. contradictions ----------------------------------------------------------------------


def _rule_rows(response: Any, key: str) -> list[receipts.ContradictionRow]:
    for findings in response.context["overview"].contradictions:
        if findings.rule.key == key:
            return findings.rows
    raise AssertionError(key)


def test_not_started_is_contradicted_by_an_audited_call(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        _failure(tool_run_id="tr_by_run", execution_state="not_started", seconds_ago=60),
        _failure(
            "cancel:ord-9", tool_run_id="tr_by_key", execution_state="not_started", seconds_ago=60
        ),
        _failure(
            "retry-key", tool_run_id="tr_first", execution_state="not_started", seconds_ago=60
        ),
        _failure(tool_run_id="tr_quiet", execution_state="not_started", seconds_ago=60),
        audit_item(tool_run_id="tr_by_run", host="orders.internal", status=None),
        audit_item(tool_run_id="", idempotency_key="cancel:ord-9", status=202),
        # The retry (another run with the same key) made the call, not the first run.
        audit_item(tool_run_id="tr_second", idempotency_key="retry-key"),
        # An audit line without a method or host saw no outbound call.
        audit_item(tool_run_id="tr_quiet", method="", host=""),
    )
    response = client.get(PAGE)
    rows = _rule_rows(response, "not-started-but-called")
    assert sorted(row.tool_run_id for row in rows) == ["tr_by_key", "tr_by_run"]
    by_run = next(row for row in rows if row.tool_run_id == "tr_by_run")
    assert "POST orders.internal/release-notes (no status)" in by_run.evidence
    assert "matched by run id" in by_run.evidence
    assert (
        "by idempotency key" in next(row for row in rows if row.tool_run_id == "tr_by_key").evidence
    )
    assert "Claims not_started, but the audit saw the call" in response.content.decode()


def test_one_key_completed_for_different_targets_is_a_contradiction(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        _completed("refund:1", target_fingerprint="sha256:aaa"),
        _completed("refund:1", target_fingerprint="sha256:bbb", result="SUCCESS"),
        _completed("refund:2", target_fingerprint="sha256:ccc"),
        _completed("refund:2", target_fingerprint="sha256:ccc", payload_hash="sha256:payload-2"),
        # Same key, same target and payload: a duplicate, not a contradiction.
        _completed("refund:3", target_fingerprint="sha256:ddd"),
        _completed("refund:3", target_fingerprint="sha256:ddd"),
        # A failed run does not complete the operation.
        _completed("refund:4", target_fingerprint="sha256:eee"),
        _completed("refund:4", target_fingerprint="sha256:fff", result="failed"),
        # A missing payload hash is missing evidence, not a second payload.
        _completed("refund:5", target_fingerprint="sha256:ggg"),
        _completed("refund:5", target_fingerprint="sha256:ggg", payload_hash=""),
    )
    rows = _rule_rows(client.get(PAGE), "conflicting-completions")
    assert sorted(row.idempotency_key for row in rows) == ["refund:1", "refund:2"]
    refund_1 = next(row for row in rows if row.idempotency_key == "refund:1")
    assert refund_1.evidence == "2 targets (sha256:aaa ≠ sha256:bbb)"
    assert refund_1.tool_run_id == "2 runs"


def test_an_external_write_without_a_key_is_a_contradiction(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        _failure(tool_run_id="tr_keyless", side_effect="external_write", seconds_ago=30),
        _failure("cancel:1", tool_run_id="tr_keyed", side_effect="external_write", seconds_ago=30),
        _failure(tool_run_id="tr_read", side_effect="read", seconds_ago=30),
    )
    assert Receipt.objects.get(tool_run_id="tr_keyless").contradictions
    rows = _rule_rows(client.get(PAGE), "external-write-without-key")
    assert [row.tool_run_id for row in rows] == ["tr_keyless"]


def test_a_stored_contradiction_code_is_listed_too(client: Client, viewer: Any) -> None:
    Receipt.objects.create(
        tool_run_id="tr_stored",
        tool="cancelOrder",
        result="blocked",
        execution_state="not_started",
        lane="policy_blocked",
        retryable=False,
        contradictions=[{"code": "retryable_in_policy_blocked", "field": "retryable"}],
    )
    rows = _rule_rows(client.get(PAGE), "retryable-policy-blocked")
    assert [row.tool_run_id for row in rows] == ["tr_stored"]


def test_retryable_in_policy_blocked_is_a_contradiction(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        receipt_item(tool_run_id="tr_retryable_block", retryable=True),
        receipt_item(tool_run_id="tr_block", retryable=False),
    )
    assert Receipt.objects.get(tool_run_id="tr_retryable_block").lane == "policy_blocked"
    response = client.get(PAGE)
    rows = _rule_rows(response, "retryable-policy-blocked")
    assert [row.tool_run_id for row in rows] == ["tr_retryable_block"]
    assert rows[0].claim == "retryable: true"


def test_contradiction_lists_are_capped_but_counted(client: Client, viewer: Any) -> None:
    Receipt.objects.bulk_create(
        Receipt(
            tool_run_id=f"tr_{number}",
            tool="cancelOrder",
            side_effect="external_write",
            result="failed",
            execution_state="completed",
        )
        for number in range(receipts.LIST_LIMIT + 3)
    )
    response = client.get(PAGE)
    findings = next(
        f
        for f in response.context["overview"].contradictions
        if f.rule.key == "external-write-without-key"
    )
    assert (len(findings.rows), findings.total) == (receipts.LIST_LIMIT, receipts.LIST_LIMIT + 3)
    assert f"The newest {receipts.LIST_LIMIT} of {receipts.LIST_LIMIT + 3}" in (
        response.content.decode()
    )


# --- 3. retry budgets -----------------------------------------------------------------------


def _over_budget(client: Client) -> list[receipts.OverBudget]:
    return client.get(PAGE).context["overview"].retry_budget.operations


def test_three_failures_within_five_minutes_are_over_the_budget(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        *(_failure("delivery:1", seconds_ago=seconds) for seconds in (290, 150, 10)),
        *(_failure("delivery:2", seconds_ago=seconds) for seconds in (200, 20)),
        # Three failures, but never three within 300 s of each other.
        *(_failure("delivery:3", seconds_ago=seconds) for seconds in (1000, 600, 10)),
        # A success is not a failure.
        *(_failure("delivery:4", seconds_ago=s, result="ok") for s in (200, 100, 10)),
    )
    operations = _over_budget(client)
    assert [operation.idempotency_key for operation in operations] == ["delivery:1"]
    assert (operations[0].peak, operations[0].budget.source) == (3, "default")


def test_without_a_key_the_target_names_the_operation(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        *(_failure(target_fingerprint="sha256:one", seconds_ago=s) for s in (120, 60, 5)),
        *(_failure(target_fingerprint=f"sha256:{s}", seconds_ago=s) for s in (121, 61, 6)),
    )
    operations = _over_budget(client)
    assert [operation.target_fingerprint for operation in operations] == ["sha256:one"]


def test_a_tool_policy_sets_the_retry_budget(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, *(_failure("delivery:2", seconds_ago=s) for s in (200, 20)))
    assert _over_budget(client) == []
    ToolPolicyFactory(collection="", tool="getDelivery", retry_budget_failures=2)
    operations = _over_budget(client)
    assert [operation.idempotency_key for operation in operations] == ["delivery:2"]
    assert operations[0].budget.source == "*/getDelivery"
    assert "2 in 300 s" in client.get(PAGE).content.decode()


def test_a_collection_policy_wins_over_the_tool_wide_one(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, *(_failure("delivery:1", seconds_ago=s) for s in (200, 100, 20)))
    ToolPolicyFactory(collection="", tool="getDelivery", retry_budget_failures=2)
    ToolPolicyFactory(collection="shop", tool="getDelivery", retry_budget_failures=5)
    assert _over_budget(client) == []


def test_the_budget_window_comes_from_the_policy(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, *(_failure("delivery:1", seconds_ago=s) for s in (290, 150, 10)))
    ToolPolicyFactory(collection="shop", tool="getDelivery", retry_budget_window_seconds=120)
    assert _over_budget(client) == []


def test_failures_older_than_the_lookback_do_not_count(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    day = 24 * 3600
    _ingest(ingest_client, *(_failure("delivery:1", seconds_ago=day + s) for s in (90, 60, 30)))
    assert _over_budget(client) == []


def test_peak_counts_the_busiest_window() -> None:
    start = datetime(2026, 11, 1, tzinfo=timezone.get_current_timezone())
    times = [start + timedelta(seconds=s) for s in (0, 400, 450, 700, 701, 2000)]
    assert receipts._peak(times, timedelta(seconds=300)) == (3, times[1], times[3])


# --- 4. policy blocks -----------------------------------------------------------------------


def test_policy_blocks_are_listed_newest_first(
    client: Client, viewer: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        receipt_item(tool_run_id="tr_old_block", ended_at=_ago(hours=5)),
        receipt_item(tool_run_id="tr_new_block", ended_at=_ago(minutes=5)),
        _failure("delivery:1", seconds_ago=30),
    )
    response = client.get(PAGE)
    blocks = response.context["overview"].policy_blocks
    assert [receipt.tool_run_id for receipt in blocks.receipts] == ["tr_new_block", "tr_old_block"]
    content = response.content.decode()
    for text in (
        "POLICY_APPROVAL_REQUIRED",
        "request_approval",
        "policy://release-note/approval-required/v3",
        "repo:docs / write:release-note",
    ):
        assert text in content


# --- queries ----------------------------------------------------------------------------------


def _fill(count: int, operator: Any) -> None:
    now = timezone.now()
    kinds: list[dict[str, Any]] = [
        {"execution_state": "started_unknown", "lane": "reconcile_first", "result": "uncertain"},
        {"execution_state": "not_started", "lane": "policy_blocked", "result": "blocked"},
        {"execution_state": "completed", "lane": "", "result": "ok"},
        {"execution_state": "completed", "lane": "retry_safe", "result": "failed"},
        {"execution_state": "not_started", "lane": "retry_safe", "result": "failed"},
    ]
    rows = Receipt.objects.bulk_create(
        Receipt(
            tool_run_id=f"tr_{number}",
            tool=f"tool{number % 3}",
            collection="shop",
            side_effect="external_write",
            idempotency_key=f"op:{number % 7}" if number % 4 else "",
            target_fingerprint=f"sha256:{number % 5}",
            payload_hash=f"sha256:p{number % 2}",
            retryable=number % 2 == 0,
            ended_at=now - timedelta(seconds=number * 10),
            **kinds[number % len(kinds)],
        )
        for number in range(count)
    )
    AuditEvent.objects.bulk_create(
        AuditEvent(tool_run_id=f"tr_{number}", method="POST", host="x", occurred_at=now)
        for number in range(0, count, 3)
    )
    Reconciliation.objects.bulk_create(
        Reconciliation(receipt=receipt, finding="applied", note="seen", actor=operator)
        for receipt in rows[::10]
    )
    ToolPolicyFactory(collection="shop", tool="tool1", retry_budget_failures=2)


@pytest.mark.parametrize("count", [5, 200])
def test_the_page_needs_the_same_queries_for_5_or_200_receipts(
    client: Client, operator: Any, django_assert_max_num_queries: Any, count: int
) -> None:
    _fill(count, operator)
    with django_assert_max_num_queries(22):
        response = client.get(PAGE)
    assert response.status_code == 200
