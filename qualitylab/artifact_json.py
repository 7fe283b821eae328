"""A big artifact's JSON, compressed in pieces: never the whole text at once.

A graph-tool-call artifact of GitHub's REST description is about 150 MB of JSON;
compressing it from one ``json.dumps`` string held that string and its bytes at once, and
Python's encoder spent two seconds on it. The artifact is split into pieces (one per tool or
node), each encoded by orjson (ten times faster than ``json.dumps``), and a thread
compresses each megabyte while the next one is encoded. A piece orjson refuses (a key that
is not a string, an integer beyond 64 bits, a lone surrogate) is encoded by ``json.dumps``,
so every value ``json.dumps`` takes is stored; orjson writes NaN and the infinities, which
JSON cannot spell, as ``null``. (The artifact is not hashed: a build is keyed by its inputs,
see ``engine.artifact_hash``.)
"""

from __future__ import annotations

import json
import queue
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import orjson

# The artifact, its top-level sections, then one piece per tool or node.
_SPLIT_DEPTH = 2
_BATCH_BYTES = 1 << 20


def json_pieces(value: Any, *, depth: int = _SPLIT_DEPTH) -> Iterator[bytes]:
    """The JSON of ``value`` (compact, UTF-8) as consecutive pieces of bytes."""
    # Only dicts with string keys are split: json.dumps converts other keys.
    if depth <= 0 or not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        yield _encode(value)
        return
    yield b"{"
    for index, key in enumerate(value):
        yield (b"," if index else b"") + _encode(key) + b":"
        yield from json_pieces(value[key], depth=depth - 1)
    yield b"}"


def _encode(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: what json.dumps still takes
        return json.dumps(value, separators=(",", ":")).encode()


def compress(value: Any, *, level: int = 1) -> bytes:
    """zlib of ``value``'s JSON, compressed as it is encoded.

    The encoding holds the GIL and zlib does not: a thread compresses each megabyte while
    the next one is encoded. Level 1: GitHub's artifact compresses about a third larger than
    at 6, in a third of the time.
    """
    compressor = zlib.compressobj(level)
    compressed: list[bytes] = []
    failure: list[BaseException] = []
    batches: queue.Queue[bytes | None] = queue.Queue(maxsize=4)

    def consume() -> None:
        while (batch := batches.get()) is not None:
            if not failure:
                try:
                    compressed.append(compressor.compress(batch))
                except BaseException as exc:  # handed to the caller below
                    failure.append(exc)

    thread = threading.Thread(target=consume, name="artifact-compress", daemon=True)
    thread.start()
    try:
        buffer: list[bytes] = []
        size = 0
        for piece in json_pieces(value):
            buffer.append(piece)
            size += len(piece)
            if size >= _BATCH_BYTES:
                batches.put(b"".join(buffer))
                buffer, size = [], 0
        if buffer:
            batches.put(b"".join(buffer))
    finally:
        batches.put(None)
        thread.join()
    if failure:
        raise failure[0]
    compressed.append(compressor.flush())
    return b"".join(compressed)
