"""triage_desk_client.scrub: the client's copy of an item holds no secret, and never fails.

The rules are the desk's own (tests/triage/test_scrub_shared.py shows both sides agree);
these tests cover scrub_item, the copy the reporter spools: what it keeps, what it
redacts, its bounds, odd input, and that the module stays standard-library Python 3.9.
Fake credentials are assembled at run time ("sk_" + "live_"); none of them is real.
"""

from __future__ import annotations

import ast
import copy
import datetime
import decimal
import enum
import glob
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from triage_desk_client import scrub as client_scrub
from triage_desk_client.scrub import (
    IDENTIFIER,
    MAX_DEPTH,
    MAX_LIST_ITEMS,
    MAX_NODES,
    MAX_STRING_CHARS,
    REDACTED,
    key_class,
    scrub_item,
    scrub_text,
)

from tests.security.scrub_strategies import SECRETS, Secret, in_sentence

MODULE = Path(client_scrub.__file__)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "Q3EGRKTW7X"
STRIPE_KEY = "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dcQ"
OPENAI_KEY = "sk-" + "live-4eC39HqLyjWDarjtT1zdp7dcQ9xK"
PASSWORD = "Hunter2Secret"


def failure(**extra: Any) -> dict[str, Any]:
    return {
        "stage": "execute",
        "reason": "http_5xx",
        "tool": "getDelivery",
        "plan_id": "plan-1",
        "step_id": "s1",
        "message": "HTTP 503",
        "evidence": {"status": 503, "attempt": 2, "elapsed": 1.5, "retry": None, "ok": False},
        **extra,
    }


def test_a_clean_item_comes_back_equal_and_as_a_new_object() -> None:
    item = failure()
    scrubbed = scrub_item(item)
    assert scrubbed == item
    assert scrubbed is not item and scrubbed["evidence"] is not item["evidence"]


def test_the_secrets_the_review_found_in_the_spool_are_gone_and_the_input_is_untouched() -> None:
    item = failure(
        message=f"auth failed with {OPENAI_KEY}; mysql -u root -p{PASSWORD} shop",
        evidence={
            "aws_secret_access_key": AWS_SECRET,
            "config": f"stripe={STRIPE_KEY} pw={PASSWORD}",
            "note": f"비밀번호: {PASSWORD}",
        },
    )
    before = copy.deepcopy(item)
    scrubbed = scrub_item(item)
    written = json.dumps(scrubbed, ensure_ascii=False)
    for secret in (AWS_SECRET, STRIPE_KEY, OPENAI_KEY, PASSWORD):
        assert secret not in written
    assert item == before
    assert scrubbed["evidence"]["aws_secret_access_key"] == REDACTED
    assert scrubbed["tool"] == "getDelivery"


def test_values_under_secret_keys_are_redacted_but_flags_and_counters_stay() -> None:
    scrubbed = scrub_item(
        {
            "password": PASSWORD,
            "apiKey": 12345,
            "client_secret": {"nested": "x"},
            "credentials": ["a", "b"],
            "token": None,
            "session": True,
            "auth_token_present": True,
            "session_station_header_names": ["Authorization"],
            "prompt_tokens": 812,
            "idempotency_key": "a1b2c3",
        }
    )
    assert scrubbed == {
        "password": REDACTED,
        "apiKey": REDACTED,
        "client_secret": REDACTED,
        "credentials": REDACTED,
        "token": None,
        "session": True,
        "auth_token_present": True,
        "session_station_header_names": ["Authorization"],
        "prompt_tokens": 812,
        "idempotency_key": "a1b2c3",
    }


def test_identifiers_travel_as_they_are_for_the_desk_hashes_them_with_its_key() -> None:
    # A marker here would give every user the desk's one hash of "[REDACTED:email]".
    item = {"user_id": "u-88127341", "email": "kim@example.com", "member_ids": ["m-1", 7]}
    assert scrub_item(item) == item
    assert scrub_item({"message": "mail kim@example.com"})["message"] == "mail [REDACTED:email]"


def test_header_values_are_redacted_in_every_shape_headers_take() -> None:
    scrubbed = scrub_item(
        {
            "request_headers": {
                "Authorization": "abc123",
                "X-Idempotency-Key": "k-1",
                "Accept": "application/json",
                "X-User-Id": "u-1",
            },
            "pairs": [["Cookie", "sid=abc"], ["Accept", "text/html"]],
            "parameters": [{"name": "api_key", "in": "query", "value": "abc123"}],
        }
    )
    assert scrubbed["request_headers"] == {
        "Authorization": REDACTED,
        "X-Idempotency-Key": REDACTED,
        "Accept": "application/json",
        "X-User-Id": "u-1",
    }
    assert scrubbed["pairs"] == [["Cookie", REDACTED], ["Accept", "text/html"]]
    assert scrubbed["parameters"] == [{"name": "api_key", "in": "query", "value": REDACTED}]


