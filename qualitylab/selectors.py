"""Reads of Quality Lab for the pages: collections, cases, suites, runs, results.

The pages find collections, runs and results through the collections their reader sees
(organisation.access, on the collection's name); what hangs off a collection found that way
(its versions, cases, suites, runs, metrics) is its own and needs no second filter."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop, ngettext

from organisation.access import visible_q
from qualitylab.models import (
    BuildStatus,
    CaseMode,
    CaseResult,
    CaseRun,
    Collection,
    CollectionVersion,
    QualityCase,
    RunStatus,
    Suite,
)

# The columns a list of versions never shows: the spec, the artifact and the big reports.
_VERSION_HEAVY = (
    "spec_source",
    "artifact_compressed",
    "readiness",
    "semantic_summary",
    "tool_names",
)
SEVERITIES = ("error", "warning", "info")
# The metrics the collection page charts, in the order a person reads them.
CHARTED_METRICS = (
    ("pass_rate", gettext_noop("pass rate")),
    ("hit_at_k", gettext_noop("hit@K")),
    ("top_1", gettext_noop("top-1")),
    ("selector_accuracy", gettext_noop("selector accuracy")),
    ("plan_hit_rate", gettext_noop("plan hit rate")),
    ("execute_success", gettext_noop("execute success")),
)
METRICS_RUNS = 30


def severity_counts(summary: dict[str, dict[str, int]] | None) -> list[tuple[str, int]]:
    """A version's readiness summary (codes counted by severity) as (severity, total)."""
    summary = summary or {}
    ordered = [s for s in SEVERITIES if s in summary] + sorted(set(summary) - set(SEVERITIES))
    return [(severity, sum(summary[severity].values())) for severity in ordered]


# --- collections ------------------------------------------------------------------------


@dataclass
class CollectionRow:
    collection: Collection
    latest_version: CollectionVersion | None
    last_run: CaseRun | None

    @property
    def severities(self) -> list[tuple[str, int]]:
        version = self.collection.current_version
        return severity_counts(
            with_gaps(
                version.readiness_summary if version else None,
                configuration_gaps(collection=self.collection),
            )
        )


def visible_collections(*, user: Any) -> QuerySet[Collection]:
    """The collections ``user`` sees (another team's: not found)."""
    return Collection.objects.filter(visible_q(user, "name"))


def collections_overview(*, user: Any) -> list[CollectionRow]:
    """Every collection ``user`` sees with its current and newest version, case counts and
    last run."""
    newest_version = CollectionVersion.objects.filter(collection=OuterRef("pk")).order_by("-number")
    last_run = CaseRun.objects.filter(collection=OuterRef("pk"), status=RunStatus.DONE).order_by(
        "-created_at", "-pk"
    )
    collections = list(
        visible_collections(user=user)
        .select_related("current_version")
        .defer(*(f"current_version__{name}" for name in _VERSION_HEAVY))
        .annotate(
            case_total=Subquery(
                QualityCase.objects.filter(collection=OuterRef("pk"))
                .values("collection")
                .annotate(n=Count("pk"))
                .values("n")
            ),
            case_active=Subquery(
                QualityCase.objects.filter(collection=OuterRef("pk"), active=True)
                .values("collection")
                .annotate(n=Count("pk"))
                .values("n")
            ),
            newest_version_id=Subquery(newest_version.values("pk")[:1]),
            last_run_id=Subquery(last_run.values("pk")[:1]),
        )
    )
    version_ids = [c.newest_version_id for c in collections if c.newest_version_id]
    versions = {
        v.pk: v for v in CollectionVersion.objects.filter(pk__in=version_ids).defer(*_VERSION_HEAVY)
    }
    run_ids = [c.last_run_id for c in collections if c.last_run_id]
    runs = {run.pk: run for run in CaseRun.objects.filter(pk__in=run_ids)}
    return [
        CollectionRow(
            collection=collection,
            latest_version=versions.get(collection.newest_version_id),
            last_run=runs.get(collection.last_run_id),
        )
        for collection in collections
    ]


def collection_versions(*, collection: Collection, limit: int = 20) -> list[CollectionVersion]:
    return list(collection.versions.defer(*_VERSION_HEAVY).order_by("-number")[:limit])


def versions_in_progress(versions: Iterable[CollectionVersion]) -> bool:
    return any(v.status in (BuildStatus.QUEUED, BuildStatus.BUILDING) for v in versions)


