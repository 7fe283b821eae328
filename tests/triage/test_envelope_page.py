"""The group page shows the envelope the agent received (extra["envelope"])."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import failure_item, receipt_item
from tests.triage.test_envelope import envelope_item
from triage.models import FailureGroup
from triage.templatetags.envelopes import breakable_code

pytestmark = pytest.mark.django_db


def ingest(client: APIClient, items: list[dict[str, Any]]) -> None:
    response = client.post(
        "/api/v1/ingest", data=json.dumps({"items": items}), content_type="application/json"
    )
    assert response.status_code == 200, response.content


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


def test_the_group_page_shows_the_newest_envelope_compactly(
    ingest_client: APIClient, client_as: Callable[[str], Client]
) -> None:
    # A newer report of the same failure, without an envelope, does not hide the envelope.
    newer = failure_item(reason="timeout", tool="send_invoice", collection="billing")
    newer["body"]["occurred_at"] = timezone.now().isoformat()
    older = envelope_item(occurred_at=(timezone.now() - timedelta(minutes=5)).isoformat())
    ingest(ingest_client, [older, newer])
    group = FailureGroup.objects.get()
    content = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    card = content[content.index('id="agent-envelope"') : content.index('id="records"')]
    shown = text_of(card)
    assert "What the agent was told" in shown
    assert "uncertain REMOTE_TIMEOUT_AFTER_ACCEPT" in shown
    assert "not allowed · write may have been accepted" in shown
    assert "next action query_by_idempotency_key" in shown
    assert "started_unknown · key notify:invoice-819:2026-10-29" in shown
    assert 'request_id: "req_7df1"' in shown
    assert "“발송 결과를 확인 중입니다. 재전송하지 않았습니다.”" in shown


def test_each_record_row_carries_its_own_envelope_in_the_partial_too(
    ingest_client: APIClient, client_as: Callable[[str], Client]
) -> None:
    ingest(
        ingest_client,
        [
            envelope_item(),
            failure_item(reason="timeout", tool="send_invoice", collection="billing"),
        ],
    )
    group = FailureGroup.objects.get()
    response = client_as("viewer").get(
        f"/triage/groups/{group.pk}/", headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    content = response.content.decode()
    assert 'id="records"' in content and 'id="agent-envelope"' not in content
    rows = re.findall(r"<tr data-shortcut-row>.*?</tr>", content, re.S)
    assert len(rows) == 2
    with_envelope = [row for row in rows if "record-envelope" in row]
    assert len(with_envelope) == 1
    summary = text_of(re.findall(r"<summary>.*?</summary>", with_envelope[0], re.S)[0])
    told = "envelope uncertain · REMOTE_TIMEOUT_AFTER_ACCEPT → query_by_idempotency_key"
    assert summary.strip() == told
    # The record's evidence is right beside it: the row does not repeat it.
    assert with_envelope[0].count("req_7df1") == 1


def test_a_group_without_envelopes_shows_no_envelope_block(
    ingest_client: APIClient, client_as: Callable[[str], Client]
) -> None:
    ingest(ingest_client, [failure_item()])
    group = FailureGroup.objects.get()
    content = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    assert 'id="agent-envelope"' not in content and "record-envelope" not in content


def test_an_unmapped_envelope_code_says_how_to_map_it(
    ingest_client: APIClient, client_as: Callable[[str], Client]
) -> None:
    ingest(ingest_client, [envelope_item(code="VENDOR_QUOTA_DANCE")])
    group = FailureGroup.objects.get()
    content = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    advice = content[content.index('id="unmapped-envelope-code"') :]
    advice = advice[: advice.index("</p>")]
    assert "TRIAGE_ENVELOPE_CODES" in advice and 'href="/ingestion/#unmapped"' in advice
    assert "triage/vocabulary/taxonomy.py" not in advice


def test_the_envelope_is_shown_in_korean(
    ingest_client: APIClient, client_as: Callable[[str], Client]
) -> None:
    ingest(ingest_client, [envelope_item()])
    group = FailureGroup.objects.get()
    content = (
        client_as("viewer")
        .get(f"/triage/groups/{group.pk}/", headers={"Accept-Language": "ko"})
        .content.decode()
    )
    card = text_of(content[content.index('id="agent-envelope"') : content.index('id="records"')])
    assert "What the agent was told" not in card
    assert "next action" not in card and "not allowed" not in card
    assert "REMOTE_TIMEOUT_AFTER_ACCEPT" in card  # codes are never translated


def test_the_unmapped_code_advice_is_translated_on_both_pages(
    ingest_client: APIClient, client_as: Callable[[str], Client], admin_client: Client
) -> None:
    ingest(ingest_client, [envelope_item(code="VENDOR_QUOTA_DANCE")])
    group = FailureGroup.objects.get()
    korean = {"Accept-Language": "ko"}
    page = client_as("viewer").get(f"/triage/groups/{group.pk}/", headers=korean)
    advice = page.content.decode().split('id="unmapped-envelope-code"')[1].split("</p>")[0]
    assert "매핑되지 않은 엔벨로프의 코드입니다" in advice
    ingestion = admin_client.get("/ingestion/", headers=korean).content.decode()
    help_text = ingestion.split('id="envelope-codes-help"')[1].split("</p>")[0]
    assert "기존 원인에 매핑하세요" in help_text and "TRIAGE_ENVELOPE_CODES" in help_text
    assert "엔벨로프 코드" in ingestion.split('id="unmapped"')[1].split('id="keys"')[0]


def test_the_card_says_when_the_desk_disagrees_with_what_the_agent_was_told(
    ingest_client: APIClient, client_as: Callable[[str], Client]
) -> None:
    told_to_retry = envelope_item(
        status="failed", retry={"allowed": True, "next_action": "retry_with_backoff"}
    )
    ingest(ingest_client, [told_to_retry])
    group = FailureGroup.objects.get()
    content = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    card = content[content.index('id="agent-envelope"') : content.index('id="records"')]
    shown = text_of(card[card.index('id="envelope-contradictions"') :])
    assert "files this failure under reconcile_first" in shown
    assert "whose next action is query_by_idempotency_key" in shown
    assert "retryable_in_reconcile_first: sent True, expected False" in shown


def test_an_envelope_the_desk_agrees_with_shows_no_disagreement(
    ingest_client: APIClient, client_as: Callable[[str], Client]
) -> None:
    ingest(ingest_client, [envelope_item()])
    group = FailureGroup.objects.get()
    content = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    assert 'id="agent-envelope"' in content and 'id="envelope-contradictions"' not in content


def test_a_related_receipts_long_code_wraps_inside_its_card(
    ingest_client: APIClient, client_as: Callable[[str], Client]
) -> None:
    receipt = receipt_item(
        tool="send_invoice",
        collection="billing",
        result="uncertain",
        code="REMOTE_TIMEOUT_AFTER_ACCEPT",
        execution_state="started_unknown",
        next_action="query_by_idempotency_key",
    )
    ingest(ingest_client, [envelope_item(), receipt])
    group = FailureGroup.objects.get()
    content = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    card = content[content.index("Related receipts") : content.index("History")]
    assert '<div class="table-scroll"><table>' in card
    assert "REMOTE_<wbr>TIMEOUT_<wbr>AFTER_<wbr>ACCEPT" in card


def test_long_codes_wrap_between_words_and_stay_escaped() -> None:
    assert breakable_code("REMOTE_TIMEOUT_AFTER_ACCEPT") == (
        "REMOTE_<wbr>TIMEOUT_<wbr>AFTER_<wbr>ACCEPT"
    )
    assert breakable_code("<b>_x") == "&lt;b&gt;_<wbr>x"
    assert breakable_code(None) == "None"
