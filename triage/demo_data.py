"""Realistic sample traffic for the demo: every stage, many reasons, runner events,
receipts and audit events, from three made-up runtimes of a shop.

Deterministic for a given seed and clock, so the same demo looks the same twice.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

COLLECTIONS = ("shop-orders", "shop-members", "shop-logistics")

# (stage, reason, tool, weight, evidence, message)
_FAILURES: list[tuple[str, str, str, int, dict[str, Any], str]] = [
    (
        "retrieve",
        "not_retrieved",
        "getOrderDetail",
        14,
        {
            "expected_target": "getOrderDetail",
            "returned_tool_names": ["listOrders", "getOrderItems"],
            "top_k": 5,
        },
        "expected target getOrderDetail not in top-5",
    ),
    (
        "retrieve",
        "no_candidates",
        "",
        3,
        {"query": "환불 규정 알려줘", "top_k": 5},
        "retrieval returned no tools",
    ),
    (
        "retrieve",
        "low_confidence",
        "searchProducts",
        6,
        {"score_distribution": [0.31, 0.29, 0.28], "threshold": 0.4},
        "top score under threshold",
    ),
    (
        "select_target",
        "llm_target_mismatch",
        "cancelOrder",
        8,
        {
            "llm_target": "cancelOrder",
            "expected_target": "requestRefund",
            "selected_target": "cancelOrder",
        },
        "LLM picked cancelOrder, expected requestRefund",
    ),
    (
        "select_target",
        "ambiguous_target",
        "getDeliveryStatus",
        5,
        {"margin": 0.02, "tied_candidates": ["getDeliveryStatus", "trackShipment"]},
        "two candidates within 0.02",
    ),
    (
        "select_target",
        "llm_target_not_in_candidates",
        "getInvoice",
        2,
        {"llm_target": "getInvoice", "candidate_names": ["listInvoices", "getOrderDetail"]},
        "LLM target outside the retrieved catalog",
    ),
    (
        "synthesize",
        "unsatisfied_field",
        "getOrderDetail",
        30,
        {"field_name": "orderNo", "semantic_tag": "order_id", "target_tool": "getOrderDetail"},
        "Required field orderNo cannot be supplied",
    ),
    (
        "synthesize",
        "enum_required",
        "requestRefund",
        9,
        {"field_name": "refundReason", "safe_enum_values": ["DAMAGED", "LATE", "OTHER"]},
        "refundReason needs a value",
    ),
    (
        "synthesize",
        "dynamic_option_required",
        "changeDeliveryAddress",
        4,
        {"producer_name": "listAddresses", "options_path": "$.addresses[*].id"},
        "address id must be picked from listAddresses",
    ),
    (
        "synthesize",
        "user_input_fallback",
        "registerMember",
        3,
        {"field_name": "birthDate", "required": True},
        "planner asks the user for birthDate",
    ),
    (
        "synthesize",
        "cycle",
        "getMemberGrade",
        1,
        {"chain": ["getMember", "getMemberGrade", "getMember"], "tool_name": "getMember"},
        "dependency chain revisits getMember",
    ),
    (
        "bind_request",
        "missing_required_argument",
        "createReturn",
        4,
        {"field_name": "returnItems", "field_path": "body.returnItems"},
        "returnItems missing after binding",
    ),
    (
        "bind_request",
        "argument_coercion_failed",
        "listOrders",
        3,
        {"field_name": "fromDate", "expected_type": "date"},
        "fromDate could not be coerced",
    ),
    (
        "auth_preflight",
        "auth_context_required",
        "getMemberProfile",
        12,
        {
            "auth_readiness": {
                "required": True,
                "auth_profile_id_present": True,
                "session_station_header_names": [],
                "failure_reason": "auth_context_required",
            }
        },
        "no user session for an auth-only API",
    ),
    (
        "auth_preflight",
        "auth_profile_missing",
        "listCoupons",
        5,
        {"auth_readiness": {"required": True, "auth_profile_id_present": False}},
        "collection has no auth profile",
    ),
    (
        "auth_preflight",
        "auth_header_resolution_failed",
        "getPointBalance",
        2,
        {
            "auth_readiness": {
                "required": True,
                "auth_profile_id_present": True,
                "session_station_header_names": ["Authorization"],
            }
        },
        "session header resolver returned nothing",
    ),
    (
        "execute",
        "auth_failed",
        "getMemberProfile",
        7,
        {"http_status": 401, "http_method": "GET", "request_header_names": ["Authorization"]},
        "HTTP 401 Unauthorized",
    ),
    (
        "execute",
        "http_4xx",
        "createReturn",
        10,
        {"http_status": 400, "http_method": "POST", "field_path": "body.returnItems[0].qty"},
        "HTTP 400 qty must be positive",
    ),
    (
        "execute",
        "http_4xx",
        "searchProducts",
        4,
        {"http_status": 429, "http_method": "GET", "rate_limited": True},
        "HTTP 429",
    ),
    (
        "execute",
        "http_5xx",
        "getDeliveryStatus",
        22,
        {"http_status": 503, "http_method": "GET"},
        "HTTP 503 Service Unavailable",
    ),
    (
        "execute",
        "http_5xx",
        "requestRefund",
        3,
        {"http_status": 500, "http_method": "POST"},
        "HTTP 500 Internal Server Error",
    ),
    (
        "execute",
        "timeout",
        "sendInvoiceEmail",
        6,
        {"timeout_sec": 10, "http_method": "POST", "sent": True},
        "read timed out after 10s",
    ),
    (
        "execute",
        "timeout",
        "listOrders",
        5,
        {"timeout_sec": 5, "http_method": "GET"},
        "read timed out after 5s",
    ),
    (
        "execute",
        "network_error",
        "getDeliveryStatus",
        4,
        {"exception_type": "ConnectionRefusedError", "http_method": "GET"},
        "connection refused by carrier-api",
    ),
    (
        "cleanup",
        "cleanup_failed",
        "createReturn",
        2,
        {"cleanup_step": "deleteReturn", "http_status": 409},
        "cleanup deleteReturn returned 409",
    ),
    (
        "cleanup",
        "cleanup_not_configured",
        "cancelOrder",
        1,
        {"case_id": "execute-cancel"},
        "mutating case has no cleanup steps",
    ),
    (
        "learn",
        "scrub_failed",
        "",
        1,
        {"path": "body.trace_edges[3]"},
        "trace payload could not be compacted",
    ),
    (
        "learn",
        "insufficient_repeated_success",
        "getOrderDetail",
        3,
        {"observations": 1, "required": 2},
        "one success so far",
    ),
    (
        "service",
        "uncaught_server_error",
        "requestRefund",
        2,
        {"exception_type": "KeyError"},
        "adapter raised KeyError",
    ),
    (
        "xgen_transport",
        "sse_stream_dropped",
        "getOrderDetail",
        2,
        {"bytes_sent": 1834},
        "SSE stream closed by proxy",
    ),
]

_PLANTED_SECRETS: list[dict[str, Any]] = [
    {"headers": {"Authorization": "Bearer sk-demo-planted-should-never-be-stored-0001"}},
    {"customer_email": "kim.minji@example.com", "user_id": "member-88412"},
    {"debug": "cookie session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2RlbW8"},
]


def demo_items(*, now: datetime, seed: int = 7, failures: int = 600) -> Iterator[dict[str, Any]]:
    """Yield ingest items ({type, id, body}) spread over the last 48 hours, with bursts."""
    rng = random.Random(seed)
    weights = [row[3] for row in _FAILURES]
    for number in range(failures):
        stage, reason, tool, _, evidence, message = rng.choices(_FAILURES, weights)[0]
        # A quarter of the traffic falls in a two-hour burst six hours ago.
        if rng.random() < 0.25:
            occurred = now - timedelta(hours=6) + timedelta(minutes=rng.uniform(0, 120))
        else:
            occurred = now - timedelta(minutes=rng.uniform(1, 48 * 60))
        body: dict[str, Any] = {
            "stage": stage,
            "reason": reason,
            "message": message,
            "tool": tool,
            "collection": rng.choice(COLLECTIONS),
            "plan_id": f"plan_{rng.randrange(16**6):06x}",
            "step_id": f"s{rng.randint(1, 3)}",
            "evidence": dict(evidence),
            "occurred_at": occurred.isoformat(),
            "graph_tool_call_version": "0.47.0",
            "source": "runtime" if rng.random() < 0.9 else "log",
        }
        if reason == "timeout" and tool == "sendInvoiceEmail":
            body["idempotency_key"] = f"notify:invoice-{rng.randint(100, 999)}"
        if number % 97 == 0:
            body["extra_context"] = _PLANTED_SECRETS[number % len(_PLANTED_SECRETS)]
        if number % 53 == 0 and stage == "auth_preflight":
            body["retryable"] = True  # a runtime that is wrong about its own failure
        yield {"type": "failure", "id": f"demo-failure-{number}", "body": body}

    yield from _runner_events(now=now, rng=rng)
    yield from _receipts_and_audit(now=now)
    yield from _learning_attempts(now=now)


def _learning_attempts(*, now: datetime) -> Iterator[dict[str, Any]]:
    """A runtime's trace-learning records: repeated successes make a suggestion; one
    attempt carries an email, so its suggestion is marked as sensitive evidence."""
    attempts = [
        ("주문 상세를 보여줘", "getOrderDetail", "listOrders", True, None),
        ("주문 상세를 보여줘", "getOrderDetail", "listOrders", True, None),
        ("주문 상세를 보여줘", "getOrderDetail", None, True, None),
        ("배송 어디까지 왔어", "trackShipment", "getDeliveryStatus", True, None),
        ("배송 어디까지 왔어", "trackShipment", None, False, "http_5xx"),
        ("배송 어디까지 왔어", "trackShipment", None, False, "timeout"),
        ("배송 어디까지 왔어", "trackShipment", None, False, "http_5xx"),
        ("refund for kim.minji@example.com", "requestRefund", None, True, None),
        ("refund for kim.minji@example.com", "requestRefund", None, True, None),
    ]
    for number, (query, target, llm_target, success, reason) in enumerate(attempts):
        body: dict[str, Any] = {
            "query": query,
            "collection": "shop-orders",
            "selected_target": target,
            "llm_target": llm_target,
            "plan_tools": [target],
            "success": success,
            "failure_reason": reason,
            "latency_ms": 180 + number * 7,
            "session_id": f"sess-demo-{number % 3}",
            "created_at": (now - timedelta(hours=number + 1)).isoformat(),
        }
        yield {"type": "learning_attempt", "id": f"demo-attempt-{number}", "body": body}


def _runner_events(*, now: datetime, rng: random.Random) -> Iterator[dict[str, Any]]:
    outcomes = [
        ("step.completed", None),
        ("step.completed", None),
        (
            "step.failed",
            {"kind": "tool", "message": "HTTP 404: Not Found", "exception_type": "HTTPError"},
        ),
        ("step.failed", {"kind": "tool", "message": "timed out", "exception_type": "TimeoutError"}),
        (
            "step.failed",
            {
                "kind": "binding",
                "message": "path $.orders[0].orderNo not found",
                "exception_type": "BindingError",
            },
        ),
    ]
    for number in range(60):
        plan_id = f"plan_run_{number:03d}"
        occurred = now - timedelta(minutes=rng.uniform(1, 24 * 60))
        kind, error = outcomes[number % len(outcomes)]
        base = {
            "plan_id": plan_id,
            "stage": "runner",
            "graph_tool_call_version": "0.47.0",
            "occurred_at": occurred.isoformat(),
            "collection": "shop-orders",
        }
        yield {
            "type": "runner_event",
            "id": f"{plan_id}-start",
            "body": {**base, "type": "plan.started", "goal": "주문 상세를 보여줘", "step_count": 1},
        }
        event: dict[str, Any] = {
            **base,
            "type": kind,
            "step_id": "s1",
            "tool": "getOrderDetail",
            "duration_ms": rng.randint(20, 900),
        }
        if error is not None:
            event["error"] = error
        yield {"type": "runner_event", "id": f"{plan_id}-s1", "body": event}


def _receipts_and_audit(*, now: datetime) -> Iterator[dict[str, Any]]:
    stamp = (now - timedelta(hours=2)).isoformat()
    receipts: list[dict[str, Any]] = [
        {
            "tool_run_id": "tr_demo_001",
            "tool": "publishChangelog",
            "result": "blocked",
            "code": "POLICY_APPROVAL_REQUIRED",
            "execution_state": "not_started",
            "next_action": "request_approval",
            "evidence_ref": "policy://release-note/approval-required/v3",
            "authority_scope": "repo:docs / write:release-note",
        },
        {
            "tool_run_id": "tr_demo_002",
            "tool": "sendInvoiceEmail",
            "result": "uncertain",
            "code": "REMOTE_TIMEOUT_AFTER_ACCEPT",
            "execution_state": "started_unknown",
            "next_action": "query_by_idempotency_key",
            "side_effect": "external_write",
            "idempotency_key": "notify:invoice-819:2026-10-29",
            "retryable": False,
        },
        {
            "tool_run_id": "tr_demo_003",
            "tool": "requestRefund",
            "result": "failed",
            "reason": "http_5xx",
            "execution_state": "partially_completed",
            "next_action": "stop_automation_and_investigate",
            "side_effect": "external_write",
            "idempotency_key": "refund:ord-2026-000123",
        },
        {
            "tool_run_id": "tr_demo_004",
            "tool": "cancelOrder",
            "result": "failed",
            "code": "REMOTE_TIMEOUT",
            "execution_state": "not_started",
            "retryable": True,
            "side_effect": "external_write",
        },
        {
            "tool_run_id": "tr_demo_005",
            "tool": "getOrderDetail",
            "result": "ok",
            "execution_state": "completed",
        },
    ]
    for number, receipt in enumerate(receipts):
        body = {
            "collection": "shop-orders",
            "attempt": 1,
            "started_at": stamp,
            "ended_at": stamp,
            "target_fingerprint": f"sha256:{number:064x}",
            **receipt,
        }
        yield {"type": "receipt", "id": f"demo-receipt-{number}", "body": body}
    # The audit log saw an outbound call for a run whose receipt claims not_started.
    yield {
        "type": "audit_event",
        "id": "demo-audit-0",
        "body": {
            "tool_run_id": "tr_demo_004",
            "method": "POST",
            "host": "orders.internal",
            "path": "/orders/ORD-2026-000777/cancel",
            "status": 202,
            "occurred_at": stamp,
        },
    }