def test_header_pairs_under_a_headers_field_lose_every_secret_headers_value() -> None:
    # Found by tests/client/test_scrub_shortcut.py: a pair whose name is no well-known
    # header ("X-Vendor-Token") kept its value in the spool, where the desk redacts it.
    item = {
        "header_pairs": [
            ["X-Vendor-Token", "c739989a33a0"],
            ("X-Auth-Thing", "v"),
            ["Accept", "*/*"],
        ],
        "response_header": [["Set-Cookie", "sid=abc"], ["X-Request-Id", "r-1"]],
        "pairs": [["X-Vendor-Token", "stays: not under a headers field"]],
    }
    scrubbed = scrub_item(item)
    assert scrubbed == {
        "header_pairs": [
            ["X-Vendor-Token", REDACTED],
            ["X-Auth-Thing", REDACTED],
            ["Accept", "*/*"],
        ],
        "response_header": [["Set-Cookie", REDACTED], ["X-Request-Id", "r-1"]],
        "pairs": [["X-Vendor-Token", "stays: not under a headers field"]],
    }
    assert scrub_item(scrubbed) == scrubbed


def test_keys_that_look_like_secrets_become_numbered_markers() -> None:
    scrubbed = scrub_item({"kim@example.com": 1, "lee@example.com": 2, "plain": 3})
    assert scrubbed == {"[REDACTED_KEY:1]": 1, "[REDACTED_KEY:2]": 2, "plain": 3}


def test_strings_and_lists_are_cut_where_the_desk_cuts_them() -> None:
    long = "upstream said no. " * 400
    scrubbed = scrub_item({"message": long, "lines": list(range(MAX_LIST_ITEMS + 50))})
    suffix = f"...[truncated {len(long)} chars]"
    kept = MAX_STRING_CHARS - len(suffix)
    assert scrubbed["message"] == long[:kept] + f"...[truncated {len(long) - kept} chars]"
    assert scrubbed["lines"][-1] == "[truncated 50 items]"
    assert len(scrubbed["lines"]) == MAX_LIST_ITEMS + 1
    assert scrub_item(scrubbed) == scrubbed


def test_a_secret_past_the_scanned_window_of_a_huge_string_does_not_survive() -> None:
    scrubbed = scrub_item({"message": "x" * 1_000_000 + f" password={PASSWORD}"})
    assert PASSWORD not in json.dumps(scrubbed)


def test_nesting_past_the_limit_becomes_a_marker_instead_of_failing() -> None:
    item: dict[str, Any] = {"password": PASSWORD}
    for _ in range(MAX_DEPTH + 10):
        item = {"inner": item}
    scrubbed = scrub_item(item)
    written = json.dumps(scrubbed)
    assert PASSWORD not in written
    assert f"nested deeper than {MAX_DEPTH} levels" in written
    depth = 0
    node: Any = scrubbed
    while isinstance(node, dict):
        node, depth = node["inner"], depth + 1
    assert depth == MAX_DEPTH


def test_more_values_than_the_limit_end_in_a_marker() -> None:
    item = {f"field_{index}": index for index in range(MAX_NODES + 100)}
    scrubbed = scrub_item(item)
    assert len(scrubbed) == MAX_NODES + 1
    assert f"[truncated: more than {MAX_NODES} values]" in scrubbed


def test_a_body_that_contains_itself_is_a_value_error() -> None:
    item: dict[str, Any] = failure()
    item["evidence"] = {"steps": [item]}
    with pytest.raises(ValueError, match="contain itself"):
        scrub_item(item)
    shared = {"password": PASSWORD}
    assert scrub_item({"a": shared, "b": shared}) == {"a": {"password": REDACTED}} | {
        "b": {"password": REDACTED}
    }


class Colour(enum.IntEnum):
    RED = 1


class Loud(str):
    """A str subclass whose str() would not be itself."""

    def __str__(self) -> str:
        return "loud"


