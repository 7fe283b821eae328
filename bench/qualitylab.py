"""Quality Lab run throughput: a real worker against the engine in a plain loop.

    .venv/bin/python bench/qualitylab.py [--cases 1000] [--database-url URL | --sqlite]
        [--redis [URL]] [--profile] [--keep-worker-log] [--strict]

What one run does:

1. Prepares the database (default ``postgres://postgres@127.0.0.1:5432/triage_bench_ql``,
   created when missing; ``--sqlite`` uses a fresh file under a temporary folder): migrate,
   then empty every ``qualitylab_*`` and ``triage_*`` table.
2. Builds a collection of about 60 operations: the demo shop spec plus 13 generated
   resources (carts, reviews, returns, payments, warehouses, ...), each with list / detail /
   create operations, English summaries and Korean descriptions. The build runs in this
   process (``services.version_build``): builds are not what is measured.
3. Imports ``--cases`` distinct search and plan cases (default 1,000): about 100 queries
   (the demo's 22 search and plan cases, plus English and Korean list and detail queries
   and detail plans with a provided id for every generated resource) repeated with new ids.
   Some are meant to fail, as in real suites, so failed cases go through FailureRecord
   ingest too.
4. Starts one worker (``celery -A config worker --pool solo``, production settings:
   ``DJANGO_DEBUG=0``) on the filesystem broker in a temporary folder, or on Redis with
   ``--redis``; runs a 10-case warm-up (the worker's imports, database connection and
   engine cache), then times one run of every case from ``run_start`` to the run being
   ``done`` (polled every 20 ms).
5. In this process, after the worker run, times ``engine.run_case`` over the same cases in
   a plain loop (engine loaded and warmed up the same way, cases parsed beforehand).
6. Checks both paths before any figure counts (``bench/verdict.py``): the worker's run must
   end ``done`` with a result for every case, and every case's verdict (passed, failure
   stage and reason) must be the plain loop's for the same case. The warm-up's ten cases
   are compared the same way before the clock starts: a worker that judges cases
   differently is not timed. Then prints cases/s for both, the ratio (worker time / raw
   engine time) and PASS/MISS against the targets: at least 100 cases/s on one worker, at
   most 1.5x the raw engine time. A path that fails its check is BROKEN: no figure or
   ratio is printed from it, its targets print MISS and the run exits 2. A missed target
   exits 1 with ``--strict``.

``--repeat N`` interleaves N worker runs and N plain loops and compares the best of each
(this machine is shared: the load average is printed at the start and the end).

``--large-spec [PATH]`` measures something else: importing a spec of GitHub's size. PATH,
else ``var/bench/api.github.com.json`` when it is there (GitHub's own description, from
``npm pack @octokit/openapi``; never committed), else the description ``bench/large_spec.py``
generates (same seed, same bytes). Each round runs two fresh processes, interleaved:
graph-tool-call's own build (``json.loads`` of the file, then
``build_openapi_collection_artifact``) and Quality Lab's import (``collection_create`` as
the upload page or the CLI does it, then ``version_build`` as the worker does it: parse,
build, hash, compress, store). Both must build the same number of tools (more than none) in
every round, or the import is BROKEN and no ratio is printed. It prints each one's seconds
and peak memory (the process's ``ru_maxrss``), where the import's time goes, and the ratio
of the worker's build to the engine's own build against the target (at most 1.2x), judged
on CPU time: what each process spent on a core, which other jobs on a shared machine do not
inflate (wall-clock seconds and their ratio are printed beside it). ``--repeat N``: best of
N rounds.

``--profile`` then runs the same cases once more in this process through
``services.run_execute`` (no queue) and prints where the time of each case goes: the
engine, ``case_spec``, the result INSERT, the counters UPDATE, the cancel check, the
ingest of failed cases' records and of every case's learning attempt, the final metrics,
learning's derivation after the run, and every SQL statement grouped by table and kind.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.verdict import Verdicts, add_strict_argument, ratio  # noqa: E402

# A case's verdict: passed, failure stage, failure reason ("" when it passed).
Verdict = tuple[bool, str, str]

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/triage_bench_ql"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"
COLLECTION = "bench-shop"
QUEUE = "qualitylab-bench"
TARGET_RATE = 100.0
TARGET_RATIO = 1.5
WARMUP_CASES = 10

# (path, singular, plural, id parameter, Korean noun, English fields)
RESOURCES: tuple[tuple[str, str, str, str, str, tuple[str, ...]], ...] = (
    ("carts", "Cart", "Carts", "cartId", "장바구니", ("memberNo", "itemCount", "totalAmount")),
    ("wishlists", "Wishlist", "Wishlists", "wishlistId", "위시리스트", ("memberNo", "name")),
    ("reviews", "Review", "Reviews", "reviewId", "상품 리뷰", ("productNo", "rating", "title")),
    ("returns", "Return", "Returns", "returnNo", "반품", ("orderNo", "reason", "status")),
    ("exchanges", "Exchange", "Exchanges", "exchangeNo", "교환", ("orderNo", "reason")),
    ("payments", "Payment", "Payments", "paymentId", "결제", ("orderNo", "method", "amount")),
    ("settlements", "Settlement", "Settlements", "settlementId", "정산", ("month", "amount")),
    ("warehouses", "Warehouse", "Warehouses", "warehouseCode", "창고", ("name", "region")),
    ("suppliers", "Supplier", "Suppliers", "supplierNo", "공급사", ("name", "contactName")),
    ("categories", "Category", "Categories", "categoryId", "카테고리", ("name", "parentId")),
    ("promotions", "Promotion", "Promotions", "promotionId", "프로모션", ("name", "discount")),
    ("notifications", "Notification", "Notifications", "notificationId", "알림", ("channel",)),
    ("stores", "Store", "Stores", "storeCode", "오프라인 매장", ("name", "address")),
)


# --- the collection and its cases ---------------------------------------------------------


def bench_spec() -> dict[str, Any]:
    """The demo shop spec plus the generated resources: about 60 operations."""
    from qualitylab import demo

    spec = copy.deepcopy(demo.load_spec())
    spec["info"]["title"] = "Bench Shop API"
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for path, singular, plural, id_name, korean, fields in RESOURCES:
        properties: dict[str, Any] = {id_name: {"type": "string"}}
        properties.update({name: {"type": "string"} for name in fields})
        schemas[singular] = {"type": "object", "properties": properties}
        reference = {"$ref": f"#/components/schemas/{singular}"}
        noun = plural.lower()
        spec["tags"].append({"name": path, "description": korean})
        spec["paths"][f"/{path}"] = {
            "get": {
                "operationId": f"list{plural}",
                "tags": [path],
                "summary": f"List {noun} ({korean} 목록 조회)",
                "description": f"{korean} 목록을 조회합니다. 페이지 단위로 돌려줍니다.",
                "parameters": [
                    {
                        "name": "page",
                        "in": "query",
                        "required": False,
                        "description": "Page number (페이지 번호)",
                        "schema": {"type": "integer"},
                    }
                ],
                "responses": {
                    "200": {
                        "description": f"The {noun}",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {noun: {"type": "array", "items": reference}},
                                }
                            }
                        },
                    }
                },
            },
            "post": {
                "operationId": f"create{singular}",
                "tags": [path],
                "summary": f"Create a {singular.lower()} ({korean} 등록)",
                "description": f"새 {korean}을(를) 등록합니다.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": [fields[0]],
                                "properties": {name: {"type": "string"} for name in fields},
                            }
                        }
                    },
                },
                "responses": {
                    "201": {
                        "description": f"The new {singular.lower()}",
                        "content": {"application/json": {"schema": reference}},
                    }
                },
            },
        }
        spec["paths"][f"/{path}/{{{id_name}}}"] = {
            "get": {
                "operationId": f"get{singular}",
                "tags": [path],
                "summary": f"Get one {singular.lower()} by its id ({korean} 상세 조회)",
                "description": f"{korean} 한 건의 상세 정보를 조회합니다.",
                "parameters": [
                    {
                        "name": id_name,
                        "in": "path",
                        "required": True,
                        "description": f"{singular} id ({korean} 번호)",
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {
                    "200": {
                        "description": f"The {singular.lower()}",
                        "content": {"application/json": {"schema": reference}},
                    }
                },
            }
        }
    return spec


def case_templates() -> list[dict[str, Any]]:
    """About 100 distinct search and plan cases over the bench spec."""
    from qualitylab import demo

    templates = [
        {key: value for key, value in case.items() if key != "demo_expectation"}
        for case in demo.load_case_data()
        if case["mode"] in ("search", "plan")
    ]
    for path, singular, plural, id_name, korean, _ in RESOURCES:
        noun = plural.lower()
        templates += [
            {
                "id": f"search-{path}-detail-en",
                "mode": "search",
                "query": f"show me the details of one {singular.lower()}",
                "expected_target": f"get{singular}",
                "expected_top_k": 5,
            },
            {
                "id": f"search-{path}-detail-ko",
                "mode": "search",
                "query": f"{korean} 상세 정보 보여줘",
                "expected_target": f"get{singular}",
                "expected_top_k": 5,
            },
            {
                "id": f"search-{path}-list-en",
                "mode": "search",
                "query": f"list all {noun}",
                "expected_target": f"list{plural}",
                "expected_top_k": 5,
            },
            {
                "id": f"search-{path}-list-ko",
                "mode": "search",
                "query": f"{korean} 목록 조회",
                "expected_target": f"list{plural}",
                "expected_top_k": 5,
            },
            {
                "id": f"plan-{path}-detail",
                "mode": "plan",
                "query": f"get {singular.lower()} {id_name} X-100 details",
                "expected_target": f"get{singular}",
                "expected_top_k": 5,
                "provided_entities": {id_name: "X-100"},
            },
            {
                "id": f"plan-{path}-detail-ko",
                "mode": "plan",
                "query": f"{korean} X-100 상세 조회해줘",
                "expected_target": f"get{singular}",
                "expected_top_k": 5,
                "provided_entities": {id_name: "X-100"},
            },
        ]
    return templates


def bench_cases(count: int) -> list[dict[str, Any]]:
    templates = case_templates()
    cases = []
    for index in range(count):
        case = copy.deepcopy(templates[index % len(templates)])
        case["id"] = f"{case['id']}-{index // len(templates):03d}"
        cases.append(case)
    return cases


# --- environment, database, worker --------------------------------------------------------


def configure(args: argparse.Namespace, scratch: Path) -> dict[str, str]:
    """The environment of this process and the worker (production settings), set before
    Django starts."""
    database_url = args.database_url
    if args.sqlite:
        database_url = f"sqlite:///{scratch / 'bench.sqlite3'}"
    env = {
        "DATABASE_URL": database_url,
        "REDIS_URL": args.redis or "",
        "TRIAGE_VAR_DIR": str(scratch / "var"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(45),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "TRIAGE_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        # Its own queue, so no other worker on the broker takes the benchmark's runs.
        "CELERY_TASK_DEFAULT_QUEUE": QUEUE,
    }
    os.environ.update(env)
    return dict(os.environ)


def ensure_database(database_url: str) -> None:
    if database_url.startswith("postgres"):
        from bench.ingest import ensure_database as ensure_postgres_database

        ensure_postgres_database(database_url)


def prepare_database() -> None:
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", interactive=False, verbosity=0)
    tables = [
        table
        for table in connection.introspection.table_names()
        if table.startswith(("qualitylab_", "triage_"))
    ]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "TRUNCATE {} RESTART IDENTITY CASCADE".format(
                    ", ".join(connection.ops.quote_name(table) for table in tables)
                )
            )
        else:
            cursor.execute("PRAGMA foreign_keys = OFF")
            for table in tables:
                cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")
            cursor.execute("PRAGMA foreign_keys = ON")


def load_collection(cases: list[dict[str, Any]]) -> Any:
    import yaml

    from qualitylab import services

    spec_text = yaml.safe_dump(bench_spec(), allow_unicode=True, sort_keys=False)
    send = services._send
    services._send = lambda task, **kwargs: None
    try:
        collection, version = services.collection_create(
            name=COLLECTION, spec_text=spec_text, title="Bench shop"
        )
    finally:
        services._send = send
    built = services.version_build(version_id=version.pk)
    if built is None or built.status != "ready":
        raise SystemExit(f"the bench collection did not build: {built and built.error}")
    report = services.cases_import(collection=collection, documents=cases)
    if report.errors:
        raise SystemExit("the bench cases do not import:\n" + "\n".join(report.errors[:20]))
    collection.refresh_from_db()
    print(
        f"collection {COLLECTION}: {built.operation_count} operations; "
        f"{report.created} cases imported"
    )
    return collection


@contextlib.contextmanager
def worker(env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "config", "worker",
                "--pool", "solo", "--concurrency", "1", "--loglevel", "WARNING",
                "--queues", QUEUE, "--without-mingle", "--without-gossip",
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_through_worker(
    collection: Any, case_ids: list[str], process: subprocess.Popen[bytes], log_path: Path
) -> tuple[float, Any, float]:
    """Seconds from run_start to the run being done, the run, and the worker's CPU seconds."""
    from qualitylab import services
    from qualitylab.models import CaseRun

    cpu_before = cpu_seconds(process.pid)
    started = time.perf_counter()
    run = services.run_start(collection=collection, case_ids=case_ids, channel="cli")
    deadline = started + 900
    while True:
        row = CaseRun.objects.only("status", "done").get(pk=run.pk)
        if row.is_finished:
            break
        if process.poll() is not None or time.perf_counter() > deadline:
            raise SystemExit(
                f"the worker {'exited' if process.poll() is not None else 'timed out'}; "
                f"its log:\n{log_path.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(process.pid) - cpu_before
    run = CaseRun.objects.get(pk=run.pk)
    return elapsed, run, cpu


def worker_verdicts(run: Any) -> dict[str, Verdict]:
    """Each case's verdict as the worker stored it."""
    return {
        case_id: (passed, stage, reason)
        for case_id, passed, stage, reason in run.results.values_list(
            "case__case_id", "passed", "failure_stage", "failure_reason"
        )
    }


def worker_problems(run: Any, expected: dict[str, Verdict]) -> list[str]:
    """What is wrong with the worker's run: not done, a result missing, or a case judged
    otherwise than by the plain engine loop (`expected`)."""
    if run.status != "done" or run.done != len(expected):
        return [f"run {run.pk} ended {run.status} with {run.done} results: {run.error}"]
    return verdict_differences(worker_verdicts(run), expected)


def verdict_differences(found: dict[str, Verdict], expected: dict[str, Verdict]) -> list[str]:
    """Every case whose verdict in `found` is not the one in `expected` (or is missing)."""
    problems = []
    for case_id, verdict in expected.items():
        if (got := found.get(case_id)) != verdict:
            problems.append(
                f"case {case_id}: the worker says {_verdict_text(got)}, the engine "
                f"{_verdict_text(verdict)}"
            )
    problems += [
        f"case {case_id}: a result for no case sent" for case_id in found.keys() - expected.keys()
    ]
    return problems


def _verdict_text(verdict: Verdict | None) -> str:
    if verdict is None:
        return "nothing"
    passed, stage, reason = verdict
    return "passed" if passed else f"failed at {stage or '?'}: {reason or '?'}"


def run_raw(
    collection: Any, cases: list[dict[str, Any]]
) -> tuple[float, dict[str, Verdict], float]:
    """Seconds for engine.run_case over the cases in a plain loop, each case's verdict, and
    the CPU seconds it took."""
    from qualitylab import engine

    version = collection.current_version
    loaded = engine.engine_for(version.artifact(), version.artifact_hash)
    specs = [engine.CaseSpec.from_json(case) for case in cases]
    for spec in specs[:WARMUP_CASES]:
        engine.run_case(loaded, spec)
    cpu_before = time.process_time()
    started = time.perf_counter()
    outcomes = [engine.run_case(loaded, spec) for spec in specs]
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_before
    return seconds, {outcome.case_id: _outcome_verdict(outcome) for outcome in outcomes}, cpu


def _outcome_verdict(outcome: Any) -> Verdict:
    """As the worker stores it (qualitylab.services' result writer)."""
    failure = outcome.failure or {}
    return outcome.passed, failure.get("stage") or "", failure.get("reason") or ""


# --- profile ------------------------------------------------------------------------------


class Phases:
    """Wall time per named phase, by wrapping functions in place."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started
                self.calls[name] += 1

        setattr(owner, attribute, timed)
        self._undo.append(lambda: setattr(owner, attribute, original))

    def undo(self) -> None:
        for undo in reversed(self._undo):
            undo()


def _statement_kind(sql: str) -> str:
    words = sql.split()
    verb = words[0].upper() if words else "?"
    table = "?"
    for keyword in ("FROM", "INTO", "UPDATE"):
        if keyword in (word.upper() for word in words):
            index = [word.upper() for word in words].index(keyword)
            if index + 1 < len(words):
                table = words[index + 1].strip('"(')
                break
    if verb == "SELECT" and "cancel_requested" in sql and "qualitylab_caserun" in sql:
        return "SELECT qualitylab_caserun (cancel check)"
    return f"{verb} {table}"


def profile(collection: Any, case_ids: list[str]) -> None:
    from django.db import connection

    from qualitylab import engine, services

    send = services._send
    services._send = lambda task, **kwargs: None
    try:
        run = services.run_start(collection=collection, case_ids=case_ids, channel="cli")
    finally:
        services._send = send
    phases = Phases()
    phases.wrap(engine, "run_case", "engine.run_case")
    phases.wrap(services, "case_spec", "case_spec (CaseSpec from the row)")
    phases.wrap(services._ResultWriter, "_ingest", "ingest: failure records and learning attempts")
    phases.wrap(services._ResultWriter, "flush", "result batches: INSERT, recount, ingest")
    phases.wrap(services, "_finish_run", "finish: metrics over every result")
    learning = services.learning_services
    phases.wrap(learning, "quality_lab_attempt_items", "learning attempts: building the items")
    phases.wrap(learning, "quality_lab_run_learn", "learning: derivation, after done")
    sql_seconds: dict[str, float] = defaultdict(float)
    sql_calls: dict[str, int] = defaultdict(int)

    def timed_sql(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            kind = _statement_kind(sql)
            sql_seconds[kind] += time.perf_counter() - started
            sql_calls[kind] += 1

    started = time.perf_counter()
    try:
        with connection.execute_wrapper(timed_sql):
            services.run_execute(run_id=run.pk)
    finally:
        phases.undo()
    total = time.perf_counter() - started
    count = len(case_ids)
    print(f"\nprofile: run_execute in this process, {count} cases, {total:.2f} s")
    print(f"  {'phase':<48} {'calls':>6} {'total s':>8} {'ms/case':>8} {'share':>6}")
    rows = sorted(phases.seconds.items(), key=lambda item: -item[1])
    for name, seconds in rows:
        print(
            f"  {name:<48} {phases.calls[name]:>6} {seconds:>8.3f} "
            f"{seconds / count * 1000:>8.2f} {seconds / total:>6.1%}"
        )
    print(f"\n  {'SQL statement':<56} {'calls':>6} {'total s':>8} {'ms/call':>8}")
    for kind, seconds in sorted(sql_seconds.items(), key=lambda item: -item[1])[:20]:
        print(
            f"  {kind[:56]:<56} {sql_calls[kind]:>6} {seconds:>8.3f} "
            f"{seconds / sql_calls[kind] * 1000:>8.3f}"
        )
    print(
        f"  {'all SQL':<56} {sum(sql_calls.values()):>6} {sum(sql_seconds.values()):>8.3f}"
        f" ({sum(sql_calls.values()) / count:.1f} statements per case)"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--sqlite", action="store_true", help="a fresh SQLite file instead")
    parser.add_argument(
        "--redis",
        nargs="?",
        const=os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL,
        default="",
        metavar="URL",
        help=f"Redis as the broker (default URL: $REDIS_URL or {DEFAULT_REDIS_URL})",
    )
    parser.add_argument("--repeat", type=int, default=1, help="interleaved runs; best of each")
    parser.add_argument("--profile", action="store_true", help="then profile run_execute")
    parser.add_argument("--keep-worker-log", action="store_true")
    parser.add_argument(
        "--large-spec",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="measure importing a spec of GitHub's size instead (see the module docstring)",
    )
    parser.add_argument("--large-spec-child", nargs=2, metavar=("WHICH", "PATH"),
                        help=argparse.SUPPRESS)  # fmt: skip
    add_strict_argument(parser)
    return parser.parse_args(argv)


# --- a spec of GitHub's size -------------------------------------------------------------

GITHUB_SPEC = ROOT / "var" / "bench" / "api.github.com.json"
TARGET_IMPORT_RATIO = 1.2


def large_spec_path(given: str, scratch: Path) -> tuple[Path, str]:
    """The spec to import and where it came from."""
    if given:
        return Path(given), "given"
    if GITHUB_SPEC.is_file():
        return GITHUB_SPEC, "GitHub's api.github.com.json"
    from bench import large_spec

    return large_spec.write(scratch / "generated.json"), "generated by bench/large_spec.py"


def _peak_mb() -> float:
    # Linux reports kilobytes; macOS bytes.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 / (1024 if sys.platform == "darwin" else 1)


def _cpu_seconds() -> float:
    """CPU time this process has run (user + system): what other jobs on a shared machine
    do not inflate, unlike wall-clock seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def large_spec_child(which: str, path: Path, name: str) -> dict[str, Any]:
    """One measurement in this (fresh) process; printed as JSON for the parent."""
    import json

    if which == "engine":
        from graph_tool_call.graphify import build_openapi_collection_artifact

        base_mb = _peak_mb()
        started, cpu_started = time.perf_counter(), _cpu_seconds()
        spec = json.loads(path.read_text(encoding="utf-8"))
        artifact = build_openapi_collection_artifact(spec, allow_private_hosts=False)
        seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu_started
        return {"seconds": seconds, "cpu_seconds": cpu, "peak_mb": _peak_mb(),
                "base_mb": base_mb, "tools": len(artifact.get("tools") or {})}  # fmt: skip

    import django

    django.setup()
    from qualitylab import engine, services
    from qualitylab.engine import spec as engine_spec
    from qualitylab.models import CollectionVersion

    spent: dict[str, float] = defaultdict(float)

    def timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter() - started

        return wrapper

    base_mb = _peak_mb()
    services._send = lambda task, **kwargs: None  # the build runs below, in this process
    started = time.perf_counter()
    spec_text = path.read_text(encoding="utf-8")
    _, version = services.collection_create(name=name, spec_text=spec_text)
    create_seconds = time.perf_counter() - started
    del spec_text
    engine.parse_spec = timed("parse (JSON, checks)", engine.parse_spec)
    # build_artifact (engine.spec) looks these two up in its own module.
    engine_spec.build_openapi_collection_artifact = timed(
        "graph-tool-call's build", engine_spec.build_openapi_collection_artifact
    )
    engine_spec.artifact_hash = timed(
        "build key (hash of spec, version, options)", engine_spec.artifact_hash
    )
    CollectionVersion.compress = staticmethod(  # type: ignore[method-assign]
        timed("compress", CollectionVersion.compress)
    )
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    built = services.version_build(version_id=version.pk)
    build_seconds, build_cpu = time.perf_counter() - started, _cpu_seconds() - cpu_started
    if built is None or built.status != "ready":
        raise SystemExit(f"the import failed: {built and built.error}")
    spent["the rest (copies, store)"] = build_seconds - sum(spent.values())
    return {
        "seconds": build_seconds,
        "cpu_seconds": build_cpu,
        "create_seconds": create_seconds,
        "peak_mb": _peak_mb(),
        "base_mb": base_mb,
        "tools": built.operation_count,
        "spent": dict(spent),
    }


def large_spec_main(args: argparse.Namespace) -> int:
    import json

    scratch = Path(tempfile.mkdtemp(prefix="qualitylab-bench-large-"))
    env = configure(args, scratch)
    ensure_database(env["DATABASE_URL"])
    try:
        path, origin = large_spec_path(args.large_spec, scratch)
        size = path.stat().st_size
        import django

        django.setup()
        prepare_database()
        print(f"start: {_load()}")
        print(f"spec: {path} ({origin}), {size / 1_000_000:.1f} MB")
        best: dict[str, dict[str, Any]] = {}
        verdicts = Verdicts()
        for attempt in range(1, args.repeat + 1):
            results: dict[str, dict[str, Any]] = {}
            for which in ("engine", "desk"):
                output = subprocess.run(
                    [sys.executable, __file__, "--large-spec-child", which, str(path)]
                    + (["--sqlite"] if args.sqlite else [])
                    + ["--database-url", env["DATABASE_URL"]],
                    env={**env, "BENCH_COLLECTION": f"large-{attempt}"},
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                results[which] = json.loads(output.strip().splitlines()[-1])
            tools = {which: result["tools"] for which, result in results.items()}
            if not verdicts.check("import", import_problems(attempt, tools)):
                continue  # a build that lost tools is not timed
            for which, result in results.items():
                print(
                    f"  attempt {attempt}: {which:<6} {result['seconds']:7.2f} s "
                    f"({result['cpu_seconds']:7.2f} s CPU), peak {result['peak_mb']:6.0f} MB, "
                    f"{result['tools']} tools"
                )
                if which not in best or result["cpu_seconds"] < best[which]["cpu_seconds"]:
                    best[which] = result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not verdicts.passed("import"):
        verdicts.target("import", needs=["import"], judge=lambda: (False, ""))
        return verdicts.exit_status(
            strict=args.strict, results_dir=args.results_dir, bench="qualitylab-large-spec"
        )
    engine_run, desk_run = best["engine"], best["desk"]
    wall_ratio = desk_run["seconds"] / engine_run["seconds"]
    cpu_ratio = desk_run["cpu_seconds"] / engine_run["cpu_seconds"]
    rounds = f" (best of {args.repeat})" if args.repeat > 1 else ""
    print()
    print(f"{'path' + rounds:<48} {'seconds':>8} {'CPU s':>8} {'peak MB':>8} {'tools':>6}")
    for label, run in (
        ("graph-tool-call build (json.loads + build)", engine_run),
        ("Quality Lab worker build (version_build)", desk_run),
    ):
        print(
            f"{label:<48} {run['seconds']:>8.2f} {run['cpu_seconds']:>8.2f} "
            f"{run['peak_mb']:>8.0f} {run['tools']:>6}"
        )
    print(
        f"{'  before it, the upload check (parse, store)':<48} {desk_run['create_seconds']:>8.2f}"
    )
    for label, seconds in sorted(desk_run["spent"].items(), key=lambda item: -item[1]):
        print(f"    {label:<44} {seconds:>8.2f}")
    print(
        f"peak memory: worker {desk_run['peak_mb']:.0f} MB (a fresh process with Django "
        f"takes {desk_run['base_mb']:.0f} MB), engine alone {engine_run['peak_mb']:.0f} MB "
        f"({engine_run['base_mb']:.0f} MB before the build); spec {size / 1_000_000:.1f} MB"
    )
    print(
        f"ratio (worker build / graph-tool-call's own build): {cpu_ratio:.2f}x in CPU time, "
        f"{wall_ratio:.2f}x wall-clock (the wall-clock ratio moves with the other jobs on "
        "the machine; CPU time is what each build itself spent, the store's insert excepted)"
    )
    verdicts.target(
        "import",
        needs=["import"],
        judge=lambda: (
            cpu_ratio <= TARGET_IMPORT_RATIO,
            f"import: {cpu_ratio:.2f}x graph-tool-call's own build "
            f"(target <= {TARGET_IMPORT_RATIO}x)",
        ),
    )
    print(f"end: {_load()}")
    return verdicts.exit_status(
        strict=args.strict, results_dir=args.results_dir, bench="qualitylab-large-spec"
    )


def import_problems(attempt: int, tools: dict[str, int]) -> list[str]:
    """The worker's build must hold the tools graph-tool-call's own build holds."""
    engine_tools, desk_tools = tools.get("engine", 0), tools.get("desk", 0)
    if engine_tools and desk_tools == engine_tools:
        return []
    return [
        f"attempt {attempt}: the worker built {desk_tools} tools, graph-tool-call's own "
        f"build {engine_tools}"
    ]


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main() -> int:
    args = parse_args()
    if args.large_spec_child:
        import json

        which, path = args.large_spec_child
        configure(args, Path(tempfile.mkdtemp(prefix="qualitylab-bench-child-")))
        name = os.environ.get("BENCH_COLLECTION", "large")
        print(json.dumps(large_spec_child(which, Path(path), name)))
        return 0
    if args.large_spec is not None:
        return large_spec_main(args)
    scratch = Path(tempfile.mkdtemp(prefix="qualitylab-bench-"))
    env = configure(args, scratch)
    ensure_database(env["DATABASE_URL"])

    import django

    django.setup()
    from django.db import connection

    print(f"start: {_load()}")
    prepare_database()
    cases = bench_cases(args.cases)
    collection = load_collection(cases)
    case_ids = [case["id"] for case in cases]
    count = len(cases)
    broker = "redis" if args.redis else "filesystem"
    print(
        f"database {connection.vendor}, broker {broker}, {count} cases "
        f"({sum(case['mode'] == 'search' for case in cases)} search, "
        f"{sum(case['mode'] == 'plan' for case in cases)} plan)"
    )

    log_path = scratch / "worker.log"
    worker_best = raw_best = in_task_best = float("inf")
    worker_cpu_best = raw_cpu_best = float("inf")
    worker_passed = raw_passed = 0
    verdicts = Verdicts()
    try:
        with worker(env, log_path) as process:
            warmup_seconds, warm_run, _ = run_through_worker(
                collection, case_ids[:WARMUP_CASES], process, log_path
            )
            print(f"worker warm-up: {WARMUP_CASES} cases in {warmup_seconds:.2f} s (start-up)")
            # Before any clock: the worker judges the warm-up's cases as the engine does.
            _, warm_expected, _ = run_raw(collection, cases[:WARMUP_CASES])
            warm_problems = worker_problems(warm_run, warm_expected)
            attempts = args.repeat if not warm_problems else 0
            if warm_problems:
                verdicts.check("worker", [f"warm-up: {problem}" for problem in warm_problems])
            for attempt in range(1, attempts + 1):
                worker_seconds, run, worker_cpu = run_through_worker(
                    collection, case_ids, process, log_path
                )
                raw_seconds, expected, raw_cpu = run_raw(collection, cases)
                loop_ok = verdicts.check(
                    "plain loop",
                    [] if len(expected) == count else [f"{len(expected)} of {count} cases ran"],
                )
                worker_ok = verdicts.check(
                    "worker",
                    [f"attempt {attempt}: {problem}" for problem in worker_problems(run, expected)],
                )
                if not (loop_ok and worker_ok):
                    print(f"  attempt {attempt}: BROKEN (above), its times discarded")
                    continue
                in_task = (run.finished_at - run.started_at).total_seconds()
                worker_passed = run.passed
                raw_passed = sum(passed for passed, _, _ in expected.values())
                print(
                    f"  attempt {attempt}: worker {worker_seconds:.2f} s "
                    f"(in the task {in_task:.2f} s, worker CPU {worker_cpu:.2f} s), "
                    f"plain loop {raw_seconds:.2f} s (CPU {raw_cpu:.2f} s)"
                )
                worker_best = min(worker_best, worker_seconds)
                in_task_best = min(in_task_best, in_task)
                raw_best = min(raw_best, raw_seconds)
                worker_cpu_best = min(worker_cpu_best, worker_cpu)
                raw_cpu_best = min(raw_cpu_best, raw_cpu)
        if args.profile:
            profile(collection, case_ids)
    finally:
        if args.keep_worker_log:
            print(f"worker log: {log_path}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    best = f" (best of {args.repeat})" if args.repeat > 1 else ""
    if verdicts.passed("worker", "plain loop"):
        # Figures only from paths that passed their checks: the same verdicts, case by case.
        print()
        print(f"{'path' + best:<36} {'seconds':>8} {'cases/s':>9} {'passed':>7}")
        print(
            f"{'worker (run_start -> done)':<36} {worker_best:>8.2f} "
            f"{count / worker_best:>9.1f} {worker_passed:>7}"
        )
        print(
            f"{'  of which inside the task':<36} {in_task_best:>8.2f} {count / in_task_best:>9.1f}"
        )
        print(
            f"{'engine.run_case, plain loop':<36} {raw_best:>8.2f} {count / raw_best:>9.1f} "
            f"{raw_passed:>7}"
        )
        print(f"ratio (worker time / raw engine time): {worker_best / raw_best:.2f}x")
        if worker_cpu_best and raw_cpu_best:
            print(
                f"CPU per case: worker {worker_cpu_best / count * 1000:.2f} ms (its own "
                f"process; the database server's work is not in it), plain loop "
                f"{raw_cpu_best / count * 1000:.2f} ms, ratio "
                f"{worker_cpu_best / raw_cpu_best:.2f}x"
            )

    def rate() -> tuple[bool, str]:
        found = count / worker_best
        return found >= TARGET_RATE, (
            f"rate: {found:.1f} cases/s on one worker (target >= {TARGET_RATE:.0f})"
        )

    def overhead() -> tuple[bool, str]:
        found = ratio(worker_best, raw_best)
        if found is None:
            return False, "overhead: the plain loop measured nothing"
        return found <= TARGET_RATIO, (
            f"overhead: {found:.2f}x the raw engine time (target <= {TARGET_RATIO}x)"
        )

    verdicts.target("rate", needs=["worker"], judge=rate)
    verdicts.target("overhead", needs=["worker", "plain loop"], judge=overhead)
    print(f"end: {_load()}")
    return verdicts.exit_status(
        strict=args.strict, results_dir=args.results_dir, bench="qualitylab"
    )


if __name__ == "__main__":
    sys.exit(main())