@dataclass
class ReadinessIssue:
    code: str
    severity: str
    count: int
    message: str
    recommendation: str
    tools: list[str]


# Quality Lab's own readiness checks of a collection's settings, beside graph-tool-call's
# checks of its spec. The code is the reason its cases fail with (triage/vocabulary/taxonomy.py).
BASE_URL_GAP = ReadinessIssue(
    code="base_url_not_configured",
    severity="error",
    count=1,
    message=gettext_noop(
        "Execute cases cannot run: the collection has no base URL to call (its spec "
        "has no absolute servers URL and none was given)."
    ),
    recommendation=gettext_noop(
        "Set the base URL in the collection's settings, or import it again with "
        "--base-url URL. Search and plan cases are not affected."
    ),
    tools=[],
)


def configuration_gaps(*, collection: Collection) -> list[ReadinessIssue]:
    """What the collection's settings lack for its cases to run (no query)."""
    return [] if collection.base_url else [BASE_URL_GAP]


def with_gaps(
    summary: dict[str, dict[str, int]] | None, gaps: list[ReadinessIssue]
) -> dict[str, dict[str, int]]:
    """A readiness summary (codes counted by severity) with the settings' gaps added."""
    merged = {severity: dict(codes) for severity, codes in (summary or {}).items()}
    for gap in gaps:
        codes = merged.setdefault(gap.severity, {})
        codes[gap.code] = codes.get(gap.code, 0) + gap.count
    return merged


def readiness_issues(*, version: CollectionVersion | None) -> list[ReadinessIssue]:
    """The version's readiness issues, one line per (severity, code), worst first."""
    if version is None:
        return []
    grouped: dict[tuple[str, str], ReadinessIssue] = {}
    for issue in (version.readiness or {}).get("issues") or []:
        if not isinstance(issue, dict):
            continue
        severity = str(issue.get("severity") or "unknown")
        code = str(issue.get("code") or "unknown")
        line = grouped.get((severity, code))
        if line is None:
            line = grouped[(severity, code)] = ReadinessIssue(
                code=code,
                severity=severity,
                count=0,
                message=str(issue.get("message") or ""),
                recommendation=str(issue.get("recommendation") or ""),
                tools=[],
            )
        line.count += 1
        if issue.get("tool"):
            line.tools.append(str(issue["tool"]))
    order = {severity: index for index, severity in enumerate(SEVERITIES)}
    return sorted(grouped.values(), key=lambda i: (order.get(i.severity, 9), -i.count, i.code))


# --- cases and suites ---------------------------------------------------------------------


def cases_with_last_result(*, collection: Collection) -> QuerySet[QualityCase]:
    """The collection's cases, each annotated with its newest result (one query)."""
    newest = CaseResult.objects.filter(case=OuterRef("pk")).order_by("-run_id", "-repetition")
    return (
        collection.cases.all()
        .annotate(
            last_result_id=Subquery(newest.values("pk")[:1]),
            last_passed=Subquery(newest.values("passed")[:1]),
            last_failure_reason=Subquery(newest.values("failure_reason")[:1]),
            last_allowed_failure=Subquery(newest.values("allowed_failure")[:1]),
            last_run_id=Subquery(newest.values("run_id")[:1]),
        )
        .order_by("case_id")
    )


def suites_with_counts(*, collection: Collection) -> QuerySet[Suite]:
    return collection.suites.annotate(case_count=Count("cases")).order_by("name")


def collection_runs(*, collection: Collection, limit: int = 10) -> list[CaseRun]:
    return list(
        collection.runs.select_related("suite", "started_by", "version")
        .defer(*(f"version__{name}" for name in _VERSION_HEAVY), "case_ids")
        .order_by("-created_at", "-pk")[:limit]
    )


@dataclass
class MetricSeries:
    key: str
    label: str
    points: list[tuple[int, float | None]]  # (run id, value)
    left_out: list[int] = field(default_factory=list)  # re-runs in the span, not charted
    # The pass rate is charted per mode (a search run's rate is no point on a plan run's
    # line); "" is runs of every mode at once.
    mode: str | None = None

    @property
    def values(self) -> list[float | None]:
        return [value for _, value in self.points]

    @property
    def latest(self) -> float | None:
        for _, value in reversed(self.points):
            if value is not None:
                return value
        return None

    @property
    def measured(self) -> bool:
        return any(value is not None for _, value in self.points)


