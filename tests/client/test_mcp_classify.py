"""triage_desk_client's local classification (classify.py, taxonomy.py) against the desk's own
code: the bundled taxonomy is the desk's document, the lane derivation is the desk's for
every combination the client can produce, and what real HTTP clients raise is read right.

The snapshot is regenerated with:
    DJANGO_DEBUG=1 python manage.py taxonomy > client/triage_desk_client/taxonomy.json
"""

from __future__ import annotations

import itertools
import json
import urllib.error
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import httpx2
import pytest
import requests
from django.test import override_settings
from triage_desk_client import classify
from triage_desk_client.classify import Failure, ToolPolicy
from triage_desk_client.taxonomy import EXECUTION_STATES, Taxonomy, bundled
from urllib3.exceptions import MaxRetryError, NewConnectionError

from triage.intake import envelope as desk_envelope
from triage.intake.normalize import ItemError
from triage.vocabulary import taxonomy as desk_taxonomy
from triage.vocabulary.lanes import Sent, ToolFacts
from triage.vocabulary.lanes import classify as desk_classify

REGENERATE = "DJANGO_DEBUG=1 python manage.py taxonomy > client/triage_desk_client/taxonomy.json"
TAXONOMY = bundled()
READ = ToolPolicy(side_effect="read")
WRITE = ToolPolicy(side_effect="external_write")


def snapshot() -> dict[str, Any]:
    text = resources.files("triage_desk_client").joinpath("taxonomy.json").read_text("utf-8")
    return json.loads(text)


@override_settings(TRIAGE_ENVELOPE_CODES={})
def test_the_bundled_taxonomy_is_the_desks_document() -> None:
    bundled_document = snapshot()
    published = {key: value for key, value in bundled_document.items() if key != "envelope_codes"}
    assert published == desk_taxonomy.public_document(), f"stale snapshot; run {REGENERATE}"
    # The rest of it is what GET /api/v1/taxonomy adds: the built-in code table.
    assert bundled_document == desk_envelope.taxonomy_document()[0], f"run {REGENERATE}"


def test_every_reason_the_client_concludes_is_in_the_catalog() -> None:
    assert [reason for reason in classify.REASONS if TAXONOMY.reason(reason) is None] == []


# The states the client's classifiers can give each reason (classify.py): the default, and
# for transport failures and 5xx the before/after-send distinction.
def states_the_client_produces(reason: str) -> set[str]:
    produced = {TAXONOMY.reasons[reason].execution_state}
    if reason in ("timeout", "network_error"):
        produced |= {"not_started", "started_unknown"}
    if reason == "http_5xx":
        produced |= {"completed", "started_unknown"}
    return produced


TIMEOUT_POLICIES = [("retry_safe", "reconcile_first"), ("reconcile_first", "manual_investigation")]
EVIDENCE: list[dict[str, Any]] = [
    {},
    {"http_status": 429, "rate_limited": True},
    {"http_method": "GET"},
    {"http_method": "POST"},
]


@pytest.mark.parametrize("reason", classify.REASONS)
def test_the_lane_derivation_agrees_with_the_desks_for_every_combination(reason: str) -> None:
    checked = 0
    for side_effect, state, (before, after), approval, evidence in itertools.product(
        ("", *classify.SIDE_EFFECTS),
        EXECUTION_STATES,
        TIMEOUT_POLICIES,
        (False, True),
        EVIDENCE,
    ):
        desk = desk_classify(
            reason=reason,
            tool=ToolFacts(side_effect, before, after, approval),
            sent=Sent(execution_state=state),
            evidence=dict(evidence),
        )
        if state not in states_the_client_produces(reason):
            continue
        # A state the client sends is one the desk accepts for the reason.
        assert desk.contradictions == [], (reason, state)
        policy = ToolPolicy(
            side_effect=side_effect,
            timeout_before_send_lane=before,
            timeout_after_send_lane=after,
            approval_required=approval,
        )
        ours = classify.derive(
            Failure(reason, TAXONOMY.reasons[reason].stage, state, "", dict(evidence)),
            taxonomy=TAXONOMY,
            policy=policy,
        )
        combination = (reason, side_effect, state, before, after, approval, evidence)
        assert (ours.lane, ours.execution_state, ours.retryable, ours.side_effect) == (
            desk.lane,
            desk.execution_state,
            desk.retryable,
            desk.side_effect,
        ), combination
        assert ours.next_action == desk_taxonomy.LANE_NEXT_ACTION[desk.lane]
        assert classify.envelope_status(ours) == desk_envelope.envelope_status(
            lane=desk.lane, execution_state=desk.execution_state
        )
        checked += 1
    assert checked >= 40


