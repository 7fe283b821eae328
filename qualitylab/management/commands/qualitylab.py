"""``manage.py qualitylab``: import collections and cases, start runs and wait for them.

The waiting helpers (:func:`wait_for_run`, :func:`wait_for_build`, :class:`TemporaryWorker`)
are shared with ``manage.py demo``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from argparse import (
    ArgumentParser,
    ArgumentTypeError,
    BooleanOptionalAction,
    RawDescriptionHelpFormatter,
)
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from django.core.validators import validate_slug
from django.db import transaction
from django.urls import NoReverseMatch, reverse

from core import outbound
from core.collection_names import CollectionNameError, check_collection_name
from core.json_limits import JSONTooDeep, loads_bounded
from core.storable import has_unstorable_text, replace_unstorable_text
from qualitylab import engine, selectors, services
from qualitylab.models import (
    BuildStatus,
    CaseMode,
    CaseRun,
    Collection,
    CollectionVersion,
    QualityCase,
    RunStatus,
    Suite,
)

# Exit codes: 1 = the cases (or the input) are the problem; 2 = the machinery is (the queue
# is down, the temporary worker died, nothing finished in time).
EXIT_FAILED = 1
EXIT_INFRASTRUCTURE = 2

PING_TIMEOUT_SECONDS = 1.5
# With the filesystem transport a worker may not answer the control channel; a worker that
# is there moves the job out of `queued` within a couple of its 1 s polls.
PICKUP_GRACE_SECONDS = 4.0
POLL_SECONDS = 0.5
WORKER_STOP_SECONDS = 20.0
DEFAULT_TIMEOUT_SECONDS = 1800.0

HELP = """\
Quality Lab from the command line: import a collection and its cases, start runs, and wait
for them as a CI gate.

  qualitylab import-collection NAME SPEC [--base-url URL] [--allowed-host H ...]
      [--auth-header Authorization --auth-scheme Bearer --auth-secret-env VAR]
      [--allow-mutations | --no-allow-mutations] [--wait]
      (when NAME exists: builds a new version of it, and the options given change its
      settings; its cases, suites and runs stay)
      (a SPEC over QUALITYLAB_MAX_SPEC_BYTES, 64 MiB by default, is refused from its size,
      unread; without --base-url or an absolute servers URL in the spec, execute cases
      cannot run: the command says so once the build is ready)
  qualitylab import-cases NAME CASES.json
  qualitylab run NAME [--suite S] [--mode M] [--repeat N] [--wait] [--json OUT]
      [--fail-under RATE]

Waiting (--wait; --json and --fail-under imply it) goes through the task queue like the
web pages do: the job is queued for a Celery worker and this command polls the database.
When no worker answers a ping (the filesystem transport may not answer one at all) and
the job has not left `queued` within a few seconds, the command starts a temporary worker
(`celery -A config worker --pool solo`) for the duration of the wait and stops it
afterwards (SIGTERM, then kill). That worker inherits this command's environment:
DATABASE_URL, REDIS_URL, and the variable named by the collection's auth profile. So
`--wait` also works with the embedded default (SQLite and the filesystem queue under var/).

Progress (cases done/total, passed, failed, elapsed) is one updating line on a terminal;
nothing but the summary is printed when stdout is not a terminal.

