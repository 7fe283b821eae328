"""JSON of big artifacts in pieces: the same text and hash as one ``json.dumps``."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from qualitylab import artifact_json, demo, engine

VALUE: dict[str, Any] = {
    "b": {"z": [1, 2, {"y": "é"}], "a": {"deep": {"deeper": None}}},
    "a": {"tools": {"pulls/list": {"x": 1.5, "한": True}}, "empty": {}},
    "numbers": {1: "one"},  # not split: json.dumps converts the key
    "list": [],
}


@pytest.mark.parametrize("sort_keys", [False, True])
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_the_pieces_are_the_one_shot_text(sort_keys: bool, ensure_ascii: bool) -> None:
    options: dict[str, Any] = {"sort_keys": sort_keys, "ensure_ascii": ensure_ascii}
    value = {key: item for key, item in VALUE.items() if not sort_keys or key != "numbers"}
    expected = json.dumps(value, separators=(",", ":"), **options)
    pieces = list(artifact_json.json_pieces(value, **options))
    assert "".join(pieces) == expected
    assert len(pieces) > 3  # split, not one string


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
