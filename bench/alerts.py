"""Alerts: how soon a webhook hears of a new group, and what 20 rules cost ingest.

    DATABASE_URL=postgres://... REDIS_URL=redis://... .venv/bin/python bench/alerts.py \
        [--samples 40] [--batches 60] [--batch-size 200] [--strict]

What one run does (the database named by DATABASE_URL is migrated and its alert, failure
and ledger tables emptied first; default postgres://postgres@127.0.0.1:5432/triage_bench_alerts,
Redis db of REDIS_URL, default redis://127.0.0.1:6379/6):

1. Starts one Celery worker (solo pool, the production settings' acks_late and prefetch 1)
   and a webhook receiver on 127.0.0.1 in a process of its own (alerts/sinks.py, verifying
   every signature), and one new_group rule to it.
2. **Latency**: ``--samples`` times, one batch with a new group through the real ingest API
   (Django's test client, in this process: the answer is returned when the batch committed
   and its hook handed the ids to the queue); the time from the answer to the signed webhook
   arriving at the receiver. p50 and p95; target p95 under 5 s.
3. **Cost**: ``--batches`` batches of ``--batch-size`` records (20 existing groups, and one
   new group in every batch, so the hook fires every time; then in one batch of ten, as
   traffic of mostly known groups) with no rule at all, then with 20
   active rules of every kind (new_group and regression rules one per team's collection,
   one of which is the bench's: each batch fires one rule and one webhook), alternating
   in blocks of 10 batches; records/s of each. Target: with rules at least 0.9x without. The worker
   evaluates and delivers meanwhile, on the same machine.

The checks, before any figure is judged (``bench/verdict.py``): every batch is answered 200
with every item accepted; the webhooks that arrive are exactly the ones the rules must send
(one per sample, then one per batch with rules and a new group: counted from the rules,
never from what arrived), each signed with the channel's secret, and by the end of each
block of batches with rules (so no delivery spills into the next block's time); no delivery
is left failed or unsent. A part that fails its check is BROKEN: its targets print MISS and
the run exits 2. A missed target exits 1 with ``--strict``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.verdict import Verdicts, add_strict_argument, ratio  # noqa: E402

TARGET_P95_SECONDS = 5.0
TARGET_RATIO = 0.9


def _environment() -> None:
    """The run's environment, set when it starts (never on import: a test that imports this
    module keeps its own)."""
    os.environ.setdefault("DJANGO_DEBUG", "1")
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/triage_bench_alerts")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/6")
    os.environ.setdefault("ALERTS_ALLOWED_HOSTS", "127.0.0.1")
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = f"bench-alerts-{os.getpid()}"
    os.environ.setdefault("TRIAGE_LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def _create_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{name}"')


def _serve_receiver(ports, secrets, events) -> None:
    """The webhook receiver, in a process of its own (its work is not the desk's)."""
    import django

    django.setup()
    from alerts.sinks import WebhookReceiver

    class Reporting(WebhookReceiver):
        def _record(self, path, headers, body):
            super()._record(path, headers, body)
            request = self.requests[-1]
            events.put((request.received_at, request.signature_ok))

    receiver = Reporting().start()
    ports.put(receiver.port)
    receiver.secrets["/bench"] = secrets.get()
    time.sleep(10**6)


class RemoteReceiver:
    """The receiver process as this process sees it: what arrived, and when."""

    def __init__(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._ports, self._secrets, self._events = context.Queue(), context.Queue(), context.Queue()
        self.process = context.Process(
            target=_serve_receiver, args=(self._ports, self._secrets, self._events), daemon=True
        )
        self.process.start()
        self.port = self._ports.get(timeout=60)
        self.requests: list[tuple[float, bool]] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def verify_with(self, secret: str) -> None:
        self._secrets.put(secret)

    def wait_for(self, count: int, *, timeout: float) -> list[tuple[float, bool]]:
        import queue

        deadline = time.monotonic() + timeout
        while len(self.requests) < count and time.monotonic() < deadline:
            try:
                self.requests.append(
                    self._events.get(timeout=max(0.01, deadline - time.monotonic()))
                )
            except queue.Empty:
                break
        return list(self.requests)

    def stop(self) -> None:
        self.process.terminate()


def delivery_problems(
    expected: int, arrived: list[tuple[float, bool]], when: str, *, signatures: bool = True
) -> list[str]:
    """What is wrong with the webhooks that arrived, against the `expected` count the rules
    must have sent by `when`: any missing or extra, and (with `signatures`) any whose
    signature did not verify."""
    problems = []
    if len(arrived) != expected:
        problems.append(f"{when}: {len(arrived)} webhooks arrived, the rules must send {expected}")
    unsigned = sum(1 for _, signature_ok in arrived if not signature_ok)
    if signatures and unsigned:
        problems.append(f"{when}: {unsigned} webhooks whose signature did not verify")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=200)
    add_strict_argument(parser)
    args = parser.parse_args()

    _environment()
    _create_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    from alerts import services
    from alerts.models import Channel, Delivery, DeliveryStatus, Rule, RuleKind
    from triage.models import ApiKey, FailureGroup, FailureRecord, IngestBatch, IngestItem
    from triage.services import api_key_create

    Delivery.objects.all().delete()
    Rule.objects.all().delete()
    Channel.objects.all().delete()
    FailureRecord.objects.all().delete()
    FailureGroup.objects.all().delete()
    IngestItem.objects.all().delete()
    IngestBatch.objects.all().delete()
    ApiKey.objects.filter(name="bench-alerts").delete()
    _, key = api_key_create(name="bench-alerts", scopes=["ingest"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    verdicts = Verdicts()
    latency_problems: list[str] = []
    cost_problems: list[str] = []

    receiver = RemoteReceiver()
    log = open(ROOT / "var" / "bench-alerts-worker.log", "wb")  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
         "--concurrency", "1", "--loglevel", "WARNING", "--without-mingle", "--without-gossip",
         "--queues", os.environ["CELERY_TASK_DEFAULT_QUEUE"]],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    run = uuid.uuid4().hex[:8]
    try:
        channel, secret = services.channel_create(name="bench", kind="webhook",
                                                  target=receiver.url("/bench"))  # fmt: skip
        receiver.verify_with(secret)

        def post(items: list[dict], problems: list[str]) -> float:
            """POST one batch; a batch not answered 200 with every item accepted is a
            problem of the part that sent it."""
            response = client.post("/api/v1/ingest", data=json.dumps({"items": items}),
                                   content_type="application/json")  # fmt: skip
            answered = time.time()
            accepted = response.json().get("accepted") if response.status_code == 200 else None
            if accepted != len(items):
                problems.append(
                    f"a batch of {len(items)} answered {response.status_code}, "
                    f"{accepted} accepted: {response.content[:200]!r}"
                )
            return answered

        def failure(item_id: str, tool: str) -> dict:
            return {"type": "failure", "id": item_id, "body": {
                "stage": "execute", "reason": "http_5xx", "tool": tool, "collection": "bench",
                "message": "downstream returned 503", "plan_id": "p", "step_id": "s1",
                "evidence": {"http_status": 503, "http_method": "GET"}}}  # fmt: skip

        # 1. latency: the rule fires once for the warm-up's new group and once per sample.
        services.rule_create(name="bench-new", kind=RuleKind.NEW_GROUP, channels=[channel],
                             min_interval_minutes=0)  # fmt: skip
        post([failure(f"{run}-warm", f"warm-{run}")], latency_problems)
        expected = 1
        receiver.wait_for(expected, timeout=30)
        latencies = []
        for n in range(args.samples):
            before = len(receiver.requests)
            answered = post([failure(f"{run}-lat-{n}", f"latency-{run}-{n}")], latency_problems)
            expected += 1
            got = receiver.wait_for(before + 1, timeout=30)
            if len(got) <= before:
                latency_problems.append(f"sample {n}: no webhook within 30 s")
                break
            latencies.append(got[before][0] - answered)
        # Nothing more may come: the rule is then switched off with the others.
        latency_problems += delivery_problems(
            expected, receiver.wait_for(expected + 1, timeout=2), "after the samples"
        )
        if verdicts.check("webhook latency", latency_problems):
            latencies.sort()
            p50 = statistics.median(latencies)
            p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
            print(
                f"ingest answer -> webhook received, {args.samples} samples, 1 worker: "
                f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"
            )
        verdicts.target(
            "webhook p95",
            needs=["webhook latency"],
            judge=lambda: (
                p95 < TARGET_P95_SECONDS,
                f"webhook p95 {p95 * 1000:.0f} ms (target < {TARGET_P95_SECONDS * 1000:.0f} ms)",
            ),
        )

        # 2. cost: no rule vs 20 rules, interleaved
        kinds: list[dict[str, Any]] = [
            # One rule per team's collection, as a desk is set up: one of them is the
            # bench's, so every batch fires one rule; the others are evaluated and stay quiet.
            *[dict(kind=RuleKind.NEW_GROUP, collection=name) for name in
              ("bench", "shop", "billing", "search", "checkout", "crm", "docs", "ops")],
            *[dict(kind=RuleKind.REGRESSION, collection=name) for name in
              ("bench", "shop", "billing", "search")],
            *[dict(kind=RuleKind.SPIKE, spike_count=100000, spike_factor=2,
                   spike_window_hours=1)] * 3,
            dict(kind=RuleKind.RECONCILE_WAITING, wait_minutes=10),
            dict(kind=RuleKind.RETRY_BUDGET),
            dict(kind=RuleKind.QUALITYLAB_REGRESSION),
            dict(kind=RuleKind.SUGGESTION_WAITING, wait_minutes=60),
            dict(kind=RuleKind.NEW_GROUP, lane="reconcile_first"),
        ]  # fmt: skip
        # A batch with a new group fires exactly the new_group rule of the bench's collection:
        # the bench's failures are http_5xx calls of unknown tools (never reconcile_first),
        # no group regresses, none spikes past 100,000, and the other kinds wait on the beat.
        webhooks_per_new_group = 1

        # Switched on and off, not deleted: the worker may still be firing one.
        Rule.objects.all().update(enabled=False)
        for index, fields in enumerate(kinds):
            services.rule_create(name=f"bench-{index}", channels=[channel], enabled=False,
                                 **fields)  # fmt: skip

        def set_rules(count: int) -> None:
            Rule.objects.filter(name__startswith="bench-").update(enabled=count > 0)
            Rule.objects.filter(name="bench-new").update(enabled=False)
            services._rules_changed()  # what an edit through the services does

        # 20 new groups with every rule off: they fire nothing.
        post([failure(f"{run}-seed-{t}", f"steady-{t}") for t in range(20)], cost_problems)
        # The hook's own time in the request (the rest of the difference is the worker's
        # evaluating and delivering on the same CPUs).
        from triage.intake import ingest

        hook_seconds = {0: 0.0, 20: 0.0}
        mode = {"rules": 0}

        def timed(listener):
            def run_listener(event):
                started = time.perf_counter()
                listener(event)
                hook_seconds[mode["rules"]] += time.perf_counter() - started

            return run_listener

        ingest._BATCH_LISTENERS[:] = [timed(listener) for listener in ingest._BATCH_LISTENERS]
        # The two modes alternate in blocks of 10 batches, so a busy machine slows both
        # alike; after a block with rules the worker finishes its deliveries before the next
        # block starts (its work during the block counts against the rules, none after).
        # Twice: a new group in every batch (the hook and a webhook every time: the worst
        # case), then in one batch of ten (traffic that is mostly known groups).
        block = 10
        rates: dict[int, dict[int, float]] = {}
        figures: list[str] = []  # printed once the part has passed its check
        for new_every in (1, 10):
            elapsed = {0: 0.0, 20: 0.0}
            records = {0: 0, 20: 0}
            hook_seconds.update({0: 0.0, 20: 0.0})
            for b in range(args.batches * 2):
                rules = 20 if (b // block) % 2 else 0
                if b % block == 0:
                    cost_problems += delivery_problems(
                        expected,
                        receiver.wait_for(expected, timeout=60),
                        f"before batch {b} (a new group in 1 batch of {new_every})",
                        signatures=False,  # checked once, at the end
                    )
                    set_rules(rules)
                    mode["rules"] = rules
                prefix = f"{run}-{new_every}-{rules}-{b}"
                items = [failure(f"{prefix}-{i}", f"steady-{i % 20}")
                         for i in range(args.batch_size - 1)]  # fmt: skip
                new = b % new_every == 0
                items.append(failure(f"{prefix}-new", f"new-{prefix}" if new else "steady-0"))
                started = time.perf_counter()
                post(items, cost_problems)
                elapsed[rules] += time.perf_counter() - started
                records[rules] += len(items)
                expected += webhooks_per_new_group if rules and new else 0
            rates[new_every] = {rules: records[rules] / elapsed[rules] for rules in elapsed}
            rate = rates[new_every]
            what = "every batch" if new_every == 1 else f"1 batch in {new_every}"
            figures.append(
                f"ingest, {records[0]} records in batches of {args.batch_size}, a new group "
                f"in {what}: no rules {rate[0]:.0f} records/s, 20 rules {rate[20]:.0f} "
                f"records/s; the hook in the "
                f"request {hook_seconds[0] / args.batches * 1000:.1f} ms a batch without "
                f"rules, {hook_seconds[20] / args.batches * 1000:.1f} ms with 20")  # fmt: skip
        receiver.wait_for(expected, timeout=60)
        cost_problems += delivery_problems(  # and nothing more comes
            expected, receiver.wait_for(expected + 1, timeout=2), "at the end"
        )
        unsent = Delivery.objects.exclude(status=DeliveryStatus.SENT).count()
        if unsent:
            cost_problems.append(f"{unsent} deliveries not sent")
        if verdicts.check("ingest cost", cost_problems):
            print("\n".join(figures))
        for new_every in (1, 10):
            what = "every batch" if new_every == 1 else f"1 batch in {new_every}"

            def judge(new_every: int = new_every, what: str = what) -> tuple[bool, str]:
                found = ratio(rates[new_every][20], rates[new_every][0])
                if found is None:
                    return False, f"ingest with 20 rules, a new group in {what}: no baseline"
                return found >= TARGET_RATIO, (
                    f"ingest with 20 rules {found:.2f}x without, a new group in {what} "
                    f"(target >= {TARGET_RATIO:.2f}x)"
                )

            verdicts.target(f"ingest cost, new group in {what}", needs=["ingest cost"],
                            judge=judge)  # fmt: skip
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        receiver.stop()
        log.close()
    return verdicts.exit_status(strict=args.strict, results_dir=args.results_dir, bench="alerts")


if __name__ == "__main__":
    sys.exit(main())
