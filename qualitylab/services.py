"""Writes of Quality Lab: collections and their builds, cases, suites, runs and results."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Field, Max, Q
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop
from kombu.exceptions import OperationalError as BrokerError

from core import outbound
from core.collection_names import CollectionNameError, check_collection_name
from core.storable import first_non_finite_number, replace_unstorable_text
from learning import services as learning_services
from qualitylab import credentials, engine
from qualitylab.metrics import run_metrics
from qualitylab.models import (
    BuildStatus,
    CaseResult,
    CaseRun,
    Collection,
    CollectionVersion,
    QualityCase,
    RunStatus,
    Suite,
)
from qualitylab.signals import run_finished
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, batch_ingest
from triage.intake.normalize import ItemError
from triage.intake.storable import storable_fields
from triage.models import (
    AuditEvent,
    FailureGroup,
    FailureRecord,
    Receipt,
    RunnerEvent,
    ToolPolicy,
)

log = logging.getLogger(__name__)

# Progress is written at most this often, so a big build does not hammer the database.
_PROGRESS_INTERVAL_SECONDS = 0.5


class QueueUnavailable(RuntimeError):
    """The task queue (broker) could not be reached; nothing was started."""


class CollectionError(ValueError):
    """A collection cannot be saved as asked; ``field`` names the setting at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# --- collections ------------------------------------------------------------------------


def collection_create(
    *,
    name: str,
    spec_text: str,
    title: str = "",
    base_url: str = "",
    allowed_hosts: list[str] | None = None,
    auth_profile: dict[str, Any] | None = None,
    mutations_allowed: bool = False,
    user: Any = None,
) -> tuple[Collection, CollectionVersion]:
    """Register a collection and queue the build of its spec.

    The spec is parsed right away, so a file that is not OpenAPI is refused with its
    parse error instead of becoming a failed build.
    """
    try:
        check_collection_name(name)
    except CollectionNameError as exc:
        raise CollectionError(str(exc)) from None
    parse_spec(spec_text)
    if Collection.objects.filter(name=name).exists():
        raise CollectionError(
            gettext("A collection named %(name)r already exists.") % {"name": name}
        )
    _check_call_settings(collection=name, base_url=base_url, auth_profile=auth_profile)
    with transaction.atomic():
        collection = Collection.objects.create(
            name=name,
            title=title,
            base_url=base_url,
            allowed_hosts=allowed_hosts
            if allowed_hosts is not None
            else default_allowed_hosts(base_url),
            auth_profile=auth_profile or {},
            mutations_allowed=mutations_allowed,
        )
        version = _new_version(collection=collection, spec_text=spec_text, user=user)
    return collection, version


def collection_rebuild(
    *, collection: Collection, spec_text: str | None = None, user: Any = None
) -> CollectionVersion:
    """Build a new version (a new spec, or the same one with this engine); cases, runs and
    results stay attached to the collection."""
    if spec_text is None:
        latest = collection.versions.order_by("-number").first()
        if latest is None:
            raise CollectionError(gettext("This collection has no spec to rebuild."))
        spec_text = latest.spec_source
    parse_spec(spec_text)
    with transaction.atomic():
        return _new_version(collection=collection, spec_text=spec_text, user=user)


# Rows of the triage app that name a collection as text (the rest point at the row).
_NAMED_BY_TEXT = (FailureGroup, FailureRecord, Receipt, RunnerEvent, AuditEvent, ToolPolicy)