class Broken:
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_odd_input_never_raises_and_comes_back_json_safe() -> None:
    item = {
        "bytes": f"password={PASSWORD}".encode(),
        "bytearray": bytearray(b"\xff\xfe ok"),
        "set": {f"Bearer {PASSWORD}"},
        "tuple": (1, "two"),
        "decimal": decimal.Decimal("1.5"),
        "when": datetime.datetime(2026, 12, 5, 13, 0, tzinfo=datetime.UTC),
        "broken": Broken(),
        "enum": Colour.RED,
        "loud": Loud(f"pw={PASSWORD}"),
        "nan": math.nan,
        1: "int key",
        None: "null key",
        (1, 2): "tuple key",
        "card_as_number": 4111111111111111,
    }
    scrubbed = scrub_item(item)
    written = json.dumps(scrubbed)  # no default=: every value is plain JSON now
    assert PASSWORD not in written
    assert scrubbed["bytes"] == "password=[REDACTED:secret]"
    assert scrubbed["tuple"] == [1, "two"]
    assert scrubbed["decimal"] == "1.5"
    assert scrubbed["when"] == "2026-12-05 13:00:00+00:00"
    assert scrubbed["broken"] == "<Broken>"
    assert scrubbed["enum"] == 1 and type(scrubbed["enum"]) is int
    assert scrubbed["loud"] == "pw=[REDACTED:secret]"
    assert math.isnan(scrubbed["nan"])
    assert scrubbed["1"] == "int key" and scrubbed["null"] == "null key"
    assert scrubbed["(1, 2)"] == "tuple key"
    assert scrubbed["card_as_number"] == "[REDACTED:card]"


def test_an_item_of_hostile_text_costs_a_bounded_time() -> None:
    item = {f"field_{index}": "1 " * 2_500 for index in range(2_000)}  # 10 MB of digits
    started = time.perf_counter()
    scrubbed = scrub_item(item)
    assert time.perf_counter() - started < 5.0
    assert "[REDACTED:unscanned_text]" in scrubbed.values()


@settings(max_examples=300, deadline=None)
@given(secret=SECRETS, rng=st.randoms(use_true_random=False))
def test_no_generated_secret_survives_in_a_message_a_field_or_a_header(
    secret: Secret, rng: random.Random
) -> None:
    key, value = rng.choice(secret.fields) if secret.fields else ("detail", secret.text)
    item = failure(message=in_sentence(rng, secret.text), evidence={key: value})
    if secret.header:
        item["headers"] = {secret.header: secret.header_value}
    scrubbed = scrub_item(item)
    assert not any(needle in scrubbed["message"] for needle in secret.needles)
    if secret.header:
        assert not any(needle in json.dumps(scrubbed["headers"]) for needle in secret.needles)
    if key_class(key) == IDENTIFIER:
        assert scrubbed["evidence"][key] == value  # the desk hashes it
    else:
        written = json.dumps(scrubbed["evidence"], ensure_ascii=False)
        assert not any(needle in written for needle in secret.needles)
    assert scrub_item(scrubbed) == scrubbed


# --- the module itself ----------------------------------------------------------------------


def test_the_module_imports_only_the_standard_library() -> None:
    tree = ast.parse(MODULE.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def _python39() -> str | None:
    candidates = [os.environ.get("PYTHON39", ""), shutil.which("python3.9") or ""]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))
    for candidate in filter(None, candidates):
        try:
            version = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 9))"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if version.stdout.strip() == "True":
            return candidate
    return None


SAMPLES = [
    f"mysql -u root -p{PASSWORD} shop",
    f"비밀번호: {PASSWORD}",
    "next=https%3A%2F%2Fadmin%3Ahunter2%40db.internal%2F",
    '{"body": "{\\"password\\": \\"x1y2z3w4\\"}"}',
    "주민등록번호 9001011234567 확인, 카드 4111 1111 1111 1111",
    f"key {AWS_SECRET} and {STRIPE_KEY}",
]


def test_the_module_runs_alike_on_python_3_9() -> None:
    python = _python39()
    if python is None:
        pytest.skip("no Python 3.9 interpreter here (set PYTHON39 to one)")
    program = (
        "import json, sys\n"
        "from triage_desk_client.scrub import scrub_item, scrub_text\n"
        "samples = json.loads(sys.stdin.read())\n"
        "print(json.dumps([[scrub_text(s) for s in samples], scrub_item({'s': samples})]))\n"
    )
    result = subprocess.run(
        [python, "-c", program],
        input=json.dumps(SAMPLES),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=MODULE.parent.parent,  # the client's source, not an installed copy
        env={**os.environ, "PYTHONPATH": str(MODULE.parent.parent)},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        [scrub_text(sample) for sample in SAMPLES],
        scrub_item({"s": SAMPLES}),
    ]