def items_for_a_matrix_of_failures() -> list[dict[str, Any]]:
    request = httpx2.Request("POST", "https://billing.example/x")
    raised: list[BaseException] = [
        RuntimeError("HTTP 503: Service Unavailable"),
        RuntimeError("HTTP 403 Forbidden"),
        RuntimeError("HTTP 429 Too Many Requests"),
        RuntimeError("HTTP 404 Not Found"),
        httpx2.ReadTimeout("read timed out", request=request),
        httpx2.ConnectTimeout("connect timed out", request=request),
        httpx2.ConnectError("refused", request=request),
        ConnectionResetError("reset by peer"),
        ValueError("something else"),
    ]
    items = []
    for policy in (ToolPolicy(), READ, WRITE):
        for error in raised:
            failure = classify.classify_exception(error, taxonomy=TAXONOMY, policy=policy)
            verdict = classify.derive(failure, taxonomy=TAXONOMY, policy=policy)
            answer = classify.envelope(
                failure, verdict, taxonomy=TAXONOMY, idempotency_key="notify:invoice-819"
            )
            item = classify.envelope_item(
                answer,
                failure,
                tool="send_invoice",
                collection="billing",
                side_effect=policy.side_effect,
                trace_id="a" * 32,
                span_id="b" * 16,
            )
            items.append(item)
    return items


@pytest.mark.parametrize("item", items_for_a_matrix_of_failures())
def test_the_desk_accepts_each_envelope_item_and_finds_no_contradiction(
    item: dict[str, Any],
) -> None:
    fields = desk_envelope.parse_envelope(item, now=datetime.now(UTC))
    assert fields.reason == item["reason"] and fields.stage == item["stage"]
    desk = desk_classify(
        reason=fields.reason,
        tool=ToolFacts(side_effect=fields.declared_side_effect),
        sent=fields.sent,
        evidence=fields.evidence,
    )
    assert desk.contradictions == []
    claims = fields.extra[desk_envelope.EXTRA_KEY]
    assert desk_envelope.envelope_contradictions(claims, desk, reason=fields.reason) == []
    assert claims["retry"]["next_action"] == desk_taxonomy.LANE_NEXT_ACTION[desk.lane]


def test_an_envelope_item_without_its_tool_is_refused_by_the_desk() -> None:
    item = items_for_a_matrix_of_failures()[0]
    del item["tool"]
    with pytest.raises(ItemError):
        desk_envelope.parse_envelope(item, now=datetime.now(UTC))


# --- what real HTTP clients raise -------------------------------------------------------------


def classified(error: BaseException, policy: ToolPolicy = READ) -> tuple[str, str, str]:
    failure = classify.classify_exception(error, taxonomy=TAXONOMY, policy=policy)
    verdict = classify.derive(failure, taxonomy=TAXONOMY, policy=policy)
    return failure.reason, failure.execution_state, verdict.lane


def http_status_error(status: int, method: str = "GET") -> httpx2.HTTPStatusError:
    request = httpx2.Request(method, "https://billing.example/x")
    response = httpx2.Response(status, request=request)
    return httpx2.HTTPStatusError("failed", request=request, response=response)


def requests_http_error(status: int) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    return requests.HTTPError("failed", response=response)


