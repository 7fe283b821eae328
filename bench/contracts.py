"""Is the contracts page fast with 1,000 tools and a million records, and how fast does the
scan count what arrives?

    .venv/bin/python bench/contracts.py [--records 1000000] [--tools 1000] [--repeat 30]
        [--jobs 2] [--database-url URL] [--reuse] [--strict]

What one run does:

1. Creates the database if it is missing (default
   ``postgres://postgres@127.0.0.1:5432/triage_contracts``), migrates it and, unless
   ``--reuse`` finds it loaded, empties the triage and contracts tables and loads
   ``--records`` failure records with ``bench/triage_scale.py``'s month of a fleet (its 50
   tools, through the ingest write path), then contract traffic for ``--tools`` more tools
   through the same path: per tool 12 receipts over the month (some retried within the
   rules), 30 ``step.completed`` runner events, and, for every tenth tool, a policy block
   called again (a broken rule the scan must find, once each).
2. Counts it all from zero with the scan (``contracts.scan.contracts_scan_all``, the beat
   task's service) and prints its rate. Before any page is timed the scan is checked: the
   daily counters must hold every production failure record with a tool, every receipt but
   the lookups and every ``step.completed`` event with a tool, and the findings exactly the
   planted policy-block retries; a wrong count prints ``BROKEN`` and exits 2.
3. Times, in one process set up as a gunicorn worker (production settings, a signed-in
   operator, Django's full request path), the contracts page (30 and 7 days), its findings
   list and the triage page's 24-hour view as the baseline, interleaved, ``--repeat`` times.

Targets: the contracts page's p95 under 100 ms (the triage page's target) and no slower than
the triage page in the same rounds (1.0x or less), at a query count that does not depend on
the number of tools.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest import app_env, ensure_database, manage  # noqa: E402
from bench.triage_scale import _setup_django, clients, load, vacuum_analyze  # noqa: E402
from bench.verdict import Verdicts, add_strict_argument, below, ratio  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/triage_contracts"
TARGET_P95_MS = 100.0
TARGET_AGAINST_TRIAGE = 1.0
DAYS = 30
RECEIPTS_PER_TOOL = 12
SUCCESSES_PER_TOOL = 30
PLANT_EVERY = 10  # every tenth tool calls a policy block again


def contract_items(tools: int, now: datetime) -> list[dict[str, Any]]:
    rng = random.Random(20261205)
    items: list[dict[str, Any]] = []
    for index in range(tools):
        collection = f"fleet-{index % 20:02d}"
        tool = f"tool{index:04d}"
        for number in range(RECEIPTS_PER_TOOL):
            at = now - timedelta(days=rng.uniform(0.1, DAYS - 1))
            retried = number % 4 == 0
            body = {
                "tool_run_id": f"tr-{index}-{number}",
                "tool": tool,
                "collection": collection,
                "side_effect": "read" if index % 3 else "external_write",
                "idempotency_key": f"{tool}:{number}",
                "attempt": 2 if retried else 1,
                "retry_count": 1 if retried else 0,
                "result": "failed" if number % 5 == 0 else "ok",
                "reason": "http_5xx" if number % 5 == 0 else "",
                "execution_state": "completed",
                "next_action": "retry_with_backoff" if index % 2 else "",
                "evidence_ref": f"req-{index}-{number}" if index % 4 else "",
                "started_at": at.isoformat(),
                "ended_at": (at + timedelta(seconds=1)).isoformat(),
            }
            items.append({"type": "receipt", "id": f"cr-{index}-{number}", "body": body})
        for number in range(SUCCESSES_PER_TOOL):
            at = now - timedelta(days=rng.uniform(0.1, DAYS - 1))
            items.append(
                {
                    "type": "runner_event",
                    "id": f"ce-{index}-{number}",
                    "body": {
                        "type": "step.completed",
                        "tool": tool,
                        "collection": collection,
                        "plan_id": f"plan-{index}-{number}",
                        "step_id": "s1",
                        "occurred_at": at.isoformat(),
                    },
                }
            )
        if index % PLANT_EVERY == 0:
            at = now - timedelta(days=2)
            for attempt in (1, 2):
                body = {
                    "tool_run_id": f"tr-{index}-block-{attempt}",
                    "tool": tool,
                    "collection": collection,
                    "idempotency_key": f"{tool}:blocked",
                    "attempt": attempt,
                    "result": "blocked",
                    "execution_state": "not_started",
                    "started_at": (at + timedelta(minutes=attempt)).isoformat(),
                }
                items.append({"type": "receipt", "id": f"cb-{index}-{attempt}", "body": body})
    return items


def load_contract_traffic(tools: int, now: datetime) -> int:
    from triage.intake.ingest import batch_ingest

    items = contract_items(tools, now)
    for start in range(0, len(items), 1000):
        outcome = batch_ingest(owner="contracts-bench", items=items[start : start + 1000])
        accepted = outcome.as_dict()["accepted"]
        if accepted != len(items[start : start + 1000]):
            raise SystemExit(f"contract traffic refused at {start}: {outcome.as_dict()}")
    return len(items)


def empty_all(database_url: str) -> None:
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND "
                "(tablename LIKE 'triage\\_%' OR tablename LIKE 'contracts\\_%') AND "
                "tablename NOT IN ('triage_apikey', 'triage_toolpolicy')"
            )
        ]
        conn.execute("TRUNCATE " + ", ".join(f'"{name}"' for name in tables) + " CASCADE")


def reset_scan() -> None:
    from contracts.models import ContractFinding, OperationTrail, ScanMark, Standing, ToolDay

    for model in (ToolDay, OperationTrail, ContractFinding, ScanMark, Standing):
        model.objects.all().delete()


def scan_problems(tools: int) -> list[str]:
    """What the counters must hold after a scan from zero."""
    from django.db.models import Sum

    from contracts.models import ContractFinding, ToolDay
    from triage.models import FailureRecord, Receipt, RunnerEvent

    counted = ToolDay.objects.aggregate(
        failures=Sum("failures"), receipts=Sum("receipts"), runner=Sum("successes_runner")
    )
    expected = {
        "failures": FailureRecord.objects.exclude(tool="").exclude(source="quality_lab").count(),
        "receipts": Receipt.objects.exclude(result__iexact="lookup").count(),
        "runner": RunnerEvent.objects.filter(event_type="step.completed").exclude(tool="").count(),
    }
    problems = [
        f"{name}: counted {counted[name] or 0:,}, stored {expected[name]:,}"
        for name in expected
        if (counted[name] or 0) != expected[name]
    ]
    planted = len(range(0, tools, PLANT_EVERY))
    found = ContractFinding.objects.filter(kind="policy_block_retry").count()
    if found != planted:
        problems.append(f"policy_block_retry findings: {found}, planted {planted}")
    return problems


@dataclass
class Timing:
    label: str
    url: str
    samples: list[float]
    queries: int = 0

    @property
    def p50(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(0.95 * len(ordered) + 0.5) - 1)]


def measure(repeat: int) -> tuple[list[Timing], list[str]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import config.wsgi  # noqa: F401  # as a gunicorn worker sets itself up

    browser, _ = clients()
    timings = [
        Timing("triage page, 24h (baseline)", "/?window=24h", []),
        Timing("contracts page, 30 days", "/contracts/", []),
        Timing("contracts page, 7 days", "/contracts/?days=7", []),
        Timing("contract findings, 30 days", "/contracts/findings", []),
    ]
    problems = []
    for timing in timings:  # warm up; count queries once; check the answer
        response = browser.get(timing.url)
        if response.status_code != 200:
            problems.append(f"{timing.url}: HTTP {response.status_code}")
        with CaptureQueriesContext(connection) as captured:
            browser.get(timing.url)
        timing.queries = len(captured)
    page = browser.get("/contracts/").content.decode()
    if "tool0000" not in page or "first batch" not in page:
        problems.append("/contracts/ does not show the fleet's tools and a first batch")
    if problems:
        return timings, problems
    for _ in range(repeat):
        for timing in timings:
            started = time.perf_counter()
            browser.get(timing.url)
            timing.samples.append((time.perf_counter() - started) * 1000)
    return timings, []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--reuse", action="store_true", help="keep what an earlier run loaded")
    add_strict_argument(parser)
    args = parser.parse_args(argv)

    env = app_env(args.database_url)
    env["DJANGO_ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    os.environ.update(env)
    ensure_database(args.database_url)
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "collectstatic", "--noinput", "-v", "0")
    _setup_django()
    from contracts.scan import contracts_scan_all
    from triage.models import FailureRecord, Receipt

    now = datetime.now(UTC)
    loaded = FailureRecord.objects.count()
    if not (args.reuse and loaded >= args.records and Receipt.objects.exists()):
        empty_all(args.database_url)
        print(f"loading {args.records:,} failure records (bench/triage_scale.py's traffic)")
        load(start=0, end=args.records, jobs=args.jobs, batch=1000, now=now)
        sent = load_contract_traffic(args.tools, now)
        print(f"loaded {sent:,} receipts and runner events of {args.tools:,} more tools")
        vacuum_analyze(args.database_url)

    reset_scan()
    started = time.perf_counter()
    rows = sum(result.total for result in contracts_scan_all(settle=timedelta(0)))
    seconds = time.perf_counter() - started
    print(f"scan from zero: {rows:,} rows in {seconds:.1f} s ({rows / seconds:,.0f} rows/s)")

    verdicts = Verdicts()
    if not verdicts.check("scan", scan_problems(args.tools)):
        return verdicts.exit_status(
            strict=args.strict, results_dir=args.results_dir, bench="contracts"
        )
    timings, problems = measure(args.repeat)
    verdicts.check("pages", problems)
    if not problems:
        print(f"\n{'endpoint':<34}{'queries':>8}{'p50 ms':>10}{'p95 ms':>10}")
        for timing in timings:
            print(f"{timing.label:<34}{timing.queries:>8}{timing.p50:>10.1f}{timing.p95:>10.1f}")
    baseline = timings[0]
    for timing in timings[1:3]:

        def judge(timing: Timing = timing) -> tuple[bool, str]:
            against = ratio(timing.p95, baseline.p95)
            met = timing.p95 < TARGET_P95_MS and (
                against is not None and against <= TARGET_AGAINST_TRIAGE
            )
            return met, (
                f"{timing.label}: p95 {below(timing.p95, TARGET_P95_MS)} ms "
                f"(target < {TARGET_P95_MS:.0f} ms), "
                f"{against or 0:.2f}x the triage page's {baseline.p95:.1f} ms in the same "
                f"rounds (target <= {TARGET_AGAINST_TRIAGE}x), {timing.queries} queries"
            )

        verdicts.target(timing.label, needs=("scan", "pages"), judge=judge)
    return verdicts.exit_status(strict=args.strict, results_dir=args.results_dir, bench="contracts")


if __name__ == "__main__":
    sys.exit(main())
