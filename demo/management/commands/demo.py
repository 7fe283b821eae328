from __future__ import annotations

import ipaddress
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from argparse import ArgumentParser
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from triage_desk_client import Reporter

from core import outbound
from fixes import demo as fixes_demo
from organisation.models import Membership, OwnedCollection, Team
from organisation.roles import ensure_role_group
from qualitylab import demo as quality_demo
from qualitylab import services as quality_services
from qualitylab.management.commands.qualitylab import run_path, wait_for_build, wait_for_run
from qualitylab.models import BuildStatus, CaseRun, Collection, LearningMode, RunStatus
from qualitylab.sandbox import DEMO_TOKEN
from triage.demo_data import demo_items
from triage.intake.ingest import batch_ingest
from triage.models import ApiKey, IngestItem
from triage.services import api_key_create, person_language_set

DEMO_OWNER = "demo-runtime"
DEMO_ADMIN = ("admin", "triage-demo-admin")
# One login per role (demo only; the passwords are printed on start).
DEMO_ROLE_USERS = {
    "viewer": ("viewer", "triage-demo-viewer"),
    "operator": ("operator", "triage-demo-operator"),
    "reviewer": ("reviewer", "triage-demo-reviewer"),
}
# An operator who reads the pages in Korean (stored on their PersonPreference).
DEMO_KOREAN_OPERATOR = ("operator-ko", "triage-demo-operator-ko")
# Two teams and the collections each owns (docs/teams.md): every collection the demo sends
# to, so that a team's lead sees it whole. The logins above belong to both, with their role,
# so they see the whole demo; each team's lead sees only their team's.
DEMO_TEAMS = {
    "checkout": ("shop", "shop-orders", "billing-mcp", fixes_demo.COLLECTION),
    "fulfilment": ("shop-members", "shop-logistics"),
}
DEMO_TEAM_LEADS = {
    "checkout": ("checkout-lead", "triage-demo-checkout-lead"),
    "fulfilment": ("fulfilment-lead", "triage-demo-fulfilment-lead"),
}

# Quality Lab: the demo collection calls the sandbox; its token reaches the worker only,
# through the environment variable the collection's auth profile names: the names declared
# for the collection "shop" (qualitylab/credentials.py).
DEMO_COLLECTION = "shop"
DEMO_TOKEN_ENV = "QUALITYLAB_SECRET_SHOP"
DEMO_EXPIRED_TOKEN_ENV = "QUALITYLAB_SECRET_SHOP__EXPIRED"
# The sandbox listens on loopback, which execute cases call only when an administrator
# allows it (QUALITYLAB_ALLOWED_PRIVATE_HOSTS); `make demo` allows exactly this address on
# the sandbox's port, no other loopback port (the database's, Redis's).
DEMO_SANDBOX_HOST = "127.0.0.1"
DEMO_AUTH_PROFILE = {
    "header_names": ["Authorization"],
    "scheme": "Bearer",
    "secret_env": DEMO_TOKEN_ENV,
    "sessions": {"expired": {"secret_env": DEMO_EXPIRED_TOKEN_ENV}},
}
DEMO_SUITES = {
    "search": "Retrieval: does the expected operation come back in the Top-K?",
    "plan": "Target selection and plan synthesis, no HTTP.",
    "execute": "Plans run against the sandbox API over HTTP.",
}
DEMO_WAIT_SECONDS = 300.0
# An agent runtime beside the desk: an MCP server (the official SDK) with triage-desk-client's
# NextActionContract middleware and an MCP client, in its own process, reaching the desk
# only through the ingest API and the OTLP door, as a deployed runtime does.
DEMO_MCP_RUNTIME = Path(settings.BASE_DIR) / "client" / "examples" / "mcp_billing.py"
DEMO_MCP_OWNER = "demo-mcp-runtime"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class AlertLog:
    """The demo's alert deliveries, one line each in a file under var/, not on the console:
    the demo's traffic fires dozens, which would push the addresses and logins out of
    sight. The console gets one line saying how many there were and where they are."""

    KINDS = (
        ("Slack", "[alerts] Slack"),
        ("webhook", "[alerts] webhook"),
        ("email", "[alerts] email"),
    )

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()  # the sinks call from their own threads
        self._file: TextIO = path.open("w", encoding="utf-8")

    def write(self, line: str) -> None:
        kind = next((kind for kind, prefix in self.KINDS if line.startswith(prefix)), "other")
        with self._lock:
            self.counts[kind] += 1
            if not self._file.closed:
                self._file.write(f"{timezone.now():%Y-%m-%d %H:%M:%S} {line}\n")
                self._file.flush()

    def summary(self) -> str:
        with self._lock:
            total = sum(self.counts.values())
            kinds = ", ".join(
                f"{self.counts[kind]} {kind}" for kind, _ in self.KINDS if self.counts[kind]
            )
        try:
            shown = self.path.relative_to(Path(settings.BASE_DIR))
        except ValueError:
            shown = self.path
        return (
            f"Alerts: {total} deliveries so far{f' ({kinds})' if kinds else ''}, one line "
            f"each in {shown} (tail -f it to watch them arrive)."
        )

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _ingest_as(owner: str) -> Callable[[list[dict[str, Any]]], None]:
    """A demo loader's ingest: its items through the ingest path, 500 a batch, as `owner`."""

    def ingest(items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), 500):
            batch_ingest(owner=owner, items=items[start : start + 500])

    return ingest


