"""PostgreSQL goes down while gunicorn ingests a batch (issue 6, "faults survived"), on both
doors (the OTLP door's answer: issue 11).

gunicorn serves the API as in docker-compose.yml, but reaches PostgreSQL through a
`TcpProxy` this test controls; the machine's PostgreSQL is shared and never stopped. The
proxy is cut at precise points of the batch's transaction (after the id claims, after the
records' COPY, after the server committed but before the client heard of it), and while
it is down. Each time the client gets 503 with `Retry-After` and a stable code; the test's
own connection (straight to PostgreSQL) then sees the batch either not at all or whole,
never half; and the client's retry of the same request stores every item exactly once.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db.models import Sum

from tests.factories import failure_item, receipt_item, runner_event_item
from tests.faults.processes import Gunicorn, base_env, database_url
from tests.faults.proxy import TcpProxy
from triage.models import (
    FailureGroup,
    FailureGroupBucket,
    FailureGroupFacet,
    FailureRecord,
    IngestBatch,
    IngestItem,
    IngestRejection,
    Receipt,
    RunnerEvent,
)

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db(transaction=True)]

URL = "/api/v1/ingest"


@pytest.fixture(scope="module")
def database_proxy(django_db_setup: Any, django_db_blocker: Any) -> Iterator[TcpProxy]:
    from django.db import connection

    database = connection.settings_dict
    upstream = (int(database["PORT"] or 5432), database["HOST"] or "127.0.0.1")
    with TcpProxy(*upstream) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def server(
    database_proxy: TcpProxy, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    # Plain text on the wire, so the proxy can see which statement goes by.
    through_proxy = database_url(host="127.0.0.1", port=database_proxy.port) + "?sslmode=disable"
    env = base_env(DATABASE_URL=through_proxy)
    with Gunicorn.serving(env=env, log_dir=tmp_path_factory.mktemp("gunicorn")) as gunicorn:
        yield gunicorn


@pytest.fixture
def proxy(database_proxy: TcpProxy) -> Iterator[TcpProxy]:
    database_proxy.start()
    yield database_proxy
    database_proxy.close()  # disarm; the next test starts it again


@pytest.fixture
def send(server: Gunicorn, make_api_key: Callable[..., str]) -> Callable[[dict[str, Any]], Any]:
    key = make_api_key()

    def post(payload: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        body = json.dumps(payload).encode()
        client = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            client.request(
                "POST",
                URL,
                body=body,
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            response = client.getresponse()
            raw = response.read()
            headers = {name.lower(): value for name, value in response.getheaders()}
        finally:
            client.close()
        try:
            data = json.loads(raw)
        except ValueError:
            pytest.fail(f"HTTP {response.status}, not JSON: {raw[:500]!r}\n{server.log()}")
        return response.status, headers, data

    return post


def _state() -> dict[str, Any]:
    """Everything a batch writes, read through the test's own connection (no proxy)."""
    groups = {
        (g.collection, g.stage, g.reason, g.tool): (g.count, g.retryable_count, g.status)
        for g in FailureGroup.objects.all()
    }
    return {
        "batches": IngestBatch.objects.count(),
        "items": IngestItem.objects.count(),
        "rejections": IngestRejection.objects.count(),
        "records": FailureRecord.objects.count(),
        "receipts": Receipt.objects.count(),
        "runner_events": RunnerEvent.objects.count(),
        "groups": groups,
        "bucket_total": FailureGroupBucket.objects.aggregate(n=Sum("count"))["n"] or 0,
        "facet_total": FailureGroupFacet.objects.aggregate(n=Sum("count"))["n"] or 0,
    }


def _batch() -> dict[str, Any]:
    """Two failures for a group that already has records, one for a new group, a failing
    runner event (one more record), a receipt, and one item that is refused. The same
    request each time, as a client's retry sends it."""
    return {
        "items": [
            failure_item("b/1"),
            failure_item("b/2", message="again"),
            failure_item("b/3", stage="bind_request", reason="missing_required_field"),
            runner_event_item("b/4"),
            receipt_item("b/5", tool_run_id="tr_b5"),
            {"type": "failure", "id": "b/6", "body": {"reason": "http_5xx"}},  # no stage
        ]
    }


def _assert_unavailable(status: int, headers: dict[str, str], body: dict[str, Any]) -> None:
    assert status == 503, body
    assert body["error"]["code"] == "database_unavailable"
    assert int(headers["retry-after"]) >= 1


def _assert_stored_once(before: dict[str, Any], after: dict[str, Any]) -> None:
    """The batch of `_batch()` is in `after` exactly once more than in `before`."""
    assert after["batches"] - before["batches"] >= 1
    assert after["items"] - before["items"] == 5
    assert after["records"] - before["records"] == 4  # 3 failures + the runner event's
    assert after["receipts"] - before["receipts"] == 1
    assert after["runner_events"] - before["runner_events"] == 1
    assert after["bucket_total"] - before["bucket_total"] == 4
    assert after["facet_total"] - before["facet_total"] == 4 * 3  # source, lane, state
    assert IngestItem.objects.filter(client_id__startswith="b/").count() == 5
    assert sorted(
        FailureRecord.objects.filter(client_id__startswith="b/").values_list("client_id", flat=True)
    ) == ["b/1", "b/2", "b/3", "b/4"]
    # Every group's counter equals its records, one by one.
    for group in FailureGroup.objects.all():
        assert group.count == group.records.count(), group
    counts_before = {key: value[0] for key, value in before["groups"].items()}
    counts_after = {key: value[0] for key, value in after["groups"].items()}
    expected = {
        **counts_before,
        ("shop", "execute", "http_5xx", "getOrderDetail"): 2 + 2,  # a/1, a/2, b/1, b/2
        ("shop", "bind_request", "missing_required_field", "getOrderDetail"): 1,
        ("", "execute", "http_5xx", "getOrderDetail"): 1,  # the runner event's
    }
    assert counts_after == expected


