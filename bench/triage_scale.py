"""Do the pages stay fast at a million records? Triage, group and read API at 100k and 1M.

    .venv/bin/python bench/triage_scale.py [--sizes 100000,1000000] [--repeat 40]
        [--jobs 2] [--batch 1000] [--database-url URL] [--reuse] [--strict] [--language ko]
        [--team]

What one run does:

1. Creates the database if it is missing (default
   ``postgres://postgres@127.0.0.1:5432/triage_scale``), migrates it and empties every
   triage table.
2. Loads failure records up to each size in turn through ``triage.intake.ingest.batch_ingest``,
   the write path of the ingest API (scrubbing, classification, claims, group counters,
   hourly buckets, facets), in batches of 1,000 from ``--jobs`` processes. The traffic is
   a fleet's month: the catalog's 9 stages and every catalog reason with a long tail
   (Zipf weights, plus a few reasons the catalog does not know), 50 tools in 5
   collections, 30 days with a day-night rhythm and a dozen bursts where one tool and
   reason spike for an hour or three. After each load, ``VACUUM ANALYZE`` (what
   autovacuum does on its own after a bulk load); every size but the largest is then
   kept as a copy of the database (``triage_scale_100000``, ``CREATE DATABASE ...
   TEMPLATE``) before the next load goes on. ``--reuse`` skips loading when the database
   and its copies already hold their sizes.
3. Measures every size in the same rounds: one process per size, each set up on its own
   database as ``config.wsgi`` sets up a gunicorn worker, requests the endpoints in turn,
   ``--repeat`` times, interleaved with the other sizes (endpoint 1 at 100k, then at 1M,
   endpoint 2 ...), so that a slow minute of the machine falls on every size alike
   instead of on whichever was measured then. Requests go through Django's full request
   path (middleware, session auth or API-key auth, view, template) with production
   settings (``DJANGO_DEBUG=0``). The figure is server time: from the request entering
   Django to the rendered response, without a network or a browser.
   Before any request is timed, every endpoint must answer 200 and every API list must
   hold rows; every timed request must answer 200 too, and each size's database must hold
   exactly its size in records. A size that fails is BROKEN (``bench/verdict.py``): no
   figure is printed from it and the run exits 2.
4. Prints p50 and p95 per endpoint at each size, the ratio of the largest size to the
   smallest, and PASS/MISS against the targets (triage page p95 under 100 ms at 1M, and
   within 1.5x of the 100k figure). Misses fail the exit status only with ``--strict``.
   Then where the time goes at the largest size: per endpoint, the median request's total
   and the medians of its SQL time, its template rendering (its own SQL left out) and the
   rest, Python (middleware, views, selectors).

``--language ko`` also requests every triage-page endpoint in Korean (the same signed-in
operator, ``Accept-Language: ko``) in the same rounds as English, and judges the Korean page
against the English one: the same number of queries and a p95 within 1.1x.

``--team`` measures as an operator who holds the role in a team only (the team owns the
bench's five collections; a second team owns another), with a read key scoped to that team:
every statement carries the team filter (organisation.access). Before timing, each endpoint's
queries are counted with and without the filter, and the run judges them equal; the pages'
targets are the same. Its result is ``triage-scale-team``, beside the default shape's.

Since 2026-12-05 the contracts page is measured too (after the scan counted the size's
records, as the beat task would have) and judged by the triage page's targets, and so are
the group pages.

Endpoints: the triage page with its defaults (last 24 hours, active groups; since
2026-12-05 as ``/?window=24h``, the same page ``/`` was before), the bare ``/`` (the first
screen: the last 60 minutes when anything failed in them, else 24 hours), the triage
page's last 60 minutes (a custom window ending at the newest record, so that a database
loaded earlier still has an hour to show; both its edges read records), the triage page
filtered (7 days, one collection, one lane; and 30 days, any status, one execution
state), the page of the largest group (first page, and a page 30 days deep by its
cursor), and the read API (newest failures, failures of one stage and reason, groups).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import random
import statistics
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest import (  # noqa: E402
    app_env,
    database_name,
    empty_tables,
    ensure_database,
    manage,
)
from bench.verdict import Verdicts, add_strict_argument, below, ratio, stop_broken  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/triage_scale"
TARGET_P95_MS = 100.0
TARGET_RATIO = 1.5
DAYS = 30
SEED = 20261129

# 5 collections x 10 tools, each with its HTTP method (reads, writes, sends).
COLLECTIONS: dict[str, tuple[str, ...]] = {
    "shop-orders": (
        "getOrderDetail",
        "listOrders",
        "getOrderItems",
        "cancelOrder",
        "requestRefund",
        "createReturn",
        "getInvoice",
        "listInvoices",
        "sendInvoiceEmail",
        "applyCoupon",
    ),
    "shop-members": (
        "getMemberProfile",
        "updateMemberProfile",
        "getMemberGrade",
        "listAddresses",
        "changeDeliveryAddress",
        "registerMember",
        "getPointBalance",
        "redeemPoints",
        "listWishlist",
        "deleteMemberAccount",
    ),
    "shop-logistics": (
        "getDeliveryStatus",
        "trackShipment",
        "listWarehouses",
        "reserveStock",
        "releaseStock",
        "scheduleDelivery",
        "reschedulePickup",
        "getCarrierQuote",
        "printShippingLabel",
        "notifyCarrier",
    ),
    "payments": (
        "authorizePayment",
        "capturePayment",
        "voidAuthorization",
        "refundPayment",
        "getPaymentStatus",
        "listPaymentMethods",
        "addPaymentMethod",
        "verify3ds",
        "getSettlementReport",
        "chargeSubscription",
    ),
    "support-desk": (
        "searchFaq",
        "createTicket",
        "getTicket",
        "updateTicket",
        "escalateTicket",
        "listAgents",
        "sendSurvey",
        "summarizeConversation",
        "translateMessage",
        "closeTicket",
    ),
}
# Reasons of adapters the catalog does not know: the unmapped long tail.
UNMAPPED = (("execute", "vendor_quota_exceeded"), ("service", "adapter_schema_drift"))
SOURCES = (("runtime", 86), ("log", 9), ("quality_lab", 5))
BURSTS = 12


# --- a fleet's month of failures -------------------------------------------------------------


@dataclass(frozen=True)
class Burst:
    start: datetime
    hours: float
    stage: str
    reason: str
    collection: str
    tool: str


@dataclass
class Traffic:
    """Deterministic generator of failure items; every process builds the same one."""

    now: datetime
    reasons: list[tuple[str, str]] = field(default_factory=list)
    reason_weights: list[float] = field(default_factory=list)
    tools: list[tuple[str, str]] = field(default_factory=list)
    tool_weights: list[float] = field(default_factory=list)
    hour_weights: list[float] = field(default_factory=list)
    bursts: list[Burst] = field(default_factory=list)

    @classmethod
    def build(cls, now: datetime) -> Traffic:
        from triage.vocabulary import taxonomy

        rng = random.Random(SEED)
        catalog = [(info.stage, info.code) for info in taxonomy.REASONS.values()]
        rng.shuffle(catalog)  # which reasons are common is arbitrary, the shape is not
        reasons = [*catalog, *UNMAPPED]
        reason_weights = [1 / (rank + 1) ** 1.2 for rank in range(len(catalog))]
        reason_weights += [reason_weights[-1] / 2] * len(UNMAPPED)
        tools = [(collection, tool) for collection, names in COLLECTIONS.items() for tool in names]
        rng.shuffle(tools)
        tool_weights = [1 / (rank + 1) ** 0.9 for rank in range(len(tools))]
        # Busy in the (Korean) day, quiet at night: hour 0..23 of the day in UTC+9.
        hour_weights = [
            1.0 + 0.8 * math.sin((((hour + 9) % 24) - 8) / 24 * 2 * math.pi) for hour in range(24)
        ]
        traffic = cls(now, reasons, reason_weights, tools, tool_weights, hour_weights)
        for _ in range(BURSTS):
            stage, reason = rng.choices(catalog[:20])[0]
            collection, tool = rng.choice(tools)
            start = now - timedelta(hours=rng.uniform(3, DAYS * 24 - 3))
            traffic.bursts.append(Burst(start, rng.uniform(1, 3), stage, reason, collection, tool))
        return traffic

    def items(self, start: int, count: int, *, prefix: str) -> Iterator[dict[str, Any]]:
        """Items number `start` to `start + count`; the same numbers give the same items."""
        for number in range(start, start + count):
            rng = random.Random(SEED * 1_000_003 + number)
            yield {"type": "failure", "id": f"{prefix}-{number:08d}", "body": self._body(rng)}

    def _body(self, rng: random.Random) -> dict[str, Any]:
        if rng.random() < 0.15:
            burst = rng.choice(self.bursts)
            occurred = burst.start + timedelta(hours=rng.uniform(0, burst.hours))
            stage, reason, collection, tool = (
                burst.stage,
                burst.reason,
                burst.collection,
                burst.tool,
            )
        else:
            day = rng.randrange(DAYS)
            hour = rng.choices(range(24), self.hour_weights)[0]
            midnight = (self.now - timedelta(days=day)).replace(
                hour=0, minute=0, second=0, microsecond=0
            )
            occurred = midnight + timedelta(hours=hour, seconds=rng.uniform(0, 3600))
            if occurred > self.now:
                occurred = self.now - timedelta(seconds=rng.uniform(1, 86_400))
            stage, reason = rng.choices(self.reasons, self.reason_weights)[0]
            collection, tool = rng.choices(self.tools, self.tool_weights)[0]
        if stage == "retrieve" and reason == "no_candidates":
            tool = ""  # nothing was retrieved, so there is no tool
        source = rng.choices([name for name, _ in SOURCES], [weight for _, weight in SOURCES])[0]
        return {
            "stage": stage,
            "reason": reason,
            "message": f"{reason} in {tool or 'retrieval'} (attempt {rng.randint(1, 3)})",
            "tool": tool,
            "collection": collection,
            "plan_id": f"plan_{rng.getrandbits(32):08x}",
            "step_id": f"s{rng.randint(1, 4)}",
            "evidence": {
                "request_id": f"req_{rng.getrandbits(64):016x}",
                "latency_ms": rng.randint(3, 15_000),
                "top_k": 5,
            },
            "occurred_at": occurred.isoformat(),
            "graph_tool_call_version": "0.47.0",
            "source": source,
            # The call's span, as W3C trace context writes it. Until 2026-12-05 the records
            # carried a trace_id alone (then an unknown field, kept in `extra`); the desk now
            # stores a failed call once by its trace and span id and refuses half a pair, so
            # the bench sends both, as runtimes do.
            "trace_id": f"{rng.getrandbits(128):032x}",
            "span_id": f"{rng.getrandbits(64):016x}",
        }


# --- loading through the ingest write path ---------------------------------------------------


def _setup_django() -> None:
    import logging

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    logging.getLogger("axes").setLevel(logging.WARNING)  # one sign-in per measurement


def _load_chunk(task: tuple[int, int, int, str]) -> int:
    """One process's share: items [start, start + count) in batches; the records stored."""
    start, count, batch, now_iso = task
    from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, DESK_SOURCES, batch_ingest

    traffic = _traffic(now_iso)
    stored = 0
    items = list(traffic.items(start, count, prefix="scale"))
    for offset in range(0, len(items), batch):
        chunk = items[offset : offset + batch]
        # Quality Lab's records come through the desk's own channel, as its runs send them.
        desk = [item for item in chunk if item["body"]["source"] in DESK_SOURCES]
        runtime = [item for item in chunk if item["body"]["source"] not in DESK_SOURCES]
        for owner, channel, part in (
            ("scale-bench", "api", runtime),
            (DESK_OWNER, DESK_CHANNEL, desk),
        ):
            if not part:
                continue
            outcome = batch_ingest(owner=owner, items=part, channel=channel)
            accepted = outcome.as_dict()["accepted"]
            if accepted != len(part):
                raise NotStored(f"batch at {start + offset}: {outcome.as_dict()}")
            stored += accepted
    return stored