def collection_rename(*, collection: Collection, new_name: str) -> int:
    """Give a collection a new name and every row that names it as text the same one (its
    failure groups and records, receipts, runner and audit events, tool policies), in one
    transaction; rows that point at the collection (versions, cases, runs, learning) follow
    by themselves. This is how a name stored before the one rule is mended. Returns how
    many text rows changed.

    The new name must be free: no collection, and no failure group or tool policy under it
    (joining two collections' groups would need their counters merged).
    """
    try:
        check_collection_name(new_name)
    except CollectionNameError as exc:
        raise CollectionError(str(exc)) from None
    old_name = collection.name
    if new_name == old_name:
        raise CollectionError(gettext("That is its name already."))
    with transaction.atomic():
        locked = Collection.objects.select_for_update().get(pk=collection.pk)
        if Collection.objects.filter(name=new_name).exists():
            raise CollectionError(
                gettext("A collection named %(name)r exists already.") % {"name": new_name}
            )
        for model in (FailureGroup, ToolPolicy):
            if model.objects.filter(collection=new_name).exists():
                raise CollectionError(
                    gettext("%(rows)s already name a collection %(name)r: choose another name.")
                    % {"rows": str(model._meta.verbose_name_plural).capitalize(), "name": new_name}
                )
        locked.name = new_name
        locked.save(update_fields=["name"])
        changed = sum(
            model.objects.filter(collection=old_name).update(collection=new_name)
            for model in _NAMED_BY_TEXT
        )
    collection.name = new_name
    log.info("collection %s renamed to %s (%d rows named it)", collection.pk, new_name, changed)
    return changed


def collection_update(
    *,
    collection: Collection,
    title: str,
    base_url: str,
    allowed_hosts: list[str],
    auth_profile: dict[str, Any],
    mutations_allowed: bool,
) -> Collection:
    """Change where and as whom execute cases call. The hosts are never inferred from the
    spec: calling a host is allowed only when someone said so."""
    _check_call_settings(collection=collection.name, base_url=base_url, auth_profile=auth_profile)
    collection.title = title
    collection.base_url = base_url
    collection.allowed_hosts = allowed_hosts
    collection.auth_profile = auth_profile
    collection.mutations_allowed = mutations_allowed
    collection.save(
        update_fields=["title", "base_url", "allowed_hosts", "auth_profile", "mutations_allowed"]
    )
    return collection


def credential_rules() -> credentials.CredentialRules:
    return credentials.CredentialRules.parse(
        prefix=settings.QUALITYLAB_CREDENTIAL_ENV_PREFIX,
        declared=settings.QUALITYLAB_CREDENTIAL_ENVS,
    )


def private_allowance() -> outbound.PrivateAllowance:
    return outbound.PrivateAllowance.parse(settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS)


def _segment_owner(collection: str) -> str:
    """The oldest collection whose name gives the same credential segment (qualitylab/
    credentials.py), ``collection`` itself when none is older."""
    segment = credentials.collection_segment(collection)
    for name in Collection.objects.order_by("pk").values_list("name", flat=True):
        if name == collection or credentials.collection_segment(name) == segment:
            return name
    return collection


def credential_refusals(*, collection: str, auth_profile: dict[str, Any] | None) -> dict[str, str]:
    """For each session of an auth profile whose variable may not be named: why."""
    variables = credentials.profile_variables(auth_profile)
    if not variables:
        return {}
    rules, owner = credential_rules(), _segment_owner(collection)
    return {
        session: refusal
        for session, variable in variables.items()
        if (refusal := rules.refusal(variable=variable, collection=collection, segment_owner=owner))
    }


def _check_call_settings(
    *, collection: str, base_url: str, auth_profile: dict[str, Any] | None
) -> None:
    """Where and as whom a collection calls, checked before it is saved: the credential
    variables against the declarations, the base URL against the address rules (a host
    that does not resolve from here is left to the call, which checks again)."""
    refusals = credential_refusals(collection=collection, auth_profile=auth_profile)
    if refusals:
        raise CollectionError(next(iter(refusals.values())), field="auth_secret_env")
    if not base_url:
        return
    problem = outbound.url_problem(base_url)
    if problem is not None:
        raise CollectionError(f"The base URL cannot be called: {problem}.", field="base_url")
    try:
        outbound.check_url(base_url, allowed_hosts=None, private_allowed=private_allowance())
    except outbound.OutboundRefused as exc:
        hint = (
            " " + gettext("An administrator can allow it in QUALITYLAB_ALLOWED_PRIVATE_HOSTS.")
            if exc.code == "address_not_allowed"
            else ""
        )
        raise CollectionError(
            gettext("Execute cases may not call it: %(problem)s.") % {"problem": exc} + hint,
            field="base_url",
        ) from None
    except OSError:
        pass


