"""Pages read from a streaming replica when one is configured (`DATABASE_REPLICA_URL`).

Who reads where:

- A signed-in person's page (a GET or HEAD that is neither the API nor the admin) reads the
  replica, unless the replica does not answer, or is more than
  `TRIAGE_REPLICA_MAX_LAG_SECONDS` behind, or the person changed something a moment ago (so
  an action, then its page, shows the action). The choice is made once per request, at its
  first read: one page reads one database.
- Everything else reads and writes the primary: the API and ingest, every POST, Celery
  tasks, management commands, anything inside `transaction.atomic()` on the primary, and,
  on every page, who may see what (sessions, users, groups, permissions, the sign-in guard:
  a person signed out or a role taken away counts at once, not a replica's lag later).

The replica's health is probed at most once every few seconds per process (one query with
its own statement timeout, on a connection with a short connect timeout), so a page costs no
extra query most of the time, and a replica that does not answer costs one page of each
process a timeout, not every page. A page that read the replica and met a database error
(the replica went away since it was probed, or cancelled a query to replay) is run once more
on the primary. Without a `replica` database alias every part here does nothing.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    Error,
    InterfaceError,
    OperationalError,
    connections,
    transaction,
)
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from rest_framework.views import APIView

logger = logging.getLogger(__name__)

REPLICA = "replica"

# Apps whose rows decide who may see what: read from the primary, on pages too.
PRIMARY_ONLY_APPS = frozenset({"auth", "sessions", "contenttypes", "admin", "axes"})

# A probe's answer is used this long; a failed one longer, so that a replica that does not
# answer costs each process one page's connect timeout this often.
PROBE_KEPT_SECONDS = 3.0
FAILED_PROBE_KEPT_SECONDS = 10.0
PROBE_STATEMENT_TIMEOUT_MS = 1000
# The page says how far behind the replica it read is from this many whole seconds on.
LAG_SHOWN_FROM_SECONDS = 1

# What the page says (PageReads.note): it read a replica a second or more behind...
BEHIND = "behind"
# ...or why it read the primary although it could have read the replica.
UNAVAILABLE = "unavailable"
LAGGING = "lagging"
AFTER_WRITE = "after_write"

# Set on the answer to a person's POST: their pages read the primary while it lasts.
AFTER_WRITE_COOKIE = "desk_wrote"
_AFTER_WRITE_SALT = "core.replica.after-write"

# How far behind the replica is: nothing when it is caught up with what it received and is
# still receiving; else the age of the newest transaction it replayed (an overestimate after
# a quiet spell on the primary, which is the safe side). Not in recovery: it is no replica
# (the URL names the primary itself), and never behind.
LAG_SQL = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0
    WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
        AND EXISTS (SELECT FROM pg_stat_wal_receiver) THEN 0
    ELSE GREATEST(0, EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()))
END
"""


def replica_configured() -> bool:
    return REPLICA in connections.settings


@dataclass(frozen=True)
class ReplicaHealth:
    """What one probe of the replica found."""

    answered: bool
    lag_seconds: float | None  # None when it did not answer or cannot tell
    probed_at: float  # time.monotonic()

    @property
    def kept_seconds(self) -> float:
        return PROBE_KEPT_SECONDS if self.answered else FAILED_PROBE_KEPT_SECONDS


def replica_probe() -> ReplicaHealth:
    """Ask the replica how far behind it is: one statement, bounded by its own timeout (and
    the alias's connect timeout); any database error means it did not answer."""
    now = time.monotonic()
    try:
        with transaction.atomic(using=REPLICA), connections[REPLICA].cursor() as cursor:
            cursor.execute(f"SET LOCAL statement_timeout = {PROBE_STATEMENT_TIMEOUT_MS}")
            cursor.execute(LAG_SQL)
            row = cursor.fetchone()
    except Error as exc:
        logger.warning(
            "the replica did not answer (%s): pages read the primary", type(exc).__name__
        )
        connections[REPLICA].close()
        return ReplicaHealth(answered=False, lag_seconds=None, probed_at=now)
    lag = row[0] if row else None
    return ReplicaHealth(
        answered=lag is not None,
        lag_seconds=None if lag is None else float(lag),
        probed_at=now,
    )


_health_lock = threading.Lock()
_health: ReplicaHealth | None = None


def replica_health() -> ReplicaHealth:
    """The last probe's answer while it is fresh, else a new probe's (per process)."""
    global _health
    with _health_lock:
        known = _health
    if known is not None and time.monotonic() - known.probed_at < known.kept_seconds:
        return known
    found = replica_probe()
    with _health_lock:
        _health = found
    return found


def forget_replica_health() -> None:
    """The next page probes the replica again (after it failed a page, and in tests)."""
    global _health
    with _health_lock:
        _health = None


def after_write_seconds() -> float:
    """How long a person's pages read the primary after they changed something: what they
    wrote reached the replica by then, or the replica is too far behind to be read (a page
    reads a replica at most the threshold behind, by a probe at most PROBE_KEPT_SECONDS old;
    the second more covers the cookie's whole-second clock)."""
    return float(settings.TRIAGE_REPLICA_MAX_LAG_SECONDS) + PROBE_KEPT_SECONDS + 1


