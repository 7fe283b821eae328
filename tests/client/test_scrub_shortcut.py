"""The reporter's shortcut past the scrubbing walk (issue 26, 7): ``is_clean_item`` says
whether ``scrub_item`` would give back an equal copy, and the reporter then encodes the
item itself. It must never say so of an item the walk would change: a secret skipped here
would reach the spool in clear text.

Two layers, each checked on every generated secret kind in every encoding, in every place
of an item, and on arbitrary text and values:

* ``may_change``, the rules' gates run once over several strings joined: False only for
  text every pass of ``scrub_text`` leaves as it is;
* ``is_clean_item``: True only when ``scrub_item`` gives back an equal value of the same
  types (so the same JSON and the same default id).

And the reporter: with the shortcut or the walk, the same record for the same item.
Fake credentials are assembled at run time; none of them is real.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triage_desk_client import Reporter, ids
from triage_desk_client import reporter as reporter_module
from triage_desk_client import scrub as client_scrub
from triage_desk_client.reporter import _ENCODER
from triage_desk_client.scrub import (
    MAX_DEPTH,
    MAX_LIST_ITEMS,
    MAX_STRING_CHARS,
    SENSITIVE_HEADER_PARTS,
    WELL_KNOWN_SECRET_HEADERS,
    is_clean_item,
    may_change,
    scrub_item,
    scrub_text,
)
from triage_desk_client.spool import frame, unframe

from tests.client.fake_desk import FakeDesk
from tests.security.scrub_strategies import (
    ENCODINGS,
    ITEM_TYPES,
    KINDS,
    SECRETS,
    SENSITIVE_KEYS,
    LeakFinder,
    batches,
    clean_corpus,
    in_sentence,
    make_secret,
)

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "Q3EGRKTW7X"
LIVE_KEY = "sk-" + "live-4eC39HqLyjWDarjtT1zdp7dcQ9xK"
CARD = 4111111111111111


def same(left: Any, right: Any) -> bool:
    """Equal and of the same types all the way down (NaN equal to itself): what makes the
    JSON and the ids of the two the same."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return bool(left == right)


def assert_shortcut_is_sound(body: Any) -> bool:
    """is_clean_item(body) only where the walk gives back the same value; returns it."""
    clean = is_clean_item(body)
    if clean:
        assert same(scrub_item(body), body), body
    return clean


# --- may_change: the gates, once over several strings ------------------------------------


def _secret_texts(seeds: int) -> list[str]:
    texts = []
    for kind in sorted(KINDS):
        for seed in range(seeds):
            secret = make_secret(kind, seed)
            rng = random.Random(f"shortcut:{kind}:{seed}")
            texts += [secret.text, secret.value, secret.header_value]
            texts += [in_sentence(rng, encode(secret, rng)) for encode in ENCODINGS.values()]
    return [text for text in texts if text]


SECRET_TEXTS = _secret_texts(seeds=6)
CLEAN_TEXTS = [value for _, value in clean_corpus(26, 3_000)]


def test_every_generated_secret_in_every_encoding_passes_a_gate() -> None:
    changed = [text for text in SECRET_TEXTS if scrub_text(text) != text]
    assert len(changed) > 0.95 * len(SECRET_TEXTS)  # not vacuous
    assert [text for text in changed if not may_change(text)] == []


def test_no_clean_value_the_rules_change_slips_past_the_gates() -> None:
    slipped = [text for text in CLEAN_TEXTS if scrub_text(text) != text and not may_change(text)]
    assert slipped == []
    # And the gates do let most clean values through: the shortcut is worth having.
    assert sum(not may_change(text) for text in CLEAN_TEXTS) > 0.4 * len(CLEAN_TEXTS)


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(max_size=200)
    | st.text(alphabet="aA1 :=-@.%+\\\"'/_(),가비밀번호키０１", max_size=400)
)
def test_text_the_gates_let_through_is_text_the_rules_leave_alone(text: str) -> None:
    if not may_change(text):
        assert scrub_text(text) == text


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(SECRET_TEXTS[:400] + CLEAN_TEXTS[:400]) | st.text(max_size=60),
        min_size=1,
        max_size=8,
    )
)
def test_strings_joined_for_one_pass_hide_none_the_rules_would_change(parts: list[str]) -> None:
    joined = client_scrub._JOIN.join(parts)
    if any(scrub_text(part) != part for part in parts):
        assert may_change(joined)