def stop_processes(processes: list[subprocess.Popen[bytes]], *, grace_seconds: float) -> None:
    """SIGTERM every process, give them `grace_seconds` together, then kill what is left.

    A second Ctrl-C, or the SIGTERM that both a supervisor (to the process group) and make
    (to its child) send, must not cut this short: the worker would be left running."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    for process in processes:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Command(BaseCommand):
    help = (
        "Migrate, create the demo logins, start web, worker and the Quality Lab sandbox API, "
        "send the demo traffic through the real ingest API, import the demo collection and "
        "its cases, run its three suites through the worker, and keep running until Ctrl-C."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", "8000")))
        parser.add_argument(
            "--ingest-port",
            type=int,
            default=int(os.environ.get("DEMO_INGEST_PORT", "8001")),
            help="where the ingest pool listens (DEMO_INGEST_PORT, default 8001)",
        )
        parser.add_argument(
            "--sandbox-port",
            type=int,
            default=int(os.environ.get("DEMO_SANDBOX_PORT", "8090")),
            help="where the Quality Lab sandbox API listens (DEMO_SANDBOX_PORT, default 8090)",
        )
        parser.add_argument(
            "--webhook-port",
            type=int,
            default=int(os.environ.get("DEMO_WEBHOOK_PORT", "8091")),
            help="where the demo's webhook receiver listens (DEMO_WEBHOOK_PORT, default 8091)",
        )
        parser.add_argument(
            "--smtp-port",
            type=int,
            default=int(os.environ.get("DEMO_SMTP_PORT", "8025")),
            help="where the demo's SMTP sink listens (DEMO_SMTP_PORT, default 8025)",
        )
        parser.add_argument(
            "--no-serve",
            action="store_true",
            help="Load the demo (traffic and Quality Lab runs), then stop every process.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            # The demo creates logins with printed passwords and serves plain HTTP: it runs
            # on the development settings only, never on a production configuration.
            raise CommandError(
                "The demo runs on the development settings: start it with `make demo` "
                "(or DJANGO_DEBUG=1 python manage.py demo)."
            )
        # The filesystem broker URL has no host; kombu warns about it on every connection.
        logging.getLogger("kombu.connection").setLevel(logging.ERROR)
        # Stopped by a supervisor (SIGTERM) like by Ctrl-C: the children stop too.
        signal.signal(signal.SIGTERM, _interrupt)
        self._check_sandbox_allowed(options["sandbox_port"])
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        self._ensure_admin()
        port: int = options["port"]
        base_url = f"http://127.0.0.1:{port}"
        ingest_url = f"http://127.0.0.1:{options['ingest_port']}"
        sandbox_url = f"http://{DEMO_SANDBOX_HOST}:{options['sandbox_port']}"
        processes: list[subprocess.Popen[bytes]] = []
        # Alerts: the receiver and SMTP sink run in this process; the children reach them.
        from alerts import demo as alerts_demo

        os.environ.update(
            alerts_demo.environment(
                webhook_port=options["webhook_port"],
                smtp_port=options["smtp_port"],
                base_url=base_url,
            )
        )
        settings.DESK_BASE_URL = base_url
        alert_log = AlertLog(Path(settings.VAR_DIR) / "demo-alerts.log")
        sinks = alerts_demo.start_sinks(
            webhook_port=options["webhook_port"],
            smtp_port=options["smtp_port"],
            say=alert_log.write,
        )
        alert_rules = alerts_demo.install(sinks=sinks)
        self.stdout.write(
            f"Alerts: {len(alert_rules)} demo rules (one of each kind) send to a webhook "
            f"receiver on {sinks.receiver.url('/')} and an SMTP sink on "
            f"127.0.0.1:{sinks.smtp.port}."
        )
        try:
            sandbox = self._start_sandbox(options["sandbox_port"])
            processes.append(sandbox)
            # The production shape: the pages and the ingest door in separate pools.
            web = self._start_web(port, pool="web", workers=2)
            processes.append(web)
            ingest = self._start_web(options["ingest_port"], pool="ingest", workers=1)
            processes.append(ingest)
            self._wait_until_up(base_url, web)
            self._wait_until_up(ingest_url, ingest)
            self._wait_for_sandbox(sandbox_url, sandbox)
            self._load_traffic(ingest_url)
            self._run_mcp_runtime(base_url, ingest_url)
            self._load_contracts(base_url)
            processes.append(self._start_worker())
            runs = self._load_quality_lab(sandbox_url)
            self._load_fixes(base_url)
            if options["no_serve"]:
                self._print_runs(base_url, runs)
                self.stdout.write(alert_log.summary())
                self.stdout.write(
                    self.style.SUCCESS(
                        "Demo loaded (--no-serve); stopping web, worker and sandbox."
                    )
                )
                return
            self._print_welcome(base_url, ingest_url, runs, alerts=alert_log.summary())
            while all(process.poll() is None for process in processes):
                time.sleep(1)
            raise CommandError("A demo process stopped; see its output above.")
        except KeyboardInterrupt:
            self.stdout.write("\nStopping.")
        finally:
            stop_processes(processes, grace_seconds=15)
            sinks.stop()
            alert_log.close()

    def _check_sandbox_allowed(self, port: int) -> None:
        allowance = quality_services.private_allowance()
        address = ipaddress.ip_address(DEMO_SANDBOX_HOST)
        if not allowance.allows(DEMO_SANDBOX_HOST, address, port=port):
            entry = outbound.host_port(DEMO_SANDBOX_HOST, port)
            raise CommandError(
                f"The demo's sandbox API listens on {entry}, which execute cases may not "
                "call unless an administrator allows it: run "
                f"QUALITYLAB_ALLOWED_PRIVATE_HOSTS={entry} python manage.py demo "
                "(make demo does, following DEMO_SANDBOX_PORT)."
            )

    def _ensure_admin(self) -> None:
        username, password = DEMO_ADMIN
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        user.groups.add(ensure_role_group("admin"))
        for role, (username, password) in DEMO_ROLE_USERS.items():
            person, _ = get_user_model().objects.get_or_create(username=username)
            person.set_password(password)
            person.save()
            person.groups.add(ensure_role_group(role))
        username, password = DEMO_KOREAN_OPERATOR
        korean, _ = get_user_model().objects.get_or_create(username=username)
        korean.set_password(password)
        korean.save()
        korean.groups.add(ensure_role_group("operator"))
        person_language_set(user=korean, language="ko")
        self._ensure_teams(
            {role: username for role, (username, _) in DEMO_ROLE_USERS.items()}
            | {"operator-ko": DEMO_KOREAN_OPERATOR[0]}
        )

    def _ensure_teams(self, members: dict[str, str]) -> None:
        """The demo's two teams: their collections, the role logins in both, and a lead each
        (an operator of that team only, with no role outside it)."""
        people = get_user_model().objects
        for team_name, collections in DEMO_TEAMS.items():
            team, _ = Team.objects.get_or_create(name=team_name)
            for collection in collections:
                OwnedCollection.objects.get_or_create(
                    collection=collection, defaults={"team": team}
                )
            for role, username in members.items():
                Membership.objects.get_or_create(
                    team=team,
                    person=people.get(username=username),
                    defaults={"role": role.removesuffix("-ko")},
                )
            username, password = DEMO_TEAM_LEADS[team_name]
            lead, _ = people.get_or_create(username=username)
            lead.set_password(password)
            lead.save()
            Membership.objects.get_or_create(team=team, person=lead, defaults={"role": "operator"})

    def _start_web(self, port: int, *, pool: str, workers: int) -> subprocess.Popen[bytes]:
        # As docker-compose.yml: the ingest pool's many threads wait for one of its batch slots
        # (one per worker) and answer 503 ingest_busy after the wait, instead of queueing in
        # gunicorn.
        threads = 16 if pool == "ingest" else 4
        slots = ["--env", f"TRIAGE_INGEST_CONCURRENT_BATCHES={workers}"] if pool == "ingest" else []
        return subprocess.Popen(
            [
                sys.executable, "-m", "gunicorn", "config.wsgi",
                "--env", f"TRIAGE_POOL={pool}", *slots,
                "--bind", f"127.0.0.1:{port}",
                "--worker-class", "gthread", "--workers", str(workers),
                "--threads", str(threads),
                "--log-level", "warning",
            ]
        )  # fmt: skip

    def _start_worker(self) -> subprocess.Popen[bytes]:
        # The demo secrets go to the worker's environment only: execute cases read them from
        # there, and neither this process nor the web server ever holds them.
        env = {
            **os.environ,
            DEMO_TOKEN_ENV: DEMO_TOKEN,
            DEMO_EXPIRED_TOKEN_ENV: quality_demo.EXPIRED_TOKEN,
        }
        return subprocess.Popen(
            # -B: the periodic tasks (stale runs, expired mutes) run inside this worker.
            [sys.executable, "-m", "celery", "--quiet", "-A", "config", "worker", "-B",
             "--loglevel", "WARNING", "--concurrency", "2"],
            env=env,
        )  # fmt: skip

    def _start_sandbox(self, port: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "qualitylab.sandbox", "--port", str(port)],
            cwd=settings.BASE_DIR,
            stdout=subprocess.DEVNULL,
        )

    def _wait_for_sandbox(self, sandbox_url: str, sandbox: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if sandbox.poll() is not None:
                raise CommandError(
                    f"The Quality Lab sandbox exited (is port {sandbox_url.rsplit(':', 1)[1]} "
                    "taken? Use DEMO_SANDBOX_PORT=8092 make demo)."
                )
            try:
                with urllib.request.urlopen(f"{sandbox_url}/__state", timeout=2):
                    return
            except OSError:  # refused, reset or timed out (URLError is an OSError)
                time.sleep(0.2)
        raise CommandError("The Quality Lab sandbox did not answer within 15 s.")

    def _load_quality_lab(self, sandbox_url: str) -> list[CaseRun]:
        """Import the demo collection (kept when it is there), its cases and suites, wait
        for the build, then run the three suites through the worker and wait for them."""
        collection = Collection.objects.filter(name=DEMO_COLLECTION).first()
        building = None
        if collection is None:
            collection, building = quality_services.collection_create(
                name=DEMO_COLLECTION,
                title="Demo shop (sandbox API)",
                spec_text=quality_demo.SPEC_PATH.read_text(encoding="utf-8"),
                base_url=sandbox_url,
                allowed_hosts=[DEMO_SANDBOX_HOST],
                auth_profile=DEMO_AUTH_PROFILE,
                # The sandbox keeps refunds in memory; the refund cases clean up after
                # themselves.
                mutations_allowed=True,
            )
            # Shadow mode: runs also rank with the learned suggestions, for the review page.
            collection.learning_mode = LearningMode.SHADOW
            collection.save(update_fields=["learning_mode"])
            self.stdout.write(f"Imported the Quality Lab collection {DEMO_COLLECTION}.")
        else:
            self.stdout.write(
                f"Quality Lab collection {DEMO_COLLECTION} already there; keeping it."
            )
            if collection.base_url != sandbox_url or collection.auth_profile != DEMO_AUTH_PROFILE:
                # The sandbox moved (DEMO_SANDBOX_PORT), or the collection was saved with
                # the credential variables of an older demo: point it at the sandbox.
                quality_services.collection_update(
                    collection=collection,
                    title=collection.title,
                    base_url=sandbox_url,
                    allowed_hosts=[DEMO_SANDBOX_HOST],
                    auth_profile=DEMO_AUTH_PROFILE,
                    mutations_allowed=collection.mutations_allowed,
                )
                self.stdout.write(f"Pointed {DEMO_COLLECTION} at the sandbox on {sandbox_url}.")
            current = collection.current_version
            if current is None or current.status != BuildStatus.READY:
                building = quality_services.collection_rebuild(collection=collection)
        case_data = quality_demo.load_case_data()
        report = quality_services.cases_import(collection=collection, documents=case_data)
        if report.errors:
            raise CommandError("The demo cases do not import: " + "; ".join(report.errors))
        suites = [
            quality_services.suite_save(
                collection=collection,
                name=mode,
                description=description,
                case_ids=[case["id"] for case in case_data if case["mode"] == mode],
            )
            for mode, description in DEMO_SUITES.items()
        ]
        self.stdout.write(
            f"Demo cases: {report.created} created, {report.updated} updated; suites "
            + ", ".join(f"{suite.name} ({suite.cases.count()})" for suite in suites)
            + "."
        )
        if building is not None:
            version = wait_for_build(
                version_id=building.pk,
                out=self.stdout,
                err=self.stderr,
                timeout=DEMO_WAIT_SECONDS,
                start_worker=False,
            )
            if version.status != BuildStatus.READY:
                raise CommandError(f"The demo collection did not build: {version.error}")
            self.stdout.write(
                f"Built {DEMO_COLLECTION} v{version.number}: {version.operation_count} operations."
            )
            collection.refresh_from_db()
        # The plan suite twice: its second run has a run of the same suite to compare with.
        # (Learning counts each case once, so the repeat adds observations, not evidence.)
        runs = [
            quality_services.run_start(collection=collection, suite=suite, channel="cli")
            for suite in [*suites, *(suite for suite in suites if suite.name == "plan")]
        ]
        self.stdout.write("Running the search, plan and execute suites through the worker.")
        finished = []
        for queued in runs:
            run = self._wait_for_run(queued)
            if run.status != RunStatus.DONE:
                raise CommandError(f"Demo run {run.pk} {run.status}: {run.error}")
            finished.append(run)
        return finished

    def _wait_for_run(self, queued: CaseRun) -> CaseRun:
        """A run the demo's worker executes, to its end (or the demo's wait)."""
        return wait_for_run(
            run_id=queued.pk,
            out=self.stdout,
            err=self.stderr,
            timeout=DEMO_WAIT_SECONDS,
            start_worker=False,
        )

    def _print_runs(self, base_url: str, runs: list[CaseRun]) -> None:
        for run in runs:
            suite = run.suite.name if run.suite else "all"
            self.stdout.write(
                f"  {suite:<8} {run.passed:>3}/{run.done:<3} passed  {base_url}{run_path(run.pk)}"
            )

    def _wait_until_up(self, base_url: str, web: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if web.poll() is not None:
                raise CommandError(
                    f"A web server exited (is port {base_url.rsplit(':', 1)[1]} taken? "
                    "Use DEMO_PORT=8002 or DEMO_INGEST_PORT=8003 make demo)."
                )
            try:
                with urllib.request.urlopen(f"{base_url}/healthz", timeout=2):
                    return
            except OSError:  # refused, reset or timed out (URLError is an OSError)
                time.sleep(0.3)
        raise CommandError(f"The web server at {base_url} did not answer within 30 s.")

    def _load_traffic(self, base_url: str) -> None:
        if IngestItem.objects.filter(owner=DEMO_OWNER).exists():
            self.stdout.write("Demo traffic already loaded; keeping it.")
            return
        ApiKey.objects.filter(name=DEMO_OWNER).delete()
        _, key = api_key_create(name=DEMO_OWNER, scopes=["ingest", "read"])
        items = list(demo_items(now=timezone.now()))
        # Through the runtime reporter, as a runtime sends them: spooled on disk, then
        # batched to POST /api/v1/ingest by its sender thread.
        reporter = Reporter(
            base_url, key, spool_dir=str(Path(settings.BASE_DIR) / "var" / "demo-spool")
        )
        for item in items:
            reporter.report(item["type"], item["id"], item["body"])
        delivered = reporter.close(timeout=120)
        stats = reporter.stats()
        if not delivered:
            raise CommandError(f"The desk did not take the demo traffic: {stats['last_error']}")
        self.stdout.write(
            f"Sent {len(items)} demo items with triage_desk_client.Reporter "
            f"(POST /api/v1/ingest): {stats['sent']} accepted, {stats['duplicate']} duplicate, "
            f"{stats['rejected']} rejected"
        )

    def _load_contracts(self, base_url: str) -> None:
        """Tools in every state of the contracts page (contracts.demo), counted at once."""
        from contracts import demo as contracts_demo

        if IngestItem.objects.filter(owner=contracts_demo.OWNER).exists():
            self.stdout.write("The contracts demo is already loaded; keeping it.")
            return

        sent = contracts_demo.install(now=timezone.now(), ingest=_ingest_as(contracts_demo.OWNER))
        self.stdout.write(
            f"Contracts: {sent} receipts of billing's getInvoice (keeps its contract) and "
            f"sendInvoice (breaks a retry rule): {base_url}/contracts/"
        )

    def _load_fixes(self, base_url: str) -> None:
        """Two releases, a fix that held, one that did not (fixes.demo), and one verified by a
        Quality Lab run in the worker."""
        if IngestItem.objects.filter(owner=fixes_demo.OWNER).exists():
            self.stdout.write("The fixes demo is already loaded; keeping it.")
            return

        operator = get_user_model().objects.get(username=DEMO_ROLE_USERS["operator"][0])
        fixes = fixes_demo.install(
            now=timezone.now(), ingest=_ingest_as(fixes_demo.OWNER), actor=operator
        )
        verdicts = ", ".join(f"{fix.tool} {fix.verdict}" for fix in fixes)
        collection = Collection.objects.get(name=DEMO_COLLECTION)
        queued = fixes_demo.verify(collection=collection, actor=operator)
        if queued is not None:
            run = self._wait_for_run(queued)
            verdicts += f"; getOrderDetail verified by run #{run.pk} ({run.passed}/{run.total})"
        self.stdout.write(f"Fixes: {verdicts}: {base_url}/fixes/")

    def _run_mcp_runtime(self, base_url: str, ingest_url: str) -> None:
        if IngestItem.objects.filter(owner=DEMO_MCP_OWNER).exists():
            self.stdout.write("The MCP runtime's failures are already loaded; keeping them.")
            return
        ApiKey.objects.filter(name=DEMO_MCP_OWNER).delete()
        _, key = api_key_create(name=DEMO_MCP_OWNER, scopes=["ingest"])
        spool = Path(settings.BASE_DIR) / "var" / "demo-mcp-spool"
        done = subprocess.run(
            [sys.executable, str(DEMO_MCP_RUNTIME), "--desk", ingest_url, "--key", key,
             "--spool", str(spool)],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise CommandError(f"The demo's MCP runtime failed:\n{done.stderr[-2000:]}")
        self.stdout.write(
            "An MCP server with the NextActionContract middleware, called seven times by an "
            "MCP client, told its agent:"
        )
        for line in done.stdout.splitlines():
            call = json.loads(line)
            envelope = call.get("envelope") or {}
            said = (
                f"{envelope['status']} {envelope['code']} -> {envelope['retry']['next_action']}"
                if envelope
                else "ok"
            )
            self.stdout.write(f"  {call['tool']:<22}{said}")
        self.stdout.write(f"  its failures: {base_url}/?collection=billing-mcp")

    def _print_welcome(
        self, base_url: str, ingest_url: str, runs: list[CaseRun], *, alerts: str
    ) -> None:
        """The runs and the alerts in a line each, then what a newcomer needs, last: the
        addresses and the logins (nothing is printed after them while the demo runs)."""
        username, password = DEMO_ADMIN
        self.stdout.write("Quality Lab runs of the demo collection:")
        self._print_runs(base_url, runs)
        self.stdout.write(alerts)
        self.stdout.write(
            self.style.SUCCESS(f"\nTriage Desk is running at {base_url}/")
            + " (Ctrl-C stops web, worker and sandbox)\n"
            + f"  logins:       {username} / {password} (admin)"
            + "".join(
                f", {user} / {secret} ({role})" for role, (user, secret) in DEMO_ROLE_USERS.items()
            )
            + f", {DEMO_KOREAN_OPERATOR[0]} / {DEMO_KOREAN_OPERATOR[1]} (operator, reads in Korean)"
            + "".join(
                f", {user} / {secret} (operator of {team} only)"
                for team, (user, secret) in DEMO_TEAM_LEADS.items()
            )
            + "\n"
            + f"  learning:     {base_url}/learning/\n"
            + f"  Quality Lab:  {base_url}/qualitylab/{DEMO_COLLECTION}/\n"
            + f"  its failures: {base_url}/?source=quality_lab&collection={DEMO_COLLECTION}\n"
            + f"  API docs:     {base_url}/api/docs/\n"
            + f"  ingest pool:  {ingest_url}/api/v1/ingest (runtimes send here; the web "
            + "address takes ingest too)\n"
            + f"  failures API: {base_url}/api/v1/groups (signed in, or with a read key)\n"
            + f"  alerts:       {base_url}/alerts/ (rules, channels, the delivery log)"
        )