def metric_history(*, collection: Collection, runs: int = METRICS_RUNS) -> list[MetricSeries]:
    """Each charted metric over the collection's last finished runs, oldest first.

    Re-runs of failed cases are left out: they run only what failed, so their rates say
    nothing about the collection. The pass rate is counted by case: a case repeated five
    times is one case, passed only when every repetition passed (as the run page calls it
    passed, not flaky), so repeats weigh no more than a single run."""
    recent = list(
        collection.runs.filter(status=RunStatus.DONE)
        .order_by("-created_at", "-pk")
        .values_list("pk", "metrics", "repeat", "rerun_of_id", "mode")[:runs]
    )
    recent.reverse()
    left_out = [run_id for run_id, _, _, rerun_of, _ in recent if rerun_of is not None]
    charted = [row for row in recent if row[3] is None]
    by_case = case_pass_rates(run_ids=[run_id for run_id, _, repeat, _, _ in charted if repeat > 1])

    def value_of(run_id: int, metrics: Any, key: str) -> float | None:
        value = by_case.get(run_id) if key == "pass_rate" else None
        if value is None:
            value = (metrics or {}).get(key)
        return float(value) if isinstance(value, (int, float)) else None

    series = []
    for key, label in CHARTED_METRICS:
        if key != "pass_rate":
            points = [(run_id, value_of(run_id, metrics, key)) for run_id, metrics, *_ in charted]
            series.append(MetricSeries(key=key, label=label, points=points, left_out=left_out))
            continue
        present = {mode for *_, mode in charted}
        for mode in [
            *(m for m in CaseMode.values if m in present),
            *([""] if "" in present else []),
        ]:
            points = [
                (run_id, value_of(run_id, metrics, key))
                for run_id, metrics, _, _, run_mode in charted
                if run_mode == mode
            ]
            series.append(
                MetricSeries(key=key, label=label, points=points, left_out=left_out, mode=mode)
            )
    return series


def case_pass_rates(*, run_ids: list[int]) -> dict[int, float]:
    """Share of each run's cases that passed every repetition (one grouped query)."""
    if not run_ids:
        return {}
    cases: dict[int, list[int]] = {}  # run id -> [cases, cases that passed every time]
    rows = (
        CaseResult.objects.filter(run_id__in=run_ids)
        .values("run_id", "case_id")
        .annotate(failures=Count("pk", filter=Q(passed=False)))
        .order_by()
        .values_list("run_id", "failures")
    )
    for run_id, failures in rows:
        counts = cases.setdefault(run_id, [0, 0])
        counts[0] += 1
        counts[1] += int(failures == 0)
    return {run_id: round(passed / total, 4) for run_id, (total, passed) in cases.items()}


# --- runs ----------------------------------------------------------------------------------


def visible_runs(*, user: Any) -> QuerySet[CaseRun]:
    return CaseRun.objects.filter(visible_q(user, "collection__name"))


def run_for_page(*, run_id: int, user: Any) -> CaseRun:
    return (
        visible_runs(user=user)
        .select_related("collection", "suite", "started_by", "version")
        .defer(*(f"version__{name}" for name in _VERSION_HEAVY))
        .get(pk=run_id)
    )


@dataclass
class CaseLine:
    """One case of a run: its repetitions, and the one whose details represent it."""

    case: QualityCase
    results: list[CaseResult] = field(default_factory=list)
    change: str = ""  # regressed | fixed | still_failing | new, against the previous run

    @property
    def passed_count(self) -> int:
        return sum(1 for result in self.results if result.passed)

    @property
    def outcome(self) -> str:
        passed = self.passed_count
        if passed == len(self.results):
            return "passed"
        return "flaky" if passed else "failed"

    @property
    def shown(self) -> CaseResult:
        """The first failed repetition (what needs looking at), else the first."""
        return next((r for r in self.results if not r.passed), self.results[0])


@dataclass
class RunComparison:
    previous: CaseRun | None  # the run compared with
    why: str = ""  # chosen | rerun_of | previous: how the run compared with was found
    regressed: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    still_failing: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    unchanged_passing: int = 0


@dataclass
class RunGap:
    """Cases of a run that could not run because of the collection's configuration."""

    reason: str
    cases: int
    message: str
    fix: str