_TRAFFIC: dict[str, Traffic] = {}


def _traffic(now_iso: str) -> Traffic:
    if now_iso not in _TRAFFIC:
        _TRAFFIC[now_iso] = Traffic.build(datetime.fromisoformat(now_iso))
    return _TRAFFIC[now_iso]


def load(*, start: int, end: int, jobs: int, batch: int, now: datetime) -> float:
    """Ingest items [start, end) from `jobs` processes; returns records per second."""
    chunk = 10 * batch
    tasks = [
        (offset, min(chunk, end - offset), batch, now.isoformat())
        for offset in range(start, end, chunk)
    ]
    started = time.perf_counter()
    done = 0
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs, initializer=_setup_django) as pool:
        tty = sys.stdout.isatty()
        for stored in _checked(pool.imap_unordered(_load_chunk, tasks)):
            done += stored
            if tty or (start + done) % 100_000 == 0 or start + done == end:
                elapsed = time.perf_counter() - started
                print(
                    f"{chr(13) if tty else ''}  loaded {start + done:>9,} / {end:,} records"
                    f"  ({done / elapsed:,.0f} records/s)",
                    end="" if tty else "\n",
                    flush=True,
                )
    if tty:
        print()
    return (end - start) / (time.perf_counter() - started)


def _checked(stored: Iterator[int]) -> Iterator[int]:
    """The loaders' counts; a batch they could not store whole stops the run as BROKEN."""
    try:
        yield from stored
    except NotStored as exc:
        stop_broken(f"loading: {exc}")


