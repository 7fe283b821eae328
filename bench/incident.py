"""Do the pages stay fast while ingest floods? Viewers and senders, shared and split pools.

    .venv/bin/python bench/incident.py [--records 1000000] [--seconds 20] [--viewers 4]
        [--think 1] [--senders 2] [--batch 500] [--web-workers 2] [--ingest-workers 2]
        [--ingest-threads 16] [--ingest-slots N] [--nice 10] [--repeat 1] [--runs a,b,c,c0,d]
        [--occurred now|month] [--database-url URL] [--prepare-only] [--strict]

What one run does:

1. Uses the million-record database of ``bench/triage_scale.py`` (default
   ``postgres://postgres@127.0.0.1:5432/triage_scale``), loading it with that benchmark's
   traffic and loader when it holds fewer than ``--records`` failure records.
2. Runs, each for ``--seconds`` and in this order (each on a new copy of the loaded
   database, ``<name>_incident``, so that every run starts from the same records and none
   pays for what the one before wrote), on gunicorn with production settings:
   (a) ``--viewers`` signed-in viewers alone on the web pool; (b) the viewers and
   ``--senders`` senders on one shared pool (``--web-workers`` sync workers serving
   everything, the shape before the pools were split); (c) the viewers on the web pool
   and the senders on the ingest pool (``TRIAGE_POOL=ingest``: gthread workers, niced,
   ``--ingest-slots`` batches at once, one per worker by default, as deployed); (c0) the
   same without the lower CPU priority (``TRIAGE_INGEST_NICE=0``); (d) the senders alone
   on the ingest pool. ``--runs a,c,d`` leaves out (b) and (c0), which the targets do not
   need.
   Before each run's clock starts, its pools are warmed up, untimed: every page twice
   from ``--web-workers`` viewers at once and one batch from each sender, so that no run's
   p95 is made of its new workers' first requests and its new copy's cold blocks.
   A viewer requests ``/``, ``/?window=7d``, ``/?window=1h`` and ``/receipts/`` in turn
   over HTTP with a session cookie, reading each page for ``--think`` seconds (0.5x to
   1.5x of it, at random) before the next: an operator clicking through the desk in the
   first minute of an incident (the page's own auto-refresh is every 10 s at the
   fastest). ``--think 0`` makes every viewer ask again the moment a page arrives: four
   of them then keep both web workers busy all the time, the pages alone saturate the
   machine, and any CPU that ingest gets comes out of the pages' time. A sender posts
   500-item batches of new failure records (the scale traffic's stages, reasons, tools and
   bursts) as fast as the answers come, and waits ``Retry-After`` when told to. With
   ``--occurred now`` (the default since 2026-12-05) each failure is stamped within the
   last 5 minutes, as runtimes report an incident's failures while they happen; with
   ``--occurred month`` (every run before) they keep the scale traffic's month, a backfill
   that rewrites the counters of every hour and day the pages read. The senders run in a process of
   their own (a runtime is another process, on another machine): as threads beside the
   viewers they held this process's interpreter lock while framing their 600 KB bodies
   and decoding the answers, and the viewers' pages were timed late by the benchmark
   itself (2.35x against 1.05x for the same desk, 30 s runs on 2026-12-02).
3. Prints, per run, page p50/p95 and the pages' status codes, ingest records/s and the
   ingest status codes, each page's p50/p95, and the cores the run used: the web pool's
   and the ingest pool's gunicorn processes, the run's PostgreSQL backends at normal and
   at lower priority (the ingest pool's), and the whole machine. Then the targets: with
   the split pools, page p95 under the flood within 1.5x of the viewers alone, and ingest
   at least 0.7x of its rate alone.
   ``--repeat N`` runs N rounds of the five runs, one round after the other, prints each
   round's table and ratios, and judges the targets on the median of the rounds' ratios:
   on a noisy host the viewers-alone run alone moved by 1.4x between rounds minutes
   apart.
4. Checks every run before its figures count (``bench/verdict.py``): only pages answered
   200 are timed, and any other answer (an error page is quick and wrong) fails the run;
   a sender's answers must be 200 or a wait-and-retry (429, 503), with no duplicate and
   no refused item, the senders must not run out of batches, and afterwards the run's
   database copy must hold exactly the claims and records the answers accepted. A rate
   counts accepted items only, and a baseline that measured nothing is no baseline (never
   1). A run that fails its check is BROKEN: no ratio is printed from it, the targets it
   feeds print MISS and the bench exits 2. A missed target exits 1 with ``--strict``.

The machine is shared and noisy: compare the rows of one run, not figures across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest import (  # noqa: E402
    ServerConfig,
    app_env,
    children,
    cpu_ticks,
    database_backends,
    encode_batches,
    ensure_database,
    manage,
    proc_stat,
    serve,
)
from bench.triage_scale import (  # noqa: E402
    DEFAULT_DATABASE_URL,
    Traffic,
    copy_database,
    copy_url,
    drop_database,
    load,
    record_count,
    vacuum_analyze,
)
from bench.verdict import Verdicts, add_strict_argument, ratio, stop_broken  # noqa: E402

VIEWER_PATHS = ("/", "/?window=7d", "/?window=1h", "/receipts/")
# The answers that ask a sender to wait and send the batch again (the ingest pool busy, a
# quota): the batch goes back on the pile, as a reporter retries it. Any other answer but
# 200 is a failure of the run.
RETRIED = (429, 503)
TARGET_PAGE_RATIO = 1.5
TARGET_INGEST_RATIO = 0.7


# --- set-up ------------------------------------------------------------------------------------


def prepare(database_url: str, records: int, env: dict[str, str]) -> None:
    ensure_database(database_url)
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "collectstatic", "--noinput", "-v", "0")  # production pages need the manifest
    count = record_count(database_url) or 0
    if count >= records:
        print(f"using the {count:,} records already loaded")
        return
    print(f"loading {records - count:,} records (bench/triage_scale.py's traffic)")
    load(start=count, end=records, jobs=2, batch=1000, now=datetime.now(UTC))
    vacuum_analyze(database_url)


def fresh_copy(database_url: str) -> str:
    """A new copy of the loaded database for one run (``<name>_incident``), so that every
    run starts from the same records: a run's senders add tens of thousands, which would
    otherwise be the next run's (and the next benchmark's) to read and to vacuum."""
    import psycopg

    target = copy_url(database_url, "incident")
    copy_database(database_url, target, quiet=True)
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    return target


def stored_by_key(database_url: str, key: str) -> tuple[int, int]:
    """(ingest claims, failure records) stored for the owner of the API key `key`."""
    import psycopg

    lookup = key.split("_", 2)[1]  # td_<lookup id>_<secret>
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM triage_ingestitem WHERE owner = k.owner),"
            " (SELECT count(*) FROM triage_failurerecord r"
            "  JOIN triage_ingestbatch b ON b.id = r.batch_id WHERE b.owner = k.owner)"
            " FROM triage_apikey k WHERE k.lookup_id = %s",
            [lookup],
        ).fetchone()
    if row is None:
        raise SystemExit(f"no API key {lookup} in {database_url}")
    return int(row[0]), int(row[1])


def credentials() -> tuple[str, str]:
    """A signed-in viewer's session cookie and an ingest key (made in this process)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.test import Client

    from organisation import roles
    from triage.services import api_key_create

    user, _ = get_user_model().objects.get_or_create(username="incident-viewer")
    user.groups.add(roles.ensure_role_group("viewer"))
    browser = Client()
    browser.force_login(user)
    _, key = api_key_create(name=f"incident-{uuid.uuid4().hex[:8]}", scopes=["ingest"])
    connections.close_all()  # the database is copied for every run: no session may stay
    return browser.cookies["sessionid"].value, key