Exit codes: 0 success; 1 bad input, a failed build, a failed or cancelled run, or a pass
rate under --fail-under; 2 the queue is unavailable, the temporary worker died, or the
wait timed out.
"""

_Row = TypeVar("_Row", CaseRun, CollectionVersion)


class Command(BaseCommand):
    help = HELP

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.formatter_class = RawDescriptionHelpFormatter
        return parser

    def add_arguments(self, parser: ArgumentParser) -> None:
        commands = parser.add_subparsers(dest="action", required=True, metavar="SUBCOMMAND")

        collection = commands.add_parser(
            "import-collection",
            help="Register a collection from an OpenAPI file, or rebuild it when NAME exists.",
        )
        collection.add_argument("name", metavar="NAME")
        collection.add_argument("spec", metavar="SPEC", type=Path, help="OpenAPI JSON or YAML")
        collection.add_argument("--title", default="")
        collection.add_argument("--base-url", default="", help="where execute cases call")
        collection.add_argument(
            "--allowed-host",
            action="append",
            default=None,
            dest="allowed_hosts",
            metavar="HOST",
            help="a host execute cases may call (repeat it; default: the base URL's host)",
        )
        collection.add_argument("--auth-header", default="", help="e.g. Authorization")
        collection.add_argument("--auth-scheme", default=None, help="e.g. Bearer")
        collection.add_argument(
            "--auth-secret-env",
            default="",
            metavar="VAR",
            help="the environment variable holding the secret (never the secret itself)",
        )
        collection.add_argument(
            "--allow-mutations",
            action=BooleanOptionalAction,
            default=None,
            help="whether execute cases may run POST/PUT/PATCH/DELETE plans (default: no)",
        )
        self._add_wait_arguments(collection, what="the build")

        cases = commands.add_parser(
            "import-cases",
            help="Create or update cases (a list, or {cases: [...], suites: {name: [ids]}}).",
        )
        cases.add_argument("name", metavar="NAME")
        cases.add_argument("file", metavar="CASES.json", type=Path)

        run = commands.add_parser("run", help="Queue a run of the active cases; --wait for it.")
        run.add_argument("name", metavar="NAME")
        run.add_argument("--suite", default="", help="only the cases of this suite")
        run.add_argument(
            "--mode", default="", choices=[mode.value for mode in CaseMode], help="only these"
        )
        run.add_argument("--repeat", type=int, default=1, help="each case 1 to 50 times")
        run.add_argument(
            "--json",
            type=Path,
            default=None,
            metavar="OUT",
            dest="json_out",
            help="write the summary, metrics and per-case results there (implies --wait)",
        )
        run.add_argument(
            "--fail-under",
            type=_rate,
            default=None,
            metavar="RATE",
            help="exit 1 when the pass rate (0..1) is under RATE (implies --wait)",
        )
        self._add_wait_arguments(run, what="the run")

    @staticmethod
    def _add_wait_arguments(parser: ArgumentParser, *, what: str) -> None:
        parser.add_argument(
            "--wait",
            action="store_true",
            help=f"wait for {what} through the queue (starts a temporary worker if none answers)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT_SECONDS,
            metavar="SECONDS",
            help=f"give up waiting after this long (exit 2; default {DEFAULT_TIMEOUT_SECONDS:.0f})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # The filesystem broker URL has no host; kombu warns about it on every connection.
        logging.getLogger("kombu.connection").setLevel(logging.ERROR)
        action = options["action"]
        if action == "import-collection":
            self.import_collection(options)
        elif action == "import-cases":
            self.import_cases(options)
        else:
            self.run(options)

    # --- import-collection ---------------------------------------------------------------

    def import_collection(self, options: dict[str, Any]) -> None:
        name: str = options["name"]
        spec_path: Path = options["spec"]
        try:
            check_collection_name(name)
        except CollectionNameError as exc:
            raise CommandError(f"{name!r} is not a collection name: {exc}") from None
        base_url: str = options["base_url"]
        if base_url and (problem := outbound.url_problem(base_url)):
            raise CommandError(f"--base-url {base_url!r} is not an http(s) URL: {problem}.")
        for option, value in (("base_url", base_url), ("title", options["title"])):
            limit = getattr(Collection._meta.get_field(option), "max_length", None) or 0
            label = f"--{option.replace('_', '-')}"
            if value and len(value) > limit:
                raise CommandError(f"{label} is longer than {limit} characters.")
            if value and has_unstorable_text(value):  # argv bytes that are not UTF-8
                raise CommandError(f"{label} is not UTF-8 text.")
        spec_text = _read_text(spec_path, what="spec", max_bytes=services.max_spec_bytes())
        collection = Collection.objects.filter(name=name).first()
        try:
            if collection is None:
                collection, version = services.collection_create(
                    name=name,
                    spec_text=spec_text,
                    title=options["title"],
                    base_url=base_url,
                    allowed_hosts=options["allowed_hosts"],
                    auth_profile=_auth_profile(options),
                    mutations_allowed=bool(options["allow_mutations"]),
                )
                self.stdout.write(f"Created collection {name}; version {version.number} queued.")
            else:
                values, changed = _updated_settings(collection, options)
                if changed:
                    services.collection_update(collection=collection, **values)
                version = services.collection_rebuild(collection=collection, spec_text=spec_text)
                self.stdout.write(
                    f"Collection {name} exists: rebuilding it as version {version.number} "
                    "(its cases, suites and runs stay attached)"
                    + (f"; updated its {', '.join(changed)}." if changed else ".")
                )
        except engine.SpecError as exc:
            raise CommandError(f"{spec_path}: {exc}") from None
        except services.CollectionError as exc:
            raise CommandError(str(exc)) from None
        except services.QueueUnavailable as exc:
            raise CommandError(
                f"Queue unavailable: {exc} The collection is saved but its build was not "
                "queued; run this command again when the queue is back.",
                returncode=EXIT_INFRASTRUCTURE,
            ) from None
        if not options["wait"]:
            return
        version = wait_for_build(
            version_id=version.pk, out=self.stdout, err=self.stderr, timeout=options["timeout"]
        )
        if version.status != BuildStatus.READY:
            raise CommandError(
                f"The build of {name} v{version.number} failed: {version.error}",
                returncode=EXIT_FAILED,
            )
        issues = ", ".join(
            f"{sum(codes.values())} {severity}"
            for severity, codes in sorted((version.readiness_summary or {}).items())
            if isinstance(codes, dict) and codes
        )
        self.stdout.write(
            f"{name} v{version.number} is ready: {version.operation_count} operations"
            + (f"; readiness: {issues}" if issues else "")
            + "."
        )
        version.collection.refresh_from_db(fields=["base_url"])
        for gap in selectors.configuration_gaps(collection=version.collection):
            self.stderr.write(f"{gap.severity} {gap.code}: {gap.message} {gap.recommendation}")

    # --- import-cases --------------------------------------------------------------------

    def import_cases(self, options: dict[str, Any]) -> None:
        collection = _collection(options["name"])
        path: Path = options["file"]
        data = _read_json(path)
        suites: Any
        if isinstance(data, list):
            documents, suites = data, {}
        elif isinstance(data, dict) and isinstance(data.get("cases"), list):
            documents, suites = data["cases"], data.get("suites") or {}
        else:
            raise CommandError(
                f"{path}: expected a list of cases or an object "
                '{"cases": [...], "suites": {"name": ["case-id", ...]}}.'
            )
        errors = _duplicate_ids(documents) + _suite_errors(collection, documents, suites)
        if errors:
            self._fail_import(errors)
        saved: list[Suite] = []
        # Cases and suites together: a file is imported whole or not at all.
        with transaction.atomic():
            report = services.cases_import(collection=collection, documents=documents)
            if not report.errors:
                saved = [
                    services.suite_save(collection=collection, name=suite_name, case_ids=ids)
                    for suite_name, ids in suites.items()
                ]
        if report.errors:
            self._fail_import(report.errors)
        self.stdout.write(
            f"{collection.name}: {report.created} cases created, {report.updated} updated"
            + "".join(f"; suite {suite.name}: {suite.cases.count()} cases" for suite in saved)
            + "."
        )

    def _fail_import(self, errors: list[str]) -> None:
        for error in errors:
            # A file's ids are quoted: a lone surrogate in one could not be written out.
            self.stderr.write(replace_unstorable_text(error))
        raise CommandError(
            f"{len(errors)} error{'s' if len(errors) != 1 else ''}; nothing was written.",
            returncode=EXIT_FAILED,
        )

    # --- run -----------------------------------------------------------------------------

    def run(self, options: dict[str, Any]) -> None:
        collection = _collection(options["name"])
        suite = None
        if options["suite"]:
            suite = Suite.objects.filter(collection=collection, name=options["suite"]).first()
            if suite is None:
                known = ", ".join(collection.suites.values_list("name", flat=True)) or "none"
                raise CommandError(
                    f"{collection.name} has no suite {options['suite']!r} (suites: {known})."
                )
        try:
            run = services.run_start(
                collection=collection,
                suite=suite,
                mode=options["mode"],
                repeat=options["repeat"],
                channel="cli",
            )
        except services.CollectionError as exc:
            raise CommandError(str(exc), returncode=EXIT_FAILED) from None
        except services.QueueUnavailable as exc:
            raise CommandError(
                f"Queue unavailable: {exc}", returncode=EXIT_INFRASTRUCTURE
            ) from None
        json_out: Path | None = options["json_out"]
        fail_under: float | None = options["fail_under"]
        execute_cases = (
            run.case_ids
            and QualityCase.objects.filter(pk__in=run.case_ids, mode=CaseMode.EXECUTE).count()
        )
        if execute_cases:
            for gap in selectors.configuration_gaps(collection=collection):
                self.stderr.write(
                    f"Warning: {execute_cases} execute case{'s' if execute_cases != 1 else ''} "
                    f"will call nothing (execute/{gap.code}). {gap.message} {gap.recommendation}"
                )
        if not (options["wait"] or json_out or fail_under is not None):
            self.stdout.write(f"Run {run.pk} queued: {run.total} cases. {run_path(run.pk)}")
            return
        run = wait_for_run(
            run_id=run.pk, out=self.stdout, err=self.stderr, timeout=options["timeout"]
        )
        if json_out is not None:
            json_out.write_text(
                json.dumps(run_report(run), indent=2, ensure_ascii=False, default=str) + "\n",
                encoding="utf-8",
            )
        for run_gap in selectors.run_gaps(results=run.results.only("case_id", "failure_reason")):
            self.stderr.write(
                f"{run_gap.cases} execute case{'s' if run_gap.cases != 1 else ''} "
                f"{run_gap.message} (execute/{run_gap.reason}); to run them: {run_gap.fix}."
            )
        if run.status != RunStatus.DONE:
            raise CommandError(
                f"Run {run.pk} {run.status}"
                + (f": {run.error}" if run.error else "")
                + f" ({run.done}/{run.total} cases done).",
                returncode=EXIT_FAILED,
            )
        rate = run.pass_rate or 0.0
        summary = (
            f"Run {run.pk} done: {run.passed}/{run.done} passed ({rate:.1%}), {run.failed} "
            f"failed, in {_run_seconds(run):.1f} s. {run_path(run.pk)}"
        )
        if fail_under is None:
            self.stdout.write(summary)
        elif rate < fail_under:
            raise CommandError(
                f"{summary} Pass rate {rate:.3f} is under {fail_under:.3f}.",
                returncode=EXIT_FAILED,
            )
        else:
            self.stdout.write(f"{summary} Pass rate {rate:.3f} >= {fail_under:.3f}.")


# --- input helpers -----------------------------------------------------------------------


def _rate(value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        raise ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0.0 <= rate <= 1.0:
        raise ArgumentTypeError(f"{value} is not between 0 and 1")
    return rate


def _read_text(path: Path, *, what: str, max_bytes: int | None = None) -> str:
    if not path.is_file():
        raise CommandError(f"{path}: no such file (the {what} to import).")
    try:
        # Judged from the file's size, before a byte of it is read.
        if max_bytes is not None and (size := path.stat().st_size) > max_bytes:
            raise CommandError(f"{path}: {services.spec_too_large_message(size=size)}")
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: not UTF-8 text (byte {exc.start}).") from None
    except OSError as exc:
        raise CommandError(f"{path}: cannot be read ({exc.strerror}).") from None


def _read_json(path: Path) -> Any:
    text = _read_text(path, what="cases file")
    try:
        return loads_bounded(text, max_depth=settings.TRIAGE_JSON_MAX_DEPTH)
    except JSONTooDeep as exc:
        raise CommandError(f"{path}: {exc} (TRIAGE_JSON_MAX_DEPTH).") from None
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})."
        ) from None
    except ValueError:  # an integer of more digits than Python converts
        raise CommandError(f"{path}: not JSON (an integer of more than 4300 digits).") from None


def _collection(name: str) -> Collection:
    # No database stores NUL in text (PostgreSQL refuses the query): no such collection.
    collection = None if "\x00" in name else Collection.objects.filter(name=name).first()
    if collection is None:
        raise CommandError(f"No collection named {name!r}; import it with import-collection.")
    return collection


def _auth_profile(options: dict[str, Any]) -> dict[str, Any] | None:
    if not (options["auth_header"] or options["auth_scheme"] or options["auth_secret_env"]):
        return None
    profile: dict[str, Any] = {
        "header_names": [options["auth_header"] or "Authorization"],
        "scheme": "Bearer" if options["auth_scheme"] is None else options["auth_scheme"],
    }
    if options["auth_secret_env"]:
        profile["secret_env"] = options["auth_secret_env"]
    return profile


def _updated_settings(
    collection: Collection, options: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """An existing collection's call settings with the options given on top (its allowed
    hosts are inferred from the base URL only when it has none), and the names of those
    that change."""
    current: dict[str, Any] = {
        "title": collection.title,
        "base_url": collection.base_url,
        "allowed_hosts": list(collection.allowed_hosts or []),
        "auth_profile": dict(collection.auth_profile or {}),
        "mutations_allowed": collection.mutations_allowed,
    }
    values = dict(current)
    if options["title"]:
        values["title"] = options["title"]
    if options["base_url"]:
        values["base_url"] = options["base_url"]
    if options["allowed_hosts"] is not None:
        values["allowed_hosts"] = options["allowed_hosts"]
    elif not values["allowed_hosts"]:
        # A collection that had nowhere to call (imported without a base URL) gets the
        # base URL's host, as a new one does; a list someone made is never widened.
        values["allowed_hosts"] = services.default_allowed_hosts(values["base_url"])
    profile = _auth_profile(options)
    if profile is not None:
        values["auth_profile"] = profile
    if options["allow_mutations"] is not None:
        values["mutations_allowed"] = options["allow_mutations"]
    labels = {
        "title": "title",
        "base_url": "base URL",
        "allowed_hosts": "allowed hosts",
        "auth_profile": "auth profile",
        "mutations_allowed": "mutation policy",
    }
    return values, [labels[key] for key in values if values[key] != current[key]]


def _duplicate_ids(documents: list[Any]) -> list[str]:
    seen: dict[str, int] = {}
    errors = []
    for index, document in enumerate(documents):
        case_id = document.get("id") if isinstance(document, dict) else None
        if not isinstance(case_id, str):
            continue
        if case_id in seen:
            errors.append(f"case {index} ({case_id}): id: repeats case {seen[case_id]}")
        else:
            seen[case_id] = index
    return errors


_SUITE_NAME_MAX = Suite._meta.get_field("name").max_length or 100


def _suite_errors(collection: Collection, documents: list[Any], suites: Any) -> list[str]:
    if not isinstance(suites, dict):
        return ['suites: must be an object {"suite-name": ["case-id", ...]}']
    known = {document.get("id") for document in documents if isinstance(document, dict)}
    known |= set(
        QualityCase.objects.filter(collection=collection).values_list("case_id", flat=True)
    )
    errors = []
    for name, case_ids in suites.items():
        try:
            validate_slug(name)
        except ValidationError:
            errors.append(f"suite {name!r}: name: letters, digits, '-' and '_' only")
        if len(name) > _SUITE_NAME_MAX:
            errors.append(f"suite {name[:40]!r}...: name: at most {_SUITE_NAME_MAX} characters")
        if not isinstance(case_ids, list) or not all(isinstance(i, str) for i in case_ids):
            errors.append(f"suite {name!r}: cases: must be a list of case ids")
            continue
        unknown = [case_id for case_id in case_ids if case_id not in known]
        if unknown:
            errors.append(f"suite {name!r}: cases: unknown case ids {', '.join(unknown[:5])}")
    return errors


# --- reports -----------------------------------------------------------------------------


def run_path(run_id: int) -> str:
    """The run's page."""
    try:
        return reverse("qualitylab:run", args=[run_id])
    except NoReverseMatch:
        return f"/qualitylab/runs/{run_id}/"