@pytest.fixture
def seeded(send: Callable[[dict[str, Any]], Any], proxy: TcpProxy) -> dict[str, Any]:
    """A first batch went through, so the batch under test meets existing group counters."""
    status, _, body = send({"items": [failure_item("a/1"), failure_item("a/2")]})
    assert status == 200, body
    return _state()


COPY = b"COPY triage_failurerecord"


@pytest.mark.parametrize(
    ("cut_after", "wait_for_reply", "committed", "stays_down"),
    [
        pytest.param((b"INSERT INTO triage_ingestitem",), False, False, True, id="after-claims"),
        pytest.param((COPY,), False, False, True, id="during-copy"),
        # The database is back at once (a fast restart, killed sessions): the error comes
        # from the broken connection itself, not from a refused reconnect.
        pytest.param((COPY,), False, False, False, id="during-copy-back-at-once"),
        pytest.param((COPY, b"COMMIT"), True, True, True, id="commit-answer-lost"),
        pytest.param((COPY, b"COMMIT"), True, True, False, id="commit-answer-lost-back-at-once"),
    ],
)
def test_a_database_lost_mid_batch_answers_503_and_the_retry_stores_it_exactly_once(
    send: Callable[[dict[str, Any]], Any],
    proxy: TcpProxy,
    seeded: dict[str, Any],
    cut_after: tuple[bytes, ...],
    wait_for_reply: bool,
    committed: bool,
    stays_down: bool,
) -> None:
    fired = proxy.cut_after(
        *cut_after, wait_for_reply=wait_for_reply, keep_listening=not stays_down
    )
    _assert_unavailable(*send(_batch()))
    assert fired.wait(timeout=10), "the proxy never saw the statement it was to cut after"

    after_cut = _state()
    if committed:
        # The server committed and the answer was lost: the batch is there, whole, with
        # its ledger row and its refusal.
        _assert_stored_once(seeded, after_cut)
        ledger = IngestBatch.objects.latest("pk")
        assert (ledger.item_count, ledger.accepted, ledger.rejected) == (6, 5, 1)
        assert list(ledger.rejections.values_list("index", "code")) == [(5, "missing_field")]
    else:
        assert after_cut == seeded, "a batch cut half way left rows behind"

    if stays_down:
        # Still down: refused at connect, same answer.
        _assert_unavailable(*send(_batch()))
        proxy.start()

    status, _, body = send(_batch())
    assert status == 207, body  # b/6 is refused, alone
    statuses = [item["status"] for item in body["items"]]
    assert statuses[:5] == (["duplicate"] * 5 if committed else ["accepted"] * 5)
    assert statuses[5] == "rejected"
    stored = _state()
    _assert_stored_once(seeded, stored)

    # Once more: only the ledger grows (a batch of duplicates and its one refusal).
    status, _, body = send(_batch())
    assert status == 207 and body["duplicates"] == 5, body
    again = _state()
    assert (again["batches"], again["rejections"]) == (
        stored["batches"] + 1,
        stored["rejections"] + 1,
    )
    assert {**again, "batches": 0, "rejections": 0} == {**stored, "batches": 0, "rejections": 0}


def test_a_database_down_before_the_request_answers_503_fast(
    send: Callable[[dict[str, Any]], Any], proxy: TcpProxy, seeded: dict[str, Any]
) -> None:
    proxy.stop()
    _assert_unavailable(*send(_batch()))
    assert _state() == seeded
    proxy.start()
    status, _, body = send(_batch())
    assert status == 207 and body["accepted"] == 5, body
    _assert_stored_once(seeded, _state())


def test_the_otlp_door_answers_503_while_the_database_is_down_and_the_retry_is_stored_once(
    server: Gunicorn, proxy: TcpProxy, make_api_key: Callable[..., str]
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    from tests.triage.intake.otlp_helpers import FAILING_CALLS, export_request, record

    key = make_api_key()
    body = export_request(record(list(FAILING_CALLS.values()))).SerializeToString()

    def export() -> tuple[int, dict[str, str], bytes]:
        client = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            client.request(
                "POST",
                "/v1/traces",
                body=body,
                headers={
                    "Authorization": f"Bearer {key}",
                    "Content-Type": "application/x-protobuf",
                },
            )
            response = client.getresponse()
            headers = {name.lower(): value for name, value in response.getheaders()}
            return response.status, headers, response.read()
        finally:
            client.close()

    proxy.stop()
    status, headers, answer = export()
    # 503 with Retry-After, the statuses OTLP exporters retry; google.rpc.Status code 14
    # (UNAVAILABLE), its message starting with the stable code.
    assert status == 503 and int(headers["retry-after"]) >= 1, answer
    assert answer[:2] == b"\x08\x0e" and b"database_unavailable" in answer
    assert FailureRecord.objects.count() == 0
    proxy.start()
    status, _, answer = export()
    assert status == 200, answer
    assert not ExportTraceServiceResponse.FromString(answer).HasField("partial_success")
    assert export()[0] == 200  # the exporter's retry of the same spans: duplicates
    assert FailureRecord.objects.count() == len(FAILING_CALLS)
    assert IngestItem.objects.count() == len(FAILING_CALLS)  # the chat and agent spans skipped
