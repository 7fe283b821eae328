"""JSON of big artifacts in pieces: every value ``json.dumps`` takes, read back the same."""

from __future__ import annotations

import json
import zlib
from typing import Any

from qualitylab import artifact_json, demo, engine

VALUE: dict[str, Any] = {
    "b": {"z": [1, 2, {"y": "é"}], "a": {"deep": {"deeper": None}}},
    "a": {"tools": {"pulls/list": {"x": 1.5, "한": True}}, "empty": {}},
    "numbers": {1: "one"},  # a key that is not a string: json.dumps converts it
    "big": {"max": 2**70, "min": -(2**70)},  # beyond 64 bits: orjson refuses, json takes
    "surrogate": {"lone": "a\ud800b"},  # not UTF-8: orjson refuses, json escapes it
    "list": [],
}


def test_the_pieces_are_one_document_that_json_reads_back_as_json_dumps_would() -> None:
    pieces = list(artifact_json.json_pieces(VALUE))
    assert len(pieces) > 3  # split, not one string
    assert json.loads(b"".join(pieces)) == json.loads(json.dumps(VALUE))


def test_compress_keeps_every_value_json_takes() -> None:
    stored = json.loads(zlib.decompress(artifact_json.compress(VALUE)))
    assert stored == json.loads(json.dumps(VALUE))
    assert stored["big"]["max"] == 2**70
    assert stored["surrogate"]["lone"] == "a\ud800b"


def test_compress_round_trips_and_the_artifact_hash_is_the_hash_of_the_build_inputs() -> None:
    import hashlib

    spec = demo.load_spec()
    built = engine.build_artifact(spec)
    artifact = built.artifact
    assert json.loads(zlib.decompress(artifact_json.compress(artifact))) == artifact
    inputs = {
        "format": "qualitylab-build-inputs/1",
        "graph_tool_call": "0.47.0",
        "options": {"allow_private_hosts": False, "semantic_options": None},
        "spec": demo.load_spec(),
    }
    one_shot = json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()
    assert built.artifact_hash == hashlib.sha256(one_shot).hexdigest()
