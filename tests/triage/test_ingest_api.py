from __future__ import annotations

import gzip
import json
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.db import OperationalError, connection
from django.db.models import Sum
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import audit_item, failure_item, receipt_item, runner_event_item
from triage.models import (
    ApiKey,
    AuditEvent,
    FailureGroup,
    FailureGroupBucket,
    FailureGroupFacet,
    FailureRecord,
    GroupStatus,
    IngestBatch,
    IngestRejection,
    Receipt,
    RunnerEvent,
)

URL = "/api/v1/ingest"
pytestmark = pytest.mark.django_db


def post(client: APIClient, items: list[Any] | Any, **extra: Any) -> Any:
    payload = items if not isinstance(items, list) else {"items": items}
    return client.post(URL, data=json.dumps(payload), content_type="application/json", **extra)


def test_a_batch_of_good_items_is_stored_and_answered_200(ingest_client: APIClient) -> None:
    items = [failure_item(), receipt_item(), audit_item(), runner_event_item()]
    response = post(ingest_client, items)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["accepted"] == 4 and body["duplicates"] == 0 and body["rejected"] == 0
    assert [item["status"] for item in body["items"]] == ["accepted"] * 4
    assert FailureRecord.objects.count() == 2  # the failure and the failing runner event
    assert (Receipt.objects.count(), AuditEvent.objects.count(), RunnerEvent.objects.count()) == (
        1,
        1,
        1,
    )
    batch = IngestBatch.objects.get()
    assert (batch.accepted, batch.rejected, batch.item_count) == (4, 0, 4)


def test_a_malformed_item_is_rejected_alone_and_recorded(ingest_client: APIClient) -> None:
    items = [
        failure_item("good-1"),
        {"type": "failure", "id": "bad-1", "body": {"reason": "http_5xx"}},
        "not an object",
        failure_item("good-2"),
        {"type": "failure", "id": "bad-2", "body": failure_item(lane="sideways")["body"]},
    ]
    response = post(ingest_client, items)
    assert response.status_code == 207
    body = response.json()
    statuses = {item["index"]: item for item in body["items"]}
    assert statuses[0]["status"] == statuses[3]["status"] == "accepted"
    assert statuses[1]["error"] == {
        "code": "missing_field",
        "message": "stage is required.",
        "field": "body.stage",
    }
    assert statuses[2]["error"]["code"] == "invalid_item"
    assert statuses[4]["error"]["field"] == "body.lane"
    assert set(FailureRecord.objects.values_list("client_id", flat=True)) == {"good-1", "good-2"}
    rejections = IngestRejection.objects.order_by("index")
    assert [(r.index, r.code) for r in rejections] == [
        (1, "missing_field"),
        (2, "invalid_item"),
        (4, "invalid_field"),
    ]
    assert IngestBatch.objects.get().rejected_by_code == {
        "missing_field": 1,
        "invalid_item": 1,
        "invalid_field": 1,
    }


def test_a_learning_attempt_without_a_collection_is_rejected_per_item(
    ingest_client: APIClient,
) -> None:
    response = post(
        ingest_client,
        [failure_item(), {"type": "learning_attempt", "id": "la-1", "body": {"query": "x"}}],
    )
    assert response.status_code == 207
    error = response.json()["items"][1]["error"]
    assert (error["code"], error["field"]) == ("missing_field", "body.collection")
    assert IngestRejection.objects.get().code == "missing_field"


def test_an_unknown_item_type_is_rejected_per_item(ingest_client: APIClient) -> None:
    response = post(ingest_client, [failure_item(), {"type": "metric", "id": "m-1", "body": {}}])
    assert response.status_code == 207
    assert response.json()["items"][1]["error"]["code"] == "unknown_type"