def max_spec_bytes() -> int:
    """The deployment's spec size limit (QUALITYLAB_MAX_SPEC_BYTES)."""
    return int(settings.QUALITYLAB_MAX_SPEC_BYTES)


def spec_too_large_message(*, size: int | None = None) -> str:
    """What a refused spec's person reads: its size, the limit and the setting."""
    limit = max_spec_bytes()
    what = f"The spec ({engine.format_size(size)})" if size is not None else "The spec"
    return (
        f"{what} is larger than the {engine.format_size(limit)} limit; nothing was read. "
        "Raise QUALITYLAB_MAX_SPEC_BYTES to import it (a build needs about 45 times the "
        "spec's size in worker memory)."
    )


def parse_spec(spec_text: str) -> dict[str, Any]:
    """The engine's parse under the deployment's size limit."""
    return engine.parse_spec(
        spec_text, max_bytes=max_spec_bytes(), max_depth=settings.TRIAGE_JSON_MAX_DEPTH
    )


def default_allowed_hosts(base_url: str) -> list[str]:
    """The hosts execute cases may call when nobody listed any: the base URL's host."""
    from urllib.parse import urlsplit

    host = urlsplit(base_url).hostname if base_url else None
    return [host] if host else []


def _new_version(*, collection: Collection, spec_text: str, user: Any) -> CollectionVersion:
    number = (collection.versions.aggregate(top=Max("number"))["top"] or 0) + 1
    version = CollectionVersion.objects.create(
        collection=collection,
        number=number,
        spec_source=spec_text,
        spec_sha256=hashlib.sha256(spec_text.encode()).hexdigest(),
        created_by=user,
    )
    transaction.on_commit(lambda: _enqueue_build(version.pk))
    return version


def _enqueue_build(version_id: int) -> None:
    from qualitylab.tasks import build_collection_version

    try:
        _send(build_collection_version, version_id=version_id)
    except QueueUnavailable:
        _version_failed(version_id, "The task queue was unreachable; rebuild when it is back.")
        raise


def _send(task: Any, **kwargs: Any) -> None:
    from config.celery import publish

    try:
        publish(task, **kwargs)
    except (BrokerError, OSError) as exc:
        raise QueueUnavailable(
            "The task queue is unreachable (is Redis or the worker's broker running?). "
            "Nothing was started; try again when it is back."
        ) from exc


def version_build(*, version_id: int) -> CollectionVersion | None:
    """Build the artifact of a queued version (the task's body). Does nothing when another
    worker already claimed it."""
    claimed = CollectionVersion.objects.filter(pk=version_id, status=BuildStatus.QUEUED).update(
        status=BuildStatus.BUILDING, progress=0.0, progress_message=gettext_noop("starting")
    )
    if not claimed:
        return None
    version = CollectionVersion.objects.select_related("collection").get(pk=version_id)
    last_write = 0.0

    def progress(stage: str, fraction: float) -> None:
        nonlocal last_write
        if time.monotonic() - last_write < _PROGRESS_INTERVAL_SECONDS and fraction < 1:
            return
        last_write = time.monotonic()
        CollectionVersion.objects.filter(pk=version_id).update(
            progress=fraction, progress_message=stage[:200]
        )

    try:
        built = engine.build_artifact(
            parse_spec(version.spec_source), progress=progress, parsed=True
        )
    except engine.SpecError as exc:
        _version_failed(version_id, f"The spec could not be read: {exc}")
        return version
    except Exception as exc:
        log.exception("build of collection version %s failed", version_id)
        _version_failed(version_id, f"The build failed ({type(exc).__name__}); see the worker log.")
        return version
    with transaction.atomic():
        CollectionVersion.objects.filter(pk=version_id).update(
            status=BuildStatus.READY,
            progress=1.0,
            progress_message="ready",
            artifact_compressed=CollectionVersion.compress(built.artifact),
            artifact_hash=built.artifact_hash,
            readiness=built.readiness,
            readiness_summary=built.readiness_summary,
            semantic_summary=built.semantic_summary,
            operation_count=built.operation_count,
            tool_names=list(built.tool_names),
            graph_tool_call_version=built.graph_tool_call_version,
            built_at=timezone.now(),
        )
        collection = version.collection
        if not collection.base_url and built.default_base_url:
            collection.base_url = built.default_base_url
        collection.current_version_id = version_id
        collection.save(update_fields=["current_version", "base_url"])
    # Without the spec and the artifact: the caller has them, or reads them when it must.
    return (
        CollectionVersion.objects.select_related("collection")
        .defer("spec_source", "artifact_compressed")
        .get(pk=version_id)
    )