# Failure reasons that say "not configured" rather than "broken", with what to do.
RUN_GAP_TEXT: dict[str, tuple[str, str]] = {
    "base_url_not_configured": (
        gettext_noop("could not run: the collection has no base URL, so nothing was called"),
        gettext_noop(
            "set the base URL in the collection's settings, or `manage.py qualitylab "
            "import-collection NAME SPEC --base-url URL`, then run them again"
        ),
    ),
}


def run_gaps(*, results: Iterable[CaseResult]) -> list[RunGap]:
    """Why some execute cases of a run could not run (configuration, not failures), from
    its results (already loaded by the page: no query)."""
    cases: dict[str, set[int]] = {}
    for result in results:
        if result.failure_reason in RUN_GAP_TEXT:
            cases.setdefault(result.failure_reason, set()).add(result.case_id)
    return [
        RunGap(
            reason=reason,
            cases=len(case_ids),
            message=RUN_GAP_TEXT[reason][0],
            fix=RUN_GAP_TEXT[reason][1],
        )
        for reason, case_ids in sorted(cases.items())
    ]


@dataclass
class RunView:
    run: CaseRun
    lines: list[CaseLine]
    comparison: RunComparison
    gaps: list[RunGap] = field(default_factory=list)

    @property
    def flaky_count(self) -> int:
        return sum(1 for line in self.lines if line.outcome == "flaky")

    @property
    def not_run(self) -> int:
        return max(self.run.total - self.run.done, 0)


def run_results(*, run: CaseRun, baseline: CaseRun | None = None) -> RunView:
    """A run's results grouped by case (failures first), compared with `baseline` (a run the
    person picked), else with the run it re-ran, else the previous one of its suite and mode."""
    results = (
        run.results.select_related("case")
        .defer("sections", "case__assertions", "case__provided_entities", "case__cleanup")
        .annotate(failure_group_id=F("failure_record__group_id"))
        .order_by("case__case_id", "repetition")
    )
    lines: dict[int, CaseLine] = {}
    for result in results:
        lines.setdefault(result.case_id, CaseLine(case=result.case)).results.append(result)
    order = {"failed": 0, "flaky": 1, "passed": 2}
    ordered = sorted(lines.values(), key=lambda line: (order[line.outcome], line.case.case_id))
    return RunView(
        run=run,
        lines=ordered,
        comparison=run_comparison(run=run, lines=ordered, baseline=baseline),
        gaps=run_gaps(results=(result for line in ordered for result in line.results)),
    )


_BASELINE_FIELDS = ("pk", "created_at", "passed", "failed", "done", "total", "status", "mode",
                    "repeat", "suite_id", "rerun_of_id", "collection_id")  # fmt: skip
FINISHED = (RunStatus.DONE, RunStatus.CANCELLED, RunStatus.FAILED)
# How many other runs the comparison's select offers (newest first).
COMPARABLE_RUNS = 50


def run_scope(run: CaseRun) -> str:
    """What a run ran, in words: its suite, or every active case, of its mode if it has one;
    a re-run says whose failed cases it ran."""
    if run.rerun_of_id is not None:
        return ngettext(
            "%(count)d failed case of run %(run)s",
            "%(count)d failed cases of run %(run)s",
            len(run.case_ids),
        ) % {"count": len(run.case_ids), "run": run.rerun_of_id}
    if run.suite_id is not None and run.suite is not None:
        scope = gettext("suite %(suite)s") % {"suite": run.suite.name}
    else:
        scope = gettext("all active cases")
    if run.mode:
        scope = gettext("%(scope)s, %(mode)s only") % {"scope": scope, "mode": run.mode}
    return scope


def previous_finished_run(*, run: CaseRun) -> CaseRun | None:
    """The last run that finished (done) of the same collection, suite and mode, started
    before this one, that ran them all: re-runs of failed cases are only part of a suite."""
    return (
        CaseRun.objects.filter(collection_id=run.collection_id, status=RunStatus.DONE)
        .filter(Q(suite__isnull=True) if run.suite_id is None else Q(suite_id=run.suite_id))
        .filter(mode=run.mode, rerun_of__isnull=True)
        .filter(Q(created_at__lt=run.created_at) | Q(created_at=run.created_at, pk__lt=run.pk))
        .exclude(pk=run.pk)
        .select_related("suite")
        .only(*_BASELINE_FIELDS, "suite__name")
        .order_by("-created_at", "-pk")
        .first()
    )