def _run_seconds(run: CaseRun) -> float:
    if run.started_at and run.finished_at:
        return (run.finished_at - run.started_at).total_seconds()
    return 0.0


def run_report(run: CaseRun) -> dict[str, Any]:
    """A finished run as JSON: the summary, its metrics and one row per case result."""
    results = run.results.select_related("case").order_by("case__case_id", "repetition")
    return {
        "run": {
            "id": run.pk,
            "url": run_path(run.pk),
            "collection": run.collection.name,
            "version": run.version.number,
            "graph_tool_call_version": run.version.graph_tool_call_version,
            "suite": run.suite.name if run.suite else None,
            "mode": run.mode or None,
            "repeat": run.repeat,
            "channel": run.channel,
            "status": run.status,
            "error": run.error or None,
            "total": run.total,
            "done": run.done,
            "passed": run.passed,
            "failed": run.failed,
            "pass_rate": run.pass_rate,
            "created_at": run.created_at.isoformat(),
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "duration_seconds": round(_run_seconds(run), 3),
        },
        "metrics": run.metrics,
        "configuration_gaps": [
            {"reason": gap.reason, "cases": gap.cases, "message": gap.message, "fix": gap.fix}
            for gap in selectors.run_gaps(results=run.results.only("case_id", "failure_reason"))
        ],
        "results": [
            {
                "case_id": result.case.case_id,
                "mode": result.case.mode,
                "repetition": result.repetition,
                "passed": result.passed,
                "allowed_failure": result.allowed_failure,
                "failure_stage": result.failure_stage or None,
                "failure_reason": result.failure_reason or None,
                "failure_message": ((result.sections or {}).get("failure") or {}).get("message"),
                "latency_ms": result.latency_ms,
            }
            for result in results
        ],
    }