class NotStored(Exception):
    """A batch of the load was not stored whole."""


def vacuum_analyze(database_url: str) -> None:
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def copy_url(database_url: str, size: int | str) -> str:
    """Where the copy of the database at `size` records lives: triage_scale_100000."""
    parts = urllib.parse.urlsplit(database_url)
    return urllib.parse.urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}_{size}"))


def drop_database(database_url: str) -> None:
    import psycopg
    from psycopg import sql

    name, maintenance = database_name(database_url)
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def copy_database(source_url: str, target_url: str, *, quiet: bool = False) -> None:
    """CREATE DATABASE target TEMPLATE source (a file copy: seconds, not a reload)."""
    import psycopg
    from psycopg import sql

    drop_database(target_url)
    source, maintenance = database_name(source_url)
    target, _ = database_name(target_url)
    with psycopg.connect(maintenance, autocommit=True) as conn:
        # A template must have no other sessions: autovacuum may have started one.
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [source],
        )
        # FILE_COPY copies the files (PostgreSQL 15's default writes every block to the WAL).
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(target), sql.Identifier(source)
            )
        )
    if not quiet:
        print(f"  kept a copy as database {target}")


def record_count(database_url: str) -> int | None:
    """Failure records in the database, or None when it or its table is missing."""
    import psycopg

    try:
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT count(*) FROM triage_failurerecord").fetchone()
    except psycopg.Error:
        return None
    return int(row[0]) if row else None