def urllib_http_error(status: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("https://billing.example/x", status, "failed", {}, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [http_status_error, requests_http_error, urllib_http_error])
@pytest.mark.parametrize(
    ("status", "read", "write"),
    [
        (503, ("http_5xx", "completed", "retry_safe"),
         ("http_5xx", "started_unknown", "reconcile_first")),
        (401, ("auth_failed", "completed", "policy_blocked"),
         ("auth_failed", "completed", "policy_blocked")),
        (403, ("auth_failed", "completed", "policy_blocked"),
         ("auth_failed", "completed", "policy_blocked")),
        (429, ("http_4xx", "completed", "retry_safe"),
         ("http_4xx", "completed", "reconcile_first")),
        (409, ("http_4xx", "completed", "input_stale"),
         ("http_4xx", "completed", "input_stale")),
    ],
)  # fmt: skip
def test_an_http_status_is_read_from_each_clients_exception(
    make: Any, status: int, read: tuple[str, ...], write: tuple[str, ...]
) -> None:
    assert classified(make(status), READ) == read
    assert classified(make(status), WRITE) == write


@pytest.mark.parametrize(
    ("error", "read", "write"),
    [
        # Never sent: the same on a read and a write; a write may be retried.
        (httpx2.ConnectTimeout("connect timed out"), ("timeout", "not_started", "retry_safe"),
         ("timeout", "not_started", "retry_safe")),
        (requests.exceptions.ConnectTimeout(), ("timeout", "not_started", "retry_safe"),
         ("timeout", "not_started", "retry_safe")),
        (httpx2.ConnectError("refused"), ("network_error", "not_started", "retry_safe"),
         ("network_error", "not_started", "retry_safe")),
        (ConnectionRefusedError(), ("network_error", "not_started", "retry_safe"),
         ("network_error", "not_started", "retry_safe")),
        (urllib.error.URLError(ConnectionRefusedError()),
         ("network_error", "not_started", "retry_safe"),
         ("network_error", "not_started", "retry_safe")),
        (requests.exceptions.ConnectionError(
            MaxRetryError(None, "/x", NewConnectionError(None, "refused"))),  # type: ignore[arg-type]
         ("network_error", "not_started", "retry_safe"),
         ("network_error", "not_started", "retry_safe")),
        # Maybe sent: retried on a read, reconciled first on a write.
        (httpx2.ReadTimeout("read timed out"), ("timeout", "started_unknown", "retry_safe"),
         ("timeout", "started_unknown", "reconcile_first")),
        (requests.exceptions.ReadTimeout(), ("timeout", "started_unknown", "retry_safe"),
         ("timeout", "started_unknown", "reconcile_first")),
        (TimeoutError(), ("timeout", "started_unknown", "retry_safe"),
         ("timeout", "started_unknown", "reconcile_first")),
        (urllib.error.URLError(TimeoutError()), ("timeout", "started_unknown", "retry_safe"),
         ("timeout", "started_unknown", "reconcile_first")),
        (ConnectionResetError(), ("network_error", "started_unknown", "retry_safe"),
         ("network_error", "started_unknown", "reconcile_first")),
        (httpx2.RemoteProtocolError("closed"), ("network_error", "started_unknown", "retry_safe"),
         ("network_error", "started_unknown", "reconcile_first")),
        # Nothing to read: a bug, never retried.
        (KeyError("total"), ("uncaught_server_error", "started_unknown", "manual_investigation"),
         ("uncaught_server_error", "started_unknown", "manual_investigation")),
    ],
)  # fmt: skip
def test_timeouts_and_connection_errors_say_whether_the_request_was_sent(
    error: BaseException, read: tuple[str, ...], write: tuple[str, ...]
) -> None:
    assert classified(error, READ) == read
    assert classified(error, WRITE) == write


def test_a_wrapped_exception_is_read_through_its_cause() -> None:
    try:
        try:
            raise httpx2.ReadTimeout("read timed out")
        except httpx2.ReadTimeout as inner:
            raise RuntimeError("Error executing tool send_invoice") from inner
    except RuntimeError as outer:
        assert classified(outer, WRITE) == ("timeout", "started_unknown", "reconcile_first")


def test_an_undeclared_tool_is_treated_as_a_write_unless_its_request_says_get() -> None:
    timeout = httpx2.ReadTimeout("read timed out")
    assert classified(timeout, ToolPolicy())[2] == "reconcile_first"
    timeout_of_a_get = httpx2.ReadTimeout(
        "read timed out", request=httpx2.Request("GET", "https://billing.example/x")
    )
    assert classified(timeout_of_a_get, ToolPolicy())[2] == "retry_safe"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("HTTP 503", "http_5xx"),
        ("upstream said HTTP/1.1 502 Bad Gateway", "http_5xx"),
        ("HTTP Error 403: Forbidden", "auth_failed"),  # urllib's own wording
        ("Unknown tool: refund_invoice", "unknown_target"),
        ("HTTP 302 Found", None),  # a redirect is no failure status
        ("the answer was 503 items long", None),  # a number is not a status
        ("", None),
    ],
)
def test_the_few_texts_that_are_read(text: str, reason: str | None) -> None:
    found = classify.classify_text(text, taxonomy=TAXONOMY, policy=READ)
    assert (found.reason if found else None) == reason


