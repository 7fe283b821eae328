"""Text and JSON the database can store, whatever model it is written to.

SQLite takes text holding NUL (U+0000) or lone surrogates (U+D800..U+DFFF); PostgreSQL
refuses it, and one refused value fails the transaction of a whole batch. The rules for
such text live here, with no model and no Django (the pure Quality Lab engine uses them):

- a bounded column (CharField: ids, codes, tool and collection names, hosts, paths) holding
  NUL or a lone surrogate is refused (`identifier_problem` says which character): an
  identifier changed by the desk would no longer match the runtime's own;
- free text and JSON (TextField and JSONField: messages, queries, evidence, payloads,
  unknown fields, keys included) is stored with each such character replaced by U+FFFD
  (the Unicode replacement character); the record lists the changed fields in its
  `replaced_characters` (`ReplacedPaths`), and the pages show it;
- NaN and infinities, which Python's JSON parser reads and PostgreSQL's jsonb refuses, are
  found by `first_non_finite_number`.

The checks of parsed ingest items against the models' columns, which apply these rules
along with the columns' own limits, are `triage.intake.storable`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

REPLACEMENT_CHARACTER = "\ufffd"
# The earliest timestamp an item may carry: earlier ones are clock or encoding bugs, and
# near year 1 a fixed offset can no longer be converted to UTC.
EARLIEST_TIMESTAMP = datetime(1970, 1, 1, tzinfo=UTC)
# At most this many changed paths are listed per record; the rest are counted.
MAX_LISTED_PATHS = 20

UNSTORABLE_RE = re.compile("[\x00\ud800-\udfff]")
# What a bounded column (an identifier, a code, a host) refuses: the unstorable characters
# above, and the control characters (C0, DEL, C1) and line separators, which identifiers
# never hold and which break what shows them: a CR/LF in a tool name reaches an alert's
# email subject, where Django refuses the header.
REFUSED_IN_IDENTIFIER_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def may_hold_unstorable_text(canonical_json: str) -> bool:
    """Whether a body's canonical JSON (``ensure_ascii=False``) holds NUL or a surrogate;
    a fast test (a few microseconds a kilobyte) so only such bodies are walked value by
    value. JSON escapes NUL; a lone surrogate stays raw, and UTF-8 cannot encode it."""
    if "\\u0000" in canonical_json:
        return True
    try:
        canonical_json.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def has_unstorable_text(text: str) -> bool:
    return UNSTORABLE_RE.search(text) is not None


def replace_unstorable_text(text: str) -> str:
    """NUL and lone surrogates replaced by U+FFFD; other text unchanged."""
    return UNSTORABLE_RE.sub(REPLACEMENT_CHARACTER, text)


def describe_unstorable(text: str) -> str:
    match = REFUSED_IN_IDENTIFIER_RE.search(text)
    if match is None:
        return "no unstorable character"
    char = match.group()
    if char == "\x00":
        return "U+0000 (NUL)"
    if "\ud800" <= char <= "\udfff":
        return f"U+{ord(char):04X} (a lone surrogate)"
    return f"U+{ord(char):04X} (a control character)"


def identifier_problem(text: str) -> str | None:
    """What an identifier or code holds that the desk refuses in one (described), or None."""
    if REFUSED_IN_IDENTIFIER_RE.search(text) is None:
        return None
    return describe_unstorable(text)


class ReplacedPaths:
    """The paths where characters were replaced, in the order found, at most a few listed."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.unlisted = 0

    def add(self, path: str) -> None:
        path = replace_unstorable_text(path)[:200]
        if path in self.paths:
            return  # a key and its value: one field
        if len(self.paths) < MAX_LISTED_PATHS:
            self.paths.append(path)
        else:
            self.unlisted += 1

    def as_list(self) -> list[str]:
        if self.unlisted:
            return [*self.paths, f"... and {self.unlisted} more"]
        return list(self.paths)

    def __bool__(self) -> bool:
        return bool(self.paths)


def storable_json(value: Any, *, path: str, replaced: ReplacedPaths) -> Any:
    """A copy of a JSON value with NUL and lone surrogates replaced in every key and string;
    the value itself when nothing needed replacing."""
    if isinstance(value, str):
        if UNSTORABLE_RE.search(value) is None:
            return value
        replaced.add(path)
        return replace_unstorable_text(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        changed = False
        for key, item in value.items():
            new_key = key
            if isinstance(key, str) and UNSTORABLE_RE.search(key) is not None:
                new_key = replace_unstorable_text(key)
                replaced.add(f"{path}.{new_key}")
                changed = True
                # Two keys that differ only in replaced characters would collide: keep both.
                while new_key in out or (new_key != key and new_key in value):
                    new_key += REPLACEMENT_CHARACTER
            new_item = storable_json(item, path=f"{path}.{new_key}", replaced=replaced)
            changed = changed or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [
            storable_json(item, path=f"{path}[{index}]", replaced=replaced)
            for index, item in enumerate(value)
        ]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
        return value
    return value


def first_non_finite_number(value: Any, *, path: str) -> str | None:
    """The path of the first NaN or infinity in a JSON value (Python's JSON parser reads
    ``NaN``, ``Infinity`` and ``1e999``; PostgreSQL's jsonb refuses them), or None.
    Iterative: the value may be as deep as the nesting limit lets it."""
    pending: list[tuple[Any, str]] = [(value, path)]
    while pending:
        current, where = pending.pop()
        if isinstance(current, float) and not math.isfinite(current):
            return where
        if isinstance(current, Mapping):
            pending.extend((item, f"{where}.{key}") for key, item in list(current.items())[::-1])
        elif isinstance(current, (list, tuple)):
            pending.extend(
                (item, f"{where}[{i}]") for i, item in reversed(list(enumerate(current)))
            )
    return None


def first_unstorable_text(value: Any, *, path: str) -> tuple[str, str] | None:
    """(path, what) of the first key or string holding NUL or a lone surrogate, or None:
    for documents the desk refuses whole rather than changes (Quality Lab specs)."""
    replaced = ReplacedPaths()
    storable_json(value, path=path, replaced=replaced)
    if not replaced:
        return None
    return replaced.paths[0], "U+0000 (NUL) or a lone surrogate"


def storable_label(text: str, *, limit: int) -> str:
    """Text the desk writes about an item (a rejection's field, message or id) cut to its
    column and with unstorable characters replaced: a rejection must always be recordable."""
    return replace_unstorable_text(text)[:limit]
