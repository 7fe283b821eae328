"""JSON with a nesting limit, measured before parsing and without recursion.

Python's JSON parser and everything that walks its result afterwards (``json.dumps``, the
scrubber, normalization) recurse once per level: a body of 5,000 nested objects raises
``RecursionError`` deep inside a request. Every door that accepts JSON (the ingest API, the
``ingest`` command, case and spec imports, the case form) measures the nesting first and
refuses a document deeper than ``TRIAGE_JSON_MAX_DEPTH`` with :class:`JSONTooDeep`, whose
message names the limit.

The measure runs at C speed over the raw text: escaped backslashes and quotes are removed,
then everything but quotes and brackets, then the strings (every other piece between
quotes), and what is left, the brackets, loses its innermost pairs once per level.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["DEFAULT_MAX_DEPTH", "JSONTooDeep", "json_depth_exceeds", "loads_bounded"]

DEFAULT_MAX_DEPTH: Final = 64

_KEPT: Final = b'"[]{}'
_DELETED: Final = bytes(byte for byte in range(256) if byte not in _KEPT)
_CURLY_TO_SQUARE: Final = bytes.maketrans(b"{}", b"[]")


class JSONTooDeep(ValueError):
    """The document nests arrays and objects deeper than ``limit`` levels."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels of arrays and objects")
        self.limit = limit


def json_depth_exceeds(text: str | bytes | bytearray, limit: int) -> bool:
    """Whether the JSON text nests arrays and objects deeper than ``limit`` levels.

    Text that is not JSON gives False unless its brackets alone already nest too deep; the
    parser then reports what is wrong with it. Cost: a few passes over the text in C, plus
    one pass over its brackets per level up to the limit.
    """
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    # An escaped backslash first, so that "\\\"" is a backslash then a quote, as in JSON.
    raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes_and_brackets = raw.translate(None, _DELETED)
    # Between an odd and the next even quote is a string: keep what lies outside them.
    brackets = b"".join(quotes_and_brackets.split(b'"')[::2]).translate(_CURLY_TO_SQUARE)
    if b"[" * (limit + 1) in brackets:
        return True
    for _ in range(limit):
        if not brackets:
            return False
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            return False  # unbalanced: not JSON, the parser says where
        brackets = shorter
    return b"[]" in brackets


def loads_bounded(text: str | bytes | bytearray, *, max_depth: int) -> Any:
    """``json.loads`` that refuses documents nested deeper than ``max_depth`` levels.

    Raises :class:`JSONTooDeep`, or what ``json.loads`` raises for text that is not JSON.
    """
    if json_depth_exceeds(text, max_depth):
        raise JSONTooDeep(max_depth)
    try:
        return json.loads(text)
    except RecursionError:  # a limit above what this interpreter's stack can parse
        raise JSONTooDeep(max_depth) from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:
        # Valid JSON Python refuses to read: an integer of more than 4,300 digits.
        raise json.JSONDecodeError("a number is too long to read", "", 0) from None
