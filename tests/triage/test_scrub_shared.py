"""The desk and the client scrub with one set of rules (triage_desk_client.scrub).

``triage.scrub`` imports its text patterns and field-name rules from the client module and
adds its own steps on top (keyed hashes, raw-body summaries, a work budget, the engine's
backstop). So on every secret of the security suite's generator, in every encoding, and on
its corpus of clean values, the two give the same text; and a value the client already
scrubbed is one the desk keeps as it is.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from triage_desk_client import scrub as client

from tests.security.scrub_strategies import (
    ENCODINGS,
    KINDS,
    clean_corpus,
    in_sentence,
    make_secret,
)
from triage import scrub as desk


def _secret_corpus(seeds: int) -> list[tuple[str, str, str]]:
    corpus = []
    for kind in sorted(KINDS):
        for seed in range(seeds):
            secret = make_secret(kind, seed)
            rng = random.Random(f"shared:{kind}:{seed}")
            for encoding, encode in ENCODINGS.items():
                corpus.append((kind, encoding, in_sentence(rng, encode(secret, rng))))
    return corpus


def test_desk_and_client_agree_on_every_generated_secret_in_every_encoding() -> None:
    corpus = _secret_corpus(seeds=12)
    assert len({kind for kind, _, _ in corpus}) == len(KINDS) >= 30
    disagreements = [
        (kind, encoding, text)
        for kind, encoding, text in corpus
        if desk.scrub_text(text) != client.scrub_text(text)
    ]
    assert disagreements == []
    # Not vacuous: the corpus is mostly redacted, and by both.
    changed = sum(client.scrub_text(text) != text for _, _, text in corpus)
    assert changed > 0.95 * len(corpus)


def test_desk_and_client_agree_on_clean_values() -> None:
    corpus = clean_corpus(11, 3_000)
    assert [text for _, text in corpus if desk.scrub_text(text) != client.scrub_text(text)] == []


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=120) | st.text(alphabet="ab1 :=-@.%+\\\"'", max_size=6_000))
def test_desk_and_client_agree_on_arbitrary_text_and_its_cut(text: str) -> None:
    assert desk.scrub_text(text) == client.scrub_text(text)
    desk_cut = desk.scrub_payload({"message": text}, hash_key=b"k")["message"]
    assert desk_cut == client.scrub_item({"message": text})["message"]


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "pw",
        "passcode",
        "db_pass",
        "AccountKey",
        "SharedAccessSignature",
        "sig",
        "x-api-key",
        "accessToken",
        "client_secret",
        "JSESSIONID",
        "auth_token_present",
        "prompt_tokens",
        "idempotency_key",
        "user_id",
        "email",
        "stage",
        "message",
    ],
)
def test_a_field_name_means_the_same_to_desk_and_client(key: str) -> None:
    kind, _ = desk._classify_key_uncached(key, False)
    shared = client.key_class(key)
    assert (kind == desk._SECRET) == (shared == client.SECRET)
    assert (kind == desk._IDENTIFIER) == (shared == client.IDENTIFIER)


def test_what_the_client_spooled_the_desk_stores_as_it_is() -> None:
    item: dict[str, Any] = {
        "stage": "execute",
        "message": "auth failed: password=" + "Hunter2Secret, 비밀번호: Hunter2Secret",
        "evidence": {
            "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "Q3EGRKTW7X",
            "lines": ["kim@example.com", "010-1234-5678"] * 150,
            "note": "x" * 9_000,
        },
    }
    spooled = client.scrub_item(item)
    assert desk.scrub_payload(spooled, hash_key=b"k") == spooled


def test_a_span_id_of_digits_that_passes_the_card_checksum_stays_an_id() -> None:
    """One random span id in tens of thousands reads as a card number; under its own name
    and in its own shape it is the id that matches a span and a report, kept as it is."""
    from triage_desk_client.scrub import scrub_item

    from triage.scrub import scrub_payload

    span_id = "4111111111111111"  # 16 digits, Luhn-valid
    body = {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": span_id,
            "message": f"card {span_id}"}  # fmt: skip
    for scrubbed in (scrub_payload(body, hash_key=b"k"), scrub_item(body)):
        assert scrubbed["span_id"] == span_id
        assert span_id not in scrubbed["message"]
