"""No generated batch makes `POST /api/v1/ingest` answer 5xx on PostgreSQL, and the good item
sent with it is always stored.

The items carry what PostgreSQL refuses and SQLite takes: NUL and lone surrogates (in keys
and values, ids and types), integers past every column's range, NaN and infinities (Python's
JSON parser reads them), timestamps Python or PostgreSQL cannot hold, strings longer than
every bounded column. Each item ends accepted, duplicate, conflict or rejected, alone.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from tests.factories import audit_item, failure_item, receipt_item, runner_event_item
from tests.learning.conftest import attempt_item
from triage.models import FailureRecord

pytestmark = [pytest.mark.django_db, pytest.mark.services("postgres")]

EXAMPLES = 100
_good_ids = itertools.count(1)

_SPECIAL_TEXT = [
    "\u0000",
    "a\u0000b",
    "\ud800",
    "x\udfff",
    "\ud83d",  # the first half of an emoji, alone
    "\ufffd",
    "",
    " ",
    "shop",
    "getOrderDetail",
    "execute",
    "http_5xx",
    "한국어 \u0000",
]
_LONG_LENGTHS = [11, 17, 25, 33, 41, 61, 65, 101, 121, 201, 256, 301, 501, 2001, 4001, 20_001]
_ODD_INTEGERS = [
    -1,
    0,
    599,
    70_000,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**63,
    -(2**63) - 1,
    10**30,
    86_400_001,
]
_ODD_TIMESTAMPS = [
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00+05:00",
    "1000-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "1970-01-01T00:00:00Z",
    "9999-12-31T23:59:59-23:00",
    "10000-01-01T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-01-01T00:00:00+99:00",
    "2026-01-01T25:00:00Z",
    "2026-11-01T10:00:00",
    "2026-11-01T10:00:00Z",
    "2999-01-01T00:00:00Z",
]

texts = st.one_of(
    st.sampled_from(_SPECIAL_TEXT),
    # Every code point, lone surrogates included (hypothesis leaves them out by default).
    st.text(st.characters(exclude_categories=()), max_size=12),
    st.builds(
        lambda length, char, tail: char * length + tail,
        st.sampled_from(_LONG_LENGTHS),
        st.sampled_from(["a", "\u0000", "한"]),
        st.sampled_from(["", "\u0000", "\ud800"]),
    ),
)
timestamps = st.one_of(
    st.sampled_from(_ODD_TIMESTAMPS),
    st.builds(
        lambda moment, minutes: moment.replace(
            tzinfo=timezone(timedelta(minutes=minutes))
        ).isoformat(),
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
        st.integers(min_value=-1439, max_value=1439),
    ),
)
numbers = st.one_of(
    st.sampled_from(_ODD_INTEGERS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts, timestamps)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=8,
)

_MAKERS = {
    "failure": failure_item,
    "runner_event": runner_event_item,
    "receipt": receipt_item,
    "audit_event": audit_item,
    "learning_attempt": attempt_item,
}
# The keys each type reads (and a few it does not), so odd values land where they are used.
_KEYS = {
    "failure": [
        "stage", "reason", "message", "tool", "collection", "collection_id", "plan_id",
        "step_id", "evidence", "idempotency_key", "occurred_at", "graph_tool_call_version",
        "lane", "execution_state", "retryable", "operator_action", "source", "side_effect",
    ],
    "runner_event": [
        "type", "stage", "plan_id", "step_id", "tool", "collection", "error", "timestamp",
        "occurred_at", "trace_metadata", "graph_tool_call_version", "failure_reason",
    ],
    "receipt": [
        "tool_run_id", "tool", "collection", "tool_version", "authority_scope",
        "target_fingerprint", "payload_hash", "attempt", "result", "code", "reason",
        "execution_state", "next_action", "retryable", "idempotency_key", "evidence_ref",
        "started_at", "ended_at", "retry_count", "stop_reason", "lane", "side_effect",
    ],
    "audit_event": [
        "tool_run_id", "idempotency_key", "collection", "tool", "method", "host", "path",
        "status", "occurred_at",
    ],
    "learning_attempt": [
        "query", "collection", "collection_id", "attempt_id", "selected_target", "llm_target",
        "plan_tools", "success", "failure_reason", "latency_ms", "session_id",
        "target_selector", "trace_edges", "created_at", "occurred_at", "query_family",
        "query_fingerprint", "plan",
    ],
}  # fmt: skip
_ERROR_SHAPES = st.fixed_dictionaries(
    {"kind": st.sampled_from(["tool", "binding", "output_binding"]) | texts},
    optional={"message": texts, "exception_type": texts, "status": numbers},
)


def _one_in(draw: st.DrawFn, n: int) -> bool:
    return draw(st.integers(min_value=1, max_value=n)) == 1


@st.composite
def bodies(draw: st.DrawFn, item_type: str) -> dict[str, Any]:
    """A good body of the type with one to three of its fields, and maybe unknown keys,
    given odd values: mostly text (where the columns are), else numbers or any JSON."""
    body = dict(_MAKERS[item_type]()["body"])
    for key in draw(st.lists(st.sampled_from(_KEYS[item_type]), min_size=1, max_size=3)):
        if key == "error":
            body[key] = draw(_ERROR_SHAPES)
        elif key.endswith("_at") or key == "timestamp":
            body[key] = draw(timestamps) if not _one_in(draw, 4) else draw(json_values)
        elif _one_in(draw, 3):
            body[key] = draw(numbers | json_values)
        else:
            body[key] = draw(texts)
    for _ in range(draw(st.integers(0, 2))):
        body[draw(texts)] = draw(json_values)  # unknown keys: kept in extra / payload
    return body


_item_ids = itertools.count(1)


@st.composite
def items(draw: st.DrawFn) -> Any:
    """Mostly a well-formed item whose body holds odd values; sometimes an odd id or type,
    sometimes no item at all."""
    if _one_in(draw, 12):
        return draw(json_values)
    item_type = draw(st.sampled_from(sorted(_MAKERS)))
    odd_id = _one_in(draw, 6)
    return {
        "type": draw(texts) if _one_in(draw, 12) else item_type,
        "id": draw(texts | numbers | st.none()) if odd_id else f"item-{next(_item_ids)}",
        "body": draw(bodies(item_type)),
    }


def _good_item() -> dict[str, Any]:
    return failure_item(f"good-{next(_good_ids)}", occurred_at=datetime.now(UTC).isoformat())


def test_no_generated_batch_answers_5xx_and_its_good_item_is_stored(
    ingest_client: APIClient,
) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        # Shrinking through the database is slow; the failing example is printed whole.
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(batch=st.lists(items(), min_size=1, max_size=4))
    def ingest_one_batch(batch: list[Any]) -> None:
        good = _good_item()
        sent = [*batch, good]
        # allow_nan (the default) writes NaN and Infinity, which Python's parser reads back.
        response = ingest_client.post(
            "/api/v1/ingest", data=json.dumps({"items": sent}), content_type="application/json"
        )
        assert response.status_code in (200, 207), (response.status_code, response.content)
        answer = response.json()
        assert [item["index"] for item in answer["items"]] == list(range(len(sent)))
        statuses = {item["status"] for item in answer["items"]}
        assert statuses <= {"accepted", "duplicate", "conflict", "rejected"}
        assert answer["items"][-1]["status"] == "accepted", answer["items"][-1]
        assert FailureRecord.objects.filter(client_id=good["id"]).exists()

    ingest_one_batch()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(envelope=json_values | st.builds(lambda value: {"items": value}, json_values))
def test_no_generated_envelope_answers_5xx(envelope: Any) -> None:
    # Not a test client fixture: hypothesis runs this body many times per test.
    from triage.services import api_key_create

    _, key = api_key_create(name=f"envelope-{next(_good_ids)}", scopes=["ingest"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.post(
        "/api/v1/ingest", data=json.dumps(envelope), content_type="application/json"
    )
    assert response.status_code < 500, response.content