def _version_failed(version_id: int, message: str) -> None:
    CollectionVersion.objects.filter(pk=version_id).update(
        status=BuildStatus.FAILED, error=message, progress_message="failed"
    )


# --- cases ------------------------------------------------------------------------------

_CASE_FIELDS = (
    "mode",
    "query",
    "expected_target",
    "expected_top_k",
    "llm_target",
    "provided_entities",
    "mutation_safety",
    "timeout_sec",
    "assertions",
    "cleanup",
    "auth_session",
    "description",
)


@dataclass
class ImportReport:
    created: int = 0
    updated: int = 0
    errors: list[str] = field(default_factory=list)


def case_spec(case: QualityCase) -> engine.CaseSpec:
    """The engine's view of a stored case."""
    return engine.CaseSpec.from_json(case_to_json(case))


def case_to_json(case: QualityCase) -> dict[str, Any]:
    """A case in the documented schema (what export writes and import reads)."""
    data: dict[str, Any] = {"id": case.case_id, "mode": case.mode, "query": case.query}
    for name in _CASE_FIELDS[2:]:
        value = getattr(case, name)
        if value not in ("", None, {}, []):
            data[name] = value
    data["expected_top_k"] = case.expected_top_k
    if not case.active:
        data["active"] = False
    return data


def collection_tool_names(*, collection: Collection) -> frozenset[str] | None:
    """The tools of the collection's built version (what a case may name), or None while
    nothing is built yet: a case saved then is checked by shape only."""
    if collection.current_version_id is None:
        return None
    names = (
        CollectionVersion.objects.filter(pk=collection.current_version_id)
        .values_list("tool_names", flat=True)
        .first()
    )
    return frozenset(names) if names else None


def cases_import(*, collection: Collection, documents: list[Any]) -> ImportReport:
    """Create or update cases from documented-schema JSON; every case is checked first (its
    tool names against the collection's tools) and nothing is written when any is wrong,
    so a half-imported file never happens."""
    report = ImportReport()
    tool_names = collection_tool_names(collection=collection)
    specs: list[tuple[engine.CaseSpec, dict[str, Any]]] = []
    for index, document in enumerate(documents):
        if not isinstance(document, dict):
            report.errors.append(gettext("case %(index)d: must be an object") % {"index": index})
            continue
        active = document.get("active", True)
        body = {key: value for key, value in document.items() if key != "active"}
        try:
            spec = engine.CaseSpec.from_json(body)
            if tool_names is not None:
                engine.check_case_tools(spec, tool_names)
            values = _case_values(spec, active=bool(active))
        except engine.CaseSpecError as exc:
            case_id = replace_unstorable_text(str(document.get("id", "no id")))[:200]
            report.errors.append(
                gettext("case %(index)d (%(case)s): %(field)s: %(error)s")
                % {"index": index, "case": case_id, "field": exc.field,
                   "error": exc.translated(gettext)}
            )  # fmt: skip
            continue
        specs.append((spec, values))
    if report.errors:
        return report
    with transaction.atomic():
        for spec, values in specs:
            _, created = QualityCase.objects.update_or_create(
                collection=collection, case_id=spec.id, defaults=values
            )
            if created:
                report.created += 1
            else:
                report.updated += 1
    return report


