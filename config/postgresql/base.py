"""Django's PostgreSQL backend, with ``timestamptz`` columns read by psycopg's C loader.

Django registers its own loader for ``timestamptz`` (to attach the connection's time zone),
a subclass of psycopg's pure-Python one, so every timestamp a query returns is parsed in
Python even when psycopg's C implementation is installed: about 8 µs a value here, which
is most of the triage page's cost of reading 2,600 groups (two timestamps each) and its
sparkline's hours at a million records. The connection's time zone is always UTC here
(``USE_TZ`` with no per-database ``TIME_ZONE``), and for a UTC session psycopg's C loader
returns the same aware datetimes (``tzinfo=datetime.timezone.utc``) that Django's does,
ten times faster. Django's loader stays wherever that does not hold.
"""

from __future__ import annotations

import datetime
import functools
from typing import Any

from django.db.backends.postgresql import base
from psycopg import adapt, adapters
from psycopg.pq import Format

_C_LOADER: Any = adapters.get_loader(base.TIMESTAMPTZ_OID, Format.TEXT)


class _UtcTimestamptzLoader(adapt.Loader):
    """psycopg's C ``timestamptz`` loader behind the ``timezone`` attribute Django reads
    off a connection's loader (the C class cannot be subclassed)."""

    timezone = datetime.UTC

    def __init__(self, oid: int, context: adapt.AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        self.load = _C_LOADER(oid, context).load  # type: ignore[method-assign]

    def load(self, data: Any) -> datetime.datetime:  # replaced per instance, above
        raise NotImplementedError


# Without psycopg's C implementation the loader registered globally is the Python one.
_FAST_UTC_LOADER = None if _C_LOADER.__module__.startswith("psycopg.") else _UtcTimestamptzLoader


@functools.lru_cache
def _with_fast_loader(template: adapt.AdaptersMap) -> adapt.AdaptersMap:
    context = adapt.AdaptersMap(template)
    context.register_loader("timestamptz", _FAST_UTC_LOADER)
    return context


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        if _FAST_UTC_LOADER is not None and self.timezone == datetime.UTC:
            params["context"] = _with_fast_loader(params["context"])
        return params
