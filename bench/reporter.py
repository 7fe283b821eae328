"""The runtime reporter (triage_desk_client.Reporter): its cost in the caller's thread, and
how fast it delivers to a local desk against bench/ingest.py's direct HTTP sender.

    .venv/bin/python bench/reporter.py [--records 20000] [--calls 20000] [--repeat 2]
        [--database-url URL] [--strict]

What one run does:

1. Sets up the database as bench/ingest.py does (default
   ``postgres://postgres@127.0.0.1:5432/triage_bench_reporter``: migrated, emptied, the API
   key ``bench`` and a few tool policies) and starts gunicorn as it does (2 sync workers,
   production settings). The items are bench/ingest.py's realistic ~1 KB failure records.
2. **Cost in the caller's thread**: ``--calls`` calls of ``reporter.failure(body)``, each
   timed with ``perf_counter_ns``: with the desk up (the sender thread delivering meanwhile,
   so its work competes for the interpreter) and with the desk down (nothing listens on its
   port: the sender backs off and the spool grows). p50, p99 and the worst call, in
   microseconds; target p99 under 50 µs either way. The benchmark's own items are frozen
   out of the garbage collector first (``gc.freeze()``), so its pauses are not theirs.
   In the same loop, call by call (one before, one after, in turns, so both meet the same
   moments of the machine), it times the **floor**: what any client that spools must do
   before returning, for the same body: the canonical JSON encode with the reporter's
   encoder, the CRC-32 frame and one ``os.write`` to a temporary file. Its p50 and p99
   print beside report()'s, with report()'s p99 over the floor's: how far the reporter is
   from what the machine allows, whether or not the machine allows 50 µs. (report() does
   more than the floor: the default id's SHA-256, the checks, the lock.)
3. **Delivery rate**: ``--records`` items from this process to the desk, from the first
   ``report()`` to ``flush()`` returning (every item answered), against bench/ingest.py's
   ``post_all`` sending the same items, already encoded in batches of 500, over 2
   connections (its default, like the reporter's ``max_in_flight``) and over 1. Each path
   starts from empty tables, and the database must then hold exactly the sent records.
   Target: the reporter at least 0.8x the direct sender. ``--repeat N`` interleaves N
   rounds and compares the best of each path.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from triage_desk_client import Reporter  # noqa: E402

# The floor encodes with the reporter's own encoder, so it follows its settings.
from triage_desk_client.reporter import _ENCODER  # noqa: E402
from triage_desk_client.spool import frame  # noqa: E402

from bench.ingest import (  # noqa: E402
    FAST_APP,
    ServerConfig,
    app_env,
    build_items,
    check_responses,
    empty_tables,
    encode_batches,
    free_port,
    post_all,
    prepare_database,
    serve,
    stored_counts,
)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/triage_bench_reporter"
BATCH = 500
TARGET_P99_US = 50.0
TARGET_RATIO = 0.8


@dataclass
class CallerCost:
    label: str
    calls: int
    p50_us: float
    p99_us: float
    worst_us: float
    floor_p50_us: float  # encode + frame + os.write, timed in the same loop
    floor_p99_us: float

    @property
    def ratio(self) -> float:
        """report()'s p99 over the floor's."""
        return self.p99_us / self.floor_p99_us if self.floor_p99_us else 0.0


@dataclass
class Delivery:
    path: str
    records: int
    seconds: float
    consistent: bool

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def caller_cost(label: str, url: str, key: str, items: list[dict[str, Any]]) -> CallerCost:
    # The items are this benchmark's data, not the reporter's: out of the collector's full
    # collections, whose pauses would otherwise be the cost of walking them.
    gc.collect()
    gc.freeze()
    spool = tempfile.mkdtemp(prefix="reporter-bench-")
    reporter = Reporter(url, key, spool_dir=spool, batch_size=BATCH, max_backoff=2.0)
    floor_fd, floor_path = tempfile.mkstemp(prefix="reporter-floor-")
    clock = time.perf_counter_ns

    def timed_report(body: dict[str, Any]) -> int:
        started = clock()
        reporter.failure(body)  # the default id: digest of the body
        return clock() - started

    def timed_floor(body: dict[str, Any]) -> int:
        started = clock()
        os.write(floor_fd, frame(_ENCODER.encode(body).encode()))
        return clock() - started

    timings: list[int] = []
    floor: list[int] = []
    try:
        for number, item in enumerate(items):
            # Each goes first every other call: the second to encode a body finds it warm in
            # the CPU caches.
            if number % 2:
                timings.append(timed_report(item["body"]))
                floor.append(timed_floor(item["body"]))
            else:
                floor.append(timed_floor(item["body"]))
                timings.append(timed_report(item["body"]))
        reporter.flush(120 if label == "desk up" else 0)
    finally:
        reporter.close(timeout=0)
        shutil.rmtree(spool, ignore_errors=True)
        os.close(floor_fd)
        os.unlink(floor_path)
        gc.unfreeze()
    timings.sort()
    floor.sort()
    return CallerCost(
        label=label,
        calls=len(timings),
        p50_us=statistics.median(timings) / 1000,
        p99_us=_p99(timings) / 1000,
        worst_us=timings[-1] / 1000,
        floor_p50_us=statistics.median(floor) / 1000,
        floor_p99_us=_p99(floor) / 1000,
    )


def _p99(sorted_timings: list[int]) -> int:
    return sorted_timings[int(len(sorted_timings) * 0.99)]


def deliver_with_reporter(port: int, key: str, items: list[dict[str, Any]]) -> float:
    spool = tempfile.mkdtemp(prefix="reporter-bench-")
    reporter = Reporter(f"http://127.0.0.1:{port}", key, spool_dir=spool, batch_size=BATCH)
    try:
        started = time.perf_counter()
        for item in items:
            reporter.failure(item["body"], id=item["id"])
        if not reporter.flush(600):
            raise SystemExit(f"the reporter did not deliver: {reporter.stats()}")
        seconds = time.perf_counter() - started
        stats = reporter.stats()
        if stats["sent"] != len(items):
            raise SystemExit(f"the reporter's answers were not all accepted: {stats}")
    finally:
        reporter.close(timeout=0)
        shutil.rmtree(spool, ignore_errors=True)
    return seconds


def deliver_directly(port: int, key: str, items: list[dict[str, Any]], connections: int) -> float:
    bodies = encode_batches(items, BATCH)
    seconds, _, _, _, results = post_all(port, key, bodies, connections)
    sizes = [min(BATCH, len(items) - start) for start in range(0, len(items), BATCH)]
    errors = check_responses(results, sizes)
    if errors:
        raise SystemExit("direct sender: " + "; ".join(errors[:3]))
    return seconds


def consistent(database_url: str, records: int) -> bool:
    counts = stored_counts(database_url)
    return counts["records"] == counts["claims"] == counts["group_sum"] == records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--records", type=int, default=20_000, help="items per delivery run")
    parser.add_argument("--calls", type=int, default=20_000, help="timed report() calls")
    parser.add_argument("--repeat", type=int, default=2, help="rounds; the best counts")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    env = app_env(args.database_url)
    key = prepare_database(args.database_url, env)
    costs: list[CallerCost] = []
    deliveries: list[Delivery] = []
    with serve(FAST_APP, ServerConfig(2, 1, 2), env) as (port, _, _):
        for round_number in range(args.repeat):
            prefix = f"r{round_number}"
            empty_tables(args.database_url)
            up = build_items(args.calls, prefix=f"{prefix}-up", seed=11)
            costs.append(caller_cost("desk up", f"http://127.0.0.1:{port}", key, up))
            down = build_items(args.calls, prefix=f"{prefix}-down", seed=12)
            costs.append(caller_cost("desk down", f"http://127.0.0.1:{free_port()}", key, down))
            for path in ("direct, 2 connections", "direct, 1 connection", "reporter"):
                empty_tables(args.database_url)
                items = build_items(args.records, prefix=f"{prefix}-{path[:8]}", seed=7)
                if path == "reporter":
                    seconds = deliver_with_reporter(port, key, items)
                else:
                    seconds = deliver_directly(port, key, items, int(path.split()[1]))
                deliveries.append(
                    Delivery(path, len(items), seconds, consistent(args.database_url, len(items)))
                )

    print(f"\nCaller's thread, {args.calls} report() calls of ~1 KB failure records")
    print("(floor: encode + frame + os.write of the same body, timed in turns with them):")
    print(
        f"{'desk':<12}{'p50 us':>9}{'p99 us':>9}{'worst us':>10}"
        f"{'floor p50':>11}{'floor p99':>11}{'p99 / floor':>13}"
    )
    for cost in costs:
        print(
            f"{cost.label:<12}{cost.p50_us:>9.1f}{cost.p99_us:>9.1f}{cost.worst_us:>10.0f}"
            f"{cost.floor_p50_us:>11.1f}{cost.floor_p99_us:>11.1f}{cost.ratio:>12.2f}x"
        )
    print(f"\nDelivery to gunicorn (2 sync workers) + PostgreSQL, {args.records} records:")
    print(f"{'path':<24}{'seconds':>9}{'records/s':>11}  db check")
    for row in deliveries:
        check = "ok" if row.consistent else "MISMATCH"
        print(f"{row.path:<24}{row.seconds:>9.2f}{row.rate:>11.0f}  {check}")

    def best(path: str) -> Delivery:
        return max((row for row in deliveries if row.path == path), key=lambda row: row.rate)

    reporter, direct = best("reporter"), best("direct, 2 connections")
    single = best("direct, 1 connection")
    best_cost = {
        label: min((c for c in costs if c.label == label), key=lambda c: c.p99_us)
        for label in ("desk up", "desk down")
    }
    best_p99 = {label: cost.p99_us for label, cost in best_cost.items()}
    ratio = reporter.rate / direct.rate if direct.rate else 0.0
    ok_cost = all(value < TARGET_P99_US for value in best_p99.values())
    ok_rate = ratio >= TARGET_RATIO and all(row.consistent for row in deliveries)
    print(
        f"\nbest of {args.repeat}: reporter / direct (2 connections) = {ratio:.2f}x, "
        f"reporter / direct (1 connection) = {reporter.rate / single.rate:.2f}x"
    )
    print(
        "check: "
        + "; ".join(
            f"p99 {label} {value:.1f} us < {TARGET_P99_US:.0f}: "
            + ("PASS" if value < TARGET_P99_US else "MISS")
            for label, value in best_p99.items()
        )
        + f"; delivery {ratio:.2f}x >= {TARGET_RATIO}x: {'PASS' if ok_rate else 'MISS'}"
    )
    print(
        "floor, in the same runs: "
        + "; ".join(
            f"{label} p99 {cost.floor_p99_us:.1f} us, report() p99 / floor p99 = {cost.ratio:.2f}x"
            for label, cost in best_cost.items()
        )
    )
    return 1 if args.strict and not (ok_cost and ok_rate) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