def case_save(
    *,
    collection: Collection,
    document: dict[str, Any],
    active: bool = True,
    failure_group: Any = None,
    check_tools: bool = True,
) -> QualityCase:
    """Create or edit one case from the form (validated like an import); a case made from a
    failure group is linked to the group it protects. Raises CaseSpecError for a bad case
    or a tool the collection does not have."""
    spec = engine.CaseSpec.from_json(document)
    tool_names = collection_tool_names(collection=collection) if check_tools else None
    if tool_names is not None:
        engine.check_case_tools(spec, tool_names)
    values = _case_values(spec, active=active)
    if failure_group is not None:
        values["failure_group"] = failure_group
    case, _ = QualityCase.objects.update_or_create(
        collection=collection, case_id=spec.id, defaults=values
    )
    return case


def _case_values(spec: engine.CaseSpec, *, active: bool) -> dict[str, Any]:
    """Model fields of a validated case; what the case leaves out gets the field's default."""
    data = spec.to_json()
    values: dict[str, Any] = {"active": active}
    for name in _CASE_FIELDS:
        value = data.get(name)
        if value is None:
            model_field = QualityCase._meta.get_field(name)
            assert isinstance(model_field, Field)
            value = model_field.get_default()
        values[name] = value
    _refuse_unstorable(spec.id, values)
    return values


def _refuse_unstorable(case_id: str, values: dict[str, Any]) -> None:
    """CaseSpecError for a value the database cannot store (checked against the model):
    a case is fixed in its file, never changed on the way in."""
    try:
        replaced = storable_fields(QualityCase, {"case_id": case_id, **values}, prefix="")
    except ItemError as exc:
        field = "id" if exc.field == "case_id" else exc.field
        raise engine.CaseSpecError(field, exc.message) from None
    if replaced:
        raise engine.CaseSpecError(
            replaced[0], "holds U+0000 (NUL) or a lone surrogate, which cannot be stored"
        )
    for name, value in values.items():
        if isinstance(value, (dict, list)) and (where := first_non_finite_number(value, path=name)):
            raise engine.CaseSpecError(
                where, "is NaN or Infinity, which cannot be stored: give a number"
            )


def suite_save(
    *, collection: Collection, name: str, case_ids: Iterable[str], description: str = ""
) -> Suite:
    suite, _ = Suite.objects.update_or_create(
        collection=collection, name=name, defaults={"description": description}
    )
    suite.cases.set(QualityCase.objects.filter(collection=collection, case_id__in=list(case_ids)))
    return suite


# --- runs -------------------------------------------------------------------------------


def run_start(
    *,
    collection: Collection,
    user: Any = None,
    suite: Suite | None = None,
    mode: str = "",
    repeat: int = 1,
    case_ids: list[str] | None = None,
    rerun_of: CaseRun | None = None,
    channel: str = "ui",
) -> CaseRun:
    """Queue a run of the chosen active cases; raises QueueUnavailable when the broker is
    down (the run is then marked failed, so it never waits forever)."""
    version = collection.current_version
    if version is None or version.status != BuildStatus.READY:
        raise CollectionError(
            gettext("The collection has no built version yet; wait for the build.")
        )
    if not 1 <= repeat <= 50:
        raise CollectionError(gettext("Repeat each case 1 to 50 times."))
    cases = collection.cases.filter(active=True)
    if suite is not None:
        cases = cases.filter(suites=suite)
    if mode:
        cases = cases.filter(mode=mode)
    if case_ids is not None:
        cases = cases.filter(case_id__in=case_ids)
    chosen = list(cases.order_by("case_id").values_list("pk", flat=True))
    if not chosen:
        raise CollectionError(gettext("No active case matches; add cases or change the filter."))
    with transaction.atomic():
        run = CaseRun.objects.create(
            collection=collection,
            version=version,
            suite=suite,
            mode=mode,
            repeat=repeat,
            case_ids=chosen,
            total=len(chosen) * repeat,
            started_by=user,
            rerun_of=rerun_of,
            channel=channel,
        )
        transaction.on_commit(lambda: _enqueue_run(run.pk))
    return run


