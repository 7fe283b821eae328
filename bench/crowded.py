"""Does a sender whose connection lands on a busy worker still get the pool's batch slots?

    .venv/bin/python bench/crowded.py [--records 1000000] [--seconds 30] [--senders 2]
        [--batch 500] [--ingest-workers 2] [--ingest-threads 16] [--slots N] [--repeat 3]
        [--database-url URL] [--strict]

A connection stays with the gunicorn worker that accepted it, and a gthread worker accepts
whatever its batch slots hold, so a few senders' keep-alive connections often all land on
one worker of the ingest pool (checked with ``ss``: two clients' connections on one worker
in 5 of 6 tries). This measures the ingest pool in the two placements, each made on
purpose rather than left to chance, on the same pool shape:

- **spread**: the pool starts with one worker; the first sender connects (and posts one
  batch) to it; ``SIGTTIN`` makes the master add the other workers; each other sender
  connects while every worker but one new one is paused (``SIGSTOP``, then ``SIGCONT``),
  so each worker holds at most one connection.
- **crowded**: every sender connects to the pool's one worker before ``SIGTTIN`` adds the
  others, which then hold none.

Then the senders post 500-item batches of new failure records as fast as the answers come
(waiting ``Retry-After`` when told to) for ``--seconds``, from threads of this process,
which does nothing else. Each run uses a fresh copy of ``bench/incident.py``'s
million-record database (loaded as that benchmark loads it), and prints the records/s,
the ingest status codes, which worker held which connection halfway through, and the
cores the pool and its PostgreSQL backends used. ``--repeat`` rounds of both, in turns.
The target: crowded at least 0.8x of spread (with a slot per process instead of per
pool, a crowded pool ingests on one worker's one slot: about half).

Each run is checked as ``bench/incident.py`` checks its senders' runs before a rate counts:
accepted items only (never duplicates or refused ones), answers 200 or a wait-and-retry,
batches to the end, and a database copy holding exactly what was accepted (the placing
batches included). A run that fails is BROKEN: no rate or ratio from it, the target MISS,
exit 2. A missed target exits 1 with ``--strict``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.incident import (  # noqa: E402
    Cpu,
    Pools,
    Row,
    Tally,
    _sender,
    cpu_meter,
    credentials,
    fresh_copy,
    prepare,
    sender_batches,
    stored_by_key,
)
from bench.ingest import ServerConfig, app_env, children, serve  # noqa: E402
from bench.triage_scale import DEFAULT_DATABASE_URL, copy_url, drop_database  # noqa: E402
from bench.verdict import Verdicts, add_strict_argument, ratio, stop_broken  # noqa: E402

TARGET_RATIO = 0.8


def _connect(port: int, key: str, batch: bytes, placed: Tally) -> http.client.HTTPConnection:
    """A keep-alive connection that has posted one batch (so a worker has accepted it); the
    batch's items count in `placed`, untimed, and must all be accepted."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request(
        "POST",
        "/api/v1/ingest",
        body=batch,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    answer = response.read()
    if response.status != 200:
        stop_broken(f"placing a connection: the pool answered {response.status}")
    outcome = json.loads(answer)
    if outcome["accepted"] != len(json.loads(batch)["items"]):
        stop_broken(f"placing a connection: not every item was accepted: {outcome}")
    placed.records += outcome["accepted"]
    return conn


def _grown(master: int, workers: int) -> list[int]:
    """The master's workers once it has `workers` of them, each booted (its threads up)."""
    deadline = time.monotonic() + 60
    while len(found := children(master)) < workers:
        if time.monotonic() > deadline:
            raise SystemExit(f"the pool did not grow to {workers} workers")
        time.sleep(0.1)
    time.sleep(3)  # a new worker loads the app before it accepts
    return found


