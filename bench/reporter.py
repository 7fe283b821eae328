"""The runtime reporter (triage_desk_client.Reporter): its cost in the caller's thread, and
how fast it delivers to a local desk against bench/ingest.py's direct HTTP sender.

    .venv/bin/python bench/reporter.py [--records 20000] [--calls 20000] [--repeat 2]
        [--durability append|batched|both] [--database-url URL] [--json OUT] [--strict]

What one run does:

1. Sets up the database as bench/ingest.py does (default
   ``postgres://postgres@127.0.0.1:5432/triage_bench_reporter``: migrated, emptied, the API
   key ``bench`` and a few tool policies) and starts gunicorn as it does (2 sync workers,
   production settings). The items are bench/ingest.py's realistic ~1 KB failure records.
2. **Cost in the caller's thread**: ``--calls`` calls of ``reporter.failure(body)``, each
   timed with ``perf_counter_ns``: with the desk up (the sender thread delivering meanwhile,
   so its work competes for the interpreter) and with the desk down (nothing listens on its
   port: the sender backs off and the spool grows), for each ``durability`` of the
   reporter (``append``, the default, as before, and ``batched``; ``--durability`` picks
   one). p50, p99, p99.9 and the worst call, in microseconds; targets: p99 under 50 µs and
   the worst call under 5 ms, either way. Each run must also have lost nothing: with the
   desk up every call delivered and answered, with it down every call in the spool files
   after ``close()``; a run that fails this is BROKEN (exit 2) and no figure of its mode
   is judged. For every call over 1 ms it also notes whether the operating system switched
   the caller's thread out meanwhile (an involuntary context switch) and, for the worst
   call, the thread's own CPU time: a worst call of milliseconds with microseconds of CPU
   waited for a core, not for the reporter. The benchmark's own items are frozen
   out of the garbage collector first (``gc.freeze()``), so its pauses are not theirs.
   In the same loop, call by call (one before, one after, in turns, so both meet the same
   moments of the machine), it times the **floor**: what any client that spools must do
   before returning, for the same body: the canonical JSON encode with the reporter's
   encoder, the CRC-32 frame and one ``os.write`` to a temporary file. Its p50 and p99
   print beside report()'s, with report()'s p99 over the floor's: how far the reporter is
   from what the machine allows, whether or not the machine allows 50 µs. (report() does
   more than the floor: the default id's SHA-256, the checks, the lock.)
3. **Delivery rate**: ``--records`` items from this process to the desk, from the first
   ``report()`` to ``flush()`` returning (every item answered), for each durability,
   against bench/ingest.py's
   ``post_all`` sending the same items, already encoded in batches of 500, over 2
   connections (its default, like the reporter's ``max_in_flight``) and over 1. Each path
   starts from empty tables, and the database must then hold exactly the sent records.
   Target: the reporter at least 0.8x the direct sender. ``--repeat N`` interleaves N
   rounds and compares the best of each path. A path whose answers or stored rows are
   wrong is BROKEN: no ratio is printed from it and the run exits 2.

``--json OUT`` also writes every row and the verdicts to OUT, for the benchmarks page. The
machine's load average at the start and the end prints beside the figures (and goes into
the JSON): the worst call is mostly the machine's other work, so it says how busy it was.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from triage_desk_client import Reporter  # noqa: E402

# The floor encodes with the reporter's own encoder, so it follows its settings.
from triage_desk_client.reporter import _ENCODER, DURABILITIES  # noqa: E402
from triage_desk_client.spool import SEGMENT_SUFFIX, frame, unframe  # noqa: E402

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
from bench.verdict import Verdicts, add_strict_argument  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/triage_bench_reporter"
BATCH = 500
TARGET_P99_US = 50.0
TARGET_WORST_US = 5000.0
TARGET_RATIO = 0.8
DESKS = ("desk up", "desk down")
SLOW_US = 1000  # calls over 1 ms are counted, with what the OS did meanwhile


class Broken(Exception):
    """A measured path lost, doubled or refused items: its figures measure nothing."""


@dataclass
class CallerCost:
    label: str
    calls: int
    p50_us: float
    p99_us: float
    worst_us: float
    floor_p50_us: float  # encode + frame + os.write, timed in the same loop
    floor_p99_us: float
    durability: str = "append"
    p999_us: float = 0.0
    # Calls over SLOW_US, and of those, the ones during which the operating system switched
    # the caller's thread out (an involuntary context switch: it waited for a core, not for
    # the reporter); the worst call's own CPU time (far below its length: it waited).
    slow_calls: int = 0
    slow_preempted: int = 0
    worst_cpu_us: float = 0.0

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


def caller_cost(
    label: str, url: str, key: str, items: list[dict[str, Any]], durability: str = "append"
) -> CallerCost:
    # The items are this benchmark's data, not the reporter's: out of the collector's full
    # collections, whose pauses would otherwise be the cost of walking them.
    gc.collect()
    gc.freeze()
    spool = tempfile.mkdtemp(prefix="reporter-bench-")
    reporter = Reporter(
        url, key, spool_dir=spool, batch_size=BATCH, max_backoff=2.0, durability=durability
    )
    floor_fd, floor_path = tempfile.mkstemp(prefix="reporter-floor-")
    clock = time.perf_counter_ns
    cpu_clock = time.thread_time_ns
    slow: list[tuple[int, int, int]] = []  # (length, CPU time, involuntary switches)

    def timed_report(body: dict[str, Any]) -> int:
        switches = _involuntary_switches()  # read outside the timed call
        cpu_started = cpu_clock()
        started = clock()
        reporter.failure(body)  # the default id: digest of the body
        took = clock() - started
        cpu = cpu_clock() - cpu_started
        if took > SLOW_US * 1000:
            slow.append((took, cpu, _involuntary_switches() - switches))
        return took

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
        if label == "desk up":
            # Every call must have reached the desk: a reporter that lost or refused items
            # would be fast for the wrong reason.
            delivered = reporter.flush(120)
            stats = reporter.stats()
            if not delivered or stats["sent"] + stats["duplicate"] != len(items):
                raise Broken(f"{durability}, desk up: not every call was delivered: {stats}")
        reporter.close(timeout=0)
        if label == "desk down":
            # close() writes out the batched mode's queue: every call must be on disk.
            spooled = records_in(spool)
            if spooled != len(items):
                raise Broken(
                    f"{durability}, desk down: {spooled} of {len(items)} calls in the spool"
                )
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
        durability=durability,
        p999_us=_quantile(timings, 0.999) / 1000,
        slow_calls=len(slow),
        slow_preempted=sum(1 for _, _, switches in slow if switches),
        worst_cpu_us=max(slow)[1] / 1000 if slow else 0.0,
    )


def _involuntary_switches() -> int:
    """The calling thread's involuntary context switches so far (Linux; 0 elsewhere)."""
    who = getattr(resource, "RUSAGE_THREAD", None)
    return resource.getrusage(who).ru_nivcsw if who is not None else 0