def _enqueue_run(run_id: int) -> None:
    from qualitylab.tasks import execute_case_run

    try:
        _send(execute_case_run, run_id=run_id)
    except QueueUnavailable:
        # Marked failed, so the run never sits "queued" forever waiting for nobody.
        CaseRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
            status=RunStatus.FAILED,
            error="The task queue was unreachable when the run was started.",
            finished_at=timezone.now(),
        )
        raise


def run_cancel(*, run: CaseRun) -> None:
    """Stop after the case in progress; a queued run stops before it starts."""
    CaseRun.objects.filter(pk=run.pk, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).update(
        cancel_requested=True
    )
    CaseRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
        status=RunStatus.CANCELLED, finished_at=timezone.now()
    )


def run_rerun_failed(*, run: CaseRun, user: Any = None) -> CaseRun:
    failed = list(
        run.results.filter(passed=False).values_list("case__case_id", flat=True).distinct()
    )
    if not failed:
        raise CollectionError(gettext("Every case of this run passed; nothing to re-run."))
    return run_start(
        collection=run.collection, user=user, case_ids=failed, rerun_of=run, repeat=run.repeat
    )


def _claim_run(run_id: int) -> bool:
    now = timezone.now()
    stale = now - timedelta(seconds=settings.QUALITYLAB_STALE_RUN_SECONDS)
    fresh = CaseRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=now, heartbeat_at=now
    )
    if fresh:
        return True
    # A redelivered task (its worker died) takes over a run nobody reports on anymore.
    return bool(
        CaseRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, heartbeat_at__lt=stale).update(
            heartbeat_at=now
        )
    )


def run_execute(
    *, run_id: int, on_case: Callable[[CaseResult], None] | None = None
) -> CaseRun | None:
    """Run every case of a claimed run that has no result yet (the task's body).

    Results are unique per (run, case, repetition), so a run resumed after a lost worker
    continues where it stopped and never stores a case twice.
    """
    if not _claim_run(run_id):
        return None
    run = CaseRun.objects.select_related("collection", "version").get(pk=run_id)
    version = run.version
    loaded = engine.engine_for(version.artifact(), version.artifact_hash)
    context = execution_context(run.collection)
    # A collection in learning's shadow mode: every case also ranks with its suggestions.
    shadow = learning_services.shadow_reranker(collection=run.collection)
    done = set(run.results.values_list("case_id", "repetition"))
    cases = {case.pk: case for case in QualityCase.objects.filter(pk__in=run.case_ids)}
    writer = _ResultWriter(run, on_case=on_case)
    for case_pk in run.case_ids:
        case = cases.get(case_pk)
        if case is None:
            continue
        for repetition in range(1, run.repeat + 1):
            if (case_pk, repetition) in done:
                continue
            if writer.due():
                writer.flush()
                if CaseRun.objects.filter(pk=run_id, cancel_requested=True).exists():
                    _finish_run(run, status=RunStatus.CANCELLED)
                    learning_services.quality_lab_run_learn(run=run)
                    return run
            outcome = _case_outcome(case, loaded=loaded, context=context, shadow=shadow)
            writer.add(case=case, repetition=repetition, outcome=outcome)
    writer.flush()
    # Every result is stored with its learning attempt; merging the attempts into
    # suggestions can wait until the run is done (pending attempts are merged by any later
    # derivation, so a worker killed in between loses nothing).
    _finish_run(run, status=RunStatus.DONE)
    learning_services.quality_lab_run_learn(run=run)
    return run


