"""JSON of a big artifact in pieces: the same text ``json.dumps`` gives, never all at once.

A graph-tool-call artifact of GitHub's REST description is about 160 MB of JSON;
compressing it from one ``json.dumps`` string held that string and its bytes at once. The
pieces (one per tool) are encoded by the same C encoder, so the text is byte for byte the
one-shot text. (The artifact is not hashed: a build is keyed by its inputs, see
``engine.artifact_hash``.)
"""

from __future__ import annotations

import functools
import json
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import Any

# The artifact, its top-level sections, then one piece per tool or node.
_SPLIT_DEPTH = 2
_BATCH_BYTES = 1 << 20


def json_pieces(
    value: Any,
    *,
    sort_keys: bool = False,
    ensure_ascii: bool = True,
    default: Callable[[Any], Any] | None = None,
    depth: int = _SPLIT_DEPTH,
) -> Iterator[str]:
    """``json.dumps(value, separators=(",", ":"), ...)`` as consecutive pieces."""
    dumps = functools.partial(
        json.dumps,
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        default=default,
        separators=(",", ":"),
    )
    return _pieces(value, depth, dumps, sort_keys)


def _pieces(value: Any, depth: int, dumps: Callable[[Any], str], sort_keys: bool) -> Iterator[str]:
    # Only dicts with string keys are split: json.dumps converts other keys, and sorting
    # mixed keys is its own error, both left to it.
    if depth <= 0 or not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        yield dumps(value)
        return
    yield "{"
    for index, key in enumerate(sorted(value) if sort_keys else value):
        yield ("," if index else "") + dumps(key) + ":"
        yield from _pieces(value[key], depth - 1, dumps, sort_keys)
    yield "}"


def compress(value: Any, *, level: int = 1) -> bytes:
    """zlib of ``json.dumps(value, separators=(",", ":"))``, compressed as it is encoded.

    The encoding holds the GIL and zlib does not: a thread compresses each megabyte while
    the next one is encoded, so on two cores this costs about the encoding alone. Level 1:
    GitHub's artifact compresses about a third larger than at 6, in a third of the time.
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
            data = piece.encode()
            buffer.append(data)
            size += len(data)
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