# --- is_clean_item: never True where the walk changes something --------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=batches(size=25))
def test_no_item_with_a_planted_secret_in_any_place_or_encoding_takes_the_shortcut(
    batch: Any,
) -> None:
    walked = 0
    for item in batch.items:
        if not same(scrub_item(item["body"]), item["body"]):
            walked += 1
            assert not is_clean_item(item["body"]), item["body"]
        assert_shortcut_is_sound(item["body"])
    # The walk keeps only a phone number or an email under its own key (an identifier,
    # for the desk to hash): every other plant makes the item one the walk changes.
    assert walked >= len(batch.items) - sum(
        plant.position == "natural_key" for plant in batch.plants
    )


def test_ordinary_items_take_the_shortcut_and_the_walk_agrees() -> None:
    rng = random.Random(5)
    bodies = [ITEM_TYPES[kind](rng).body for _ in range(60) for kind in sorted(ITEM_TYPES)]
    taken = [assert_shortcut_is_sound(body) for body in bodies]
    assert sum(taken) > 0.9 * len(bodies)
    # Twice: the second time from the caches.
    assert [is_clean_item(body) for body in bodies] == taken


_KEYS = st.sampled_from(
    [
        "message",
        "detail",
        "stage",
        "items",
        "note",
        "user_id",
        "email",
        "member_ids",
        "trace_id",
        "span_id",
        "headers",
        "request_headers",
        "name",
        "value",
        "in",
        "prompt_tokens",
        "token_present",
        "[REDACTED_KEY:1]",
        *SENSITIVE_KEYS[:12],
        *sorted(WELL_KNOWN_SECRET_HEADERS)[:4],
        *SENSITIVE_HEADER_PARTS[:3],
    ]
) | st.text(max_size=12)
_STRINGS = (
    st.sampled_from(SECRET_TEXTS[::7] + CLEAN_TEXTS[::7])
    | st.text(max_size=40)
    | st.sampled_from(["4111111111111111", "4bf92f3577b34da6", "kim@example.com", "x" * 2_001])
    | st.sampled_from(sorted(WELL_KNOWN_SECRET_HEADERS))
)
_SCALARS = (
    _STRINGS
    | st.integers()
    | st.sampled_from([CARD, -CARD, 10**12, 10**12 - 1, 1_733_419_200_000])
    | st.floats()
    | st.booleans()
    | st.none()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(_KEYS, children, max_size=5)
        | st.lists(st.sampled_from(["getOrderDetail", 7]), min_size=199, max_size=202)
    ),
    max_leaves=30,
)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=st.dictionaries(_KEYS, _VALUES, max_size=8))
def test_arbitrary_values_take_the_shortcut_only_where_the_walk_changes_nothing(
    body: dict[Any, Any],
) -> None:
    assert_shortcut_is_sound(body)


def nested(levels: int) -> dict[str, Any]:
    """A dict holding `levels` dicts inside one another."""
    body: dict[str, Any] = {"stage": "execute"}
    for _ in range(levels):
        body = {"inner": body}
    return body