def runs_requeue_stale(*, now: Any = None) -> list[int]:
    """Send again the runs nobody works on: running with a silent worker (it died), or
    queued for longer than the stale window (the message was lost). Claiming is
    conditional, so a run that is in fact alive ignores the extra message."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.QUALITYLAB_STALE_RUN_SECONDS)
    run_ids = list(
        CaseRun.objects.filter(
            Q(status=RunStatus.RUNNING, heartbeat_at__lt=stale)
            | Q(status=RunStatus.QUEUED, created_at__lt=stale)
        ).values_list("pk", flat=True)
    )
    from qualitylab.tasks import execute_case_run

    for run_id in run_ids:
        _send(execute_case_run, run_id=run_id)
    return run_ids


def _case_outcome(
    case: QualityCase,
    *,
    loaded: engine.LoadedCollection,
    context: engine.ExecutionContext,
    shadow: engine.Rerank | None,
) -> engine.CaseOutcome:
    try:
        spec = case_spec(case)
    except engine.CaseSpecError as exc:
        outcome = engine.CaseOutcome(case_id=case.case_id, mode=case.mode)
        outcome.failure = engine.failure_record(
            "service", "uncaught_server_error", f"case is invalid: {exc}"
        )
        return outcome
    return engine.run_case(loaded, spec, execution=context, shadow=shadow)


def _with_http_method(failure: dict[str, Any], execute: dict[str, Any] | None) -> dict[str, Any]:
    """Name the failed call's HTTP method in the evidence: classification then knows a GET
    that timed out may be retried, where an undeclared tool is assumed to write."""
    calls = (execute or {}).get("calls") or []
    method = calls[-1].get("method") if calls and isinstance(calls[-1], dict) else None
    evidence = dict(failure.get("evidence") or {})
    if not method or "http_method" in evidence:
        return failure
    return {**failure, "evidence": {**evidence, "http_method": method}}


class _ResultWriter:
    """Keeps a run's results in memory and writes them in batches (every 50 cases or half a
    second): one INSERT, one exact recount of the run's counters and one ingest of the
    failed cases per batch instead of several statements per case. A killed worker loses
    at most the batch in memory, which the next delivery runs again; results stay unique
    per (run, case, repetition), so nothing is stored twice."""

    SIZE = 50
    SECONDS = 0.5

    def __init__(self, run: CaseRun, *, on_case: Callable[[CaseResult], None] | None) -> None:
        self.run = run
        self.on_case = on_case
        self.pending: list[tuple[CaseResult, dict[str, Any] | None]] = []
        self.flushed_at = time.monotonic()

    def add(self, *, case: QualityCase, repetition: int, outcome: engine.CaseOutcome) -> None:
        failure = outcome.failure or {}
        result = CaseResult(
            run=self.run,
            case=case,
            repetition=repetition,
            passed=outcome.passed,
            failure_stage=failure.get("stage") or "",
            failure_reason=failure.get("reason") or "",
            allowed_failure=outcome.failure_allowed,
            sections=outcome.to_dict(),
            latency_ms={k: v for k, v in outcome.latency_ms.items() if v is not None},
        )
        recorded = failure if failure and not outcome.failure_allowed else None
        if recorded is not None:
            recorded = _with_http_method(recorded, outcome.execute)
        self.pending.append((result, recorded))

    def due(self) -> bool:
        return len(self.pending) >= self.SIZE or (
            bool(self.pending) and time.monotonic() - self.flushed_at >= self.SECONDS
        )

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        self.flushed_at = time.monotonic()
        if not pending:
            return
        results = [result for result, _ in pending]
        with transaction.atomic():
            # ignore_conflicts: results another delivery already stored are kept as they are.
            CaseResult.objects.bulk_create(results, ignore_conflicts=True)
            stored = {
                (case_id, repetition): pk
                for case_id, repetition, pk in self.run.results.filter(
                    case_id__in={r.case_id for r in results}
                ).values_list("case_id", "repetition", "pk")
            }
            for result in results:  # its own id, or that of the result stored before it
                result.pk = stored[(result.case_id, result.repetition)]
            counts = self.run.results.aggregate(
                done=Count("id"), passed=Count("id", filter=Q(passed=True))
            )
            CaseRun.objects.filter(pk=self.run.pk).update(
                done=counts["done"],
                passed=counts["passed"],
                failed=counts["done"] - counts["passed"],
                heartbeat_at=timezone.now(),
            )
            # In the results' transaction: a redelivery skips the cases that have results,
            # so what was written after the commit was lost with a killed worker.
            self._ingest(pending)
        if self.on_case is not None:
            for result in self.run.results.filter(pk__in=[r.pk for r in results]).select_related(
                "case"
            ):
                self.on_case(result)

    def _ingest(self, pending: list[tuple[CaseResult, dict[str, Any] | None]]) -> None:
        """The batch's failed cases as FailureRecords and every case as a learning attempt,
        in one pass through the ingest path, like a runtime's; then each failed result
        links its record."""
        run = self.run
        failures: dict[str, CaseResult] = {}
        items: list[dict[str, Any]] = []
        for result, failure in pending:
            if failure is None:
                continue
            body = {key: value for key, value in failure.items() if value is not None}
            body.update(
                {
                    "collection": run.collection.name,
                    "source": "quality_lab",
                    "graph_tool_call_version": run.version.graph_tool_call_version,
                    "quality_lab": {
                        "run": run.pk,
                        "case": result.case.case_id,
                        "repetition": result.repetition,
                    },
                }
            )
            items.append({"type": "failure", "id": result.ingest_id, "body": body})
            failures[result.ingest_id] = result
        items += learning_services.quality_lab_attempt_items(
            run=run, results=[result for result, _ in pending]
        )
        batch_ingest(owner=DESK_OWNER, items=items, channel=DESK_CHANNEL)
        if not failures:
            return
        from triage.models import FailureRecord

        records = FailureRecord.objects.filter(
            client_id__in=list(failures), source="quality_lab"
        ).values_list("client_id", "pk")
        CaseResult.objects.bulk_update(
            [
                CaseResult(pk=failures[client_id].pk, failure_record_id=record_id)
                for client_id, record_id in records
            ],
            ["failure_record"],
        )


def _finish_run(run: CaseRun, *, status: str) -> None:
    metrics = run_metrics(run.results.all())
    CaseRun.objects.filter(pk=run.pk).update(
        status=status, finished_at=timezone.now(), metrics=metrics
    )
    run.refresh_from_db()
    run_finished_send(run)


def run_finished_send(run: CaseRun) -> None:
    """Tell the apps listening that `run` ended; a listener's error is logged, never the
    run's (its results are stored whatever a listener does)."""
    for receiver, result in run_finished.send_robust(sender=CaseRun, run=run):
        if isinstance(result, Exception):
            log.error("run %s: listener %r failed", run.pk, receiver, exc_info=result)