def records_in(spool: str) -> int:
    """Intact records in the spool's segment files."""
    count = 0
    for name in os.listdir(spool):
        if name.endswith(SEGMENT_SUFFIX):
            with open(os.path.join(spool, name), "rb") as segment:
                count += sum(1 for line in segment if unframe(line.rstrip(b"\n")) is not None)
    return count


def _p99(sorted_timings: list[int]) -> int:
    return _quantile(sorted_timings, 0.99)


def _quantile(sorted_timings: list[int], share: float) -> int:
    return sorted_timings[min(len(sorted_timings) - 1, int(len(sorted_timings) * share))]


def deliver_with_reporter(
    port: int, key: str, items: list[dict[str, Any]], durability: str = "append"
) -> float:
    spool = tempfile.mkdtemp(prefix="reporter-bench-")
    reporter = Reporter(
        f"http://127.0.0.1:{port}", key, spool_dir=spool, batch_size=BATCH, durability=durability
    )
    try:
        started = time.perf_counter()
        for item in items:
            reporter.failure(item["body"], id=item["id"])
        if not reporter.flush(600):
            raise Broken(f"reporter ({durability}) did not deliver: {reporter.stats()}")
        seconds = time.perf_counter() - started
        stats = reporter.stats()
        if stats["sent"] != len(items):
            raise Broken(f"reporter ({durability}): not every answer was accepted: {stats}")
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
        raise Broken("direct sender: " + "; ".join(errors[:3]))
    return seconds


