"""Values the database can store, checked against the model fields they are written to.

SQLite takes text holding NUL (U+0000) or lone surrogates (U+D800..U+DFFF), integers of
any size, strings longer than a column's max_length and any timestamp Python can hold;
PostgreSQL refuses each of them, and one refused value fails the transaction of a whole
batch. So every item is checked here, before its batch's transaction, against the `_meta`
of the model its values are written to (the limits are the models' own, never copied):

- a bounded column (CharField: ids, codes, tool and collection names, hosts, paths) holding
  NUL or a lone surrogate is refused with `invalid_character`: an identifier changed by
  the desk would no longer match the runtime's own;
- free text and JSON (TextField and JSONField: messages, queries, evidence, payloads,
  unknown fields, keys included) is stored with each such character replaced by U+FFFD
  (the Unicode replacement character); the record lists the changed fields in its
  `replaced_characters`, and the pages show it;
- a string longer than its column is refused with `value_too_long`, an integer outside
  its column's range with `number_out_of_range`, a timestamp before 1970 or one Python
  cannot convert to UTC with `timestamp_out_of_range`. Each error names the field.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from triage.intake.normalize import (
    AuditEventFields,
    FailureFields,
    ItemError,
    ReceiptFields,
    RunnerEventFields,
)

REPLACEMENT_CHARACTER = "\ufffd"
# The earliest timestamp an item may carry: earlier ones are clock or encoding bugs, and
# near year 1 a fixed offset can no longer be converted to UTC.
EARLIEST_TIMESTAMP = datetime(1970, 1, 1, tzinfo=UTC)
# At most this many changed paths are listed per record; the rest are counted.
MAX_LISTED_PATHS = 20

_UNSTORABLE_RE = re.compile("[\x00\ud800-\udfff]")
# What a bounded column (an identifier, a code, a host) refuses: the unstorable characters
# above, and the control characters (C0, DEL, C1) and line separators, which identifiers
# never hold and which break what shows them: a CR/LF in a tool name reaches an alert's
# email subject, where Django refuses the header.
_REFUSED_IN_IDENTIFIER_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# The ranges of the standard integer columns (the same on every database Django supports
# but SQLite, which takes anything: checked here so both behave alike).
_INTEGER_RANGES = BaseDatabaseOperations.integer_field_ranges


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
    return _UNSTORABLE_RE.search(text) is not None


def replace_unstorable_text(text: str) -> str:
    """NUL and lone surrogates replaced by U+FFFD; other text unchanged."""
    return _UNSTORABLE_RE.sub(REPLACEMENT_CHARACTER, text)


def describe_unstorable(text: str) -> str:
    match = _REFUSED_IN_IDENTIFIER_RE.search(text)
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
    if _REFUSED_IN_IDENTIFIER_RE.search(text) is None:
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
        if _UNSTORABLE_RE.search(value) is None:
            return value
        replaced.add(path)
        return replace_unstorable_text(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        changed = False
        for key, item in value.items():
            new_key = key
            if isinstance(key, str) and _UNSTORABLE_RE.search(key) is not None:
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


def storable_value(
    field: models.Field[Any, Any], value: Any, *, path: str, replaced: ReplacedPaths, deep: bool
) -> Any:
    """`value` as it can be written to `field`, or ItemError naming `path`.

    `deep` walks JSON values string by string (callers pass False when a cheap test of the
    whole body found nothing to replace).
    """
    if value is None:
        return value
    if isinstance(field, models.JSONField):
        return storable_json(value, path=path, replaced=replaced) if deep else value
    if isinstance(field, models.CharField) and isinstance(value, str):
        problem = identifier_problem(value)
        if problem is not None:
            raise ItemError(
                "invalid_character",
                path,
                f"{path.rsplit('.', 1)[-1]} holds {problem}, which an identifier or code "
                "may not hold; identifiers and codes are refused rather than changed.",
            )
        limit = field.max_length
        if limit is not None and len(value) > limit:
            raise ItemError(
                "value_too_long",
                path,
                f"{path.rsplit('.', 1)[-1]} is {len(value)} characters; at most {limit} "
                "are stored.",
            )
        return value
    if isinstance(field, models.TextField) and isinstance(value, str):
        if _UNSTORABLE_RE.search(value) is None:
            return value
        replaced.add(path)
        return replace_unstorable_text(value)
    if isinstance(field, models.IntegerField) and isinstance(value, int):
        low, high = _INTEGER_RANGES.get(field.get_internal_type(), (None, None))
        if low is not None and high is not None and not low <= value <= high:
            raise ItemError(
                "number_out_of_range",
                path,
                f"{path.rsplit('.', 1)[-1]} must be in {low}..{high}.",
            )
        return value
    if isinstance(field, models.DateTimeField) and isinstance(value, datetime):
        return _storable_timestamp(value, path=path)
    return value


def _storable_timestamp(value: datetime, *, path: str) -> datetime:
    name = path.rsplit(".", 1)[-1]
    try:
        in_utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        in_utc = None
    if in_utc is None or in_utc < EARLIEST_TIMESTAMP or in_utc.year > 9998:
        raise ItemError(
            "timestamp_out_of_range",
            path,
            f"{name} must be between 1970-01-01 and 9998-12-31 in UTC.",
        )
    # Stored in UTC: ISO 8601 allows offsets up to 23:59, PostgreSQL holds up to 15:59 (a
    # +20:38 offset used to reach the database as it was and fail the whole batch).
    return in_utc


# What each column needs looked at; a value that passes the cheap test is left alone, the
# rest goes through storable_value (which says what is wrong).
_CHAR, _TEXT, _JSON, _INTEGER, _TIMESTAMP = range(5)


@functools.cache
def _columns(
    model: type[models.Model], shape: type, skip: frozenset[str]
) -> tuple[tuple[str, models.Field[Any, Any], int, Any], ...]:
    names = {field.name for field in dataclass_fields(shape)} if is_dataclass(shape) else None
    plan: list[tuple[str, models.Field[Any, Any], int, Any]] = []
    for field in model._meta.concrete_fields:
        if (
            field.is_relation
            or field.name in skip
            or (names is not None and field.name not in names)
        ):
            continue
        if isinstance(field, models.JSONField):
            plan.append((field.name, field, _JSON, None))
        elif isinstance(field, models.CharField):
            plan.append((field.name, field, _CHAR, field.max_length))
        elif isinstance(field, models.TextField):
            plan.append((field.name, field, _TEXT, None))
        elif isinstance(field, models.IntegerField):
            low_high = _INTEGER_RANGES.get(field.get_internal_type())
            if low_high is not None:
                plan.append((field.name, field, _INTEGER, low_high))
        elif isinstance(field, models.DateTimeField):
            plan.append((field.name, field, _TIMESTAMP, None))
    return tuple(plan)


def _needs_a_look(kind: int, value: Any, arg: Any, deep: bool) -> bool:
    if kind == _CHAR:
        return type(value) is str and (
            (arg is not None and len(value) > arg)
            or _REFUSED_IN_IDENTIFIER_RE.search(value) is not None
        )
    if kind == _TEXT:
        return type(value) is str and _UNSTORABLE_RE.search(value) is not None
    if kind == _JSON:
        return deep
    if kind == _INTEGER:
        return type(value) is int and not arg[0] <= value <= arg[1]
    # An offset moves a timestamp by less than a day: only the years at the bounds are close.
    # Any offset but UTC's is converted (PostgreSQL holds offsets up to 15:59 only).
    return isinstance(value, datetime) and (
        not 1970 < value.year < 9998 or value.utcoffset() != _NO_OFFSET
    )


_NO_OFFSET = timedelta(0)


def storable_fields(
    model: type[models.Model],
    values: Any,
    *,
    prefix: str = "body",
    deep: bool = True,
    skip: Iterable[str] = (),
) -> list[str]:
    """Check and clean, in place, the values of a dataclass or dict that become `model`'s
    columns (same names; other names are ignored). Returns the paths where characters were
    replaced; raises ItemError for a value that is refused."""
    if not isinstance(values, dict) and not (is_dataclass(values) and not isinstance(values, type)):
        raise TypeError(f"cannot check {type(values).__name__} against {model.__name__}")
    replaced = ReplacedPaths()
    is_dict = isinstance(values, dict)
    target: Any = values
    for name, field, kind, arg in _columns(model, type(values), frozenset(skip)):
        value = target.get(name) if is_dict else getattr(target, name)
        if value is None or not _needs_a_look(kind, value, arg, deep):
            continue
        path = f"{prefix}.{name}" if prefix else name
        new = storable_value(field, value, path=path, replaced=replaced, deep=deep)
        if new is not value:
            if is_dict:
                target[name] = new
            else:
                setattr(target, name, new)
    return replaced.as_list()


def storable_item(fields: Any, *, model: type[models.Model] | None, deep: bool) -> None:
    """Check and clean one parsed item in place (ItemError when a value is refused) and
    note on it where characters were replaced. `model` is what an item type added by
    another app writes (its fields a dataclass with `replaced_characters`)."""
    # Imported here: the text helpers above serve modules loaded before the apps are.
    from triage.models import AuditEvent, FailureRecord, Receipt, RunnerEvent

    if isinstance(fields, FailureFields):
        fields.replaced_characters = storable_fields(FailureRecord, fields, deep=deep)
    elif isinstance(fields, RunnerEventFields):
        replaced = storable_fields(RunnerEvent, fields, deep=deep, skip=("payload",))
        # The payload is the body itself (bulky fields left out): its paths start at "body".
        in_payload = ReplacedPaths()
        if deep:
            fields.payload = storable_json(fields.payload, path="body", replaced=in_payload)
        fields.replaced_characters = [*replaced, *in_payload.as_list()]
        if fields.failure is not None:
            storable_item(fields.failure, model=None, deep=deep)
    elif isinstance(fields, (ReceiptFields, AuditEventFields)):
        target = Receipt if isinstance(fields, ReceiptFields) else AuditEvent
        fields.values["replaced_characters"] = storable_fields(target, fields.values, deep=deep)
    elif model is not None:
        fields.replaced_characters = storable_fields(model, fields, deep=deep)


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
