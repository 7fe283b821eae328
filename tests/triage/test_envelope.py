"""Item type `envelope`: seed 004's envelope through POST /api/v1/ingest and `manage.py ingest`."""

from __future__ import annotations

import copy
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.intake.envelope import BUILTIN_ENVELOPE_CODES, envelope_codes, reason_for_code
from triage.models import FailureGroup, FailureRecord, IngestBatch, IngestRejection
from triage.vocabulary.taxonomy import REASONS

URL = "/api/v1/ingest"
pytestmark = pytest.mark.django_db
_ids = itertools.count(1)

# Seed 004's example envelope exactly as the seed writes it, plus the tool and collection.
SEED_ENVELOPE: dict[str, Any] = {
    "status": "uncertain",
    "code": "REMOTE_TIMEOUT_AFTER_ACCEPT",
    "retry": {
        "allowed": False,
        "reason": "write may have been accepted",
        "next_action": "query_by_idempotency_key",
    },
    "execution": {
        "state": "started_unknown",
        "idempotency_key": "notify:invoice-819:2026-10-29",
    },
    "evidence": {"request_id": "req_7df1", "remote_operation": "mail-88412"},
    "user_safe_message": "발송 결과를 확인 중입니다. 재전송하지 않았습니다.",
    "tool": "send_invoice",
    "collection": "billing",
}