@pytest.mark.parametrize(
    ("body", "clean"),
    [
        ({"stage": "execute", "message": "HTTP 503"}, True),
        ({"message": f"retried with {LIVE_KEY}"}, False),
        ({"password": "x"}, False),  # a secret's name: its value becomes [REDACTED]
        ({"token": None, "stage": "x"}, False),  # kept by the walk, but not worth knowing
        ({"request_headers": {"Accept": "text/html"}}, False),
        ({"pairs": [["Authorization", "abc"]]}, False),
        ({"pairs": [["Accept", "text/html"]]}, True),
        ({"header_pairs": [["Accept", "text/html"]]}, False),  # a field of headers
        ({"session_station_header_names": ["Authorization"]}, True),  # names them only
        ({"parameters": [{"name": "q", "in": "query", "value": "shoes"}]}, False),
        ({"email": "kim@example.com", "user_id": "u-1"}, True),  # the desk hashes them
        ({"emails": ["kim@example.com"]}, True),
        ({"contacts": ["kim@example.com"]}, False),
        ({"note": "kim@example.com"}, False),
        ({"span_id": "4111111111111111"}, True),  # a span id in its shape, not a card
        ({"order": "4111111111111111"}, False),
        ({"amount": CARD}, False),  # a card sent as a number
        ({"sent_at_ms": 1_733_419_200_000}, True),
        ({"kim@example.com": 1}, False),  # a key that is itself personal data
        ({"tags": ("a", "b")}, False),  # a tuple: the walk makes it a list
        ({1: "int key"}, False),
        ({"blob": b"bytes"}, False),
        ({"nan": math.nan}, True),
        ({"message": "x" * MAX_STRING_CHARS}, True),
        ({"message": "x" * (MAX_STRING_CHARS + 1)}, False),  # the walk cuts it
        ({"lines": list(range(MAX_LIST_ITEMS))}, True),
        ({"lines": list(range(MAX_LIST_ITEMS + 1))}, False),
        (nested(MAX_DEPTH - 1), True),
        (nested(MAX_DEPTH), False),  # the walk replaces the innermost dict
        ({f"field_{n}": n for n in range(client_scrub.MAX_NODES + 1)}, False),
        ([{"stage": "execute"}], False),  # not a dict
    ],
)
def test_each_thing_the_walk_would_change_keeps_an_item_off_the_shortcut(
    body: Any, clean: bool
) -> None:
    assert is_clean_item(body) is clean
    if isinstance(body, dict):
        assert (not clean) or same(scrub_item(body), body)


class Loud(str):
    def __str__(self) -> str:
        return "loud"


def test_a_key_of_a_str_subclass_takes_the_walk_which_spells_it_by_its_str() -> None:
    body = {Loud("stage"): "execute"}
    assert not is_clean_item(body)
    assert scrub_item(body) == {"loud": "execute"}


def test_a_body_that_contains_itself_takes_the_walk_which_refuses_it() -> None:
    body: dict[str, Any] = {"stage": "execute"}
    body["steps"] = [body]
    assert not is_clean_item(body)
    with pytest.raises(ValueError, match="contain itself"):
        scrub_item(body)


def test_a_string_with_a_secret_is_never_remembered_as_clean() -> None:
    body = {"message": f"Bearer {LIVE_KEY}"}
    for _ in range(3):
        assert not is_clean_item(body)
    assert f"Bearer {LIVE_KEY}" not in client_scrub._clean_strings
    assert f"Bearer {LIVE_KEY}" not in client_scrub._met_once


# --- the reporter --------------------------------------------------------------------------


def spooled(spool: Path) -> list[bytes]:
    lines = []
    for path in sorted(spool.glob("*.seg")):
        for line in path.read_bytes().splitlines():
            payload = unframe(line)
            assert payload is not None
            lines.append(payload)
    return lines


def expected_record(body: dict[str, Any]) -> bytes:
    """The record the reporter wrote before the shortcut: the walked copy, encoded."""
    scrubbed = scrub_item(body)
    canonical = _ENCODER.encode(scrubbed).encode()
    item_id = ids.failure_id(scrubbed, canonical)
    return b'{"type":"failure","id":%s,"body":%s}' % (json.dumps(item_id).encode(), canonical)


BODIES: list[dict[str, Any]] = [
    {"stage": "execute", "reason": "http_5xx", "plan_id": "plan_1", "message": "HTTP 503"},
    {"stage": "execute", "message": f"auth failed with {LIVE_KEY}", "plan_id": "plan_2"},
    {"stage": "execute", "evidence": {"aws_secret_access_key": AWS_SECRET}},
    {"stage": "execute", "email": "kim@example.com", "user_query": "주문 상세를 보여줘"},
    {"stage": "execute", "amount": CARD, "tags": ("a", "b"), "blob": b"pw=Hunter2Secret"},
    {"stage": "execute", "step_id": 7, "attempt": 2, "score": 0.5, "ok": True, "none": None},
]


