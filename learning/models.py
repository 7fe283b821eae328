"""Learning attempts, the suggestions derived from them, their shadow evidence and reviews."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy


class AttemptSource(models.TextChoices):
    RUNTIME = "runtime", gettext_lazy("runtime")
    QUALITY_LAB = "quality_lab", gettext_lazy("Quality Lab")


class LearningAttempt(models.Model):
    """One scrubbed trace-learning record (graph-tool-call's shape); never rewritten."""

    collection = models.ForeignKey(
        "qualitylab.Collection", on_delete=models.CASCADE, related_name="learning_attempts"
    )
    batch = models.ForeignKey(
        "triage.IngestBatch", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    owner = models.CharField(max_length=200)  # the ingest owner (API key owner)
    client_id = models.CharField(max_length=200)
    attempt_id = models.CharField(max_length=200)
    source = models.CharField(
        max_length=16, choices=AttemptSource.choices, default=AttemptSource.RUNTIME
    )
    query = models.TextField()  # scrubbed
    query_family = models.TextField()
    query_fingerprint = models.CharField(max_length=64)
    selected_target = models.CharField(max_length=200, blank=True)
    llm_target = models.CharField(max_length=200, blank=True)
    plan_tools = models.JSONField(default=list, blank=True)
    success = models.BooleanField()
    failure_reason = models.CharField(max_length=100, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    session_id_hash = models.CharField(max_length=64, blank=True)
    target_selector = models.JSONField(default=dict, blank=True)
    trace_edges = models.JSONField(default=list, blank=True)
    extra = models.JSONField(default=dict, blank=True)  # unknown fields, scrubbed
    # Fields where the desk replaced NUL or lone surrogates with U+FFFD (triage.intake.storable).
    replaced_characters = models.JSONField(default=list, blank=True)
    # The scrubber replaced something in the body: the attempt arrived carrying a secret.
    carried_secret = models.BooleanField(default=False)
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(default=timezone.now)
    # Null until the derivation task merged it into the collection's suggestions (once).
    derived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-occurred_at", "-id"]
        indexes = [
            models.Index(fields=["collection", "query_fingerprint", "occurred_at"]),
            models.Index(
                fields=["collection", "id"],
                name="attempt_pending_idx",
                condition=models.Q(derived_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        outcome = "success" if self.success else (self.failure_reason or "failure")
        return f"{self.collection_id}/{self.query_family[:40]}: {outcome}"

    def as_record(self) -> dict[str, Any]:
        """The attempt as graph-tool-call's trace learning record."""
        return {
            "query": self.query,
            "query_fingerprint": self.query_fingerprint,
            "query_family": self.query_family,
            "collection_id": self.collection.name,
            "attempt_id": self.attempt_id,
            "session_id_hash": self.session_id_hash or None,
            "selected_target": self.selected_target,
            "llm_target": self.llm_target or None,
            "plan_tools": list(self.plan_tools or []),
            "failure_reason": self.failure_reason or None,
            "success": self.success,
            "latency_ms": self.latency_ms,
            "target_selector": dict(self.target_selector or {}),
            "trace_edges": list(self.trace_edges or []),
            "created_at": self.occurred_at.isoformat(),
        }

    def uses_target(self, target: str) -> bool:
        """graph-tool-call's match: the attempt selected the target or ran it in its plan."""
        if not target:
            return True
        return self.selected_target == target or target in (self.plan_tools or [])

    @property
    def quality_lab(self) -> dict[str, Any]:
        """Where a Quality Lab attempt came from: run, case, repetition, result_id, mode."""
        value = (self.extra or {}).get("quality_lab")
        return value if isinstance(value, dict) else {}

    @property
    def quality_lab_result_id(self) -> int | None:
        value = self.quality_lab.get("result_id")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


# What each suggestion type would change (graph-tool-call's suggestion docs).
SUGGESTION_TYPE_HELP = {
    "target_preference": gettext_lazy(
        "nudges this target up in retrieval and selection for the query family"
    ),
    "plan_path": gettext_lazy("prefers this ordered tool path when the planner's choices tie"),
    "data_flow_edge": gettext_lazy("makes this producer -> consumer edge visible to planning"),
    "field_mapping": gettext_lazy("maps a source field to a target field in request binding"),
    "context_default_candidate": gettext_lazy(
        "a stable context value that may remove a user prompt"
    ),
    "enum_mapping_candidate": gettext_lazy("a value-label enum mapping that may be reused"),
}


class SuggestionStatus(models.TextChoices):
    SUGGESTED = "suggested", gettext_lazy("suggested")
    PROMOTABLE = "promotable", gettext_lazy("promotable")
    PROMOTED = "promoted", gettext_lazy("promoted")
    REJECTED = "rejected", gettext_lazy("rejected")


# Promotable first: what a reviewer can act on now leads the queue.
QUEUE_ORDER = (
    SuggestionStatus.PROMOTABLE,
    SuggestionStatus.SUGGESTED,
    SuggestionStatus.PROMOTED,
    SuggestionStatus.REJECTED,
)


class RejectionReason(models.TextChoices):
    SENSITIVE_EVIDENCE = (
        "sensitive_evidence",
        gettext_lazy("sensitive_evidence: scrubbing found unsafe data"),
    )
    UNSTABLE_TARGET = (
        "unstable_target",
        gettext_lazy("unstable_target: runs selected different targets"),
    )
    WEAK_SHADOW_DELTA = (
        "weak_shadow_delta",
        gettext_lazy("weak_shadow_delta: shadow ranking did not improve"),
    )
    OPERATOR_REJECTED = (
        "operator_rejected",
        gettext_lazy("operator_rejected: a person decided against it"),
    )
    COLLECTION_POLICY_BLOCKED = (
        "collection_policy_blocked",
        gettext_lazy("collection_policy_blocked: the collection does not allow it"),
    )


class Suggestion(models.Model):
    """A graph-tool-call learning suggestion of one collection, with its review state."""

    collection = models.ForeignKey(
        "qualitylab.Collection", on_delete=models.CASCADE, related_name="suggestions"
    )
    suggestion_id = models.CharField(max_length=200)  # the library's id ("type:hash")
    type = models.CharField(max_length=40)
    target = models.CharField(max_length=200, blank=True)
    query_family = models.TextField()
    query_fingerprint = models.CharField(max_length=64)
    status = models.CharField(
        max_length=12, choices=SuggestionStatus.choices, default=SuggestionStatus.SUGGESTED
    )
    observations = models.PositiveIntegerField(default=0)
    # The successful attempts behind it, told apart by where they came from and counted by
    # what makes them independent: a runtime session, a Quality Lab case (repeats and re-runs
    # of one case are one piece of evidence). The gate's repeated-success threshold applies
    # to production_sessions + test_cases. Kept by the gate on every refresh.
    production_observations = models.PositiveIntegerField(default=0)
    production_sessions = models.PositiveIntegerField(default=0)
    test_observations = models.PositiveIntegerField(default=0)
    test_cases = models.PositiveIntegerField(default=0)
    prior_failure_count = models.PositiveIntegerField(default=0)
    recent_failures = models.PositiveIntegerField(default=0)
    recent_attempts = models.PositiveIntegerField(default=0)
    sensitive_evidence = models.BooleanField(default=False)
    # The promotion gate's last verdict: [{"name", "passed", "detail"}, ...].
    gate = models.JSONField(default=list, blank=True)
    # The library's suggestion dict (evidence, plan_tools, edge, evidence_sources, ...).
    data = models.JSONField(default=dict)
    # Shadow evidence summed over the latest result of each case it touches.
    shadow = models.JSONField(default=dict, blank=True)
    promoted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    promoted_by_label = models.CharField(max_length=150, blank=True)  # username or "policy"
    promoted_at = models.DateTimeField(null=True, blank=True)
    promotion_reason = models.TextField(blank=True)
    rejection_reason = models.CharField(max_length=40, choices=RejectionReason.choices, blank=True)
    rejection_note = models.TextField(blank=True)
    attempts: models.ManyToManyField[LearningAttempt, SuggestionAttempt] = models.ManyToManyField(
        LearningAttempt, through="SuggestionAttempt", related_name="suggestions"
    )
    # When the desk derived it; its attempts all occurred before.
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # The oldest and the newest of its attempts (when they occurred, not when they arrived):
    # what the pages call first and last seen.
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-last_seen_at", "-id"]
        permissions = [("review_suggestion", "Can approve, reject and demote suggestions")]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "suggestion_id"], name="suggestion_unique_per_collection"
            )
        ]
        indexes = [
            models.Index(fields=["collection", "query_fingerprint"]),
            models.Index(fields=["status", "last_seen_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.target} ({self.status})"

    @property
    def is_open(self) -> bool:
        """Still decided by the gate, not by a person."""
        return self.status in (SuggestionStatus.SUGGESTED, SuggestionStatus.PROMOTABLE)

    @property
    def recent_failure_ratio(self) -> float | None:
        return self.recent_failures / self.recent_attempts if self.recent_attempts else None

    @property
    def blocked_checks(self) -> list[dict[str, Any]]:
        """The gate checks it failed last time (why it is not promotable)."""
        return [check for check in self.gate or [] if not check.get("passed")]

    @property
    def type_help(self) -> str:
        return str(SUGGESTION_TYPE_HELP.get(self.type, ""))

    @property
    def distinct_evidence(self) -> int:
        """What the gate's repeated-success threshold counts."""
        return self.production_sessions + self.test_cases

    @property
    def shadow_changes_nothing(self) -> bool:
        """Shadow runs compared it on some case and it moved nothing on any: promoting it
        changes nothing observed yet."""
        shadow = self.shadow or {}
        if not shadow.get("cases"):
            return False
        moved = ("improved", "worsened", "selected_target_changed", "failure_reason_changed")
        return not shadow.get("rank_delta") and not any(shadow.get(key) for key in moved)

    def as_library(self) -> dict[str, Any]:
        """The suggestion in graph-tool-call's shape (what the export API returns)."""
        data: dict[str, Any] = {
            **(self.data or {}),
            "id": self.suggestion_id,
            "type": self.type,
            "target": self.target,
            "collection_id": self.collection.name,
            "query_family": self.query_family,
            "query_fingerprint": self.query_fingerprint,
            "status": self.status,
            "observations": self.observations,
            "prior_failure_count": self.prior_failure_count,
            "last_seen_at": self.last_seen_at.isoformat(),
        }
        if self.status == SuggestionStatus.PROMOTED:
            data["promoted_by"] = self.promoted_by_label
            data["promoted_at"] = self.promoted_at.isoformat() if self.promoted_at else None
            data["promotion_reason"] = self.promotion_reason
        if self.status == SuggestionStatus.REJECTED:
            data["rejection_reason"] = self.rejection_reason
        if self.shadow:
            data["shadow"] = dict(self.shadow)
        return data


class SuggestionAttempt(models.Model):
    """A successful attempt that this suggestion was derived from (one observation)."""

    suggestion = models.ForeignKey(Suggestion, on_delete=models.CASCADE)
    attempt = models.ForeignKey(LearningAttempt, on_delete=models.CASCADE)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["suggestion", "attempt"], name="suggestion_attempt_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.suggestion_id} <- {self.attempt_id}"


class Decision(models.TextChoices):
    APPROVE = "approve", gettext_lazy("approved")
    REJECT = "reject", gettext_lazy("rejected")
    DEMOTE = "demote", gettext_lazy("demoted")
    REOPEN = "reopen", gettext_lazy("reopened")
    AUTO_PROMOTE = "auto_promote", gettext_lazy("promoted by policy")


class Review(models.Model):
    """Append-only history: one row per decision on a suggestion, by a person or policy."""

    suggestion = models.ForeignKey(Suggestion, on_delete=models.CASCADE, related_name="reviews")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_label = models.CharField(max_length=150)  # the username then, or "policy"
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reason_code = models.CharField(max_length=40, blank=True)
    note = models.TextField(blank=True)
    status_before = models.CharField(max_length=12)
    status_after = models.CharField(max_length=12)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.decision} suggestion {self.suggestion_id}"


class ShadowObservation(models.Model):
    """What one suggestion changes for one Quality Lab case result when applied in shadow."""

    suggestion = models.ForeignKey(
        Suggestion, on_delete=models.CASCADE, related_name="shadow_observations"
    )
    result = models.ForeignKey("qualitylab.CaseResult", on_delete=models.CASCADE, related_name="+")
    case_id = models.CharField(max_length=120)
    expected_target = models.CharField(max_length=200, blank=True)
    current_rank = models.PositiveIntegerField(null=True, blank=True)
    shadow_rank = models.PositiveIntegerField(null=True, blank=True)
    rank_delta = models.IntegerField(null=True, blank=True)  # positive: moved up
    selected_target_changed = models.BooleanField(null=True, blank=True)
    failure_reason_changed = models.BooleanField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["suggestion", "result"], name="shadow_unique")
        ]

    def __str__(self) -> str:
        return f"{self.suggestion_id} on {self.case_id}: {self.rank_delta}"