def consistent(database_url: str, records: int) -> bool:
    counts = stored_counts(database_url)
    return counts["records"] == counts["claims"] == counts["group_sum"] == records


def reporter_path(durability: str) -> str:
    # "reporter" alone is the default durability's row, named as before.
    return "reporter" if durability == "append" else f"reporter, {durability}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--records", type=int, default=20_000, help="items per delivery run")
    parser.add_argument("--calls", type=int, default=20_000, help="timed report() calls")
    parser.add_argument("--repeat", type=int, default=2, help="rounds; the best counts")
    parser.add_argument(
        "--durability",
        choices=(*DURABILITIES, "both"),
        default="both",
        help="the reporter's durability to measure (default: both, side by side)",
    )
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--json", metavar="OUT", help="also write the results to OUT as JSON")
    add_strict_argument(parser)
    args = parser.parse_args()
    modes = list(DURABILITIES) if args.durability == "both" else [args.durability]

    env = app_env(args.database_url)
    key = prepare_database(args.database_url, env)
    # The machine's load beside the figures: the caller's worst call is mostly the operating
    # system running other work while it waits, so figures of a busy machine say so.
    load: dict[str, list[float]] = {"start": list(os.getloadavg())}
    costs: list[CallerCost] = []
    deliveries: list[Delivery] = []
    broken: list[str] = []
    paths = ["direct, 2 connections", "direct, 1 connection", *map(reporter_path, modes)]
    with serve(FAST_APP, ServerConfig(2, 1, 2), env) as (port, _, _):
        for round_number in range(args.repeat):
            prefix = f"r{round_number}"
            for mode in modes:  # interleaved, so both modes meet the same machine noise
                empty_tables(args.database_url)
                up = build_items(args.calls, prefix=f"{prefix}-{mode}-up", seed=11)
                down = build_items(args.calls, prefix=f"{prefix}-{mode}-down", seed=12)
                for label, url, items in (
                    ("desk up", f"http://127.0.0.1:{port}", up),
                    ("desk down", f"http://127.0.0.1:{free_port()}", down),
                ):
                    try:
                        costs.append(caller_cost(label, url, key, items, mode))
                    except Broken as exc:
                        print(f"BROKEN: {exc}", file=sys.stderr)
                        broken.append(f"{mode}, {label}")
            for path in paths:
                empty_tables(args.database_url)
                items = build_items(args.records, prefix=f"{prefix}-{path[:12]}", seed=7)
                try:
                    if path.startswith("reporter"):
                        mode = path.partition(", ")[2] or "append"
                        seconds = deliver_with_reporter(port, key, items, mode)
                    else:
                        seconds = deliver_directly(port, key, items, int(path.split()[1]))
                except Broken as exc:
                    print(f"BROKEN: {exc}", file=sys.stderr)
                    broken.append(path)
                    continue
                row = Delivery(path, len(items), seconds, consistent(args.database_url, len(items)))
                if not row.consistent:
                    print(f"BROKEN: {path}: the database does not hold exactly the records sent")
                    broken.append(path)
                deliveries.append(row)

    load["end"] = list(os.getloadavg())
    print(
        "\nload average (1, 5, 15 min) at the start: "
        + ", ".join(f"{value:.2f}" for value in load["start"])
        + "; at the end: "
        + ", ".join(f"{value:.2f}" for value in load["end"])
        + f" ({os.cpu_count()} cores)"
    )
    print(f"\nCaller's thread, {args.calls} report() calls of ~1 KB failure records")
    print("(floor: encode + frame + os.write of the same body, timed in turns with them):")
    print(
        f"{'desk':<12}{'durability':<12}{'p50 us':>9}{'p99 us':>9}{'p99.9 us':>10}"
        f"{'worst us':>10}{'floor p50':>11}{'floor p99':>11}{'p99 / floor':>13}"
    )
    for cost in costs:
        print(
            f"{cost.label:<12}{cost.durability:<12}{cost.p50_us:>9.1f}{cost.p99_us:>9.1f}"
            f"{cost.p999_us:>10.1f}{cost.worst_us:>10.0f}"
            f"{cost.floor_p50_us:>11.1f}{cost.floor_p99_us:>11.1f}{cost.ratio:>12.2f}x"
        )
    print(f"calls over {SLOW_US / 1000:g} ms, and what the caller's thread did meanwhile:")
    for cost in costs:
        print(
            f"  {cost.label}, {cost.durability}: none"
            if not cost.slow_calls
            else f"  {cost.label}, {cost.durability}: {cost.slow_calls} calls, "
            f"{cost.slow_preempted} of them switched out by the OS; the worst call "
            f"{cost.worst_us / 1000:.1f} ms with {cost.worst_cpu_us:.0f} us of its own CPU time"
        )
    print(f"\nDelivery to gunicorn (2 sync workers) + PostgreSQL, {args.records} records:")
    print(f"{'path':<24}{'seconds':>9}{'records/s':>11}  db check")
    for row in deliveries:
        check = "ok" if row.consistent else "MISMATCH"
        print(f"{row.path:<24}{row.seconds:>9.2f}{row.rate:>11.0f}  {check}")
    # Each path and each caller measurement is checked (delivered, stored, on disk) before
    # any figure of it counts: a broken one prints BROKEN and no ratio is computed from it.
    verdicts = Verdicts()
    for name in [*paths, *(f"{mode}, {label}" for mode in modes for label in DESKS)]:
        verdicts.check(name, [f"{name} failed (errors above)"] if name in broken else [])

    def best(path: str) -> Delivery:
        return max((row for row in deliveries if row.path == path), key=lambda row: row.rate)

    def mode_verdicts(mode: str) -> None:
        direct = best("direct, 2 connections")
        reporter = best(reporter_path(mode))
        ratio = reporter.rate / direct.rate if direct.rate else 0.0
        verdicts.target(
            f"{mode} delivery",
            needs=("direct, 2 connections", reporter_path(mode)),
            judge=lambda: (
                ratio >= TARGET_RATIO,
                f"{mode} delivery: reporter / direct (2 connections) {ratio:.2f}x "
                f">= {TARGET_RATIO}x",
            ),
        )
        for label in DESKS:
            judge_caller(
                verdicts,
                mode,
                label,
                [c for c in costs if (c.label, c.durability) == (label, mode)],
            )

    if not verdicts.broken:
        print()
        for mode in modes:
            mode_verdicts(mode)
    write_json(args, costs, deliveries, broken, load)
    return verdicts.exit_status(strict=args.strict, results_dir=args.results_dir, bench="reporter")