RECENT_SECONDS = 300  # --occurred now: how far back an incident's failures are stamped


def sender_batches(count: int, size: int, *, tag: str, occurred: str = "now") -> list[bytes]:
    """`count` batches of `size` new failure items (the scale traffic; Quality Lab's source
    is the desk's own, so a runtime's items say runtime). `occurred`: "now" stamps each in
    the last RECENT_SECONDS, as runtimes report an incident's failures while they happen;
    "month" keeps the scale traffic's month, a backfill that rewrites the counters of every
    hour and day the pages read."""
    now = datetime.now(UTC)
    traffic = Traffic.build(now)
    pick = random.Random(tag)
    batches = []
    for start in range(0, count * size, size):
        items = list(traffic.items(start, size, prefix=f"incident-{tag}"))
        for item in items:
            if item["body"]["source"] == "quality_lab":
                item["body"]["source"] = "runtime"
            # New calls, not the loaded ones again: the same numbers make the same bodies,
            # spans included, and the desk stores a call once by its span (a duplicate).
            item["body"]["trace_id"] = f"{pick.getrandbits(128):032x}"
            item["body"]["span_id"] = f"{pick.getrandbits(64):016x}"
            if occurred == "now":
                age = timedelta(seconds=pick.uniform(0, RECENT_SECONDS))
                item["body"]["occurred_at"] = (now - age).isoformat()
        batches += encode_batches(items, size)
    return batches


