"""What triage-desk-client's NextActionContract middleware adds to a failed MCP tool call,
against the same server without it, in the same run; with the desk up and down.

    .venv/bin/python bench/mcp_middleware.py [--calls 3000] [--database-url URL] [--json OUT]
        [--strict]

What one run does:

1. Sets up the database as bench/ingest.py does (default
   ``postgres://postgres@127.0.0.1:5432/triage_bench_mcp``) and starts gunicorn on it
   (production settings): the desk "up". The desk "down" is a port nothing listens on.
2. For each, two MCP servers built on the official SDK (``MCPServer``, the billing example
   of client/examples/mcp_billing.py): one bare, one with the middleware reporting to a
   ``Reporter`` for that desk. The SDK's ``Client`` calls both in process, in turns (one
   bare call, one with the middleware), ``--calls`` times each, the tool failing the way a
   downstream 503 does. Each call is timed with ``perf_counter_ns``; the table shows p50,
   p99 and the worst call of both, and the middleware's added p50 and p99 (its quantile
   minus the bare server's). Target: added p99 under 1 ms, desk up and down. The reporter's
   own enqueue (``reporter.envelope()``, timed inside the middleware) prints beside it: a
   desk that is down or slow may cost the call that much and no more.
3. Checks that nothing was lost: with the desk up, after ``flush()`` the database holds
   one record per failed call; with it down, the spool holds every report after
   ``close()``. A run that fails this is BROKEN (exit 2).

The SDK logs each tool's exception (with its traceback) on its own logger; the bench sends
that logger to a NullHandler for both servers, so formatting tracebacks to a terminal is
not what is measured (the middleware still reads the record: it is created either way).
``--json OUT`` writes the rows and verdicts for the benchmarks page.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import logging
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402
from triage_desk_client import Reporter  # noqa: E402
from triage_desk_client.mcp import SDK_TOOL_LOGGER, NextActionContract  # noqa: E402

from bench.ingest import (  # noqa: E402
    FAST_APP,
    ServerConfig,
    app_env,
    empty_tables,
    free_port,
    prepare_database,
    serve,
    stored_counts,
)
from bench.verdict import Verdicts, add_strict_argument  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/triage_bench_mcp"
TARGET_ADDED_P99_US = 1000.0
EXAMPLE = ROOT / "client" / "examples" / "mcp_billing.py"
FAILING_CALL = ("get_delivery_status", {"invoice_id": "INV-819"})


class Broken(Exception):
    """Reports were lost or doubled: the run measured nothing."""


@dataclass
class Row:
    desk: str
    calls: int
    bare_p50_us: float
    bare_p99_us: float
    bare_worst_us: float
    contract_p50_us: float
    contract_p99_us: float
    contract_worst_us: float
    added_p50_us: float
    added_p99_us: float
    enqueue_p50_us: float
    enqueue_p99_us: float


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("mcp_billing", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mcp_billing"] = module
    spec.loader.exec_module(module)
    return module


class TimedReporter:
    """The reporter's ``envelope()``, timed: the enqueue a tool call waits for."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.timings: list[int] = []

    def envelope(self, body: Mapping[str, Any], id: str | None = None) -> str:
        started = time.perf_counter_ns()
        try:
            return self.reporter.envelope(body, id)
        finally:
            self.timings.append(time.perf_counter_ns() - started)


def quantile(timings: list[int], share: float) -> float:
    ordered = sorted(timings)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] / 1000


async def compare(billing: Any, reporter: TimedReporter, calls: int) -> tuple[list[int], ...]:
    bare_server = billing.build_server()
    contract = NextActionContract(reporter, collection=billing.COLLECTION, tools=billing.TOOLS)
    with_contract = billing.build_server(middleware=[contract])
    bare: list[int] = []
    contracted: list[int] = []
    tool, arguments = FAILING_CALL
    async with Client(bare_server) as plain, Client(with_contract) as answered:
        for _ in range(50):
            await plain.call_tool(tool, arguments)
            await answered.call_tool(tool, arguments)
        reporter.timings.clear()
        gc.collect()
        gc.freeze()  # the setup's objects are not the calls' collector pauses
        for number in range(calls):
            # In turns, so both servers meet the same moments of the machine.
            first, second = (plain, answered) if number % 2 == 0 else (answered, plain)
            for client in (first, second):
                started = time.perf_counter_ns()
                result = await client.call_tool(tool, arguments)
                elapsed = time.perf_counter_ns() - started
                if not result.is_error:
                    raise Broken("the failing tool did not fail")
                if client is answered:
                    if not result.structured_content:
                        raise Broken("the middleware did not answer with its envelope")
                    contracted.append(elapsed)
                else:
                    bare.append(elapsed)
        gc.unfreeze()
    contract.close()
    return bare, contracted, list(reporter.timings)