@dataclass
class PageReads:
    """Where one request's reads go. `eligible`: a page the replica may serve; then the
    database is chosen at the first read and kept to the end of the request."""

    eligible: bool = False
    fallback: str = ""  # UNAVAILABLE, LAGGING or AFTER_WRITE: why the primary
    lag_seconds: float | None = None
    chosen: str | None = None

    def alias(self) -> str:
        if not self.eligible:
            return DEFAULT_DB_ALIAS
        if self.chosen is None:
            health = replica_health()
            self.lag_seconds = health.lag_seconds
            if health.lag_seconds is None:
                self.read_primary(UNAVAILABLE)
            elif health.lag_seconds > settings.TRIAGE_REPLICA_MAX_LAG_SECONDS:
                self.read_primary(LAGGING)
            else:
                self.chosen = REPLICA
        return self.chosen or DEFAULT_DB_ALIAS

    def read_primary(self, reason: str) -> None:
        self.chosen = DEFAULT_DB_ALIAS
        self.fallback = reason

    @property
    def read_replica(self) -> bool:
        return self.chosen == REPLICA

    @property
    def behind_seconds(self) -> int:
        return round(self.lag_seconds or 0)

    @property
    def note(self) -> str:
        """What the page says about it (templates/core/_replica_note.html): BEHIND,
        UNAVAILABLE, LAGGING, or nothing."""
        self.alias()
        if self.fallback in (UNAVAILABLE, LAGGING):
            return self.fallback
        if self.read_replica and self.behind_seconds >= LAG_SHOWN_FROM_SECONDS:
            return BEHIND
        return ""


_page_reads: ContextVar[PageReads | None] = ContextVar("page_reads", default=None)


def current_page_reads() -> PageReads | None:
    """This request's choice; None outside a request (tasks, commands) or without replica."""
    return _page_reads.get()


class ReplicaRouter:
    """Django's database router: an eligible page's reads go where its PageReads says; every
    other read, and every write, to the primary. Without a replica it routes nothing."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        if not replica_configured():
            return None
        reads = _page_reads.get()
        if (
            reads is None
            or model._meta.app_label in PRIMARY_ONLY_APPS
            or connections[DEFAULT_DB_ALIAS].in_atomic_block
        ):
            return DEFAULT_DB_ALIAS
        return reads.alias()

    def db_for_write(self, model: type[Model], **hints: Any) -> str | None:
        return DEFAULT_DB_ALIAS if replica_configured() else None

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        # The replica holds the primary's rows: objects read from either relate.
        if {obj1._state.db, obj2._state.db} <= {DEFAULT_DB_ALIAS, REPLICA}:
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == REPLICA else None


SAFE_METHODS = ("GET", "HEAD")


def _is_page(request: HttpRequest, view_func: Callable[..., Any]) -> bool:
    """A signed-in person's page: not the API (its views are DRF's), not the admin (where
    people correct rows, and must see the newest)."""
    if request.method not in SAFE_METHODS or not request.user.is_authenticated:
        return False
    view_class = getattr(view_func, "cls", None)
    if isinstance(view_class, type) and issubclass(view_class, APIView):
        return False
    match = request.resolver_match
    return match is None or "admin" not in match.app_names


def _wrote_recently(request: HttpRequest) -> bool:
    mark = request.get_signed_cookie(
        AFTER_WRITE_COOKIE,
        default=None,
        salt=_AFTER_WRITE_SALT,
        max_age=timedelta(seconds=after_write_seconds()),
    )
    return mark is not None


class ReplicaReadsMiddleware:
    """Gives each request its PageReads: the page views of signed-in people are eligible for
    the replica (process_view); a person's POST marks their next pages for the primary (a
    signed cookie); a page that read the replica and failed on a database error is run once
    more on the primary. After authentication, which it asks who the person is."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not replica_configured():
            return self.get_response(request)
        token = _page_reads.set(PageReads())
        try:
            response = self.get_response(request)
        finally:
            _page_reads.reset(token)
        if request.method not in SAFE_METHODS and request.user.is_authenticated:
            response.set_signed_cookie(
                AFTER_WRITE_COOKIE,
                "1",
                salt=_AFTER_WRITE_SALT,
                max_age=math.ceil(after_write_seconds()),
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> None:
        reads = _page_reads.get()
        if reads is None or not _is_page(request, view_func):
            return
        reads.eligible = True
        if _wrote_recently(request):
            reads.read_primary(AFTER_WRITE)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        reads = _page_reads.get()
        if (
            reads is None
            or not reads.read_replica
            or not isinstance(exception, (OperationalError, InterfaceError))
            or request.resolver_match is None
        ):
            return None
        # GET and HEAD only reach here (eligible pages): running the view again is safe.
        logger.warning(
            "a page failed on the replica (%s): read the primary", type(exception).__name__
        )
        forget_replica_health()
        reads.read_primary(UNAVAILABLE)
        match = request.resolver_match
        return match.func(request, *match.args, **match.kwargs)


def page_reads(request: HttpRequest) -> dict[str, Any]:
    """Context processor: where this page read from, for templates/core/_replica_note.html."""
    return {"page_reads": _page_reads.get()}