# --- load ------------------------------------------------------------------------------------


@dataclass
class Tally:
    pages_ms: list[float] = field(default_factory=list)  # pages answered 200 only
    path_ms: dict[str, list[float]] = field(default_factory=dict)  # the same pages by path
    page_status: Counter[int] = field(default_factory=Counter)  # every page, 0: no answer
    batch_ms: list[float] = field(default_factory=list)
    ingest_status: Counter[int] = field(default_factory=Counter)
    records: int = 0  # items accepted: the only ones a rate counts
    duplicates: int = 0  # each run's batches are new: a duplicate is the benchmark's own
    rejected: int = 0  # items refused in a 207 answer
    ran_out: bool = False  # the senders sent every batch built for the run before its end
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __getstate__(self) -> dict[str, object]:  # sent from the senders' process
        return {name: value for name, value in vars(self).items() if name != "lock"}

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state, lock=threading.Lock())

    def merge(self, other: Tally) -> None:
        with self.lock:
            self.pages_ms += other.pages_ms
            for path, times in other.path_ms.items():
                self.path_ms.setdefault(path, []).extend(times)
            self.page_status.update(other.page_status)
            self.batch_ms += other.batch_ms
            self.ingest_status.update(other.ingest_status)
            self.records += other.records
            self.duplicates += other.duplicates
            self.rejected += other.rejected
            self.ran_out = self.ran_out or other.ran_out