def judge_caller(verdicts: Verdicts, mode: str, label: str, rounds: list[CallerCost]) -> None:
    """The caller's p99 (its best round) and worst call (over every round: it is a bound)."""
    cost = min(rounds, key=lambda c: c.p99_us)
    worst = max(c.worst_us for c in rounds)
    verdicts.target(
        f"{mode} p99 {label}",
        needs=(f"{mode}, {label}",),
        judge=lambda: (
            cost.p99_us < TARGET_P99_US,
            f"{mode} p99 {label} {cost.p99_us:.1f} us < {TARGET_P99_US:.0f} us "
            f"(floor p99 {cost.floor_p99_us:.1f} us, {cost.ratio:.2f}x)",
        ),
    )
    verdicts.target(
        f"{mode} worst {label}",
        needs=(f"{mode}, {label}",),
        judge=lambda: (
            worst < TARGET_WORST_US,
            f"{mode} worst {label} {worst:.0f} us < {TARGET_WORST_US:.0f} us",
        ),
    )


def write_json(
    args: argparse.Namespace,
    costs: list[CallerCost],
    deliveries: list[Delivery],
    broken: list[str],
    load: dict[str, list[float]],
) -> None:
    if not args.json:
        return
    report = {
        "benchmark": "reporter",
        "cores": os.cpu_count(),
        "load_average": load,
        "calls": args.calls,
        "records": args.records,
        "repeat": args.repeat,
        "targets": {
            "p99_us": TARGET_P99_US,
            "worst_us": TARGET_WORST_US,
            "delivery_ratio": TARGET_RATIO,
        },
        "caller": [asdict(cost) | {"p99_over_floor": cost.ratio} for cost in costs],
        "delivery": [asdict(row) | {"rate": row.rate} for row in deliveries],
        "broken": sorted(set(broken)),
    }
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