# --- waiting through the queue -----------------------------------------------------------


def worker_answers(timeout: float = PING_TIMEOUT_SECONDS) -> bool:
    """Whether any Celery worker answers a ping on the broker's control channel."""
    from config.celery import app

    try:
        return bool(app.control.ping(timeout=timeout))
    except Exception:  # a transport without a control channel, a broker hiccup: no answer
        return False


class TemporaryWorker:
    """A solo Celery worker started for the length of one wait; its output goes to a log file
    that is shown when it dies and removed when it is stopped."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.process = process
        self.log_path = log_path

    @classmethod
    def start(cls, *, env: dict[str, str] | None = None) -> TemporaryWorker:
        with tempfile.NamedTemporaryFile(
            prefix="qualitylab-worker-", suffix=".log", delete=False
        ) as log_file:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "celery", "-A", "config", "worker",
                    "--pool", "solo", "--concurrency", "1", "--loglevel", "WARNING",
                    "--hostname", f"qualitylab-cli-{os.getpid()}@%h",
                    "--without-mingle", "--without-gossip",
                ],
                cwd=settings.BASE_DIR,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        return cls(process, Path(log_file.name))

    def check(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise CommandError(
                f"The temporary worker exited (code {code}). Its log ({self.log_path}) ends:\n"
                + self.log_tail(),
                returncode=EXIT_INFRASTRUCTURE,
            )

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        exited_by_itself = self.process.poll() is not None
        if not exited_by_itself:
            # Warm shutdown: it finishes the task in hand, and the job is finished by now.
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=WORKER_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not exited_by_itself:
            self.log_path.unlink(missing_ok=True)


def ensure_worker(
    *, still_queued: Callable[[], bool], err: OutputWrapper
) -> TemporaryWorker | None:
    """Start a temporary worker when the job has not been taken and no worker answers."""
    if not still_queued() or worker_answers():
        return None
    deadline = time.monotonic() + PICKUP_GRACE_SECONDS
    while time.monotonic() < deadline:
        if not still_queued():
            return None
        time.sleep(0.25)
    err.write("No worker took the job; starting a temporary worker for this wait.")
    return TemporaryWorker.start()


def _wait(
    *,
    load: Callable[[], _Row],
    finished: Callable[[_Row], bool],
    queued: Callable[[_Row], bool],
    progress: Callable[[_Row, float], str],
    out: OutputWrapper,
    err: OutputWrapper,
    timeout: float | None,
    start_worker: bool,
) -> _Row:
    started = time.monotonic()
    tty = out.isatty()
    worker = ensure_worker(still_queued=lambda: queued(load()), err=err) if start_worker else None
    try:
        while True:
            row = load()
            elapsed = time.monotonic() - started
            if tty:
                out.write(f"\r{progress(row, elapsed)}\x1b[K", ending="")
                out.flush()
            if finished(row):
                return row
            if worker is not None:
                worker.check()
            if timeout and elapsed > timeout:
                raise CommandError(
                    f"Gave up waiting after {timeout:.0f} s; the job continues in the queue.",
                    returncode=EXIT_INFRASTRUCTURE,
                )
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        raise CommandError(
            "Stopped waiting; the job goes on when a worker takes it.", returncode=130
        ) from None
    finally:
        if tty:
            out.write("")
        if worker is not None:
            worker.stop()


def wait_for_run(
    *,
    run_id: int,
    out: OutputWrapper,
    err: OutputWrapper,
    timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
    start_worker: bool = True,
) -> CaseRun:
    """Poll a run until it is finished, showing progress on a terminal."""
    return _wait(
        load=lambda: CaseRun.objects.select_related("collection", "version", "suite").get(
            pk=run_id
        ),
        finished=lambda run: run.is_finished,
        queued=lambda run: run.status == RunStatus.QUEUED,
        progress=_run_progress,
        out=out,
        err=err,
        timeout=timeout,
        start_worker=start_worker,
    )


def _run_progress(run: CaseRun, elapsed: float) -> str:
    what = f"run {run.pk}" + (f" ({run.suite.name})" if run.suite else "")
    return (
        f"{what} {run.status}: {run.done}/{run.total} cases · {run.passed} passed · "
        f"{run.failed} failed · {elapsed:.1f} s"
    )


def wait_for_build(
    *,
    version_id: int,
    out: OutputWrapper,
    err: OutputWrapper,
    timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
    start_worker: bool = True,
) -> CollectionVersion:
    """Poll a collection build until it is ready or failed, showing progress on a terminal."""
    return _wait(
        load=lambda: (
            CollectionVersion.objects.select_related("collection")
            .defer("spec_source", "artifact_compressed")
            .get(pk=version_id)
        ),
        finished=lambda version: version.status in (BuildStatus.READY, BuildStatus.FAILED),
        queued=lambda version: version.status == BuildStatus.QUEUED,
        progress=_build_progress,
        out=out,
        err=err,
        timeout=timeout,
        start_worker=start_worker,
    )


def _build_progress(version: CollectionVersion, elapsed: float) -> str:
    message = f" ({version.progress_message})" if version.progress_message else ""
    return (
        f"build of {version.collection.name} v{version.number} {version.status}: "
        f"{version.progress:.0%}{message} · {elapsed:.1f} s"
    )
