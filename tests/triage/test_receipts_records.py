"""Receipts that cannot surprise: one verdict per row, confirmed findings, corrections kept
in the history, and run ids that open their failure group."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.factories import failure_item, receipt_item
from tests.triage.test_receipts import PAGE, _failure, _ingest, _record, _uncertain, _user
from triage import receipts
from triage.models import FailureGroup, Receipt, Reconciliation
from triage.services import ReconcileError, receipt_reconcile
from triage.vocabulary.lanes import most_cautious_lane

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client: Client) -> Any:
    user = _user("operator", "kim")
    client.force_login(user)
    return user


def _url(receipt: Receipt) -> str:
    return reverse("triage:receipt-reconcile", args=[receipt.pk])


def _rows_of(response: Any, key: str) -> list[receipts.ContradictionRow]:
    return next(f.rows for f in response.context["overview"].contradictions if f.rule.key == key)


def _section(content: str, element_id: str) -> str:
    start = content.index(f'id="{element_id}"')
    return content[start : content.index("</tbody>", start)]


# --- one verdict per row --------------------------------------------------------------------


def test_the_most_cautious_lane_wins() -> None:
    assert most_cautious_lane("retry_safe", "reconcile_first") == "reconcile_first"
    assert most_cautious_lane("policy_blocked", "manual_investigation") == "policy_blocked"
    assert most_cautious_lane("", "input_stale") == "input_stale"
    assert most_cautious_lane("", "not_a_lane") == ""


def test_a_keyless_external_write_never_shows_retry_safe(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        _failure(
            tool_run_id="tr_keyless", side_effect="external_write", lane="retry_safe",
            result="ok", code="", seconds_ago=30,
        ),
    )  # fmt: skip
    assert Receipt.objects.get().lane == "retry_safe"  # the runtime's lane, kept as sent
    response = client.get(PAGE)
    [row] = _rows_of(response, "external-write-without-key")
    assert row.verdict == "manual_investigation"
    section = response.content.decode().split('id="external-write-without-key"')[1]
    section = section.split("</table>")[0]
    assert "a retry may repeat it" in section
    assert 'class="pill lane-retry_safe"' not in section
    assert 'class="pill lane-manual_investigation"' in section
    assert "receipt said retry_safe" in section


def test_each_rule_raises_the_verdict_to_its_floor(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        _failure(tool_run_id="tr_blocked", lane="policy_blocked", retryable=True, seconds_ago=5),
    )
    [row] = _rows_of(client.get(PAGE), "retryable-policy-blocked")
    assert row.verdict == "policy_blocked"


def test_uncertain_writes_wait_as_reconcile_first_whatever_lane_was_sent(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(
        ingest_client,
        _uncertain(tool_run_id="tr_sent_safe", lane="retry_safe"),
        _uncertain(tool_run_id="tr_read", side_effect="read", lane="retry_safe"),
    )
    items = {item.receipt.tool_run_id: item for item in client.get(PAGE).context["queue"].items}
    assert items["tr_sent_safe"].verdict == "reconcile_first"
    assert items["tr_sent_safe"].blocks_retry
    assert items["tr_read"].verdict == items["tr_read"].receipt.lane


# --- findings are confirmed ----------------------------------------------------------------


def test_recording_not_applied_asks_first_and_records_nothing(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    receipt = Receipt.objects.get()
    response = client.post(_url(receipt), {"finding": "not_applied", "note": "404 by key"})
    assert response.status_code == 200
    assert not Reconciliation.objects.exists()
    content = response.content.decode()
    assert "Record that tr_mail was not_applied?" in content
    assert "a retry is now safe with the same idempotency key" in content
    assert 'name="step" value="confirm"' in content
    assert 'type="hidden" name="note" value="404 by key"' in content
    # Still waiting: nothing changed until the person confirms.
    assert [item.receipt for item in response.context["queue"].items] == [receipt]


def test_every_finding_asks_first_with_htmx_too(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    receipt = Receipt.objects.get()
    response = client.post(
        _url(receipt),
        {"finding": "applied", "note": "seen"},
        headers={"HX-Request": "true"},
    )
    content = response.content.decode().strip()
    assert content.startswith('<section id="queue"')
    assert "Record that tr_mail was applied?" in content
    assert "do not retry" in content
    assert not Reconciliation.objects.exists()


def test_change_it_goes_back_to_the_form_with_what_was_typed(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    receipt = Receipt.objects.get()
    response = client.post(
        _url(receipt), {"finding": "not_applied", "note": "typed note", "step": "edit"}
    )
    content = _section(response.content.decode(), f"receipt-{receipt.pk}")
    assert "typed note</textarea>" in content
    assert re.search(r'value="not_applied" required checked', content)
    assert "Record that" not in content
    assert not Reconciliation.objects.exists()


@pytest.mark.parametrize(
    "data",
    [
        {"finding": "maybe", "note": "x"},
        {"finding": "applied", "note": "x", "step": "sure"},
        {"finding": "applied", "note": "x", "corrects": "abc"},
        {"finding": "applied", "note": "x", "corrects": "0"},
        {"finding": "applied", "note": "x" * 4001},
    ],
)
def test_bad_posts_say_nothing_was_recorded(
    client: Client, operator: Any, ingest_client: APIClient, data: dict[str, str]
) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    response = client.post(_url(receipt), data)
    assert response.status_code == 200
    assert "Nothing was recorded" in response.content.decode()
    assert not Reconciliation.objects.exists()


# --- corrections ----------------------------------------------------------------------------


def test_a_later_finding_corrects_an_earlier_one_and_both_stay(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    receipt = Receipt.objects.get()
    _record(client, receipt, {"finding": "not_applied", "note": "404 by key"})
    first = Reconciliation.objects.get()

    asked = client.post(
        _url(receipt), {"finding": "applied", "note": "the mail log has it", "corrects": first.pk}
    )
    content = asked.content.decode()
    assert "Record that tr_mail was applied?" in content
    assert "This corrects the finding not_applied recorded by kim" in content
    assert Reconciliation.objects.count() == 1

    response = _record(
        client, receipt, {"finding": "applied", "note": "the mail log has it", "corrects": first.pk}
    )
    assert response.status_code == 302
    second = Reconciliation.objects.exclude(pk=first.pk).get()
    assert (second.corrects, second.finding, second.actor) == (first, "applied", operator)

    page = client.get(PAGE)
    [run] = page.context["queue"].recent
    assert run.current == second and run.earlier == [first]
    assert run.consequence.startswith("Done remotely: do not retry")
    section = _section(page.content.decode(), f"reconciled-{receipt.pk}")
    assert "earlier finding, corrected" in section
    assert "<s>not_applied</s>" in section and "404 by key" in section
    assert "a retry is now safe" not in section
    assert f'name="corrects" value="{second.pk}"' in section
    assert f'name="corrects" value="{first.pk}"' not in section


def test_only_the_current_finding_can_be_corrected(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    receipt = Receipt.objects.get()
    first = receipt_reconcile(receipt=receipt, actor=operator, finding="applied", note="a")
    receipt_reconcile(
        receipt=receipt, actor=operator, finding="not_applied", note="b", corrects=first
    )
    with pytest.raises(ReconcileError, match="corrected that finding already"):
        receipt_reconcile(
            receipt=receipt, actor=operator, finding="applied", note="c", corrects=first
        )
    response = _record(client, receipt, {"finding": "applied", "note": "c", "corrects": first.pk})
    assert response.status_code == 302
    assert Reconciliation.objects.count() == 2
    assert "corrected that finding already" in client.get(PAGE).content.decode()


def test_a_finding_of_another_run_cannot_be_corrected_through_this_one(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain(tool_run_id="tr_a"), _uncertain(tool_run_id="tr_b"))
    receipt_a, receipt_b = Receipt.objects.order_by("tool_run_id")
    finding = receipt_reconcile(receipt=receipt_a, actor=operator, finding="applied", note="a")
    _record(client, receipt_b, {"finding": "applied", "note": "x", "corrects": finding.pk})
    assert Reconciliation.objects.count() == 1
    with pytest.raises(ReconcileError, match="another run"):
        receipt_reconcile(
            receipt=receipt_b, actor=operator, finding="applied", note="x", corrects=finding
        )


def test_the_database_refuses_a_second_first_finding(
    operator: Any, ingest_client: APIClient
) -> None:
    _ingest(ingest_client, _uncertain())
    receipt = Receipt.objects.get()
    receipt_reconcile(receipt=receipt, actor=operator, finding="applied", note="a")
    with pytest.raises(IntegrityError), transaction.atomic():
        Reconciliation.objects.create(receipt=receipt, finding="not_applied", note="b")


def test_a_viewer_sees_the_history_but_no_correction_form(
    client: Client, ingest_client: APIClient
) -> None:
    operator = _user("operator", "kim")
    _ingest(ingest_client, _uncertain(tool_run_id="tr_mail"))
    receipt = Receipt.objects.get()
    first = receipt_reconcile(receipt=receipt, actor=operator, finding="applied", note="a")
    receipt_reconcile(
        receipt=receipt, actor=operator, finding="not_applied", note="b", corrects=first
    )
    client.force_login(_user("viewer"))
    content = client.get(PAGE).content.decode()
    assert "earlier finding, corrected" in content
    assert "Correct this finding" not in content


# --- run ids open their group ---------------------------------------------------------------


def _post(ingest_client: APIClient, *items: dict[str, Any]) -> None:
    response = ingest_client.post(
        "/api/v1/ingest", data=json.dumps({"items": list(items)}), content_type="application/json"
    )
    assert response.status_code == 200, response.content


def test_run_ids_link_to_the_group_of_their_tool_and_reason(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _post(
        ingest_client,
        failure_item(stage="execute", reason="timeout", tool="sendInvoiceEmail", collection="shop"),
        failure_item(
            stage="execute", reason="http_5xx", tool="sendInvoiceEmail", collection="shop"
        ),
        _uncertain(tool_run_id="tr_mail", reason="timeout"),
        receipt_item(tool_run_id="tr_policy", tool="publish_changelog"),
    )
    group = FailureGroup.objects.get(reason="timeout")
    content = client.get(PAGE).content.decode()
    group_url = reverse("triage:group", args=[group.pk])
    assert re.search(rf'<a href="{group_url}"[^>]*>tr_mail</a>', content)
    # No group of publish_changelog: the link lists the tool's groups on the triage page.
    match = re.search(r'<a href="([^"]+)"[^>]*>tr_policy</a>', content)
    assert match and match.group(1).startswith("/?")
    assert "tool=publish_changelog" in match.group(1) and "status=all" in match.group(1)


def test_a_tools_only_group_is_its_runs_group(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _post(
        ingest_client,
        failure_item(stage="execute", reason="http_5xx", tool="getDelivery", collection="shop"),
        _failure(tool_run_id="tr_budget", seconds_ago=10),
    )
    group = FailureGroup.objects.get()
    receipt = Receipt.objects.get()
    links = receipts.group_links([receipts.run_key(receipt)])
    assert links[receipts.run_key(receipt)].url == reverse("triage:group", args=[group.pk])


def test_the_group_page_shows_each_related_run_by_its_one_verdict(
    client: Client, operator: Any, ingest_client: APIClient
) -> None:
    _post(
        ingest_client,
        failure_item(stage="execute", reason="timeout", tool="sendInvoiceEmail", collection="shop"),
        _uncertain(tool_run_id="tr_sent_safe", lane="retry_safe", idempotency_key=""),
    )
    receipt = Receipt.objects.get()
    # No key to look the write up by: investigation, not a lookup.
    assert receipt.lane == "reconcile_first" and receipt.verdict == "manual_investigation"
    group = FailureGroup.objects.get()
    content = client.get(reverse("triage:group", args=[group.pk])).content.decode()
    related = content.split("Related receipts")[1].split("</table>")[0]
    assert "tr_sent_safe" in related
    assert 'class="pill lane-manual_investigation"' in related
    assert "lane-reconcile_first" not in related and "lane-retry_safe" not in related


def test_a_plain_success_has_no_verdict() -> None:
    receipt = Receipt(lane="", execution_state="completed", side_effect="external_write")
    assert receipt.verdict == ""
    read = Receipt(lane="retry_safe", execution_state="started_unknown", side_effect="read")
    assert read.verdict == "retry_safe"