def test_a_failure_for_an_unknown_collection_registers_it(ingest_client: APIClient) -> None:
    from qualitylab.models import Collection

    post(ingest_client, [failure_item(collection="billing-runtime-7")])
    collection = Collection.objects.get(name="billing-runtime-7")
    assert (collection.learning_mode, collection.learning_allowed) == ("observe", True)
    assert collection.mutations_allowed is False


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "invalid_batch"),
        (b'{"items": {"a": 1}}', "invalid_batch"),
        (b'{"items": []}', "empty_batch"),
    ],
)
def test_a_body_that_is_not_a_batch_is_400(ingest_client: APIClient, raw: bytes, code: str) -> None:
    response = ingest_client.post(URL, data=raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert IngestBatch.objects.count() == 0


def test_a_missing_key_is_401(db: Any) -> None:
    response = post(APIClient(), [failure_item()])
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "missing_api_key"
    assert "Bearer" in response["WWW-Authenticate"]


@pytest.mark.parametrize("header", ["Bearer td_nope_nope", "Bearer garbage", "Bearer a b"])
def test_an_unknown_key_is_401(db: Any, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = post(client, [failure_item()])
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_revoked_and_expired_keys_are_401(make_api_key: Any) -> None:
    revoked = make_api_key("revoked")
    expired = make_api_key("expired")
    ApiKey.objects.filter(name="revoked").update(revoked_at=timezone.now())
    ApiKey.objects.filter(name="expired").update(expires_at=timezone.now() - timedelta(seconds=1))
    for key, code in ((revoked, "revoked_api_key"), (expired, "expired_api_key")):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        response = post(client, [failure_item()])
        assert response.status_code == 401
        assert response.json()["error"]["code"] == code


def test_a_key_without_the_ingest_scope_is_403(make_api_key: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('reader', scopes=('read',))}")
    response = post(client, [failure_item()])
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "missing_scope"


def test_a_body_over_the_limit_is_413(ingest_client: APIClient, settings: Any) -> None:
    settings.TRIAGE_INGEST_MAX_BODY_BYTES = 2_000
    response = post(ingest_client, [failure_item(message="x" * 3_000)])
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


def test_a_gzip_body_that_inflates_over_the_limit_is_413(
    ingest_client: APIClient, settings: Any
) -> None:
    settings.TRIAGE_INGEST_MAX_BODY_BYTES = 50_000
    compressed = gzip.compress(
        json.dumps({"items": [failure_item(message="a" * 100_000)]}).encode()
    )
    assert len(compressed) < 50_000
    response = ingest_client.post(
        URL, data=compressed, content_type="application/json", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 413


def test_a_cut_gzip_body_is_invalid_gzip_not_invalid_json(ingest_client: APIClient) -> None:
    compressed = gzip.compress(json.dumps({"items": [failure_item()]}).encode())
    response = ingest_client.post(
        URL, data=compressed[:-12], content_type="application/json", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_gzip"


def test_a_gzip_body_within_the_limit_is_ingested(ingest_client: APIClient) -> None:
    compressed = gzip.compress(json.dumps({"items": [failure_item()]}).encode())
    response = ingest_client.post(
        URL, data=compressed, content_type="application/json", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 200


def test_more_items_than_allowed_is_413(ingest_client: APIClient, settings: Any) -> None:
    settings.TRIAGE_INGEST_MAX_ITEMS = 3
    response = post(ingest_client, [failure_item() for _ in range(4)])
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_many_items"


def test_over_quota_is_429_with_retry_after(make_api_key: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key()}")
    ApiKey.objects.update(quota_per_minute=3)
    assert post(client, [failure_item(), failure_item()]).status_code == 200
    response = post(client, [failure_item(), failure_item()])
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "quota_exceeded"
    assert 1 <= int(response["Retry-After"]) <= 60
    assert FailureRecord.objects.count() == 2


def test_an_unreachable_database_is_503_with_retry_after(ingest_client: APIClient) -> None:
    with mock.patch(
        "triage.intake.native.batch_ingest", side_effect=OperationalError("connection refused")
    ):
        response = post(ingest_client, [failure_item()])
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "database_unavailable"
    assert int(response["Retry-After"]) >= 1


def test_the_same_item_twice_is_a_duplicate_and_stored_once(ingest_client: APIClient) -> None:
    item = failure_item("same")
    assert post(ingest_client, [item]).json()["accepted"] == 1
    response = post(ingest_client, [item])
    assert response.status_code == 200
    assert response.json()["items"][0]["status"] == "duplicate"
    assert FailureRecord.objects.count() == 1
    assert FailureGroup.objects.get().count == 1


def test_duplicate_id_with_other_body_is_a_conflict(ingest_client: APIClient) -> None:
    post(ingest_client, [failure_item("same")])
    response = post(ingest_client, [failure_item("same", message="something else")])
    assert response.status_code == 207
    item = response.json()["items"][0]
    assert (item["status"], item["error"]["code"]) == ("conflict", "conflict")
    assert IngestRejection.objects.get().code == "conflict"
    assert IngestBatch.objects.order_by("pk").last().conflicts == 1  # type: ignore[union-attr]


def test_an_id_repeated_inside_one_batch_is_stored_once(ingest_client: APIClient) -> None:
    response = post(
        ingest_client, [failure_item("x"), failure_item("x"), failure_item("x", message="other")]
    )
    assert [i["status"] for i in response.json()["items"]] == ["accepted", "duplicate", "conflict"]
    assert FailureRecord.objects.count() == 1


def test_ids_are_scoped_per_type_and_owner(make_api_key: Any) -> None:
    first, second = APIClient(), APIClient()
    first.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('a')}")
    second.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('b')}")
    assert post(first, [failure_item("1"), receipt_item("1")]).json()["accepted"] == 2
    assert post(second, [failure_item("1")]).json()["accepted"] == 1


def test_group_counters_buckets_and_facets_follow_the_records(ingest_client: APIClient) -> None:
    post(
        ingest_client,
        [
            failure_item(occurred_at="2026-11-01T10:05:00Z"),
            failure_item(occurred_at="2026-11-01T10:55:00Z", source="log"),
            failure_item(occurred_at="2026-11-01T12:00:00Z"),
        ],
    )
    group = FailureGroup.objects.get()
    assert group.count == 3
    assert group.first_seen.isoformat() == "2026-11-01T10:05:00+00:00"
    assert group.last_seen.isoformat() == "2026-11-01T12:00:00+00:00"
    assert sorted(FailureGroupBucket.objects.values_list("count", flat=True)) == [1, 2]
    facets = {(f.dimension, f.value): f.count for f in FailureGroupFacet.objects.all()}
    assert facets[("source", "runtime")] == 2 and facets[("source", "log")] == 1
    assert facets[("lane", "retry_safe")] == 3


def test_groups_sharing_parts_of_a_key_keep_their_own_counters(ingest_client: APIClient) -> None:
    post(
        ingest_client,
        [failure_item(collection="a", tool="t2"), failure_item(collection="b", tool="t1")],
    )
    post(
        ingest_client,
        [
            failure_item(collection="a", tool="t1"),
            failure_item(collection="b", tool="t2"),
            failure_item(collection="b", tool="t2"),
            failure_item(collection="a", tool="t2"),
        ],
    )
    counts = {(g.collection, g.tool): g.count for g in FailureGroup.objects.all()}
    assert counts == {("a", "t2"): 2, ("b", "t1"): 1, ("a", "t1"): 1, ("b", "t2"): 2}
    by_group = {
        (record.collection, record.tool): record.group_id for record in FailureRecord.objects.all()
    }
    groups = {(g.collection, g.tool): g.pk for g in FailureGroup.objects.all()}
    assert by_group == groups
    assert FailureGroupBucket.objects.aggregate(total=Sum("count"))["total"] == 6


@pytest.mark.parametrize("new_groups", [False, True])
def test_a_batch_costs_the_same_statements_for_few_or_many_groups(
    ingest_client: APIClient, new_groups: bool
) -> None:
    def batch(groups: int, collection: str) -> list[dict[str, Any]]:
        return [failure_item(tool=f"tool{n % groups}", collection=collection) for n in range(200)]

    post(ingest_client, [failure_item(collection="warm-up")])  # the key's last use is stamped
    statements = []
    for groups in (2, 100):
        collection = f"c{groups}"
        if not new_groups:
            post(ingest_client, batch(groups, collection))  # creates the groups
        with CaptureQueriesContext(connection) as queries:
            response = post(ingest_client, batch(groups, collection))
        assert response.json()["accepted"] == 200
        statements.append(len(queries))
        assert FailureGroup.objects.filter(collection=collection).count() == groups
    assert statements[0] == statements[1]


def test_a_resolved_group_that_sees_a_new_record_is_regressed(ingest_client: APIClient) -> None:
    post(ingest_client, [failure_item()])
    FailureGroup.objects.update(status=GroupStatus.RESOLVED)
    post(ingest_client, [failure_item()])
    group = FailureGroup.objects.get()
    assert group.status == GroupStatus.REGRESSED
    assert group.status_changed_at is not None


def test_sent_values_that_contradict_the_derivation_are_kept_and_flagged(
    ingest_client: APIClient,
) -> None:
    post(
        ingest_client,
        [
            failure_item(
                "blocked",
                stage="auth_preflight",
                reason="auth_profile_missing",
                retryable=True,
                evidence={},
            ),
            failure_item("five", execution_state="not_started"),
        ],
    )
    blocked = FailureRecord.objects.get(client_id="blocked")
    assert (blocked.lane, blocked.retryable, blocked.sent_retryable) == (
        "policy_blocked",
        False,
        True,
    )
    assert [c["code"] for c in blocked.contradictions] == ["retryable_in_policy_blocked"]
    five = FailureRecord.objects.get(client_id="five")
    assert five.sent_execution_state == "not_started"
    assert five.execution_state == "completed"
    assert [c["code"] for c in five.contradictions] == ["execution_state_contradicts_http_5xx"]
    assert FailureGroup.objects.get(reason="http_5xx").contradiction_count == 1


def test_an_unknown_reason_is_stored_and_marked_unmapped(ingest_client: APIClient) -> None:
    response = post(ingest_client, [failure_item(stage="xgen_transport", reason="sse_dropped")])
    assert response.status_code == 200
    record = FailureRecord.objects.get()
    assert not record.reason_mapped
    assert record.lane == "manual_investigation"
    assert FailureGroup.objects.get().reason_mapped is False


def test_unknown_fields_are_preserved_scrubbed_in_extra(ingest_client: APIClient) -> None:
    post(
        ingest_client, [failure_item(adapter_trace={"span": "abc", "authorization": "Bearer zzz"})]
    )
    extra = FailureRecord.objects.get().extra
    assert extra["adapter_trace"]["span"] == "abc"
    assert "zzz" not in json.dumps(extra)


def test_a_runner_event_failure_becomes_a_classified_record(ingest_client: APIClient) -> None:
    post(ingest_client, [runner_event_item(), runner_event_item(type="step.completed", error={})])
    record = FailureRecord.objects.get()
    assert (record.stage, record.reason) == ("execute", "http_5xx")
    assert record.runner_event is not None and record.runner_event.event_type == "step.failed"
    assert RunnerEvent.objects.count() == 2


def test_a_receipt_gets_its_lane_and_own_contradictions(ingest_client: APIClient) -> None:
    post(
        ingest_client,
        [
            receipt_item("blocked", retryable=True),
            receipt_item(
                "uncertain",
                result="uncertain",
                code="REMOTE_TIMEOUT_AFTER_ACCEPT",
                execution_state="started_unknown",
                side_effect="external_write",
            ),
        ],
    )
    blocked = Receipt.objects.get(client_id="blocked")
    assert blocked.lane == "policy_blocked"
    assert [c["code"] for c in blocked.contradictions] == ["retryable_in_policy_blocked"]
    uncertain = Receipt.objects.get(client_id="uncertain")
    assert uncertain.lane == "reconcile_first"
    assert [c["code"] for c in uncertain.contradictions] == [
        "external_write_without_idempotency_key"
    ]


def test_the_quota_counts_decompressed_bytes_too(make_api_key: Any, settings: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key()}")

    def send(item_id: str) -> Any:
        batch = json.dumps({"items": [failure_item(item_id, message="x" * 3_000)]}).encode()
        return client.post(
            URL, data=gzip.compress(batch), content_type="application/json",
            HTTP_CONTENT_ENCODING="gzip",
        )  # fmt: skip

    size = len(json.dumps({"items": [failure_item("q-1", message="x" * 3_000)]}))
    settings.TRIAGE_INGEST_QUOTA_BYTES_PER_MINUTE = 2 * size + 100  # gzip makes it ~100 bytes
    minute = timezone.now().replace(second=30)  # all three in the same quota window
    with mock.patch("triage.intake.quota.timezone.now", return_value=minute):
        assert send("q-1").status_code == 200
        assert send("q-2").status_code == 200
        response = send("q-3")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "quota_exceeded"
    assert 1 <= int(response["Retry-After"]) <= 60
    assert FailureRecord.objects.count() == 2


@override_settings(TRIAGE_RETENTION_DAYS=0)  # 1975 is older than any retention keeps
def test_any_iso_offset_is_stored_in_utc_and_a_date_before_the_first_day_is_refused(
    ingest_client: APIClient,
) -> None:
    """ISO 8601 allows offsets up to 23:59; PostgreSQL keeps up to 15:59. A time with a
    +20:38 offset used to reach the database as it was and fail the batch (500)."""
    far_east = "1976-01-01T01:00:00.000001+20:38"
    response = post(
        ingest_client,
        [
            failure_item("far", occurred_at=far_east),
            runner_event_item("far-event", occurred_at=far_east),
            failure_item("before-time", occurred_at="0001-01-01T00:00:00+05:00"),
        ],
    )
    assert response.status_code == 207, response.content
    statuses = {item["id"]: item["status"] for item in response.json()["items"]}
    assert statuses == {"far": "accepted", "far-event": "accepted", "before-time": "rejected"}
    stored = FailureRecord.objects.filter(occurred_at__year=1975)  # the failure and the event
    assert [r.occurred_at.isoformat() for r in stored] == ["1975-12-31T04:22:00.000001+00:00"] * 2
    [rejected] = [i for i in response.json()["items"] if i["status"] == "rejected"]
    assert rejected["error"]["code"] == "timestamp_out_of_range"


@override_settings(TRIAGE_RETENTION_DAYS=30)
def test_a_failure_or_event_older_than_retention_keeps_is_refused_with_its_code(
    ingest_client: APIClient,
) -> None:
    """The next prune would remove it, and on PostgreSQL its day may be dropped already."""
    now = timezone.now()
    old = (now - timedelta(days=30, minutes=1)).isoformat()
    kept = (now - timedelta(days=29, hours=23)).isoformat()
    response = post(
        ingest_client,
        [
            failure_item("old", occurred_at=old),
            runner_event_item("old-event", occurred_at=old),
            failure_item("kept", occurred_at=kept),
            receipt_item("old-receipt", created_at=old),  # receipts outlive retention
        ],
    )
    assert response.status_code == 207, response.content
    items = {item["id"]: item for item in response.json()["items"]}
    assert {key: item["status"] for key, item in items.items()} == {
        "old": "rejected",
        "old-event": "rejected",
        "kept": "accepted",
        "old-receipt": "accepted",
    }
    assert items["old"]["error"]["code"] == "older_than_retention"
    assert items["old"]["error"]["field"] == "body.occurred_at"
    assert "30 days" in items["old"]["error"]["message"]
    assert list(FailureRecord.objects.values_list("client_id", flat=True)) == ["kept"]


def test_the_same_span_ids_days_apart_are_two_calls_on_every_database(
    ingest_client: APIClient,
) -> None:
    """One call is one moment (SAME_CALL_WINDOW): a report with a stored span's ids two days
    away is stored as its own record, never refused by an index."""
    span = {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}
    now = timezone.now()
    first = post(ingest_client, [failure_item("call-1", occurred_at=now.isoformat(), **span)])
    later = post(
        ingest_client,
        [failure_item("call-2", occurred_at=(now - timedelta(days=2)).isoformat(), **span)],
    )
    same = post(ingest_client, [failure_item("call-3", occurred_at=now.isoformat(), **span)])
    assert (first.status_code, later.status_code, same.status_code) == (200, 200, 200)
    assert [item["status"] for item in same.json()["items"]] == ["duplicate"]
    assert FailureRecord.objects.filter(**span).count() == 2