def _viewer(
    port: int,
    session: str,
    stop_at: float,
    tally: Tally,
    offset: int,
    think: float,
    pages: int | None = None,
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Cookie": f"sessionid={session}"}
    index = offset
    pause = random.Random(offset)
    if think:  # the viewers do not all start on the same instant
        time.sleep(pause.uniform(0, think))
    while time.monotonic() < stop_at and (pages is None or index < offset + pages):
        path = VIEWER_PATHS[index % len(VIEWER_PATHS)]
        index += 1
        started = time.perf_counter()
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            status = 0
        elapsed = (time.perf_counter() - started) * 1000
        with tally.lock:
            tally.page_status[status] += 1
            if status == 200:  # an error page is quick and wrong: never a timed page
                tally.pages_ms.append(elapsed)
                tally.path_ms.setdefault(path, []).append(elapsed)
        if think:  # reading the page before the next click: half to one and a half `think`
            time.sleep(min(pause.uniform(0.5, 1.5) * think, max(0.0, stop_at - time.monotonic())))
    conn.close()


def _sender(
    port: int,
    key: str,
    batches: list[bytes],
    stop_at: float,
    tally: Tally,
    limit: int | None = None,
    conn: http.client.HTTPConnection | None = None,
) -> None:
    """Post `batches` until `stop_at`, on `conn` when given (a connection already open)."""
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    sent = 0
    while time.monotonic() < stop_at and (limit is None or sent < limit):
        sent += 1
        with tally.lock:
            if not batches:
                tally.ran_out = True
                return
            body = batches.pop()
        started = time.perf_counter()
        wait = 0.0
        try:
            conn.request("POST", "/api/v1/ingest", body=body, headers=headers)
            response = conn.getresponse()
            answer = response.read()
            status = response.status
            stored = duplicates = rejected = 0
            if status in (200, 207):
                outcome = json.loads(answer)
                stored = int(outcome["accepted"])
                duplicates = int(outcome["duplicates"])
                rejected = int(outcome["rejected"]) + int(outcome.get("conflicts", 0))
            elif status in RETRIED:
                wait = float(response.getheader("Retry-After") or 0)
                with tally.lock:
                    batches.append(body)  # a refused batch is sent again, as a reporter does
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            status, stored, duplicates, rejected = 0, 0, 0, 0
        elapsed = (time.perf_counter() - started) * 1000
        with tally.lock:
            tally.ingest_status[status] += 1
            tally.records += stored
            tally.duplicates += duplicates
            tally.rejected += rejected
            if status in (200, 207):
                tally.batch_ms.append(elapsed)
        if wait:
            time.sleep(min(wait, max(0.0, stop_at - time.monotonic())))
    conn.close()


def _senders_process(
    conn: Connection,
    port: int,
    key: str,
    batches: list[bytes],
    stop_at: float,
    senders: int,
    limit: int | None,
) -> None:
    """`senders` sender threads until `stop_at` (or `limit` batches each); their tally goes
    back through `conn`."""
    tally = Tally()
    threads = [
        threading.Thread(target=_sender, args=(port, key, batches, stop_at, tally, limit))
        for _ in range(senders)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    conn.send(tally)
    conn.close()


def run_load(
    *,
    seconds: float,
    viewers: int,
    think: float,
    page_port: int | None,
    session: str,
    senders: int,
    ingest_port: int | None,
    key: str,
    batches: list[bytes],
    pages_each: int | None = None,
    batches_each: int | None = None,
) -> Tally:
    """Viewers and senders until `seconds` have passed, or until each viewer has read
    `pages_each` pages and each sender has posted `batches_each` batches.

    The senders run in a process of their own (forked, so it shares the batches already
    built): runtimes are other processes, on other machines. Sender threads beside the
    viewers' would hold this interpreter's lock while they frame 600 KB bodies and decode
    the answers, and a viewer's page would then be timed late by this process, not by the
    desk. The viewers stay threads of this process, which does nothing else meanwhile."""
    tally = Tally()
    stop_at = time.monotonic() + seconds  # CLOCK_MONOTONIC: the same in the child
    sending = None
    if ingest_port is not None:
        receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
        sending = multiprocessing.get_context("fork").Process(
            target=_senders_process,
            args=(send, ingest_port, key, batches, stop_at, senders, batches_each),
        )
        sending.start()
        send.close()
    threads = []
    if page_port is not None:
        threads = [
            threading.Thread(
                target=_viewer,
                args=(page_port, session, stop_at, tally, n, think),
                kwargs={"pages": pages_each},
            )
            for n in range(viewers)
        ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if sending is not None:
        with contextlib.suppress(EOFError):  # died before answering: its traceback is out
            tally.merge(receive.recv())
        sending.join()
        if sending.exitcode:
            raise SystemExit(f"the senders' process exited with {sending.exitcode}")
    return tally


def warm_up(
    *,
    page_port: int,
    session: str,
    workers: int,
    ingest_port: int | None,
    senders: int,
    key: str,
    batches: list[bytes],
) -> Tally:
    """Untimed: every page twice from `workers` viewers at once, and one batch from each
    of the `senders` when there is an ingest port, before the clock starts. A run starts
    on new gunicorn workers (their first requests import and compile what the rest reuse)
    and a new database copy, whose blocks are not in PostgreSQL's shared buffers yet:
    without this, each run's first pages are its slowest, and land in its p95 whatever
    the load."""
    tally = run_load(
        seconds=120,
        viewers=workers,
        think=0.0,
        page_port=page_port,
        session=session,
        senders=senders,
        ingest_port=ingest_port,
        key=key,
        batches=batches,
        pages_each=2 * len(VIEWER_PATHS),
        batches_each=1,
    )
    bad = {status: count for status, count in tally.page_status.items() if status != 200}
    if bad:  # checked before any clock starts: a desk that answers errors is not timed
        stop_broken(f"warming up: pages answered {bad}")
    return tally


# --- the runs ----------------------------------------------------------------------------------


# (name, label, shape, with viewers): the five runs of a round, in the order they run.
RUNS = (
    ("a", "(a) viewers alone", None, False),
    ("b", "(b) viewers + senders, one shared pool", "shared", True),
    ("c", "(c) viewers + senders, split pools", "split", True),
    ("c0", "(c0) split pools, ingest not niced", "split", True),
    ("d", "(d) senders alone, ingest pool", "alone", False),
)
JUDGED = ("a", "c", "d")  # the runs the targets are judged on


def p95(times: list[float]) -> float | None:
    ordered = sorted(times)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


@dataclass
class Row:
    name: str
    label: str
    tally: Tally
    seconds: float
    cpu: Cpu
    viewers: bool = True  # the run had viewers (its pages are judged)
    senders: bool = False  # the run had senders (its ingest is judged)
    warm_records: int = 0  # accepted by the warm-up, before the clock
    stored: tuple[int, int] | None = None  # (claims, records) of the senders' key, after

    def problems(self) -> list[str]:
        """What makes this run's figures wrong: any page but a 200 (never timed, never
        fast), any ingest answer but 200 or a wait-and-retry, duplicates or refused items
        (each run's batches are new and valid), senders that ran out of batches (the rate
        is then the benchmark's supply), nothing measured at all, and a database that does
        not hold exactly what the answers said was accepted."""
        found = []
        tally = self.tally
        if self.viewers:
            bad = {status: count for status, count in tally.page_status.items() if status != 200}
            if bad:
                found.append(f"pages answered {dict(sorted(bad.items()))} (0: no answer)")
            if not tally.pages_ms:
                found.append("no page answered 200")
        if self.senders:
            bad = {
                status: count
                for status, count in tally.ingest_status.items()
                if status not in (200, *RETRIED)
            }
            if bad:
                found.append(f"ingest answered {dict(sorted(bad.items()))} (0: no answer)")
            if tally.duplicates:
                found.append(f"{tally.duplicates:,} duplicates: the benchmark sent items twice")
            if tally.rejected:
                found.append(f"{tally.rejected:,} items refused")
            if tally.ran_out:
                found.append(
                    "the senders ran out of batches before the end: the rate is the "
                    "benchmark's supply, not the desk's"
                )
            if not tally.records:
                found.append("no item accepted")
            expected = self.warm_records + tally.records
            if self.stored is not None and self.stored != (expected, expected):
                claims, records = self.stored
                found.append(
                    f"the database holds {claims:,} claims and {records:,} records of the "
                    f"senders' key; the answers accepted {expected:,}"
                )
        return found

    @property
    def page_p50(self) -> float | None:
        return statistics.median(self.tally.pages_ms) if self.tally.pages_ms else None

    @property
    def page_p95(self) -> float | None:
        return p95(self.tally.pages_ms)

    @property
    def rate(self) -> float | None:
        return self.tally.records / self.seconds if self.tally.ingest_status else None


@dataclass
class Pools:
    web_port: int
    web_pid: int | None  # the gunicorn masters; no web pool in bench/crowded.py
    ingest_port: int | None = None
    ingest_pid: int | None = None


@contextlib.contextmanager
def pools(
    env: dict[str, str], web: ServerConfig, ingest: ServerConfig | None, nice: int, slots: int = 0
) -> Iterator[Pools]:
    """The web pool, and the ingest pool niced `nice` with `slots` batch slots (0: one per
    worker, as deployed) when `ingest` is given."""
    with serve("config.wsgi", web, {**env, "TRIAGE_POOL": "web"}) as (web_port, _, web_pid):
        if ingest is None:
            yield Pools(web_port, web_pid)
            return
        ingest_env = {**env, "TRIAGE_POOL": "ingest", "TRIAGE_INGEST_NICE": str(nice)}
        if slots:
            ingest_env["TRIAGE_INGEST_CONCURRENT_BATCHES"] = str(slots)
        with serve("config.wsgi", ingest, ingest_env) as (ingest_port, _, ingest_pid):
            yield Pools(web_port, web_pid, ingest_port, ingest_pid)


@dataclass
class Cpu:
    """Cores used over a timed run: the whole machine, each pool's gunicorn processes, and
    the run's PostgreSQL backends by priority (the ingest pool's are niced with it; on the
    shared pool, and with the ingest pool not niced, all of them count as normal)."""

    machine: float = 0.0
    web: float = 0.0
    ingest: float = 0.0
    backends: float = 0.0
    niced_backends: float = 0.0
    # The senders' connections each ingest worker held halfway through the run, most first:
    # a connection stays with the worker that accepted it, so [2, 0] is one worker serving
    # both senders (before the slots were the pool's, on that worker's one slot in turn).
    ingest_connections: list[int] = field(default_factory=list)


def connections_by_worker(port: int, master: int) -> list[int]:
    """Established TCP connections to `port` that each worker of `master` holds, most first
    (Linux's /proc; empty elsewhere)."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()  # sl local remote state ... inode (the 10th)
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    sockets.add(f"socket:[{fields[9]}]")
    counts = []
    for pid in children(master):
        held = 0
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):  # closed since the listing
                    held += os.readlink(f"/proc/{pid}/fd/{fd}") in sockets
        counts.append(held)
    return sorted(counts, reverse=True)


@contextlib.contextmanager
def cpu_meter(database_url: str, running: Pools, seconds: float) -> Iterator[Cpu]:
    """What the block's run of `seconds` used of the CPU, filled in when the block ends
    (Linux's /proc; zeros elsewhere). A process that ended during the run leaves its last
    ticks out. Halfway through, it notes which ingest worker holds which connection."""

    def snapshot() -> dict[int, tuple[str, int, int]]:
        """Each process of the run: (its part, user + system ticks so far, its nice)."""
        parts = {}
        if running.web_pid is not None:
            parts["web"] = [running.web_pid, *children(running.web_pid)]
        if running.ingest_pid is not None:
            parts["ingest"] = [running.ingest_pid, *children(running.ingest_pid)]
        parts["backends"] = database_backends(database_url)
        found = {}
        for part, pids in parts.items():
            for pid in pids:
                if (fields := proc_stat(pid)) is not None:
                    found[pid] = (part, int(fields[11]) + int(fields[12]), int(fields[16]))
        return found

    cpu = Cpu()
    halfway = None
    if running.ingest_port is not None and running.ingest_pid is not None:
        port, master = running.ingest_port, running.ingest_pid
        halfway = threading.Timer(
            seconds / 2, lambda: cpu.ingest_connections.extend(connections_by_worker(port, master))
        )
        halfway.start()
    before, (busy_before, total_before) = snapshot(), cpu_ticks()
    started = time.monotonic()
    try:
        yield cpu
    finally:
        if halfway is not None:
            halfway.cancel()
    after, (busy_after, total_after) = snapshot(), cpu_ticks()
    seconds = time.monotonic() - started
    hertz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    cpu.machine = (
        (os.cpu_count() or 1) * (busy_after - busy_before) / max(1, total_after - total_before)
    )
    for pid, (part, ticks, nice) in after.items():
        used = (ticks - before.get(pid, (part, 0, 0))[1]) / hertz / seconds
        if part == "backends" and nice > 0:  # the ingest pool's, niced with it
            part = "niced_backends"
        setattr(cpu, part, getattr(cpu, part) + used)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--viewers", type=int, default=4)
    parser.add_argument(
        "--think", type=float, default=1.0, help="a viewer's pause between pages (0: none)"
    )
    parser.add_argument("--senders", type=int, default=2)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--ingest-workers", type=int, default=2)
    parser.add_argument("--ingest-threads", type=int, default=16)  # as deployed
    parser.add_argument(
        "--ingest-slots", type=int, default=0, help="the ingest pool's batch slots (0: workers)"
    )
    parser.add_argument("--nice", type=int, default=10)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of all five runs; targets on the median"
    )
    parser.add_argument(
        "--runs",
        type=lambda value: value.split(","),
        default=[run[0] for run in RUNS],
        help="which runs of a, b, c, c0, d (comma-separated; the targets need a, c and d)",
    )
    parser.add_argument(
        "--occurred",
        choices=("now", "month"),
        default="now",
        help="the flood's failures: in the last minutes (an incident) or over the month",
    )
    parser.add_argument("--prepare-only", action="store_true")
    add_strict_argument(parser)
    args = parser.parse_args(argv)
    unknown = set(args.runs) - {run[0] for run in RUNS}
    if unknown or not set(JUDGED) <= set(args.runs):
        parser.error(f"--runs takes a, b, c, c0 and d, and needs a, c and d (got {args.runs})")

    env = app_env(args.database_url)
    os.environ.update(env)
    prepare(args.database_url, args.records, env)
    if args.prepare_only:
        return 0
    session, key = credentials()
    web = ServerConfig(args.web_workers, 1, args.viewers)
    ingest = ServerConfig(args.ingest_workers, args.ingest_threads, args.senders)
    # Enough new batches for the fastest senders: 2 of them reached 6,000 records/s here,
    # and ran out of the batches built for 6,000 (a run that runs out says so).
    per_run = max(20, math.ceil(args.seconds * 12_000 / args.batch))
    runs = [run for run in RUNS if run[0] in args.runs]
    rounds: list[list[Row]] = []
    for number in range(args.repeat):  # the rounds interleave: each meets the same hours
        rounds.append([])
        for name, label, shape, with_viewers in runs:
            nice = 0 if name == "c0" else args.nice
            run_env = {**env, "DATABASE_URL": fresh_copy(args.database_url)}
            print(f"round {number + 1}: {label}, {args.seconds:.0f} s", flush=True)
            split = shape in ("split", "alone")
            feed = []
            if shape is not None:  # built before the clock starts, new ids for every run
                feed = sender_batches(
                    per_run, args.batch, tag=uuid.uuid4().hex[:6], occurred=args.occurred
                )
            # The warm-up's batches are its own: the senders' process pops from its copy of
            # the list, so the run would otherwise send them again (as duplicates).
            warm_feed = [feed.pop() for _ in range(min(args.senders, len(feed)))]
            with pools(run_env, web, ingest if split else None, nice, args.ingest_slots) as running:
                web_port = running.web_port
                target = running.ingest_port if split else web_port
                warm = warm_up(
                    page_port=web_port,
                    session=session,
                    workers=args.web_workers,
                    ingest_port=target if shape is not None else None,
                    senders=args.senders,
                    key=key,
                    batches=warm_feed,
                )
                with cpu_meter(run_env["DATABASE_URL"], running, args.seconds) as cpu:
                    tally = run_load(
                        seconds=args.seconds,
                        viewers=args.viewers,
                        think=args.think,
                        page_port=web_port if (with_viewers or shape is None) else None,
                        session=session,
                        senders=args.senders,
                        ingest_port=target if shape is not None else None,
                        key=key,
                        batches=feed,
                    )
            senders = shape is not None
            rounds[-1].append(
                Row(
                    name,
                    label,
                    tally,
                    args.seconds,
                    cpu,
                    viewers=with_viewers or not senders,
                    senders=senders,
                    warm_records=warm.records,
                    # Checked now: the next run's copy replaces this one.
                    stored=stored_by_key(run_env["DATABASE_URL"], key) if senders else None,
                )
            )
    drop_database(copy_url(args.database_url, "incident"))
    return report(rounds, args)


def _think(think: float) -> str:
    return f"{think:g} s between pages" if think else "no pause between pages"


def _ms(value: float | None) -> str:
    return f"{value:.0f} ms" if value is not None else "-"


@dataclass
class Ratios:
    """A round's ratios; None where a run measured nothing (no baseline is ever 1)."""

    shared_pages: float | None  # page p95, one shared pool, over the viewers alone (run b)
    split_pages: float | None  # page p95, split pools, over the viewers alone
    split_ingest: float | None  # records/s, split pools, over the senders alone


def ratios(rows: list[Row]) -> Ratios:
    by_name = {row.name: row for row in rows}
    alone, split, senders_alone = (by_name[name] for name in JUDGED)
    shared = by_name.get("b")
    return Ratios(
        shared_pages=ratio(shared.page_p95, alone.page_p95) if shared else None,
        split_pages=ratio(split.page_p95, alone.page_p95),
        split_ingest=ratio(split.rate, senders_alone.rate),
    )


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "- (no baseline)"


def print_round(rows: list[Row]) -> None:
    header = f"{'run':<42}{'pages':>7}{'p50':>9}{'p95':>9}{'records/s':>11}  statuses"
    print(header)
    print("-" * (len(header) + 20))
    for row in rows:
        pages = dict(sorted(row.tally.page_status.items()))
        ingest = dict(sorted(row.tally.ingest_status.items()))
        statuses = (f"pages {pages} " if pages else "") + (f"ingest {ingest}" if ingest else "")
        checked = not row.problems()
        rate = f"{row.rate:,.0f}" if row.rate is not None and checked else "-"
        p50_text, p95_text = (_ms(row.page_p50), _ms(row.page_p95)) if checked else ("-", "-")
        if not checked:  # no figure of it counts: its problems print below the round
            statuses += " BROKEN"
        print(
            f"{row.label:<42}{len(row.tally.pages_ms):>7}{p50_text:>9}{p95_text:>9}{rate:>11}"
            f"  {statuses}"
        )
    for row in rows:  # which pages the flood slows: each path's p50 / p95
        if row.tally.path_ms:
            paths = ", ".join(
                f"{path} {statistics.median(times):.0f}/{p95(times):.0f}"
                for path, times in sorted(row.tally.path_ms.items())
            )
            print(f"  ({row.name}) by page, p50/p95 ms: {paths}")
    for row in rows:  # who had the cores
        cpu = row.cpu
        held = " + ".join(map(str, cpu.ingest_connections))
        print(
            f"  ({row.name}) cores used: web pool {cpu.web:.2f} + backends {cpu.backends:.2f}, "
            f"ingest pool {cpu.ingest:.2f} + niced backends {cpu.niced_backends:.2f}; "
            f"the machine {cpu.machine:.2f} of {os.cpu_count()}"
            + (f"; senders' connections by ingest worker {held}" if held else "")
        )


def print_ratios(rows: list[Row], *, shared: bool) -> None:
    """The round's ratios, from runs that passed their checks (the shared pool's when
    `shared`: run b passed too)."""
    found = ratios(rows)
    shared_pages = f"shared pool {_x(found.shared_pages)}, " if shared else ""
    print(
        f"page p95 against the viewers alone: {shared_pages}split pools {_x(found.split_pages)}; "
        f"split pools' ingest {_x(found.split_ingest)} its rate alone"
    )


def report(rounds: list[list[Row]], args: argparse.Namespace) -> int:
    when = (
        f"in the last {RECENT_SECONDS // 60} minutes"
        if args.occurred == "now"
        else "over the month"
    )
    print(
        f"\n{args.viewers} viewers ({_think(args.think)}), {args.senders} senders of "
        f"{args.batch}-item batches, "
        f"{args.seconds:.0f} s each; web pool {args.web_workers} sync workers, ingest pool "
        f"{args.ingest_workers} gthread workers x {args.ingest_threads} threads, "
        f"{args.ingest_slots or args.ingest_workers} batch slots; the flood's failures {when}"
    )
    verdicts = Verdicts()
    for number, rows in enumerate(rounds, 1):
        print(f"\nround {number} of {len(rounds)}")
        print_round(rows)
        for row in rows:
            verdicts.check(row.name, [f"round {number}: {problem}" for problem in row.problems()])
        if verdicts.passed(*JUDGED):
            print_ratios(rows, shared=verdicts.passed("b"))
    of = f"the median of {len(rounds)} rounds" if len(rounds) > 1 else "one round"
    if verdicts.passed("a", "b"):
        shared = [r.shared_pages for r in (ratios(rows) for rows in rounds)]
        if all(shared):
            median = statistics.median(value or 0.0 for value in shared)
            print(f"\n{of}: shared pool page p95 {median:.2f}x the viewers alone")

    def judge(pick: str, target: float, text: str, *, at_most: bool) -> tuple[bool, str]:
        values = [getattr(ratios(rows), pick) for rows in rounds]
        if not all(values):
            return False, f"split pools: {text}: a round's baseline measured nothing"
        found = statistics.median(values)
        met = found <= target if at_most else found >= target
        sign = "<=" if at_most else ">="
        return met, f"split pools: {text} {found:.2f}x, {of} (target {sign} {target}x)"

    verdicts.target(
        "split pools: page p95 against the viewers alone",
        needs=JUDGED,
        judge=lambda: judge(
            "split_pages", TARGET_PAGE_RATIO, "page p95 against the viewers alone", at_most=True
        ),
    )
    verdicts.target(
        "split pools: ingest against its rate alone",
        needs=JUDGED,
        judge=lambda: judge(
            "split_ingest", TARGET_INGEST_RATIO, "ingest against its rate alone", at_most=False
        ),
    )
    # The backfill's shape keeps a result of its own beside the incident's.
    name = "incident" if args.occurred == "now" else "incident-month"
    return verdicts.exit_status(strict=args.strict, results_dir=args.results_dir, bench=name)


if __name__ == "__main__":
    sys.exit(main())