def test_pydantic_validation_text_names_fields_and_kinds_never_values() -> None:
    text = (
        "Error executing tool send_invoice: 2 validation errors for send_invoiceArguments\n"
        "invoice_id\n  Field required [type=missing, input_value={'to': 'kim@example.com'}, "
        "input_type=dict]\n    For further information visit https://errors.pydantic.dev\n"
        "amount\n  Input should be a valid number [type=float_parsing, input_value='x', "
        "input_type=str]\n"
    )
    found = classify.classify_text(text, taxonomy=TAXONOMY, policy=WRITE)
    assert found is not None and found.reason == "missing_required_argument"
    assert found.evidence == {
        "fields": ["amount", "invoice_id"],
        "validation_errors": ["float_parsing", "missing"],
    }
    assert "kim@example.com" not in found.message
    only_types = text.replace("type=missing", "type=string_type")
    coerced = classify.classify_text(only_types, taxonomy=TAXONOMY, policy=WRITE)
    assert coerced is not None and coerced.reason == "argument_coercion_failed"


@pytest.mark.parametrize(
    ("code", "message", "reason"),
    [
        (-32601, "Method not found", "unknown_target"),
        (-32602, "Unknown tool: refund_invoice", "unknown_target"),
        (-32602, "Missing required argument: city", "missing_required_argument"),
        (-32602, "city must be a name", "argument_coercion_failed"),
        (-32603, "Internal error", "uncaught_server_error"),
        (-32603, "HTTP 503 from the gateway", "http_5xx"),
    ],
)
def test_jsonrpc_errors(code: int, message: str, reason: str) -> None:
    failure = classify.classify_jsonrpc(code, message, taxonomy=TAXONOMY, policy=READ)
    assert failure.reason == reason
    assert failure.evidence["jsonrpc_code"] == code


# --- declarations -----------------------------------------------------------------------------


def test_a_declaration_in_the_seeds_names_is_read() -> None:
    policy = ToolPolicy.from_declaration(
        "create_release_note",
        {
            "side_effect": "external_write",
            "idempotency": {
                "required": True,
                "lookup": "GET /release-notes/by-key/{key}",
                "key_argument": "key",
            },
            "timeout_policy": {"on_before_send": "retry_safe", "on_after_send": "reconcile_first"},
            "authority": {"approval_required": False},
        },
    )
    assert policy == ToolPolicy(
        side_effect="external_write",
        idempotency_required=True,
        idempotency_lookup="GET /release-notes/by-key/{key}",
        idempotency_key_argument="key",
    )
    assert policy.idempotency_key({"key": "notes:2026-10-29"}) == "notes:2026-10-29"
    assert policy.idempotency_key({"other": "x"}) == ""
    assert ToolPolicy().idempotency_key({"key": "x"}) == ""


@pytest.mark.parametrize(
    "declaration",
    [
        {"side_effect": "write"},
        {"side_efect": "read"},
        {"timeout_policy": {"on_after_send": "retry"}},
        {"idempotency": {"required": "yes"}},
        {"idempotency": "GET /x"},
        {"authority": {"approval": True}},
    ],
)
def test_a_bad_declaration_is_refused_at_once(declaration: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="tools\\['send_invoice'\\]"):
        classify.policies({"send_invoice": declaration})


def test_a_document_that_is_not_a_taxonomy_is_refused() -> None:
    with pytest.raises(ValueError):
        Taxonomy({"version": "1", "reasons": [{"code": "x"}], "lanes": [], "stages": []})
    document = snapshot()
    document["reasons"][0]["lane"] = "retry_later"
    with pytest.raises(ValueError, match="unknown lane"):
        Taxonomy(document)


def test_the_desks_policy_document_is_read_or_refused_whole() -> None:
    from triage_desk_client.classify import ToolPolicySource

    source = ToolPolicySource("billing")  # no desk: nothing but the code's declarations
    assert source.current() == {} and source.refresh() is False
    read = source.parse({"collection": "billing", "tools": {"get": {"side_effect": "read"}}})
    assert read["get"].side_effect == "read"
    documents: list[Any] = [{"tools": "all"}, [], {"tools": {"get": {"side_effect": "often"}}}]
    for document in documents:
        with pytest.raises(ValueError):
            source.parse(document)
