"""OpenAPI collections, their built artifacts, Quality Lab cases, suites, runs and results."""

from __future__ import annotations

import json
import zlib
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from core.fields import BulkJSONField, validate_collection_name
from qualitylab import artifact_json


class LearningMode(models.TextChoices):
    OBSERVE = "observe", "observe"
    SHADOW = "shadow", "shadow"
    PROMOTED = "promoted", "promoted"


class Collection(models.Model):
    """An API collection: its OpenAPI source, where to call it, and its policy."""

    # Any name the one rule accepts ("checkout.v2", "team a", "체크아웃"); URLs carry it
    # through the `collection` path converter.
    name = models.CharField(
        max_length=COLLECTION_NAME_MAX_LENGTH, unique=True, validators=[validate_collection_name]
    )
    title = models.CharField(max_length=200, blank=True)
    base_url = models.URLField(
        blank=True, help_text="Execute mode calls this; its host must be allowed."
    )
    allowed_hosts = models.JSONField(default=list, blank=True)
    # Header names and where each session's secret comes from (environment variable names:
    # {"header_names": [...], "scheme": "Bearer", "secret_env": "VAR", "required": false,
    #  "sessions": {"expired": {"secret_env": "OTHER_VAR"}}}), never a secret.
    auth_profile = models.JSONField(default=dict, blank=True)
    learning_mode = models.CharField(
        max_length=10, choices=LearningMode.choices, default=LearningMode.OBSERVE
    )
    learning_allowed = models.BooleanField(default=True)
    mutations_allowed = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    current_version = models.ForeignKey(
        "CollectionVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        permissions = [("run_quality_lab", "Can start, cancel and re-run Quality Lab runs")]

    def __str__(self) -> str:
        return self.name


class BuildStatus(models.TextChoices):
    QUEUED = "queued", gettext_lazy("queued")
    BUILDING = "building", gettext_lazy("building")
    READY = "ready", gettext_lazy("ready")
    FAILED = "failed", gettext_lazy("failed")


class CollectionVersion(models.Model):
    """One build of a collection's spec into a graph-tool-call artifact (kept compressed)."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    spec_source = models.TextField()
    spec_sha256 = models.CharField(max_length=64)
    status = models.CharField(
        max_length=10, choices=BuildStatus.choices, default=BuildStatus.QUEUED
    )
    progress = models.FloatField(default=0.0)
    progress_message = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    artifact_compressed = models.BinaryField(null=True, blank=True)
    # The build's key (engine.artifact_hash: spec, graph-tool-call version, options), which
    # names the artifact and keys the loaded-engine cache.
    artifact_hash = models.CharField(max_length=64, blank=True, db_index=True)
    readiness = models.JSONField(default=dict, blank=True)
    readiness_summary = models.JSONField(default=dict, blank=True)
    semantic_summary = models.JSONField(default=dict, blank=True)
    operation_count = models.PositiveIntegerField(default=0)
    # The built catalog's tool names (operationIds): what a case may name, checked on save.
    tool_names = models.JSONField(default=list, blank=True)
    graph_tool_call_version = models.CharField(max_length=40, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "number"], name="collection_version_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.collection} v{self.number} ({self.status})"

    def artifact(self) -> dict[str, Any]:
        if not self.artifact_compressed:
            raise ValueError(f"{self} has no artifact")
        return json.loads(zlib.decompress(bytes(self.artifact_compressed)))

    @staticmethod
    def compress(artifact: dict[str, Any]) -> bytes:
        return artifact_json.compress(artifact)


class CaseMode(models.TextChoices):
    SEARCH = "search", "search"
    PLAN = "plan", "plan"
    EXECUTE = "execute", "execute"


class QualityCase(models.Model):
    """One Quality Lab case in the documented schema (graph-tool-call's Quality Lab docs)."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="cases")
    case_id = models.SlugField(max_length=120)
    mode = models.CharField(max_length=10, choices=CaseMode.choices)
    query = models.TextField()
    expected_target = models.CharField(max_length=200, blank=True)
    expected_top_k = models.PositiveSmallIntegerField(default=5)
    llm_target = models.CharField(max_length=200, blank=True)
    provided_entities = models.JSONField(default=dict, blank=True)
    mutation_safety = models.CharField(max_length=40, blank=True)
    timeout_sec = models.FloatField(default=10.0)
    assertions = models.JSONField(default=dict, blank=True)  # list (typed) or object style
    cleanup = models.JSONField(default=list, blank=True)
    # Which runtime session of the collection's auth profile an execute case runs as.
    auth_session = models.CharField(max_length=60, blank=True)
    description = models.CharField(max_length=500, blank=True)
    active = models.BooleanField(default=True)
    failure_group = models.ForeignKey(
        "triage.FailureGroup",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="cases",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["collection", "case_id"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "case_id"], name="quality_case_unique")
        ]

    def __str__(self) -> str:
        return f"{self.collection}/{self.case_id}"


class Suite(models.Model):
    """A named set of cases of one collection, run together."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="suites")
    name = models.SlugField(max_length=100)
    description = models.CharField(max_length=300, blank=True)
    cases = models.ManyToManyField(QualityCase, related_name="suites", blank=True)

    class Meta:
        ordering = ["collection", "name"]
        constraints = [models.UniqueConstraint(fields=["collection", "name"], name="suite_unique")]

    def __str__(self) -> str:
        return f"{self.collection}/{self.name}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", gettext_lazy("queued")
    RUNNING = "running", gettext_lazy("running")
    DONE = "done", gettext_lazy("done")
    CANCELLED = "cancelled", gettext_lazy("cancelled")
    FAILED = "failed", gettext_lazy("failed")


class CaseRun(models.Model):
    """A run of many cases, executed by a Celery task; resumable after a lost worker."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="runs")
    version = models.ForeignKey(CollectionVersion, on_delete=models.PROTECT, related_name="runs")
    suite = models.ForeignKey(Suite, null=True, blank=True, on_delete=models.SET_NULL)
    mode = models.CharField(max_length=10, choices=CaseMode.choices, blank=True)
    repeat = models.PositiveSmallIntegerField(default=1)
    rerun_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL)
    case_ids = models.JSONField(default=list)  # the cases chosen when it was queued
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    channel = models.CharField(max_length=10, default="ui")  # ui | cli
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.collection} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (RunStatus.DONE, RunStatus.CANCELLED, RunStatus.FAILED)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.done if self.done else None