def newest_record(database_url: str) -> datetime | None:
    """When the newest failure record occurred: the time the loaded traffic ends."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT max(occurred_at) FROM triage_failurerecord").fetchone()
    return row[0] if row else None


def clock_lag(newest: list[datetime | None], wall: datetime) -> timedelta:
    """How far behind the wall clock the measuring processes read the time: to a second
    after the newest record of any database. A page of relative windows ("the last 24
    hours", the first screen's "anything in the last hour?") then measures the traffic as
    it was when it was made, however long ago it was loaded: a 10M load takes about an
    hour, and a --reuse run may come days later."""
    known = [moment for moment in newest if moment is not None]
    if not known:
        return timedelta(0)
    return max(timedelta(0), wall - max(known) - timedelta(seconds=1))


def set_clock_back(lag: timedelta) -> None:
    """The desk's clock (django.utils.timezone.now, which every page reads) runs ``lag``
    behind the wall clock in this process."""
    from django.utils import timezone

    wall_now = getattr(timezone.now, "wall_now", timezone.now)

    def now() -> datetime:
        return wall_now() - lag

    now.wall_now = wall_now  # type: ignore[attr-defined]
    timezone.now = now


def table_counts() -> dict[str, int]:
    from triage.models import FailureGroup, FailureGroupBucket, FailureGroupFacet, FailureRecord

    return {
        "records": FailureRecord.objects.count(),
        "groups": FailureGroup.objects.count(),
        "buckets": FailureGroupBucket.objects.count(),
        "facets": FailureGroupFacet.objects.count(),
    }


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Endpoint:
    label: str
    url: str
    api: bool = False
    triage_page: bool = False
    language: str = "en"


@dataclass
class Timing:
    label: str
    samples_ms: list[float]
    queries: int
    triage_page: bool = False
    language: str = "en"
    # Per request: milliseconds in SQL and in template rendering (its own SQL left out);
    # the rest of the request is Python (views, selectors, middleware).
    parts_ms: list[tuple[float, float]] = field(default_factory=list)
    # With --team: the same endpoint's query count without the team filter.
    unfiltered_queries: int | None = None

    def profile(self) -> tuple[float, float, float]:
        """Where the time goes: (SQL, Python, template) milliseconds, the medians of SQL and
        template and the rest of the median request."""
        sql = statistics.median(part[0] for part in self.parts_ms) if self.parts_ms else 0.0
        template = statistics.median(part[1] for part in self.parts_ms) if self.parts_ms else 0.0
        return sql, max(0.0, self.p50 - sql - template), template

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


# The Korean triage page against the English one (--language ko).
TARGET_LANGUAGE_RATIO = 1.1


def endpoints(languages: tuple[str, ...] = ()) -> list[Endpoint]:
    """The endpoints, and each triage-page endpoint again in every other language asked for."""
    measured = _english_endpoints()
    for language in languages:
        measured += [
            Endpoint(f"{endpoint.label} [{language}]", endpoint.url, triage_page=True,
                     language=language)
            for endpoint in measured
            if endpoint.triage_page and endpoint.language == "en"
        ]  # fmt: skip
    return measured


def _english_endpoints() -> list[Endpoint]:
    from triage.models import FailureGroup, FailureRecord

    largest = FailureGroup.objects.order_by("-count").first()
    if largest is None:
        raise SystemExit("no groups: nothing was loaded")
    from django.utils import timezone

    month_ago = timezone.now() - timedelta(days=DAYS - 1)
    deep = (
        FailureRecord.objects.filter(group=largest, occurred_at__lt=month_ago)
        .order_by("-occurred_at", "-id")
        .values_list("occurred_at", "id")
        .first()
    )
    group_url = f"/triage/groups/{largest.pk}/"
    deep_url = group_url
    if deep is not None:
        deep_url += "?" + urllib.parse.urlencode({"before": f"{deep[0].isoformat()}_{deep[1]}"})
    collection = next(iter(COLLECTIONS))
    return [
        # "/" chose 24h until the first screen learned to open on the last 60 minutes when
        # anything failed in them; the 24h view keeps its row (same page as before), and
        # the bare address is measured on its own row (one more query: is the hour quiet?).
        Endpoint("triage page, defaults (24h, active)", "/?window=24h", triage_page=True),
        Endpoint("triage page, first screen (no window in the URL)", "/", triage_page=True),
        Endpoint("triage page, last 60 minutes of the data", _last_hour_url(), triage_page=True),
        Endpoint(
            "triage page, 7d + collection + lane",
            f"/?window=7d&collection={collection}&lane=manual_investigation",
            triage_page=True,
        ),
        Endpoint(
            "triage page, 30d + any status + state",
            "/?window=30d&status=all&execution_state=started_unknown",
            triage_page=True,
        ),
        # The group page is judged by the same targets (issue 30: under 100 ms with its
        # new parts), since its per-release table and fixes panel joined it.
        Endpoint("group page, largest group", group_url, triage_page=True),
        Endpoint("group page, 30 days deep", deep_url, triage_page=True),
        Endpoint("API failures, newest 100", "/api/v1/failures", api=True),
        Endpoint(
            f"API failures, {largest.stage}/{largest.reason}",
            f"/api/v1/failures?stage={largest.stage}&reason={largest.reason}",
            api=True,
        ),
        Endpoint("API groups, recently seen", "/api/v1/groups", api=True),
        # Seed 004's rollout plan, read from the scan's counters (counted before the rounds):
        # judged by the triage page's targets.
        Endpoint("contracts page, 30 days", "/contracts/", triage_page=True),
    ]


def _last_hour_url() -> str:
    """The 1h window as the page reads it, ending at the newest record: a database loaded an
    hour ago (``--reuse``) has nothing in the clock's last hour. Both ends fall inside an
    hour, so both edges are read from the records (the clock's own 1h window reads only the
    start's: nothing was recorded after now), never less work than the page's 1h window."""
    from django.db.models import Max

    from triage.models import FailureRecord

    newest = FailureRecord.objects.aggregate(newest=Max("occurred_at"))["newest"]
    if newest is None:
        raise SystemExit("no records: nothing was loaded")
    end = newest.astimezone(UTC) + timedelta(seconds=1)
    since = end - timedelta(hours=1)
    return "/?" + urllib.parse.urlencode(
        {
            "window": "custom",
            "since": since.strftime("%Y-%m-%dT%H:%M:%S"),
            "until": end.strftime("%Y-%m-%dT%H:%M:%S"),
        }
    )


def clients(*, team: bool = False, admin: bool = False) -> tuple[Any, Any]:
    """A signed-in operator's browser and a runtime's API client with the read scope.

    With ``team``, the operator holds the role in a team only (team "scale", which owns the
    bench's collections, beside a second team that owns another), and the key is scoped to
    that team: every page and answer goes through the team filter and shows the same rows.
    With ``admin``, an admin (who sees every collection, teams or not: no filter at all).
    """
    from django.contrib.auth import get_user_model
    from django.test import Client

    from organisation import roles
    from organisation.models import Membership, OwnedCollection, Team
    from triage.models import ApiKey
    from triage.services import api_key_create

    people = get_user_model().objects
    ApiKey.objects.filter(name="scale-team-reader" if team else "scale-reader").delete()
    if team:
        ours, _ = Team.objects.get_or_create(name="scale")
        other, _ = Team.objects.get_or_create(name="scale-elsewhere")
        for collection in COLLECTIONS:
            OwnedCollection.objects.update_or_create(collection=collection, defaults={"team": ours})
        OwnedCollection.objects.get_or_create(collection="elsewhere", defaults={"team": other})
        user, _ = people.get_or_create(username="scale-team-operator")
        user.groups.clear()
        Membership.objects.update_or_create(team=ours, person=user, defaults={"role": "operator"})
        api_key, key = api_key_create(name="scale-team-reader", scopes=["read"])
        ApiKey.objects.filter(pk=api_key.pk).update(team=ours)
    else:
        # The default shape measures a desk without teams (a --team run before it made some).
        if not admin:
            ApiKey.objects.filter(name="scale-team-reader").delete()  # its team is PROTECTed
            Team.objects.filter(name__in=["scale", "scale-elsewhere"]).delete()
        role = "admin" if admin else "operator"
        user, _ = people.get_or_create(username=f"scale-{role}")
        user.groups.add(roles.ensure_role_group(role))
        _, key = api_key_create(name="scale-reader", scopes=["read"])
    browser = Client()
    browser.force_login(user)
    return browser, Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def _serve(
    database_url: str,
    channel: Any,
    languages: tuple[str, ...] = (),
    team: bool = False,
    lag: timedelta = timedelta(0),
) -> None:
    """A measuring process on one database, its clock ``lag`` behind the wall clock (see
    clock_lag): sends its endpoints' labels, query counts (and, with ``team``, each
    endpoint's query count without the team filter), table counts and what its warm-up
    found wrong, then answers each endpoint index with one request's milliseconds and
    status code."""
    os.environ["DATABASE_URL"] = database_url
    _setup_django()
    set_clock_back(lag)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import config.wsgi  # noqa: F401  # set up like a gunicorn worker: views loaded, startup frozen
    from contracts.scan import contracts_scan_all

    for _ in contracts_scan_all(settle=timedelta(0)):  # what the beat task would have counted
        pass
    # With --team, the same pages without the filter: an admin's (once a team exists, a
    # person in no team sees nothing).
    plain = clients(admin=True) if team else None
    browser, api = clients(team=team)
    targets = endpoints(languages)

    from core.templates import Template  # the pages' template backend (settings.TEMPLATES)

    spent = {"sql": 0.0, "template": 0.0, "sql_in_template": 0.0}
    rendering = [False]

    def timed_sql(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            took = (time.perf_counter() - started) * 1000
            spent["sql"] += took
            if rendering[0]:
                spent["sql_in_template"] += took

    render = Template.render

    def timed_render(self: Any, *args: Any, **kwargs: Any) -> Any:
        if rendering[0]:  # an include inside a render: counted by the outer one
            return render(self, *args, **kwargs)
        rendering[0] = True
        started = time.perf_counter()
        try:
            return render(self, *args, **kwargs)
        finally:
            spent["template"] += (time.perf_counter() - started) * 1000
            rendering[0] = False

    Template.render = timed_render  # type: ignore[method-assign]

    # A statement read beside the page (core.side_reads) runs on another connection; what
    # the page waits for its rows is counted as SQL, like a statement of its own.
    from core.side_reads import SideRead

    side_rows = SideRead.rows

    def timed_side_rows(self: Any) -> Any:
        if not self.beside:  # read in turn, by the page's connection: timed above
            return side_rows(self)
        started = time.perf_counter()
        try:
            return side_rows(self)
        finally:
            took = (time.perf_counter() - started) * 1000
            spent["sql"] += took
            if rendering[0]:
                spent["sql_in_template"] += took

    SideRead.rows = timed_side_rows  # type: ignore[method-assign]

    def get(endpoint: Endpoint, *, unfiltered: bool = False) -> tuple[float, Any]:
        client = api if endpoint.api else browser
        if unfiltered and plain is not None:
            client = plain[1] if endpoint.api else plain[0]
        for part in spent:
            spent[part] = 0.0
        started = time.perf_counter()
        with connection.execute_wrapper(timed_sql):
            response = client.get(endpoint.url, HTTP_ACCEPT_LANGUAGE=endpoint.language)
        return (time.perf_counter() - started) * 1000, response

    queries = []
    unfiltered_queries = []
    problems = []
    for endpoint in targets:  # warm caches, connections and templates; count queries once
        _, response = get(endpoint)
        problems += endpoint_problems(endpoint, response.status_code, response.content)
        with CaptureQueriesContext(connection) as captured:
            get(endpoint)
        queries.append(len(captured))
        if team:
            _, plain_response = get(endpoint, unfiltered=True)
            # The team owns every collection: the filter may hide nothing.
            if endpoint.api and plain_response.content != response.content:
                problems.append(f"{endpoint.url}: the team's key reads other rows")
            with CaptureQueriesContext(connection) as captured:
                get(endpoint, unfiltered=True)
            unfiltered_queries.append(len(captured))
    labels = [(endpoint.label, endpoint.triage_page, endpoint.language) for endpoint in targets]
    channel.send((labels, queries, table_counts(), problems, unfiltered_queries))
    while (index := channel.recv()) is not None:
        elapsed, response = get(targets[index])
        parts = (spent["sql"], spent["template"] - spent["sql_in_template"])
        channel.send((elapsed, response.status_code, parts))


def endpoint_problems(endpoint: Endpoint, status: int, content: bytes) -> list[str]:
    """Checked before any request is timed: every endpoint answers 200, and every API list
    holds rows (the database is loaded: an empty answer is fast and wrong)."""
    if status != 200:
        return [f"{endpoint.url}: HTTP {status}"]
    if endpoint.api:
        import json

        if not json.loads(content).get("results"):
            return [f"{endpoint.url}: no rows in the answer"]
    return []


@dataclass
class _Server:
    process: Any
    channel: Any
    labels: list[tuple[str, bool, str]] = field(default_factory=list)
    queries: list[int] = field(default_factory=list)
    unfiltered_queries: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    samples: list[list[float]] = field(default_factory=list)
    parts: list[list[tuple[float, float]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def measure(
    databases: dict[int, str],
    repeat: int,
    languages: tuple[str, ...] = (),
    team: bool = False,
    lag: timedelta = timedelta(0),
) -> dict[int, _Server]:
    """Every size in the same rounds, one process each, never two requests at once, each
    process's clock ``lag`` behind the wall clock."""
    context = multiprocessing.get_context("spawn")
    servers: dict[int, _Server] = {}
    try:
        for size, database_url in databases.items():
            ours, theirs = context.Pipe()
            process = context.Process(
                target=_serve, args=(database_url, theirs, languages, team, lag), daemon=True
            )
            process.start()
            servers[size] = _Server(process, ours)
        for server in servers.values():
            (
                server.labels,
                server.queries,
                server.counts,
                server.problems,
                server.unfiltered_queries,
            ) = server.channel.recv()
            server.samples = [[] for _ in server.labels]
            server.parts = [[] for _ in server.labels]
        if any(server.problems for server in servers.values()):
            return servers  # checked before timed: nothing is measured on a wrong answer
        for _ in range(repeat):
            for index in range(len(next(iter(servers.values())).labels)):
                for server in servers.values():
                    server.channel.send(index)
                    elapsed, status, parts = server.channel.recv()
                    server.samples[index].append(elapsed)
                    server.parts[index].append(parts)
                    if status != 200:
                        server.problems.append(f"{server.labels[index][0]}: HTTP {status}")
    except EOFError:
        raise SystemExit("a measuring process died; its error is above") from None
    finally:
        for server in servers.values():
            with contextlib.suppress(OSError):
                server.channel.send(None)
            server.process.join(timeout=10)
    return servers


# --- report ----------------------------------------------------------------------------------


@dataclass
class SizeResult:
    size: int
    load_rate: float | None
    counts: dict[str, int]
    timings: list[Timing]
    problems: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.size:,} records"

    def all_problems(self) -> list[str]:
        """The measuring process's, and a database that does not hold its size."""
        found = list(self.problems)
        if self.counts.get("records") != self.size:
            found.append(f"the database holds {self.counts.get('records', 0):,} records")
        return found


def report(results: list[SizeResult]) -> Verdicts:
    small, large = results[0], results[-1]
    print()
    verdicts = Verdicts()
    for result in results:
        counts = ", ".join(f"{value:,} {name}" for name, value in result.counts.items())
        rate = f", loaded at {result.load_rate:,.0f} records/s" if result.load_rate else ""
        print(f"{result.size:,} records: {counts}{rate}")
        verdicts.check(result.label, result.all_problems())
    if verdicts.broken:
        return verdicts  # no figure from a size whose check failed
    print()
    sizes = [f"{result.size // 1000:,}k" for result in results]
    width = max(40, *(len(timing.label) + 2 for timing in large.timings))
    header = f"{'endpoint':<{width}}{'queries':>8}"
    for size in sizes:
        header += f"{size + ' p50':>12}{size + ' p95':>12}"
    header += f"{'p95 ratio':>11}"
    print(header)
    print("-" * len(header))
    for index, timing in enumerate(large.timings):
        line = f"{timing.label:<{width}}{timing.queries:>8}"
        for result in results:
            line += f"{result.timings[index].p50:>10.1f}ms{result.timings[index].p95:>10.1f}ms"
        growth = ratio(timing.p95, small.timings[index].p95)
        line += f"{growth:>10.2f}x" if growth is not None else f"{'-':>11}"
        print(line)
    print(
        f"\nwhere the median request's time goes at {large.size:,} records (ms; SQL: its "
        "statements, and its waits for those read beside it):"
    )
    print(f"{'endpoint':<{width}}{'total':>8}{'SQL':>8}{'Python':>8}{'template':>10}")
    for timing in large.timings:
        sql, python, template = timing.profile()
        print(
            f"{timing.label:<{width}}{timing.p50:>8.1f}{sql:>8.1f}{python:>8.1f}{template:>10.1f}"
        )
    print()
    judged_sizes = [small.label, large.label]
    for index, timing in enumerate(large.timings):
        if not timing.triage_page or timing.language != "en":
            continue

        def judge(timing: Timing = timing, index: int = index) -> tuple[bool, str]:
            p95 = timing.p95
            growth = ratio(p95, small.timings[index].p95)
            flat = growth is not None and growth <= TARGET_RATIO
            return p95 < TARGET_P95_MS and flat, (
                f"{timing.label}: p95 {below(p95, TARGET_P95_MS)} ms at {large.size:,} (target < "
                f"{TARGET_P95_MS:.0f} ms), {growth or 0:.2f}x the {small.size:,} figure "
                f"(target <= {TARGET_RATIO}x)"
            )

        verdicts.target(timing.label, needs=judged_sizes, judge=judge)
    _report_team_filter(large, verdicts)
    _report_languages(large, verdicts)
    return verdicts


def _report_team_filter(result: SizeResult, verdicts: Verdicts) -> None:
    """With --team: each page keeps its query count with the team filter on (the filter
    joins inside the page's statements, it does not add any)."""
    for timing in result.timings:
        if timing.unfiltered_queries is None or timing.language != "en":
            continue

        def judge(timing: Timing = timing) -> tuple[bool, str]:
            return timing.queries == timing.unfiltered_queries, (
                f"{timing.label}: {timing.queries} queries with the team filter, "
                f"{timing.unfiltered_queries} without (target: the same)"
            )

        verdicts.target(f"{timing.label} [team queries]", needs=[result.label], judge=judge)


def _report_languages(result: SizeResult, verdicts: Verdicts) -> None:
    """Each translated triage page against its English one, at the given size."""
    english = {t.label: t for t in result.timings if t.triage_page and t.language == "en"}
    for timing in result.timings:
        if timing.language == "en":
            continue

        def judge(timing: Timing = timing) -> tuple[bool, str]:
            base = english[timing.label.rsplit(" [", 1)[0]]
            against = ratio(timing.p95, base.p95)
            same_queries = timing.queries == base.queries
            ok = same_queries and against is not None and against <= TARGET_LANGUAGE_RATIO
            return ok, (
                f"{timing.label}: {timing.queries} queries (English {base.queries}), p95 "
                f"{timing.p95:.1f} ms, {against or 0:.2f}x English's {base.p95:.1f} ms at "
                f"{result.size:,} (target: same queries, <= {TARGET_LANGUAGE_RATIO}x)"
            )

        verdicts.target(timing.label, needs=[result.label], judge=judge)


DEFAULT_SIZES = "100000,1000000"


def result_name(sizes: list[int], *, team: bool = False) -> str:
    """`triage-scale` for the default sizes; another shape keeps a result of its own beside
    it (`triage-scale-1m-10m` for --sizes 1000000,10000000, `triage-scale-team` with
    --team)."""
    suffix = ["team"] if team else []
    if sizes == sorted(int(size) for size in DEFAULT_SIZES.split(",")):
        return "-".join(["triage-scale", *suffix])
    short = [
        f"{size // 1_000_000}m" if size % 1_000_000 == 0 else f"{size // 1000}k" for size in sizes
    ]
    return "-".join(["triage-scale", *short, *suffix])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--reuse", action="store_true", help="keep records already loaded")
    parser.add_argument(
        "--wall-clock",
        action="store_true",
        help="measure at the wall clock's time, not at the time the loaded traffic ends (the "
        "shape before 2026-12-06: relative windows then see less traffic the longer ago it "
        "was loaded)",
    )
    add_strict_argument(parser)
    parser.add_argument(
        "--language",
        action="append",
        default=[],
        choices=["ko"],
        help="also measure the triage page in this language against English",
    )
    parser.add_argument(
        "--team",
        action="store_true",
        help="measure as a member of a team that owns the collections, with a team-scoped key",
    )
    args = parser.parse_args(argv)
    sizes = sorted(int(size) for size in args.sizes.split(","))

    if len(sizes) < 2:
        raise SystemExit("need two sizes to compare")
    env = app_env(args.database_url)
    env["DJANGO_ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    os.environ.update(env)
    ensure_database(args.database_url)
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "collectstatic", "--noinput", "-v", "0")  # production pages need the manifest
    databases = {size: copy_url(args.database_url, size) for size in sizes[:-1]}
    databases[sizes[-1]] = args.database_url
    rates: dict[int, float] = {}
    if args.reuse and all(record_count(url) == size for size, url in databases.items()):
        print("reusing the records loaded by an earlier run")
        for url in databases.values():
            manage({**env, "DATABASE_URL": url}, "migrate", "--noinput", "-v", "0")
    else:
        empty_tables(args.database_url, keep=frozenset())
        # What the beat does on a deployed desk: each day of the month gets its partition
        # before its records arrive (PostgreSQL partitions records by day).
        manage(env, "record_partitions", "--days", "31")
        now = datetime.now(UTC)
        loaded = 0
        for size in sizes:
            print(f"loading {size - loaded:,} records ({args.jobs} processes)")
            rates[size] = load(start=loaded, end=size, jobs=args.jobs, batch=args.batch, now=now)
            loaded = size
            vacuum_analyze(args.database_url)
            if size != sizes[-1]:
                copy_database(args.database_url, databases[size])
    print(f"measuring {' and '.join(f'{size:,}' for size in sizes)} records in the same rounds")
    lag = timedelta(0)
    if not args.wall_clock:
        lag = clock_lag([newest_record(url) for url in databases.values()], datetime.now(UTC))
        print(
            f"  at the time the loaded traffic ends: the pages' clock reads "
            f"{lag.total_seconds() / 60:,.1f} minutes behind the wall clock (--wall-clock: not)"
        )
    servers = measure(databases, args.repeat, tuple(args.language), team=args.team, lag=lag)
    results = [
        SizeResult(
            size,
            rates.get(size),
            server.counts,
            [
                Timing(
                    label,
                    server.samples[index],
                    server.queries[index],
                    triage_page,
                    language,
                    parts_ms=server.parts[index],
                    unfiltered_queries=(
                        server.unfiltered_queries[index] if server.unfiltered_queries else None
                    ),
                )
                for index, (label, triage_page, language) in enumerate(server.labels)
            ],
            server.problems,
        )
        for size, server in servers.items()
    ]
    return report(results).exit_status(
        strict=args.strict, results_dir=args.results_dir, bench=result_name(sizes, team=args.team)
    )


if __name__ == "__main__":
    sys.exit(main())