def envelope_item(item_id: str | None = None, **changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(SEED_ENVELOPE)
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return {"type": "envelope", "id": item_id or f"env-{next(_ids)}", "body": body}


def post(client: APIClient, items: list[dict[str, Any]]) -> Any:
    return client.post(URL, data=json.dumps({"items": items}), content_type="application/json")


def stored(client: APIClient, item: dict[str, Any]) -> FailureRecord:
    response = post(client, [item])
    assert response.status_code == 200, response.content
    assert response.json()["items"][0]["status"] == "accepted"
    return FailureRecord.objects.get(client_id=item["id"])


# --- the seed's own envelopes ---------------------------------------------------------------


def test_the_seeds_example_envelope_is_accepted_and_classified(ingest_client: APIClient) -> None:
    record = stored(ingest_client, envelope_item("seed"))
    assert (record.stage, record.reason, record.reason_mapped) == ("execute", "timeout", True)
    assert (record.tool, record.collection) == ("send_invoice", "billing")
    # An undeclared tool may write: a timeout after the remote side accepted it is a lookup.
    assert (record.lane, record.execution_state) == ("reconcile_first", "started_unknown")
    assert record.retryable is False
    assert record.idempotency_key == "notify:invoice-819:2026-10-29"
    assert record.sent_execution_state == "started_unknown" and record.sent_retryable is False
    assert record.contradictions == []
    assert record.evidence == SEED_ENVELOPE["evidence"]
    assert record.message == "REMOTE_TIMEOUT_AFTER_ACCEPT: write may have been accepted"
    envelope = record.extra["envelope"]
    assert envelope == {key: SEED_ENVELOPE[key] for key in envelope}
    assert set(envelope) == {
        "status",
        "code",
        "retry",
        "execution",
        "evidence",
        "user_safe_message",
    }


def test_the_seeds_approval_code_is_a_blocked_policy_failure(ingest_client: APIClient) -> None:
    record = stored(
        ingest_client,
        envelope_item(
            status="blocked",
            code="POLICY_APPROVAL_REQUIRED",
            retry={"allowed": False, "next_action": "request_approval"},
            execution={"state": "not_started"},
            evidence={"evidence_ref": "policy://release-note/approval-required/v3"},
            tool="publish_changelog",
        ),
    )
    assert (record.stage, record.reason) == ("auth_preflight", "auth_context_required")
    assert (record.lane, record.execution_state) == ("policy_blocked", "not_started")
    assert record.sent_lane == "policy_blocked"
    assert record.contradictions == []


def test_a_code_spelled_like_a_desk_reason_maps_to_it_in_any_case(
    ingest_client: APIClient,
) -> None:
    for code in ("http_5xx", "HTTP_5XX"):
        record = stored(
            ingest_client,
            envelope_item(
                status="failed",
                code=code,
                retry={"allowed": True, "next_action": "retry_with_backoff"},
                execution={"state": "completed"},
                side_effect="read",
            ),
        )
        assert (record.reason, record.lane, record.retryable) == ("http_5xx", "retry_safe", True)
        assert record.contradictions == []
        assert record.extra["envelope"]["code"] == code


def test_an_explicit_reason_and_stage_win_over_the_code_table(ingest_client: APIClient) -> None:
    record = stored(
        ingest_client,
        envelope_item(reason="network_error", code="REMOTE_TIMEOUT_AFTER_ACCEPT"),
    )
    assert (record.stage, record.reason) == ("execute", "network_error")
    other = stored(ingest_client, envelope_item(reason="uncaught_server_error", stage="service"))
    assert (other.stage, other.reason) == ("service", "uncaught_server_error")


def test_a_rate_limited_read_is_retried_with_backoff(ingest_client: APIClient) -> None:
    record = stored(
        ingest_client,
        envelope_item(
            status="failed",
            code="RATE_LIMITED",
            retry={"allowed": True, "next_action": "retry_with_backoff"},
            execution={"state": "completed"},
            evidence={"retry_after_seconds": 4},
            side_effect="read",
        ),
    )
    assert (record.reason, record.lane) == ("http_4xx", "retry_safe")
    assert record.evidence == {"retry_after_seconds": 4, "rate_limited": True}
    assert record.extra["envelope"]["evidence"] == {"retry_after_seconds": 4}
    assert record.contradictions == []


def test_every_built_in_code_names_a_reason_of_the_taxonomy() -> None:
    assert BUILTIN_ENVELOPE_CODES  # the table is not empty
    assert {reason for reason in BUILTIN_ENVELOPE_CODES.values() if reason not in REASONS} == set()


@override_settings(TRIAGE_ENVELOPE_CODES={"VENDOR_BUSY": "http_5xx", "TIMEOUT": "network_error"})
def test_the_operators_table_adds_codes_and_wins_over_the_built_in_one(
    ingest_client: APIClient,
) -> None:
    table = envelope_codes()
    assert table["VENDOR_BUSY"] == "http_5xx" and table["TIMEOUT"] == "network_error"
    assert reason_for_code("REMOTE_TIMEOUT_AFTER_ACCEPT", table=table) == "timeout"
    record = stored(ingest_client, envelope_item(code="VENDOR_BUSY", status="failed"))
    assert (record.reason, record.reason_mapped) == ("http_5xx", True)


# --- unknown codes --------------------------------------------------------------------------


def test_an_unknown_code_is_stored_as_an_unmapped_reason_and_listed(
    ingest_client: APIClient, admin_client: Any
) -> None:
    record = stored(ingest_client, envelope_item(code="VENDOR_QUOTA_DANCE"))
    assert (record.stage, record.reason, record.reason_mapped) == (
        "execute",
        "VENDOR_QUOTA_DANCE",
        False,
    )
    assert record.lane == "manual_investigation"
    assert FailureGroup.objects.get(reason="VENDOR_QUOTA_DANCE").reason_mapped is False
    # An unknown desk reason sent explicitly stays an unmapped *reason*, not an envelope code.
    stored(ingest_client, envelope_item(reason="vendor_reason", code="TIMEOUT"))

    content = admin_client.get("/ingestion/").content.decode()
    section = content[content.index('id="unmapped"') : content.index('id="keys"')]
    rows = {
        reason: row
        for row in re.findall(r"<tr>.*?</tr>", section, re.S)
        for reason in re.findall(r'<td class="code">([^<]+)</td>', row)
    }
    assert "envelope code" in rows["VENDOR_QUOTA_DANCE"]
    assert '<code>"VENDOR_QUOTA_DANCE": "…"</code>' in rows["VENDOR_QUOTA_DANCE"]
    assert "envelope code" not in rows["vendor_reason"]
    assert "TRIAGE_ENVELOPE_CODES" in section


# --- the runtime's claims -------------------------------------------------------------------


def codes_of(record: FailureRecord) -> set[str]:
    return {contradiction["code"] for contradiction in record.contradictions}


def test_a_status_that_contradicts_the_derivation_is_flagged(ingest_client: APIClient) -> None:
    record = stored(ingest_client, envelope_item(status="failed"))
    assert codes_of(record) == {"status_contradicts_timeout"}
    (flag,) = record.contradictions
    assert (flag["sent"], flag["derived"]) == ("failed", "uncertain")


def test_an_envelope_that_allows_a_blind_retry_of_a_write_is_flagged(
    ingest_client: APIClient,
) -> None:
    record = stored(
        ingest_client,
        envelope_item(
            status="failed",
            retry={"allowed": True, "next_action": "retry_with_backoff"},
        ),
    )
    assert record.lane == "reconcile_first"  # the desk never follows it into a blind retry
    assert codes_of(record) == {
        "retryable_in_reconcile_first",
        "next_action_in_reconcile_first",
        "status_contradicts_timeout",
    }


def test_a_more_cautious_next_action_is_not_a_contradiction(ingest_client: APIClient) -> None:
    record = stored(
        ingest_client,
        envelope_item(
            status="failed",
            code="SERVICE_UNAVAILABLE",
            retry={"allowed": False, "next_action": "stop_automation_and_investigate"},
            execution={"state": "completed"},
            side_effect="read",
        ),
    )
    assert record.lane == "retry_safe"
    assert codes_of(record) == set()


def test_a_blocked_status_keeps_the_failure_blocked(ingest_client: APIClient) -> None:
    record = stored(
        ingest_client,
        envelope_item(
            status="blocked",
            code="SERVICE_UNAVAILABLE",
            retry={"allowed": False, "next_action": "request_approval"},
            execution={"state": "completed"},
            side_effect="read",
        ),
    )
    # The runtime's lane is the more cautious one: kept, and the disagreement flagged.
    assert record.lane == "policy_blocked"
    assert codes_of(record) == {"lane_contradicts_http_5xx"}


def test_an_uncertain_status_without_a_state_claims_started_unknown(
    ingest_client: APIClient,
) -> None:
    record = stored(ingest_client, envelope_item(execution=None))
    assert record.sent_execution_state == "started_unknown"
    assert record.execution_state == "started_unknown" and record.contradictions == []
    assert "execution" not in record.extra["envelope"]


# --- what is kept, and scrubbed -------------------------------------------------------------


def test_the_user_safe_message_and_evidence_are_scrubbed(ingest_client: APIClient) -> None:
    record = stored(
        ingest_client,
        envelope_item(
            user_safe_message="kim@example.com 님께 발송 결과를 확인 중입니다.",
            evidence={"request_id": "req_1", "note": "Authorization: Bearer abcdefghijklmnop12"},
        ),
    )
    envelope = record.extra["envelope"]
    assert "kim@example.com" not in json.dumps(envelope, ensure_ascii=False)
    assert envelope["user_safe_message"].startswith("[REDACTED:email]")
    assert "abcdefghijklmnop12" not in json.dumps(record.evidence)


def test_unknown_fields_beside_and_inside_the_envelope_are_kept(ingest_client: APIClient) -> None:
    record = stored(
        ingest_client,
        envelope_item(
            retry={"allowed": False, "next_action": "query_by_idempotency_key", "after_s": 30},
            runtime="graph-tool-call 0.47",
            plan_id="plan_9",
        ),
    )
    assert record.extra["runtime"] == "graph-tool-call 0.47"
    assert record.extra["envelope"]["retry"]["after_s"] == 30
    assert record.plan_id == "plan_9"


def test_an_envelope_and_a_report_of_the_same_span_are_stored_once(
    ingest_client: APIClient,
) -> None:
    span = {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}
    response = post(
        ingest_client,
        [
            failure_item(
                "report", reason="timeout", tool="send_invoice", collection="billing", **span
            ),
            envelope_item("envelope", **span),
        ],
    )
    assert response.status_code == 200, response.content
    assert [item["status"] for item in response.json()["items"]] == ["accepted", "duplicate"]
    record = FailureRecord.objects.get()
    assert (record.trace_id, record.span_id) == (span["trace_id"], span["span_id"])
    assert record.extra["envelope"]["code"] == "REMOTE_TIMEOUT_AFTER_ACCEPT"


# --- refusals -------------------------------------------------------------------------------


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"nested": value}
    return value