class CaseResult(models.Model):
    """One case's outcome in one run (unique per run, case and repetition)."""

    run = models.ForeignKey(CaseRun, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(QualityCase, on_delete=models.CASCADE, related_name="results")
    repetition = models.PositiveSmallIntegerField(default=1)
    passed = models.BooleanField()
    failure_stage = models.CharField(max_length=64, blank=True)
    failure_reason = models.CharField(max_length=100, blank=True)
    allowed_failure = models.BooleanField(default=False)
    sections = BulkJSONField(default=dict)
    latency_ms = BulkJSONField(default=dict)
    # No database constraint: on PostgreSQL the records table is partitioned by day, and a
    # foreign key to it would have to name the day too. Retention clears the link (and says
    # so, below) before a record goes, as the constraint's SET NULL would have.
    failure_record = models.ForeignKey(
        "triage.FailureRecord",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
    )
    # Set when retention removes the linked record (qualitylab/retention.py), so the pages say
    # so instead of showing nothing: when, the age it was older than, and its group, which
    # outlives its records.
    failure_record_pruned_at = models.DateTimeField(null=True, blank=True)
    failure_record_retention_days = models.PositiveIntegerField(null=True, blank=True)
    pruned_record_group = models.ForeignKey(
        "triage.FailureGroup", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "case__case_id", "repetition"]
        constraints = [
            models.UniqueConstraint(fields=["run", "case", "repetition"], name="case_result_unique")
        ]

    def __str__(self) -> str:
        return f"{self.case} in run {self.run_id}: {'passed' if self.passed else 'failed'}"

    @property
    def ingest_id(self) -> str:
        """The id its failure record and its learning attempt carry through ingest."""
        return f"run-{self.run_id}/{self.case.case_id}/{self.repetition}"