def execution_context(collection: Collection) -> engine.ExecutionContext:
    """Where execute cases call, as whom: each session's credential is read from the
    environment variable the collection's auth profile names (never stored). A collection
    without a base URL gets a context with an empty one: its execute cases then fail as
    ``execute/base_url_not_configured``, after the mutation-safety rule has been judged."""
    profile = collection.auth_profile or {}
    header_names = tuple(profile.get("header_names") or ("Authorization",))
    scheme = profile.get("scheme", "Bearer")
    # Checked again here: the declarations may have changed since the collection was saved.
    refusals = credential_refusals(collection=collection.name, auth_profile=profile)
    refused_variables = {
        variable
        for session, variable in credentials.profile_variables(profile).items()
        if session in refusals
    }

    def headers_from(source: dict[str, Any]) -> dict[str, str] | None:
        variable = str(source.get("secret_env") or "")
        if variable in refused_variables:
            return None
        secret = os.environ.get(variable)
        if not secret:
            return None
        return {header_names[0]: f"{scheme} {secret}" if scheme else secret}

    sessions = {
        str(name): headers
        for name, source in (profile.get("sessions") or {}).items()
        if isinstance(source, dict) and (headers := headers_from(source))
    }
    return engine.ExecutionContext(
        base_url=collection.base_url,
        allowed_hosts=tuple(collection.allowed_hosts or ()),
        auth_headers=headers_from(profile),
        sessions=sessions,
        auth_profile=engine.AuthProfile(
            header_names=header_names, required=bool(profile.get("required"))
        )
        if profile
        else None,
        timeout_sec=float(settings.QUALITYLAB_EXECUTE_TIMEOUT_SECONDS),
        allow_mutations=collection.mutations_allowed,
        private_allowed=tuple(settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS),
        max_response_bytes=settings.QUALITYLAB_MAX_RESPONSE_BYTES,
        credential_refusals=refusals,
    )