REFUSED = [
    ({"status": None}, "missing_field", "body.status"),
    ({"status": "pending"}, "invalid_field", "body.status"),
    ({"status": ["uncertain"]}, "invalid_field", "body.status"),
    ({"code": None}, "missing_field", "body.code"),
    ({"code": 504}, "invalid_field", "body.code"),
    ({"code": "REMOTE TIMEOUT"}, "invalid_field", "body.code"),
    ({"code": "TIMEOUT\r\nX-Injected: 1"}, "invalid_character", "body.code"),
    ({"tool": None}, "missing_field", "body.tool"),
    ({"tool": "send\x1binvoice"}, "invalid_character", "body.tool"),
    ({"retry": "no"}, "invalid_field", "body.retry"),
    ({"retry": {"allowed": "false"}}, "invalid_field", "body.retry.allowed"),
    ({"retry": {"reason": 12}}, "invalid_field", "body.retry.reason"),
    ({"retry": {"reason": "may\nhave"}}, "invalid_character", "body.retry.reason"),
    ({"retry": {"reason": "x" * 501}}, "value_too_large", "body.retry.reason"),
    ({"retry": {"next_action": "query by key"}}, "invalid_field", "body.retry.next_action"),
    ({"execution": ["started_unknown"]}, "invalid_field", "body.execution"),
    ({"execution": {"state": "unknown"}}, "invalid_field", "body.execution.state"),
    (
        {"execution": {"idempotency_key": "key\x00one"}},
        "invalid_character",
        "body.execution.idempotency_key",
    ),
    (
        {"execution": {"idempotency_key": "k" * 301}},
        "value_too_large",
        "body.execution.idempotency_key",
    ),
    ({"evidence": "req_7df1"}, "invalid_field", "body.evidence"),
    ({"evidence": {"request\nid": "r"}}, "invalid_character", "body.evidence"),
    ({"evidence": _deep(9)}, "value_too_deep", "body.evidence"),
    ({"evidence": {f"k{n}": "v" * 1000 for n in range(40)}}, "value_too_large", "body.evidence"),
    ({"user_safe_message": {"ko": "..."}}, "invalid_field", "body.user_safe_message"),
    ({"user_safe_message": "확인 중\x07"}, "invalid_character", "body.user_safe_message"),
    ({"user_safe_message": "가" * 1001}, "value_too_large", "body.user_safe_message"),
    ({"user_safe_message": "가" * 90_000}, "value_too_large", "body.user_safe_message"),
    ({"execution_state": "completed"}, "invalid_field", "body.execution_state"),
    ({"idempotency_key": "k1"}, "invalid_field", "body.idempotency_key"),
    ({"envelope": {"status": "failed"}}, "invalid_field", "body.envelope"),
    ({"trace_id": "abc"}, "invalid_span_id", "body.trace_id"),
    ({"reason": "has space"}, "invalid_field", "body.reason"),
    ({"occurred_at": "yesterday"}, "invalid_field", "body.occurred_at"),
]