def run(*, placement: str, env: dict[str, str], args: argparse.Namespace, key: str) -> Row:
    """One run: its tally, the pool's cores and which worker held which connection halfway
    (``row.cpu``), and what the database holds of the senders' key afterwards."""
    batches = sender_batches(
        max(20, int(args.seconds * 12_000 / args.batch)),
        args.batch,
        tag=uuid.uuid4().hex[:6],
        occurred="month",  # as measured on 2026-12-04
    )
    env = {**env, "DATABASE_URL": fresh_copy(args.database_url), "TRIAGE_POOL": "ingest"}
    one = ServerConfig(1, args.ingest_threads, args.senders)
    slots = {"TRIAGE_INGEST_CONCURRENT_BATCHES": str(args.slots or args.ingest_workers)}
    with serve("config.wsgi", one, {**env, **slots}) as (port, _, master):
        first = children(master)[0]
        placed = Tally()
        conns = [_connect(port, key, batches.pop(), placed)]
        if placement == "crowded":  # every sender on the one worker there is
            conns += [_connect(port, key, batches.pop(), placed) for _ in range(args.senders - 1)]
        for _ in range(args.ingest_workers - 1):
            os.kill(master, signal.SIGTTIN)
        workers = _grown(master, args.ingest_workers)
        if placement == "spread":  # each sender on a new worker: the others paused meanwhile
            new = [pid for pid in workers if pid != first]
            for index in range(args.senders - 1):
                paused = [pid for pid in workers if pid != new[index]]
                for pid in paused:
                    os.kill(pid, signal.SIGSTOP)
                try:
                    conns.append(_connect(port, key, batches.pop(), placed))
                finally:
                    for pid in paused:
                        os.kill(pid, signal.SIGCONT)
        tally = Tally()
        stop_at = time.monotonic() + args.seconds
        running = Pools(web_port=0, web_pid=None, ingest_port=port, ingest_pid=master)
        with cpu_meter(env["DATABASE_URL"], running, args.seconds) as cpu:
            threads = [
                threading.Thread(target=_sender, args=(port, key, batches, stop_at, tally),
                                 kwargs={"conn": conn})
                for conn in conns
            ]  # fmt: skip
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    return Row(
        placement,
        placement,
        tally,
        args.seconds,
        cpu,
        viewers=False,
        senders=True,
        warm_records=placed.records,
        stored=stored_by_key(env["DATABASE_URL"], key),
    )


def cores(cpu: Cpu) -> float:
    """The ingest pool's and its PostgreSQL backends' cores."""
    return cpu.ingest + cpu.niced_backends + cpu.backends


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--senders", type=int, default=2)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--ingest-workers", type=int, default=2)
    parser.add_argument("--ingest-threads", type=int, default=16)
    parser.add_argument(
        "--slots", type=int, default=0, help="TRIAGE_INGEST_CONCURRENT_BATCHES (default: workers)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    add_strict_argument(parser)
    args = parser.parse_args(argv)
    if not 2 <= args.senders <= args.ingest_workers:
        parser.error("--senders must be 2 or more, and no more than --ingest-workers")

    env = app_env(args.database_url)
    os.environ.update(env)
    prepare(args.database_url, args.records, env)
    _, key = credentials()
    verdicts = Verdicts()
    ratios: list[float] = []
    for number in range(1, args.repeat + 1):
        rows = {}
        for placement in ("spread", "crowded"):
            print(f"round {number}: {placement}, {args.seconds:.0f} s", flush=True)
            row = rows[placement] = run(placement=placement, env=env, args=args, key=key)
            statuses = dict(sorted(row.tally.ingest_status.items()))
            held = " + ".join(map(str, row.cpu.ingest_connections)) or "?"
            checked = verdicts.check(
                placement, [f"round {number}: {problem}" for problem in row.problems()]
            )
            # Accepted items only, from a run that passed its check.
            rate = f"{row.rate or 0:>7,.0f} records/s" if checked else "      - records/s"
            print(
                f"  {placement:<8} {rate}  ingest {statuses}; connections by worker {held}; "
                f"pool + its backends {cores(row.cpu):.2f} cores",
                flush=True,
            )
        found = ratio(rows["crowded"].rate, rows["spread"].rate)
        if verdicts.passed("spread", "crowded") and found is not None:
            ratios.append(found)
            print(f"  crowded against spread: {found:.2f}x", flush=True)
    drop_database(copy_url(args.database_url, "incident"))

    def judge() -> tuple[bool, str]:
        found = statistics.median(ratios)
        return found >= TARGET_RATIO, (
            f"crowded {found:.2f}x of spread, the median of {len(ratios)} rounds "
            f"(target >= {TARGET_RATIO}x)"
        )

    verdicts.target("crowded against spread", needs=["spread", "crowded"], judge=judge)
    return verdicts.exit_status(strict=args.strict, results_dir=args.results_dir, bench="crowded")


if __name__ == "__main__":
    sys.exit(main())
