"""SQL the apps share: rows as the source of one INSERT, whatever the database."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection


def row_sources(
    pg_types: tuple[str, ...], rows: Sequence[tuple[Any, ...]]
) -> Iterable[tuple[str, list[Any]]]:
    """Rows as the source of an INSERT: on PostgreSQL one array per column through
    unnest (one statement, a few parameters: binding thousands of scalars costs more
    than the insert itself, measured by bench/ingest.py); elsewhere VALUES in chunks."""
    if connection.vendor == "postgresql":
        arrays = ", ".join(f"%s::{kind}[]" for kind in pg_types)
        yield (
            f"SELECT * FROM unnest({arrays})",
            [list(column) for column in zip(*rows, strict=True)],
        )
        return
    one_row = "(" + ", ".join(["%s"] * len(pg_types)) + ")"
    for start in range(0, len(rows), 300):
        chunk = rows[start : start + 300]
        yield f"VALUES {', '.join([one_row] * len(chunk))}", [v for row in chunk for v in row]