@pytest.mark.parametrize("durability", ["append", "batched"])
def test_the_reporter_writes_the_record_it_wrote_before_and_walks_only_what_needs_it(
    make_reporter: Callable[..., Reporter],
    desk: FakeDesk,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    durability: str,
) -> None:
    walked: list[Any] = []

    def counting_scrub_item(body: Any) -> Any:
        walked.append(body)
        return scrub_item(body)

    monkeypatch.setattr(reporter_module, "scrub_item", counting_scrub_item)
    desk.stop()  # the records stay in the spool
    reporter = make_reporter(durability=durability)
    for body in BODIES:
        reporter.failure(body)
    reporter.close(timeout=0)
    assert spooled(tmp_path / "spool") == [expected_record(body) for body in BODIES]
    # The ones with nothing to change took the shortcut (an email under "email" too: the
    # walk keeps it for the desk to hash); the rest, the walk.
    assert [body in walked for body in BODIES] == [False, True, True, False, True, False]


def test_what_the_batched_queue_holds_is_the_item_as_reported_not_as_changed_after() -> None:
    with tempfile.TemporaryDirectory() as spool:
        reporter = Reporter(
            "http://127.0.0.1:9", "k", spool_dir=spool, durability="batched", max_backoff=0.2
        )
        body: dict[str, Any] = {"stage": "execute", "message": "HTTP 503", "evidence": {}}
        item_id = reporter.failure(body)
        assert is_clean_item(body)  # so no copy was made of it
        body["message"] = f"changed after: {LIVE_KEY}"  # before the writer's next group
        body["evidence"]["token"] = LIVE_KEY
        reporter.close(timeout=0)
        (record,) = spooled(Path(spool))
    assert json.loads(record) == {
        "type": "failure",
        "id": item_id,
        "body": {"stage": "execute", "message": "HTTP 503", "evidence": {}},
    }


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=batches(size=30))
def test_batched_mode_writes_no_planted_secret_in_clear_text(batch: Any) -> None:
    with tempfile.TemporaryDirectory() as spool:
        reporter = Reporter(
            "http://127.0.0.1:9", "k", spool_dir=spool, durability="batched", max_backoff=0.2
        )
        for item in batch.items:
            reporter.report(item["type"], item["id"], item["body"])
        reporter.close(timeout=0)
        written = [(path.name, path.read_text()) for path in Path(spool).iterdir()]
    assert len(written) >= 1
    # What survives is only what the walk keeps too: an identifier under its own key
    # ("email": ...), which the client sends as it is for the desk to hash.
    bodies = {item["id"]: item["body"] for item in batch.items}
    for survivor in LeakFinder(batch.plants).find(written):
        walked = json.dumps(scrub_item(bodies[survivor.plant.item_id]), ensure_ascii=False)
        assert LeakFinder([survivor.plant]).find([("walked", walked)]), survivor
        assert survivor.plant.position == "natural_key", survivor


def test_a_frame_of_the_shortcut_is_the_frame_of_the_walk() -> None:
    """The two give byte-identical spool lines, checksum included."""
    body = BODIES[0]
    assert is_clean_item(body)
    direct = _ENCODER.encode(body).encode()
    assert frame(direct) == frame(_ENCODER.encode(scrub_item(body)).encode())


def test_secrets_from_the_property_suite_never_take_the_shortcut_in_any_field() -> None:
    rng = random.Random(11)
    for kind in sorted(KINDS):
        secret = make_secret(kind, 3)
        for key, value in [("detail", secret.text), *secret.fields]:
            body = {"stage": "execute", "evidence": {key: value}}
            if scrub_item(body) != body:
                assert not is_clean_item(body), (kind, key)
        headers = {"request_headers": {secret.header or "X-Debug": secret.header_value or "x"}}
        assert not is_clean_item(headers)
        assert not is_clean_item({"note": in_sentence(rng, secret.text)}), kind


@given(secret=SECRETS)
@settings(max_examples=150, deadline=None)
def test_a_generated_secret_in_a_message_never_takes_the_shortcut(secret: Any) -> None:
    body = {"stage": "execute", "message": f"call failed: {secret.text}"}
    assert not is_clean_item(body)