def default_baseline(*, run: CaseRun) -> tuple[CaseRun | None, str]:
    """What a run is compared with unless the person picks: the run whose failed cases it
    re-ran (fixed or still failing is the question), else the previous run of its suite and
    mode. With the reason, for the page to say."""
    if run.rerun_of_id is not None:
        original = (
            CaseRun.objects.filter(pk=run.rerun_of_id, status__in=FINISHED)
            .select_related("suite")
            .only(*_BASELINE_FIELDS, "suite__name")
            .first()
        )
        if original is not None:
            return original, "rerun_of"
    previous = previous_finished_run(run=run)
    return previous, "previous" if previous is not None else ""


def comparable_runs(*, run: CaseRun, chosen: CaseRun | None = None) -> list[CaseRun]:
    """The other finished runs of the collection that ran at least one case, which a person
    may compare with, newest first (the chosen one included even when it is older than the
    newest COMPARABLE_RUNS)."""
    runs = list(
        CaseRun.objects.filter(collection_id=run.collection_id, status__in=FINISHED, done__gt=0)
        .exclude(pk=run.pk)
        .select_related("suite")
        .only(*_BASELINE_FIELDS, "suite__name")
        .order_by("-created_at", "-pk")[:COMPARABLE_RUNS]
    )
    if chosen is not None and all(other.pk != chosen.pk for other in runs):
        runs.append(chosen)
    return runs


def comparable_run(*, run: CaseRun, run_id: int) -> CaseRun | None:
    """Another finished run of the same collection that ran a case, or None."""
    return (
        CaseRun.objects.filter(
            collection_id=run.collection_id, status__in=FINISHED, done__gt=0, pk=run_id
        )
        .exclude(pk=run.pk)
        .select_related("suite")
        .only(*_BASELINE_FIELDS, "suite__name")
        .first()
    )


def run_comparison(
    *, run: CaseRun, lines: list[CaseLine], baseline: CaseRun | None = None
) -> RunComparison:
    """Each case of the run against the run compared with. A case counts as passed in a run
    when every repetition passed; a case the other run did not run is "new"."""
    why = "chosen"
    if baseline is None:
        baseline, why = default_baseline(run=run)
    comparison = RunComparison(previous=baseline, why=why)
    if baseline is None:
        return comparison
    before: dict[str, bool] = {}
    for case_id, passed in baseline.results.values_list("case__case_id", "passed"):
        before[case_id] = before.get(case_id, True) and passed
    for line in lines:
        case_id = line.case.case_id
        passed_now = line.outcome == "passed"
        if case_id not in before:
            line.change = "new"
        elif before[case_id] and not passed_now:
            line.change = "regressed"
        elif not before[case_id] and passed_now:
            line.change = "fixed"
        elif not passed_now:
            line.change = "still_failing"
        else:
            comparison.unchanged_passing += 1
            continue
        getattr(comparison, line.change).append(case_id)
    return comparison


def run_elapsed_seconds(run: CaseRun) -> float | None:
    if run.started_at is None:
        return None
    end = run.finished_at or timezone.now()
    return max(0.0, (end - run.started_at).total_seconds())


def result_for_page(*, result_id: int, user: Any) -> CaseResult:
    return (
        CaseResult.objects.filter(visible_q(user, "run__collection__name"))
        .select_related("case", "run", "run__collection")
        .defer(*(f"run__{name}" for name in ("case_ids", "metrics")))
        .annotate(failure_group_id=F("failure_record__group_id"))
        .get(pk=result_id)
    )


# --- a case from a failure group ----------------------------------------------------------

# The stage a failure happened in says which mode reproduces it.
_MODE_FOR_STAGE = {"retrieve": CaseMode.SEARCH, "select_target": CaseMode.PLAN,
                   "synthesize": CaseMode.PLAN}  # fmt: skip


def mode_for_stage(stage: str) -> str:
    return str(_MODE_FOR_STAGE.get(stage, CaseMode.EXECUTE))


def group_query(*, group: Any, scan: int = 50) -> str:
    """A user query seen in the group's newest records' evidence, if any carried one."""
    records = group.records.order_by("-occurred_at").values_list("evidence", "extra")[:scan]
    for evidence, extra in records:
        for source in (evidence or {}, extra or {}):
            query = source.get("query") if isinstance(source, dict) else None
            if isinstance(query, str) and query.strip():
                return query.strip()[:2000]
    return ""