@pytest.mark.parametrize(("changes", "code", "field"), REFUSED)
def test_a_bad_envelope_is_refused_alone_with_a_stable_code(
    ingest_client: APIClient, changes: dict[str, Any], code: str, field: str
) -> None:
    response = post(ingest_client, [envelope_item("good"), envelope_item("bad", **changes)])
    assert response.status_code == 207, response.content
    good, bad = response.json()["items"]
    assert good["status"] == "accepted"
    assert bad["status"] == "rejected"
    assert (bad["error"]["code"], bad["error"]["field"]) == (code, field)
    rejection = IngestRejection.objects.get()
    assert (rejection.item_type, rejection.client_id, rejection.code) == ("envelope", "bad", code)
    assert IngestBatch.objects.get().rejected_by_code == {code: 1}
    assert FailureRecord.objects.count() == 1


def test_a_multi_line_user_safe_message_is_accepted(ingest_client: APIClient) -> None:
    message = "확인 중입니다.\n\t다시 보내지 않았습니다."
    record = stored(ingest_client, envelope_item(user_safe_message=message))
    assert "\n" in record.extra["envelope"]["user_safe_message"]


# --- the ingest command ---------------------------------------------------------------------


def test_the_ingest_command_takes_envelopes_with_the_same_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [envelope_item("cli-good"), envelope_item("cli-bad", status="maybe")]
    path = tmp_path / "envelopes.ndjson"
    path.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n")
    with pytest.raises(CommandError):
        call_command("ingest", str(path))
    output = capsys.readouterr()
    assert "1 accepted" in output.out and "invalid_field body.status" in output.err
    assert FailureRecord.objects.get().reason == "timeout"
