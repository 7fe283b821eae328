"""triage.scrub: nothing secret or personal survives; everything the boundary allows does.

Plain functions, no database. Fake credentials are assembled at run time ("sk_" + "live_")
so secret scanners do not flag this file; none of them is real.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import math
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from graph_tool_call.learning import scrub_trace_payload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.scrub import HOSTILE_SHAPES, body_of, scrub_with_work
from tests.factories import failure_item
from triage.models import IngestRejection
from triage.scrub import (
    MAX_LIST_ITEMS,
    MAX_STRING_CHARS,
    REDACTED,
    WORK_ALLOWANCE,
    WORK_PER_INPUT_CHAR,
    ScrubError,
    ScrubLogFilter,
    hash_identifier,
    scrub_payload,
    scrub_text,
)

KEY = b"test-hash-key-0123456789abcdef"
OTHER_KEY = b"another-hash-key-fedcba9876543210"


def scrub(value: Any) -> Any:
    return scrub_payload(value, hash_key=KEY)


def dumped(value: Any) -> str:
    return json.dumps(scrub(value), ensure_ascii=False)


# --- the corpus of secrets -----------------------------------------------------------------
@dataclass(frozen=True)
class Secret:
    label: str
    text: str  # what gets planted
    fragments: tuple[str, ...]  # none of these may appear in the output
    token: bool = False  # also: no 12-char window of a fragment may appear

    def leaks(self, output: str) -> list[str]:
        found = [fragment for fragment in self.fragments if fragment in output]
        if self.token:
            for fragment in self.fragments:
                found += [
                    fragment[start : start + 12]
                    for start in range(len(fragment) - 11)
                    if fragment[start : start + 12] in output
                ]
        return found


BEARER_TOKEN = "8f3kQ9zLmN2pX7vR4tY1wB6cD0eF5gH"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiJ1c2VyLTQyIiwiZW1haWwiOiJhbGljZUBleGFtcGxlLmNvbSJ9"
    + ".c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU"
)
OPENAI_KEY = "sk-" + "proj-Xk29vLq8Hn3TbR7mWc1ZpY4sJd6FgA0eKu5N"
OPENAI_LEGACY_KEY = "sk-" + "4f9Kq2Lm8Nx7Vb3Zc6Rt1Yw5Hs0Jd9Pa"
ANTHROPIC_KEY = "sk-" + "ant-api03-Qm7Kx2Lp9Vn4Bc8Zr3Ty6Wh1Js5Df0Ga-AbCdEf"
GITHUB_TOKEN = "gh" + "p_R4nD0mT0k3nV4lu3F0rT3st1ngPurp0s3s12"
GITHUB_PAT = "github" + "_pat_11AQ7W3E9R0_x8Kp2Lm4Nq6Rs8Tv0Wx2Yz4Ab6Cd8Ef0Gh2Ij4Kl6"
AWS_KEY_ID = "AK" + "IAQ3EGRKTW7XN5LMPZ"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "Q3EGRKTW7X"
SLACK_TOKEN = "xo" + "xb-271828182845-3141592653589-Q7wErTyUiOpAsDfGhJkLzXcV"
STRIPE_KEY = "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dcQ"
GOOGLE_KEY = "AI" + "zaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
PEM_BODY = "MIIEowIBAAKCAQEAq7Vx0bY3kLmN8pQ2rS5tU9vW1xYzA4bC6dE8fG0hJ2kL4mN6pQ8r"
PEM = (
    "-----BEGIN RSA " + "PRIVATE KEY-----\n" + PEM_BODY + "\nS5tU9vW1xYzA4bC6dE8fG0hJ2kL4mN6p\n"
    "-----END RSA " + "PRIVATE KEY-----"
)
PEM_TRUNCATED = "-----BEGIN " + "PRIVATE KEY-----\n" + PEM_BODY[:40]
DB_PASSWORD = "S3cr3tPassw0rd"
URL_WITH_PASSWORD = f"postgres://admin:{DB_PASSWORD}@db.internal:5432/app"
TEXT_PASSWORD = "hunter2-Correct-Horse"

TRUNCATED_PEM = Secret("truncated pem", PEM_TRUNCATED, (PEM_BODY[:40],), token=True)
TEXT_SECRETS: list[Secret] = [
    Secret("bearer", f"Bearer {BEARER_TOKEN}", (BEARER_TOKEN,), token=True),
    Secret("authorization line", f"Authorization: Bearer {BEARER_TOKEN}", (BEARER_TOKEN,), True),
    Secret("jwt", JWT, (JWT, JWT.split(".")[1]), token=True),
    Secret("openai key", OPENAI_KEY, (OPENAI_KEY[3:],), token=True),
    Secret("openai legacy key", OPENAI_LEGACY_KEY, (OPENAI_LEGACY_KEY[3:],), token=True),
    Secret("anthropic key", ANTHROPIC_KEY, (ANTHROPIC_KEY[7:],), token=True),
    Secret("github token", GITHUB_TOKEN, (GITHUB_TOKEN[4:],), token=True),
    Secret("github pat", GITHUB_PAT, (GITHUB_PAT[11:],), token=True),
    Secret("aws access key id", AWS_KEY_ID, (AWS_KEY_ID,), token=True),
    Secret("aws secret key", f"aws_secret_access_key={AWS_SECRET}", (AWS_SECRET,), token=True),
    Secret("slack token", SLACK_TOKEN, (SLACK_TOKEN[5:],), token=True),
    Secret("stripe key", STRIPE_KEY, (STRIPE_KEY[8:],), token=True),
    Secret("google key", GOOGLE_KEY, (GOOGLE_KEY[4:],), token=True),
    Secret("pem private key", PEM, (PEM_BODY,), token=True),
    TRUNCATED_PEM,
    Secret("url with password", URL_WITH_PASSWORD, (DB_PASSWORD, "admin:S3cr"), token=True),
    Secret("password in text", f"password={TEXT_PASSWORD}", (TEXT_PASSWORD,), token=True),
    Secret("json secret in text", '{"client_secret": "cs-Zx81Qw72Er63"}', ("cs-Zx81Qw72Er63",)),
    Secret("basic auth", "Basic dXNlcjpwYXNzd29yZA==", ("dXNlcjpwYXNzd29yZA",)),
    Secret("email", "alice.kim@example.com", ("alice.kim@example.com", "alice.kim@")),
    Secret("phone kr intl", "+82 10-4821-7396", ("+82 10-4821-7396", "4821-7396")),
    Secret("phone kr", "010-6317-2984", ("010-6317-2984", "6317-2984")),
    Secret("phone us", "(415) 739-2846", ("(415) 739-2846", "739-2846")),
    Secret("phone us intl", "+1 555 867 5309", ("+1 555 867 5309", "867 5309")),
    Secret("card", "4111 1111 1111 1111", ("4111 1111 1111 1111", "4111111111111111")),
    Secret("card dashes", "5555-5555-5555-4444", ("5555-5555-5555-4444",)),
    Secret("amex", "378282246310005", ("378282246310005",)),
    Secret("resident registration number", "850317-2468135", ("850317-2468135", "2468135")),
]

# Bodies with a slot for a secret, one per position an item body can hold text in.
POSITIONS: dict[str, Callable[[str], dict[str, Any]]] = {
    "top-level string": lambda text: {"stage": "execute", "message": text},
    "message text": lambda text: {"message": f"upstream call failed: {text} (retry 2 of 3)"},
    "nested evidence": lambda text: {"evidence": {"detail": {"note": f"seen {text} here"}}},
    "extra field": lambda text: {"stage": "execute", "vendor_extra": text},
    "trace_metadata": lambda text: {
        "trace_metadata": {"auth_readiness": {"failure_reason": "auth_failed", "note": text}}
    },
    "error dict": lambda text: {"error": {"kind": "tool", "message": f"HTTP 401: {text}"}},
    "headers dict": lambda text: {"request_headers": {"X-Debug": text, "Accept": "*/*"}},
    "header pairs": lambda text: {"headers": [["Accept", "*/*"], ["X-Debug", text]]},
    "header objects": lambda text: {"response_headers": [{"name": "X-Debug", "value": text}]},
    "nested lists of dicts": lambda text: {
        "trace_steps": [{"step_id": "step_1", "args_resolved": {"q": ["x", [{"v": text}]]}}]
    },
    "dict key": lambda text: {"evidence": {text: 1}},
    "nested dict key": lambda text: {"trace_metadata": {"by_user": {text: {"count": 2}}}},
    "parameter object": lambda text: {"params": [{"name": "q", "value": text, "in": "query"}]},
    "list of strings": lambda text: {"returned_tools": ["getOrderDetail", text]},
    "tuple": lambda text: {"evidence": {"pair": ("orderNo", text)}},
}


@pytest.mark.parametrize("secret", TEXT_SECRETS, ids=lambda secret: secret.label)
@pytest.mark.parametrize("position", list(POSITIONS), ids=str)
def test_planted_secret_never_survives(secret: Secret, position: str) -> None:
    output = dumped(POSITIONS[position](secret.text))
    assert secret.leaks(output) == [], output


def test_corpus_covers_at_least_twelve_kinds() -> None:
    assert len({secret.label for secret in TEXT_SECRETS}) >= 12


@pytest.mark.parametrize("secret", TEXT_SECRETS, ids=lambda secret: secret.label)
def test_scrub_text_redacts_with_a_typed_marker(secret: Secret) -> None:
    scrubbed = scrub_text(f"before {secret.text} after")
    assert secret.leaks(scrubbed) == []
    assert "[REDACTED:" in scrubbed
    assert scrubbed.startswith("before ")
    if secret is not TRUNCATED_PEM:  # a PEM block without its END line runs to the end
        assert scrubbed.endswith(" after")


SENSITIVE_HEADERS = {
    "Authorization": f"Bearer {BEARER_TOKEN}",
    "Proxy-Authorization": "Basic cHJveHk6c2VjcmV0MTIz",
    "Cookie": "sid=abc123def456ghi; theme=dark",
    "Set-Cookie": "session=zyx987wvu654tsr; HttpOnly; Secure",
    "X-Api-Key": "k3yVaLuE0987654321abcdef",
    "X-Auth-Token": "plainTokenValue42",
    "X-Vendor-Session": "vendorSessionValue77",
}
HEADER_FRAGMENTS = [
    BEARER_TOKEN,
    "cHJveHk6c2VjcmV0MTIz",
    "abc123def456ghi",
    "zyx987wvu654tsr",
    "k3yVaLuE0987654321abcdef",
    "plainTokenValue42",
    "vendorSessionValue77",
]
HEADER_SHAPES: dict[str, Callable[[dict[str, str]], Any]] = {
    "dict": lambda headers: headers,
    "pairs": lambda headers: [[name, value] for name, value in headers.items()],
    "objects": lambda headers: [{"name": name, "value": value} for name, value in headers.items()],
}


@pytest.mark.parametrize("shape", list(HEADER_SHAPES))
@pytest.mark.parametrize("key", ["headers", "request_headers", "response_headers"])
def test_header_values_are_redacted_and_names_survive(shape: str, key: str) -> None:
    headers = {**SENSITIVE_HEADERS, "Content-Type": "application/json", "X-Request-Id": "req-42"}
    body = {"evidence": {key: HEADER_SHAPES[shape](headers)}}
    output = dumped(body)
    assert [fragment for fragment in HEADER_FRAGMENTS if fragment in output] == []
    for name in headers:
        assert name in output  # header names are allowed
    assert "application/json" in output and "req-42" in output


RAW_USER_ID = "u-88127341"
RAW_SESSION_ID = "sess_9f8e7d6c5b4a3921"
KEYED_SECRETS: list[tuple[dict[str, Any], str]] = [
    ({"user_id": RAW_USER_ID}, RAW_USER_ID),
    ({"userId": RAW_USER_ID}, RAW_USER_ID),
    ({"session_id": RAW_SESSION_ID}, RAW_SESSION_ID),
    ({"sessionId": RAW_SESSION_ID}, RAW_SESSION_ID),
    ({"member_id": 88127341}, "88127341"),
    ({"email": "bob.lee@example.org"}, "bob.lee"),
    ({"headers": {"X-User-Id": RAW_USER_ID}}, RAW_USER_ID),
    ({"params": [{"name": "sessionId", "value": RAW_SESSION_ID}]}, RAW_SESSION_ID),
    ({"headers": {"X-Api-Key": "k3yVaLuE0987654321abcdef"}}, "k3yVaLuE0987654321abcdef"),
    ({"Cookie": "sid=abc123def456ghi"}, "abc123def456ghi"),
    ({"api_key": "plain-looking-value-123"}, "plain-looking-value-123"),
]


@pytest.mark.parametrize(("planted", "raw"), KEYED_SECRETS, ids=lambda value: str(value)[:30])
@pytest.mark.parametrize("position", ["top", "evidence", "trace_metadata", "nested lists", "extra"])
def test_keyed_secrets_and_raw_identifiers_never_survive(
    planted: dict[str, Any], raw: str, position: str
) -> None:
    body = {
        "top": {"stage": "execute", **planted},
        "evidence": {"evidence": {"detail": planted}},
        "trace_metadata": {"trace_metadata": {"auth_readiness": {"context": planted}}},
        "nested lists": {"trace_steps": [{"step_id": "step_1", "args_resolved": [planted]}]},
        "extra": {"vendor_extra": {"records": [[planted]]}},
    }[position]
    assert raw not in dumped(body)


def test_header_dict_shape_is_kept() -> None:
    clean = scrub({"headers": {"Authorization": "Bearer x1y2z3", "Accept": "text/html"}})
    assert clean == {"headers": {"Authorization": REDACTED, "Accept": "text/html"}}
    pairs = scrub({"headers": [["Cookie", "a=1"], ["Accept", "text/html"]]})
    assert pairs == {"headers": [["Cookie", REDACTED], ["Accept", "text/html"]]}


def test_header_pairs_are_recognized_by_key_and_by_well_known_name() -> None:
    clean = scrub(
        {
            "header_pairs": [["X-Vendor-Token", "vendorTokenValue1"], ["Accept", "*/*"]],
            "evidence": {"sent": [["Authorization", "Digest opaqueValue2"], ["x-api-key", "v3"]]},
            "plan_tools": ["getSession", "createOrder"],  # a pair of tool names, not a header
            "retries": [[1, 2], ["token", "refresh"]],
        }
    )
    assert clean == {
        "header_pairs": [["X-Vendor-Token", REDACTED], ["Accept", "*/*"]],
        "evidence": {"sent": [["Authorization", REDACTED], ["x-api-key", REDACTED]]},
        "plan_tools": ["getSession", "createOrder"],
        "retries": [[1, 2], ["token", "refresh"]],
    }


def test_values_under_secret_keys_are_redacted() -> None:
    body = {
        "api_key": "plain-looking-value-123",
        "apiKey": "camelValue456",
        "password": "correct horse battery staple",
        "passwd": 123456,
        "client_secret": "cs-value-789",
        "access_token": "at-value-abc",
        "refreshToken": "rt-value-def",
        "session": "opaque-session-blob",
        "credentials": {"username": "bob", "password": "pw"},
        "private_key": ["line one", "line two"],
        "Cookie": "a=b",
        "x-api-key": "xak-value",
    }
    clean = scrub(body)
    assert clean == {key: REDACTED for key in body}


def test_booleans_and_descriptive_keys_survive_next_to_secrets() -> None:
    body = {
        "auth_token_present": True,
        "xgen_auth_token_present": True,
        "token": False,
        "password": None,
        "session_station_header_names": ["Authorization", "X-Session-Token"],
        "auth_header_name": "Authorization",
        "token_count": 3,
        "api_key_required": True,
        "password_hash": "9f86d081884c7d659a2feaa0c55ad015",
        "prompt_tokens": 812,
        "token_usage": {"prompt_tokens": 812, "completion_tokens": 64},
        "idempotency_key": "idem-2026-11-29-0001",
    }
    assert scrub(body) == body


# --- what must survive ---------------------------------------------------------------------
SEED_RUNNER_EVENT = {
    "type": "step.failed",
    "stage": "execute",
    "plan_id": "plan_01HZX3K9QW",
    "step_id": "step_2",
    "tool": "getOrderDetail",
    "graph_tool_call_version": "0.47.0",
    "occurred_at": "2026-11-29T20:16:13Z",
    "trace_metadata": {
        "failure_reason": "http_4xx",
        "http_status": 400,
        "xgen_auth_token_present": True,
        "auth_readiness": {
            "required": True,
            "auth_profile_id_present": True,
            "session_station_header_names": ["Authorization"],
            "failure_reason": None,
        },
    },
}
SEED_FAILURE_RECORD = {
    "stage": "synthesize",
    "reason": "unsatisfied_field",
    "message": "Required field orderNo cannot be supplied",
    "tool": "getOrderDetail",
    "plan_id": "plan_01HZ",
    "step_id": None,
    "retryable": False,
    "operator_action": "ask_user_or_add_context_default",
    "evidence": {
        "field_name": "orderNo",
        "semantic_tag": "order_id",
        "target_tool": "getOrderDetail",
    },
}
SEED_RECEIPT = {
    "tool_run_id": "tr_20261029_021",
    "tool": "publish_changelog",
    "authority_scope": "repo:docs / write:release-note",
    "target_fingerprint": "sha256:" + "ab12" * 16,
    "payload_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "attempt": 1,
    "result": "blocked",
    "code": "POLICY_APPROVAL_REQUIRED",
    "execution_state": "not_started",
    "next_action": "request_approval",
    "evidence_ref": "policy://release-note/approval-required/v3",
    "idempotency_key": "5f0c1f8e-2b7d-4c1a-9e55-0d6f3c2b9a10",
    "started_at": "2026-10-29T02:10:00.123456+09:00",
    "session_id_hash": "3f2a9c0d1e4b5a69",
}
EVERYTHING_ALLOWED = {
    "http_status": 403,
    "status": 503,
    "latency_ms": 1532,
    "score": 0.9375,
    "retries": 0,
    "order_no": "ORD-2026-000123",
    "request_id": str(uuid.UUID("123e4567-e89b-12d3-a456-426614174000")),
    "query": "주문 상세를 보여줘",
    "korean_message": "인증 토큰이 만료되었습니다. 다시 로그인하세요.",
    "field_path": "orders[0].orderNo",
    "json_path": "$.data.items[3].price",
    "url": "https://api.example.com/v1/orders/ORD-2026-000123?expand=items&page=2",
    "client_ip": "10.0.12.7",
    "host": "api.example.com:8443",
    "version": "0.47.0",
    "duration": "PT30S",
    "epoch_ms": 1764447373000,
    "epoch_text": "1764447373000",
    "git_sha": "3f786850e387550fdab836ed7e6dc881de23001b",
    "headers": {"Content-Type": "application/json", "Accept": "application/json"},
    "returned_tools": ["getOrderDetail", "listOrders", "createRefund"],
    "result": "succeeded",
    "output": None,
}


@pytest.mark.parametrize(
    "body",
    [SEED_RUNNER_EVENT, SEED_FAILURE_RECORD, SEED_RECEIPT, EVERYTHING_ALLOWED],
    ids=["seed runner event", "seed failure record", "seed receipt", "allowed values"],
)
def test_allowed_values_survive_unchanged(body: dict[str, Any]) -> None:
    assert scrub(body) == body


def test_scrubbing_never_mutates_its_input() -> None:
    body = {
        "user_id": "u-1",
        "headers": [["Authorization", "Bearer abc123def456"]],
        "body": {"a": 1},
        "message": "mail alice.kim@example.com",
        "items": list(range(MAX_LIST_ITEMS + 5)),
    }
    before = copy.deepcopy(body)
    scrub(body)
    assert body == before


# --- identifiers ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "hashed_key"),
    [
        ("user_id", "user_id_hash"),
        ("userId", "user_id_hash"),
        ("x-user-id", "x_user_id_hash"),
        ("member_id", "member_id_hash"),
        ("customer_id", "customer_id_hash"),
        ("session_id", "session_id_hash"),
        ("sessionId", "session_id_hash"),
        ("account_id", "account_id_hash"),
        ("email", "email_hash"),
    ],
)
def test_identifiers_are_hashed_under_a_hash_key(key: str, hashed_key: str) -> None:
    raw = "raw-identifier-8812734@example.com" if key == "email" else "raw-identifier-8812734"
    clean = scrub({key: raw, "stage": "execute"})
    assert clean == {hashed_key: hash_identifier(raw, hash_key=KEY), "stage": "execute"}
    assert "8812734" not in json.dumps(clean)


def test_identifier_hash_is_stable_per_key_and_differs_between_keys() -> None:
    first = scrub_payload({"user_id": 42}, hash_key=KEY)
    again = scrub_payload({"user_id": 42}, hash_key=KEY)
    other = scrub_payload({"user_id": 42}, hash_key=OTHER_KEY)
    assert first == again
    assert first["user_id_hash"] != other["user_id_hash"]
    assert first["user_id_hash"] == hash_identifier("42", hash_key=KEY)
    digest = first["user_id_hash"]
    assert len(digest) == 32 and all(char in "0123456789abcdef" for char in digest)


def test_an_existing_hash_key_wins_over_the_raw_identifier() -> None:
    clean = scrub({"session_id": "sess_raw_value", "session_id_hash": "given-hash"})
    assert clean == {"session_id_hash": "given-hash"}
    clean = scrub({"session_id_hash": "given-hash", "sessionId": "sess_raw_value"})
    assert clean == {"session_id_hash": "given-hash"}


def test_identifier_headers_are_hashed_too() -> None:
    clean = scrub({"headers": {"X-User-Id": "u-77", "X-Session-Id": "s-88"}})
    assert clean == {
        "headers": {
            "x_user_id_hash": hash_identifier("u-77", hash_key=KEY),
            "x_session_id_hash": hash_identifier("s-88", hash_key=KEY),
        }
    }


def test_identifier_in_a_parameter_object_is_hashed() -> None:
    clean = scrub({"params": [{"name": "userId", "value": "u-77", "in": "path"}]})
    assert clean == {
        "params": [
            {"name": "user_id_hash", "value": hash_identifier("u-77", hash_key=KEY), "in": "path"}
        ]
    }


# --- raw bodies ----------------------------------------------------------------------------
def test_raw_bodies_become_a_summary_of_their_shape() -> None:
    response = {"orderNo": "ORD-1", "customer": {"email": "bob@example.com"}, "items": [1, 2]}
    clean = scrub(
        {
            "response_body": response,
            "request_body": [1, 2, 3],
            "raw": "GET /v1/orders HTTP/1.1\r\nAuthorization: Bearer zzz",
            "payload": {f"field_{index}": index for index in range(30)},
            "output": {"orders": []},
        }
    )
    assert clean["response_body"] == {
        "redacted": "raw_body",
        "type": "object",
        "size": len(json.dumps(response, separators=(",", ":"))),
        "keys": ["orderNo", "customer", "items"],
    }
    assert clean["request_body"] == {"redacted": "raw_body", "type": "array", "size": 7}
    assert clean["raw"]["type"] == "string" and "Bearer" not in json.dumps(clean)
    assert clean["payload"]["keys"] == [f"field_{index}" for index in range(20)]
    assert clean["output"]["keys"] == ["orders"]


def test_the_root_body_is_never_treated_as_a_raw_body() -> None:
    assert scrub({"stage": "execute"}) == {"stage": "execute"}
    assert scrub_payload({"body": "x y"}, path="body", hash_key=KEY)["body"]["redacted"] == (
        "raw_body"
    )


def test_a_receipt_result_code_is_kept_but_a_structured_result_is_not() -> None:
    assert scrub({"result": "blocked"}) == {"result": "blocked"}
    assert scrub({"result": {"rows": [1]}})["result"]["redacted"] == "raw_body"


def test_raw_body_field_names_that_look_secret_are_redacted() -> None:
    clean = scrub({"body": {"alice.kim@example.com": 1, "orderNo": 2}})
    assert clean["body"]["keys"] == ["[REDACTED_KEY:1]", "orderNo"]


# --- limits and errors ---------------------------------------------------------------------
def test_long_strings_are_truncated_after_scrubbing() -> None:
    text = "mail alice.kim@example.com " + "x" * 5000
    clean = scrub({"message": text})["message"]
    assert len(clean) <= MAX_STRING_CHARS
    assert "alice.kim" not in clean and "[REDACTED:email]" in clean
    assert clean.endswith("chars]") and "...[truncated " in clean


def test_a_secret_past_the_cut_of_a_huge_string_does_not_leak() -> None:
    text = "x " * 20_000 + f"Bearer {BEARER_TOKEN}" + " y" * 20_000
    clean = scrub({"message": text})["message"]
    assert BEARER_TOKEN not in clean and len(clean) <= MAX_STRING_CHARS


def test_long_lists_keep_their_first_items_and_a_marker() -> None:
    clean = scrub({"items": list(range(MAX_LIST_ITEMS + 50))})["items"]
    assert clean[:MAX_LIST_ITEMS] == list(range(MAX_LIST_ITEMS))
    assert clean[MAX_LIST_ITEMS:] == ["[truncated 50 items]"]
    assert scrub({"items": clean}) == {"items": clean}


def test_secret_looking_keys_are_replaced_by_numbered_markers() -> None:
    clean = scrub({"alice.kim@example.com": 1, f"Bearer {BEARER_TOKEN}": 2, "plain": 3})
    assert clean == {"[REDACTED_KEY:1]": 1, "[REDACTED_KEY:2]": 2, "plain": 3}


def _fullwidth(text: str) -> str:
    return text.translate({ord(digit): 0xFF10 + int(digit) for digit in "0123456789"})


def test_fullwidth_digits_are_numbers_too() -> None:
    date = _fullwidth("2026-11-29")
    text = _fullwidth("카드 4111 1111 1111 1111, 전화 010-6317-2984, 날짜 ") + date
    assert scrub_text(text) == f"카드 [REDACTED:card], 전화 [REDACTED:phone], 날짜 {date}"


def test_a_card_number_sent_as_a_number_is_redacted() -> None:
    assert scrub({"card": 4111111111111111}) == {"card": "[REDACTED:card]"}
    assert scrub({"epoch_ms": 1764447373000}) == {"epoch_ms": 1764447373000}


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_nesting_deeper_than_32_levels_is_rejected_with_a_path() -> None:
    assert scrub(_nested(32))  # exactly 32 levels is fine
    with pytest.raises(ScrubError) as error:
        scrub({"evidence": _nested(32)})
    assert error.value.path == "body.evidence" + ".a" * 31
    assert "32" in str(error.value)


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (
            {"evidence": {"headers": [["A", "b"], ["C", b"sekret-bytes"]]}},
            "body.evidence.headers[1][1]",
        ),
        ({"evidence": {"payload_raw": {"sekret-in-a-set"}}}, "body.evidence.payload_raw"),
        ({"score": math.nan}, "body.score"),
        ({"items": [0, 1, math.inf]}, "body.items[2]"),
        ({"evidence": {"sekret-key": "x", 3: "x"}}, "body.evidence[<non-string key>]"),
        ({"evidence": {"obj": Exception("sekret-object")}}, "body.evidence.obj"),
        ({"body": b"sekret-raw-bytes"}, "body.body"),
        ({"user_id": b"sekret-user"}, "body.user_id"),
        ({"password": b"sekret-password"}, "body.password"),
    ],
)
def test_unscrubbable_values_are_rejected_without_echoing_them(
    body: dict[str, Any], path: str
) -> None:
    with pytest.raises(ScrubError) as error:
        scrub(body)
    assert error.value.path == path
    assert "sekret" not in str(error.value) and "sekret" not in error.value.message


def test_a_secret_key_never_appears_in_an_error_path() -> None:
    with pytest.raises(ScrubError) as error:
        scrub({"evidence": {"alice.kim@example.com": {"score": math.nan}}})
    assert "alice" not in error.value.path and "alice" not in str(error.value)
    assert error.value.path == "body.evidence.[REDACTED_KEY].score"


def test_too_many_values_are_rejected() -> None:
    with pytest.raises(ScrubError) as error:
        scrub({f"rows_{index}": list(range(MAX_LIST_ITEMS)) for index in range(101)})
    assert "20000" in str(error.value)


def test_a_cycle_is_rejected_as_too_deep() -> None:
    body: dict[str, Any] = {"a": {}}
    body["a"]["self"] = body
    with pytest.raises(ScrubError):
        scrub(body)


def test_the_caller_path_prefixes_error_paths() -> None:
    with pytest.raises(ScrubError) as error:
        scrub_payload({"x": math.nan}, path="items[3].body", hash_key=KEY)
    assert error.value.path == "items[3].body.x"


# --- the engine's scrubber: what it catches, we catch; where it over-redacts, we do not ---
@pytest.mark.parametrize("secret", TEXT_SECRETS, ids=lambda secret: secret.label)
def test_everything_the_engine_redacts_is_redacted_here(secret: Secret) -> None:
    text = f"call failed: {secret.text} (step_2)"
    engine = scrub_trace_payload(text, max_string=10_000)
    ours = scrub_text(text)
    for fragment in secret.fragments:
        if fragment not in engine:
            assert fragment not in ours


def test_the_engine_comparison_is_not_vacuous_and_shows_what_it_misses() -> None:
    caught: list[str] = []
    missed: list[str] = []
    for secret in TEXT_SECRETS:
        engine = scrub_trace_payload(f"call failed: {secret.text} (step_2)", max_string=10_000)
        (missed if any(f in engine for f in secret.fragments) else caught).append(secret.label)
    assert {"bearer", "jwt", "email", "phone kr", "card"} <= set(caught)
    assert {"openai key", "github token", "aws access key id", "pem private key"} <= set(missed)
    assert {"password in text", "stripe key", "google key", "basic auth"} <= set(missed)


def test_engine_secret_corpus_parity_on_structures() -> None:
    body = {
        "authorization": "Bearer abc123def456",
        "cookie": "sid=1",
        "token": "t-1",
        "api_key": "k-1",
        "secret": "s-1",
        "password": "p-1",
        "passwd": "p-2",
        "session": "s-2",
        "user_id": "u-1",
        "x_user_id": "u-2",
    }
    engine = json.dumps(scrub_trace_payload(body))
    ours = json.dumps(scrub(body))
    for value in body.values():
        assert value not in engine
        assert value not in ours


def test_the_engine_over_redacts_what_the_boundary_allows_and_we_do_not() -> None:
    allowed = {
        "xgen_auth_token_present": True,
        "session_station_header_names": ["Authorization"],
        "occurred_at": "2026-11-29T20:16:13Z",
        "payload_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "order_no": "ORD-2026-000123",
        "result": "blocked",
    }
    engine = scrub_trace_payload(allowed)
    assert engine != allowed  # the reason this module exists
    assert scrub(allowed) == allowed


# --- false positives -----------------------------------------------------------------------
def _clean_corpus() -> list[str]:
    fixed = [
        "HTTP Error 404: Not Found",
        "HTTP 403: Forbidden",
        "401 Client Error: Unauthorized for url: https://api.example.com/v1/orders/123",
        "Client error '429 Too Many Requests' for url 'https://api.example.com/v1/orders'",
        "Connection refused by api.example.com:443",
        "Read timed out. (read timeout=30)",
        "status_code=503",
        "Required field orderNo cannot be supplied",
        "token expired",
        "Invalid token: expired",
        "session: missing",
        "auth_token_present: true",
        "session_station_header_names: Authorization",
        "No Authorization header was sent",
        "Bearer authentication is required for this API",
        "Basic authentication failed",
        "target getOrderDetail is not in the graph artifact",
        "/v1/orders/{orderNo}",
        "orders[0].orderNo",
        "$.data.items[3].price",
        "policy://release-note/approval-required/v3",
        "repo:docs / write:release-note",
        "https://api.example.com/v1/orders?page=2&size=50",
        "https://docs.example.com/errors#auth_failed",
        "http://localhost:8000/api/v1/ingest",
        "주문 상세를 보여줘",
        "환불 요청해줘",
        "배송 상태 알려줘",
        "인증 토큰이 만료되었습니다. 다시 로그인하세요.",
        "필수 필드 orderNo 를 채울 수 없습니다",
        "show my last order",
        "find product 'blue shoes' size 270",
        "0.47.0",
        "v2.3.1-rc.1",
        "graph-tool-call==0.47.0",
        "Python 3.11.7",
        "PT30S",
        "1500ms",
        "10.0.0.1",
        "192.168.1.254:8080",
        "port 5432",
        "step_2",
        "<output_binding>",
        "ask_user_or_add_context_default",
        "POLICY_APPROVAL_REQUIRED",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "3f786850e387550fdab836ed7e6dc881de23001b",
        "123e4567-e89b-12d3-a456-426614174000",
        "Retry budget: 2 per 5 minutes, backoff 1s/4s with jitter",
        "retry-after: 120",
        "Content-Type: application/json; charset=utf-8",
        "Date: Sun, 29 Nov 2026 20:16:13 GMT",
        "Server-Timing: db;dur=53, app;dur=47.2",
        "max_tokens=1024",
        "prompt_tokens: 812",
        "OpenAPIRequestValidationError: missing_required ['orderNo']",
        "TypeError: expected str, got int",
        "KeyError: 'orderNo'",
        "score 0.9375 below threshold 0.35",
        "candidate margin 0.012 (ambiguous)",
    ]
    rng = random.Random(20261129)
    generated: list[str] = []
    templates: list[Callable[[], str]] = [
        lambda: f"Read timed out after {rng.randint(1, 60000)} ms on step_{rng.randint(1, 9)}",
        lambda: (
            f"HTTP {rng.choice([400, 401, 403, 404, 409, 422, 500, 502, 503])} "
            f"at 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
        ),
        lambda: f"ORD-2026-{rng.randint(0, 999999):06d}",
        lambda: f"tr_2026{rng.randint(1000, 1231)}_{rng.randint(0, 999):03d}",
        lambda: str(uuid.UUID(int=rng.getrandbits(128))),
        lambda: f"plan_{rng.getrandbits(48):012x}",
        lambda: f"https://api.example.com/v1/orders/{rng.randint(1, 10**9)}?expand=items",
        lambda: f"{rng.randint(1_600_000_000_000, 1_799_999_999_999)}",
        lambda: f"latency {rng.randint(1, 9999)}ms, retries {rng.randint(0, 3)}",
        lambda: f"{rng.randint(0, 9)}.{rng.randint(0, 60)}.{rng.randint(0, 30)}",
        lambda: f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        lambda: f"page {rng.randint(1, 500)} of {rng.randint(500, 1000)}",
        lambda: f"주문 {rng.randint(1, 99)}건을 찾았습니다",
        lambda: f"expected_top_k={rng.randint(1, 10)} got rank {rng.randint(1, 50)}",
        lambda: f"{rng.getrandbits(256):064x}",
    ]
    while len(fixed) + len(generated) < 210:
        generated.append(rng.choice(templates)())
    return fixed + generated


def test_clean_text_is_changed_in_fewer_than_one_percent_of_cases() -> None:
    corpus = _clean_corpus()
    assert len(corpus) >= 200
    changed = [text for text in corpus if scrub_text(text) != text]
    assert len(changed) / len(corpus) < 0.01, changed


# --- properties ----------------------------------------------------------------------------
_FILLER = st.text(
    alphabet=st.characters(categories=("Ll", "Lu", "Nd", "Lo"), max_codepoint=0xD7A3),
    max_size=12,
)
_PLANTED = st.builds(
    lambda before, secret, after: f"{before} {secret.text} {after}",
    _FILLER,
    st.sampled_from(TEXT_SECRETS),
    _FILLER,
)
_KEYS = st.one_of(
    st.sampled_from(
        [
            "stage",
            "message",
            "evidence",
            "note",
            "name",
            "value",
            "args_resolved",
            "trace_metadata",
            "headers",
            "request_headers",
            "Authorization",
            "Cookie",
            "token",
            "password",
            "user_id",
            "userId",
            "session_id",
            "email",
            "body",
            "result",
            "output",
            "auth_token_present",
            "session_station_header_names",
            "payload_hash",
            "x-user-id",
        ]
    ),
    st.text(max_size=10),
    _PLANTED,
)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    _PLANTED,
    st.sampled_from([planted for planted, _ in KEYED_SECRETS]),
)
_JSON = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_KEYS, children, max_size=4),
        st.lists(st.tuples(_KEYS, children).map(list), max_size=3),  # header-pair shaped
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.dictionaries(_KEYS, _JSON, max_size=6))
def test_planted_secrets_never_leak_and_scrubbing_is_idempotent(value: dict[str, Any]) -> None:
    once = scrub(value)
    output = json.dumps(once, ensure_ascii=False)
    for secret in TEXT_SECRETS:
        assert secret.leaks(output) == [], secret.label
    for _, raw in KEYED_SECRETS:
        assert raw not in output
    assert scrub(once) == once


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=80))
def test_scrub_text_is_idempotent(text: str) -> None:
    once = scrub_text(text)
    assert scrub_text(once) == once


# --- logging -------------------------------------------------------------------------------
def _capture(logger_name: str) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(ScrubLogFilter())
    logger = logging.getLogger(logger_name)
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, stream


def test_log_filter_scrubs_secrets_in_args() -> None:
    logger, stream = _capture("triage.tests.scrub.args")
    logger.info("calling %s with header %s", "getOrderDetail", f"Bearer {BEARER_TOKEN}")
    logger.warning("user %s from %s", "alice.kim@example.com", {"Cookie": "sid=abc123def456ghi"})
    output = stream.getvalue()
    assert BEARER_TOKEN not in output and "alice.kim" not in output
    assert "calling getOrderDetail with header [REDACTED:bearer]" in output


def test_log_filter_scrubs_exception_text_and_never_raises() -> None:
    logger, stream = _capture("triage.tests.scrub.exc")
    try:
        raise RuntimeError(f"connect failed for {URL_WITH_PASSWORD}")
    except RuntimeError:
        logger.exception("request failed")
    try:
        raise RuntimeError(f"token {GITHUB_TOKEN} rejected")
    except RuntimeError:
        logger.exception("bad format %d", "not-a-number")  # bad args and an exception
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s %s", ("only-one",), None)
    assert ScrubLogFilter().filter(record) is True

    class Unprintable:
        def __str__(self) -> str:
            raise ValueError("no")

    record = logging.LogRecord("x", logging.INFO, __file__, 1, Unprintable(), None, None)
    assert ScrubLogFilter().filter(record) is True
    output = stream.getvalue()
    assert DB_PASSWORD not in output and GITHUB_TOKEN[4:] not in output
    assert "request failed" in output and "RuntimeError" in output


def test_log_filter_leaves_clean_records_alone() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "ran %d cases", (12,), None)
    assert ScrubLogFilter().filter(record) is True
    assert record.msg == "ran %d cases" and record.args == (12,)


# --- speed ---------------------------------------------------------------------------------
def _realistic_item(rng: random.Random, index: int) -> dict[str, Any]:
    occurred = f"2026-11-{rng.randint(1, 29):02d}T{rng.randint(0, 23):02d}:16:13.{index:06d}Z"
    return {
        **SEED_RUNNER_EVENT,
        "plan_id": f"plan_{rng.getrandbits(40):x}",
        "occurred_at": occurred,
        "error": {
            "kind": "tool",
            "type": "HTTPError",
            "message": f"HTTP Error 403: Forbidden for url https://api.example.com/v1/orders/"
            f"{rng.randint(1, 10**6)} at {occurred}",
        },
        "evidence": {
            **SEED_FAILURE_RECORD["evidence"],  # type: ignore[dict-item]
            "request_headers": {"Accept": "application/json", "Authorization": "Bearer x1y2z3w4"},
            "returned_tools": ["getOrderDetail", "listOrders", "createRefund", "getCustomer"],
            "score_distribution": [round(rng.random(), 4) for _ in range(5)],
        },
        "receipt": {**SEED_RECEIPT, "idempotency_key": str(uuid.UUID(int=rng.getrandbits(128)))},
        "user_id": f"u-{rng.randint(1, 10**8)}",
    }


def test_scrubbing_500_realistic_items_is_fast() -> None:
    # A loose regression guard against quadratic patterns; the real benchmark is the
    # module docstring's (about 15-20 ms on the development machine).
    rng = random.Random(7)
    items = [_realistic_item(rng, index) for index in range(500)]
    scrub(items[0])
    started = time.perf_counter()
    for item in items:
        scrub(item)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    "text",
    [
        "a." * 25_000 + "@",  # the engine's email pattern alone takes seconds on this
        "a." * 25_000 + "@" + "b." * 25_000,
        "eyJ" * 15_000,
        "-eyJ" * 12_000 + ".",
        "1 " * 25_000,
        "+1" * 25_000,
        "4111 " * 10_000,
        "password=" * 5_000,
        "token: " * 7_000,
        "-----BEGIN PRIVATE KEY-----" * 2_000,
        "Bearer " * 7_000,
        "x@" * 25_000,
        "https://" + "a:" * 25_000 + "@",
        '"client_secret": "' + "a" * 50_000,
        "Basic " + "a" * 50_000,
        "sk-" + "a" * 50_000,
    ],
    ids=lambda text: repr(text[:12]),
)
def test_pathological_strings_scrub_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    scrub_text(text)  # the whole string, as the log filter would
    scrub({"message": text})  # a window of it, then truncated
    assert time.perf_counter() - started < 3.0


def test_a_token_behind_a_deeply_escaped_quote_in_a_logged_mapping_is_redacted() -> None:
    # Found by tests/security: JSON inside JSON inside a str, logged as part of a dict.
    planted = (
        '오류 - "{\\"detail\\": \\"accessToken=\\\\\\"LEDbzvM8RYzjNOQpX.0ErjpUhYPoBf5iScBS'
        '\\\\\\"\\"}" | 인증에 실패했습니다'
    )
    line = "request " + str({"headers": {"X-Debug": planted}, "note": planted})
    assert "LEDbzvM8RYzj" not in scrub_text(line)
    assert "LEDbzvM8RYzj" not in scrub_text(repr(line))


# --- the work budget ----------------------------------------------------------------------


@pytest.mark.parametrize("shape", sorted(HOSTILE_SHAPES))
def test_doubling_a_hostile_body_doubles_the_scrubbers_work(shape: str) -> None:
    """Linear on every shape: the deterministic work counter, not a clock."""
    make = HOSTILE_SHAPES[shape]
    small, _, _ = scrub_with_work(body_of(make, 20_000))
    large, refused, _ = scrub_with_work(body_of(make, 40_000))
    if not refused:
        assert 1.8 <= large / small <= 2.2, (small, large)
        assert large <= WORK_PER_INPUT_CHAR * 40_000 + WORK_ALLOWANCE


def test_a_body_that_would_cost_more_than_its_budget_is_refused_with_its_path() -> None:
    body = body_of(HOSTILE_SHAPES["secrets, encoded and escaped"], 100_000)
    with pytest.raises(ScrubError) as raised:
        scrub_payload(body, hash_key=b"k")
    assert "scan more than 6 times its size" in raised.value.message
    assert raised.value.path.startswith("body.evidence.")


def test_a_refused_body_is_scrub_failed_and_the_batch_keeps_its_other_items(
    ingest_client: Any,
) -> None:
    hostile = {
        "type": "failure",
        "id": "hostile-1",
        "body": {
            "stage": "execute",
            "reason": "http_5xx",
            **body_of(HOSTILE_SHAPES["secrets, encoded and escaped"], 100_000),
        },
    }
    items = [hostile, failure_item("plain-1")]
    response = ingest_client.post(
        "/api/v1/ingest", data=json.dumps({"items": items}), content_type="application/json"
    )
    assert response.status_code == 207
    refused, stored = response.json()["items"]
    assert refused["error"]["code"] == "scrub_failed"
    assert "times its size" in refused["error"]["message"]
    assert stored["status"] == "accepted"
    assert IngestRejection.objects.get().code == "scrub_failed"


def test_ordinary_items_stay_far_below_the_budget() -> None:
    work, refused, _ = scrub_with_work(body_of(HOSTILE_SHAPES["ordinary log text"], 100_000))
    assert not refused and work <= 1.2 * 100_000


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("pw=Hunter2Secret", "Hunter2Secret"),
        ("mysql -u root -pHunter2Secret shop", "Hunter2Secret"),
        ("비밀번호: Hunter2Secret", "Hunter2Secret"),
        ("DB 비번=Hunter2Secret 입니다", "Hunter2Secret"),
        ("주민등록번호 9001011234567 확인", "9001011234567"),
        ("rrn 900101 1234567 on file", "900101 1234567"),
        ("SG.AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg", "SG.AbCd"),
        ("the key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, rotate it", "wJalrXUtnFEMI"),
        ("AccountName=shop;AccountKey=abc123DEF456ghi789+/==;EndpointSuffix=x", "abc123DEF"),
    ],
)
def test_the_shapes_review_found_unscrubbed_are_redacted(text: str, secret: str) -> None:
    assert secret not in scrub_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "order 1764921600000 placed at 2026-12-05",  # epoch milliseconds: not a birth date
        "commit 3f2a9c1e0b7d4a5f6e8c9b0a1d2e3f4a5b6c7d8e",  # a hex digest
        "GET /api/v1/orders/ABCdef123/items/xyzQRS789 returned 503",
        "암호화 방식: AES-256",  # "encryption method": the word, not the label
        "mysql -u root -p shop",  # -p alone asks for the password at the prompt
    ],
)
def test_look_alikes_of_the_new_shapes_stay(text: str) -> None:
    assert scrub_text(text) == text