def run(billing: Any, desk: str, url: str, key: str, calls: int, database_url: str) -> Row:
    with tempfile.TemporaryDirectory(prefix="bench-mcp-spool-") as spool:
        reporter = Reporter(url, key, spool_dir=spool, flush_interval=0.2, max_backoff=1.0)
        timed = TimedReporter(reporter)
        bare, contracted, enqueue = asyncio.run(compare(billing, timed, calls))
        reported = 50 + calls  # the warm-up's failures are reported too
        if desk == "up":
            if not reporter.flush(timeout=120):
                raise Broken(f"desk up: flush() left {reporter.stats()['queued']} items")
            stored = stored_counts(database_url)["records"]
            if stored != reported:
                raise Broken(f"desk up: {stored} records stored for {reported} failed calls")
            reporter.close()
        else:
            reporter.close(timeout=0)
            left = reporter.stats()["queued"]
            if left != reported:
                raise Broken(f"desk down: {left} reports in the spool for {reported} calls")
    return Row(
        desk=desk,
        calls=calls,
        bare_p50_us=quantile(bare, 0.5),
        bare_p99_us=quantile(bare, 0.99),
        bare_worst_us=max(bare) / 1000,
        contract_p50_us=quantile(contracted, 0.5),
        contract_p99_us=quantile(contracted, 0.99),
        contract_worst_us=max(contracted) / 1000,
        added_p50_us=quantile(contracted, 0.5) - quantile(bare, 0.5),
        added_p99_us=quantile(contracted, 0.99) - quantile(bare, 0.99),
        enqueue_p50_us=quantile(enqueue, 0.5),
        enqueue_p99_us=quantile(enqueue, 0.99),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--calls", type=int, default=3000, help="timed calls per server")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--json", metavar="OUT", help="also write the results to OUT as JSON")
    add_strict_argument(parser)
    args = parser.parse_args()

    sdk_logger = logging.getLogger(SDK_TOOL_LOGGER)
    sdk_logger.addHandler(logging.NullHandler())
    sdk_logger.propagate = False
    billing = load_example()
    env = app_env(args.database_url)
    key = prepare_database(args.database_url, env)
    rows: list[Row] = []
    broken: list[str] = []
    with serve(FAST_APP, ServerConfig(2, 1, 2), env) as (port, _, _):
        for desk, url in (
            ("up", f"http://127.0.0.1:{port}"),
            ("down", f"http://127.0.0.1:{free_port()}"),
        ):
            empty_tables(args.database_url)
            try:
                rows.append(run(billing, desk, url, key, args.calls, args.database_url))
            except Broken as exc:
                print(f"BROKEN: {exc}", file=sys.stderr)
                broken.append(desk)

    print(f"\nA failed tool call (HTTP 503 downstream), {args.calls} calls per server, in process:")
    print(
        f"{'desk':<6}{'bare p50':>10}{'bare p99':>10}{'mw p50':>9}{'mw p99':>9}"
        f"{'added p50':>11}{'added p99':>11}{'enq p50':>9}{'enq p99':>9}{'mw worst':>10}  (us)"
    )
    for row in rows:
        print(
            f"{row.desk:<6}{row.bare_p50_us:>10.0f}{row.bare_p99_us:>10.0f}"
            f"{row.contract_p50_us:>9.0f}{row.contract_p99_us:>9.0f}{row.added_p50_us:>11.0f}"
            f"{row.added_p99_us:>11.0f}{row.enqueue_p50_us:>9.0f}{row.enqueue_p99_us:>9.0f}"
            f"{row.contract_worst_us:>10.0f}"
        )
    # A server whose calls were not all delivered (or stored) is BROKEN: no figure of it.
    verdicts = Verdicts()
    for desk in ("up", "down"):
        verdicts.check(
            f"desk {desk}", [f"desk {desk} failed (errors above)"] if desk in broken else []
        )
    for row in rows:
        judge_added(verdicts, row)
    if args.json:
        report = {
            "bench": "mcp_middleware",
            "calls": args.calls,
            "rows": [asdict(row) for row in rows],
            "target_added_p99_us": TARGET_ADDED_P99_US,
            "broken": broken,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return verdicts.exit_status(
        strict=args.strict, results_dir=args.results_dir, bench="mcp_middleware"
    )


def judge_added(verdicts: Verdicts, row: Row) -> None:
    verdicts.target(
        f"desk {row.desk}: added p99",
        needs=(f"desk {row.desk}",),
        judge=lambda: (
            row.added_p99_us < TARGET_ADDED_P99_US,
            f"desk {row.desk}: the middleware adds {row.added_p99_us:.0f} us at p99 "
            f"< {TARGET_ADDED_P99_US:.0f} us (enqueue p50 {row.enqueue_p50_us:.0f} us)",
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
