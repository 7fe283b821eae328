"""Parsed ingest items checked against the model fields they are written to.

SQLite takes text holding NUL (U+0000) or lone surrogates (U+D800..U+DFFF), integers of
any size, strings longer than a column's max_length and any timestamp Python can hold;
PostgreSQL refuses each of them, and one refused value fails the transaction of a whole
batch. So every item is checked here, before its batch's transaction, against the `_meta`
of the model its values are written to (the limits are the models' own, never copied).
The text rules are the shared core's (`core.storable`); here they become item errors:

- a bounded column (CharField) holding NUL, a lone surrogate or a control character is
  refused with `invalid_character`;
- free text and JSON (TextField and JSONField, keys included) is stored with each such
  character replaced by U+FFFD, and the item's `replaced_characters` lists the changed
  fields;
- a string longer than its column is refused with `value_too_long`, an integer outside
  its column's range with `number_out_of_range`, a timestamp before 1970 or one Python
  cannot convert to UTC with `timestamp_out_of_range`. Each error names the field.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from core.storable import (
    EARLIEST_TIMESTAMP,
    REFUSED_IN_IDENTIFIER_RE,
    UNSTORABLE_RE,
    ReplacedPaths,
    identifier_problem,
    replace_unstorable_text,
    storable_json,
)
from triage.intake.normalize import (
    AuditEventFields,
    FailureFields,
    ItemError,
    ReceiptFields,
    RunnerEventFields,
)

# The ranges of the standard integer columns (the same on every database Django supports
# but SQLite, which takes anything: checked here so both behave alike).
_INTEGER_RANGES = BaseDatabaseOperations.integer_field_ranges


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
        if UNSTORABLE_RE.search(value) is None:
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
            or REFUSED_IN_IDENTIFIER_RE.search(value) is not None
        )
    if kind == _TEXT:
        return type(value) is str and UNSTORABLE_RE.search(value) is not None
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
    # Imported here: importing the item checks loads no model.
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
