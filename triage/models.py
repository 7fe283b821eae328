"""Normalized failures, their groups, receipts, audit events, tool policies, API keys, the
ingest ledger and the retention ledger."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from triage.vocabulary import taxonomy
from triage.vocabulary.lanes import most_cautious_lane

# Execution states whose outcome nobody knows yet: the work may or may not have happened.
UNCERTAIN_STATES = ("started_unknown", "partially_completed")

_LANE_CHOICES = [(lane, lane) for lane in taxonomy.LANES]
_STATE_CHOICES = [(state, state) for state in taxonomy.EXECUTION_STATES]
_GRADE_CHOICES = [(grade, grade) for grade in taxonomy.SIDE_EFFECT_GRADES]
_SOURCE_CHOICES = [(source, source) for source in taxonomy.SOURCES]


class ApiKeyScope(models.TextChoices):
    INGEST = "ingest", "ingest"
    READ = "read", "read"


class ApiKey(models.Model):
    """A runtime's credential for the API; only a hash of the secret part is stored."""

    KEY_PREFIX = "td"

    name = models.CharField(max_length=100, unique=True)
    # Idempotency ids are unique per owner, so a rotated key keeps its runtime's history.
    owner = models.CharField(max_length=100)
    lookup_id = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    quota_per_minute = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # What the key serves (organisation.access.key_q): the collections named here and those
    # its team owns, now and later; neither means every collection. Ingest refuses an item
    # for another collection (`collection_not_allowed`); reads show only these.
    collections = models.JSONField(default=list, blank=True)
    # PROTECT: deleting the team must not turn its keys into keys for every collection.
    team = models.ForeignKey(
        "organisation.Team",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="api_keys",
    )

    class Meta:
        ordering = ["name"]
        permissions = [("manage_api_keys", "Can create and revoke API keys")]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def hash_secret(secret: str) -> str:
        # Keys carry 192 random bits, so a fast hash is enough; a slow KDF would only
        # make every API request slower.
        return hashlib.sha256(secret.encode()).hexdigest()

    @classmethod
    def new_key_material(cls) -> tuple[str, str, str]:
        """Return (full key shown once, lookup id, secret hash)."""
        lookup_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(24)
        return f"{cls.KEY_PREFIX}_{lookup_id}_{secret}", lookup_id, cls.hash_secret(secret)

    def secret_matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash, self.hash_secret(secret))

    def is_active(self, *, now: datetime) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > now

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class ApiKeyCollectionUse(models.Model):
    """When a key last sent items for one collection: the key page's last use per
    collection. Ingest writes it once per batch, at most once a minute per row."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="collection_uses")
    # "" for items that name no collection.
    collection = models.CharField(max_length=COLLECTION_NAME_MAX_LENGTH, blank=True)
    last_used_at = models.DateTimeField()

    class Meta:
        ordering = ["collection"]
        constraints = [
            models.UniqueConstraint(
                fields=["api_key", "collection"], name="api_key_collection_use_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.api_key_id} {self.collection}: {self.last_used_at:%Y-%m-%d %H:%M}"


class ApiKeyQuotaWindow(models.Model):
    """Items and bytes ingested by one key in one minute, incremented atomically (the quota)."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="quota_windows")
    window_start = models.DateTimeField()
    used = models.PositiveIntegerField(default=0)
    used_bytes = models.PositiveBigIntegerField(default=0)  # decompressed body bytes

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["api_key", "window_start"], name="quota_window_unique")
        ]

    def __str__(self) -> str:
        return f"{self.api_key_id} @ {self.window_start:%H:%M}: {self.used}"


class IngestBatch(models.Model):
    """One ledger row per batch received, with what happened to its items."""

    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    owner = models.CharField(max_length=100)
    channel = models.CharField(max_length=20, default="api")  # api | otlp | cli | quality_lab
    received_at = models.DateTimeField(default=timezone.now, db_index=True)
    item_count = models.PositiveIntegerField(default=0)
    accepted = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    conflicts = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    rejected_by_code = models.JSONField(default=dict)
    # Entries a door counted and left out on purpose (OTLP spans that are not tool calls).
    skipped = models.PositiveIntegerField(default=0)
    body_bytes = models.PositiveIntegerField(default=0)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-received_at"]

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.item_count} items)"


class IngestItem(models.Model):
    """Claims a client's item id once per owner and type; later copies are duplicates."""

    owner = models.CharField(max_length=100)
    item_type = models.CharField(max_length=32)
    client_id = models.CharField(max_length=200)
    body_hash = models.CharField(max_length=64)
    batch = models.ForeignKey(IngestBatch, on_delete=models.CASCADE, related_name="items")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "item_type", "client_id"], name="ingest_item_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.owner}/{self.item_type}/{self.client_id}"


class IngestRejection(models.Model):
    """An item that was not stored, and why: nothing is dropped without a row here."""

    batch = models.ForeignKey(IngestBatch, on_delete=models.CASCADE, related_name="rejections")
    index = models.PositiveIntegerField()
    item_type = models.CharField(max_length=32, blank=True)
    client_id = models.CharField(max_length=200, blank=True)
    code = models.CharField(max_length=40, db_index=True)
    field = models.CharField(max_length=200, blank=True)
    message = models.CharField(max_length=500)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["batch_id", "index"]

    def __str__(self) -> str:
        return f"batch {self.batch_id} item {self.index}: {self.code}"


class RejectionCount(models.Model):
    """Rejected items per code since the beginning, kept by ingest with each batch's
    rejections: the ingestion page reads a handful of rows, not every rejection (counting
    a million of them took 65 ms a page load)."""

    code = models.CharField(max_length=40, primary_key=True)
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-count", "code"]

    def __str__(self) -> str:
        return f"{self.code}: {self.count}"


class ToolPolicy(models.Model):
    """What a tool may do and how its failures are handled (seed 004); collection "" = any."""

    collection = models.CharField(max_length=200, blank=True, default="")
    tool = models.CharField(max_length=200)
    side_effect = models.CharField(max_length=20, choices=_GRADE_CHOICES, default="read")
    idempotency_required = models.BooleanField(default=False)
    idempotency_lookup = models.CharField(max_length=300, blank=True)
    timeout_before_send_lane = models.CharField(
        max_length=24, choices=_LANE_CHOICES, default="retry_safe"
    )
    timeout_after_send_lane = models.CharField(
        max_length=24, choices=_LANE_CHOICES, default="reconcile_first"
    )
    approval_required = models.BooleanField(default=False)
    retry_max_attempts = models.PositiveSmallIntegerField(default=2)
    retry_budget_failures = models.PositiveSmallIntegerField(default=3)
    retry_budget_window_seconds = models.PositiveIntegerField(default=300)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["collection", "tool"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "tool"], name="tool_policy_unique")
        ]
        verbose_name_plural = "tool policies"

    def __str__(self) -> str:
        return f"{self.collection or '*'}/{self.tool} ({self.side_effect})"


# A release is a short identifier ("1.4.2", "2026-06-01.3", a commit's short hash).
RELEASE_VERSION_MAX_LENGTH = 64
RELEASE_URL_MAX_LENGTH = 500


class Release(models.Model):
    """One version of a collection's runtime and when it was deployed (declared by CI)."""

    collection = models.CharField(max_length=200)
    version = models.CharField(max_length=RELEASE_VERSION_MAX_LENGTH)
    deployed_at = models.DateTimeField()
    url = models.CharField(max_length=RELEASE_URL_MAX_LENGTH, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["collection", "-deployed_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "version"], name="release_unique")
        ]
        indexes = [
            models.Index(fields=["collection", "deployed_at"], name="release_collection_time")
        ]

    def __str__(self) -> str:
        return f"{self.collection} {self.version}"


class GroupStatus(models.TextChoices):
    OPEN = "open", gettext_lazy("open")
    ACKNOWLEDGED = "acknowledged", gettext_lazy("acknowledged")
    RESOLVED = "resolved", gettext_lazy("resolved")
    MUTED = "muted", gettext_lazy("muted")
    REGRESSED = "regressed", gettext_lazy("regressed")


# The source of the records Quality Lab's runs send through the desk's own channel (the
# seed's catalog names it); every other source is runtime traffic.
QUALITY_LAB_SOURCE = "quality_lab"


class FailureGroup(models.Model):
    """All failures of one (collection, stage, reason, tool), with denormalized counters."""

    collection = models.CharField(max_length=200, blank=True)
    stage = models.CharField(max_length=64)
    reason = models.CharField(max_length=100)
    tool = models.CharField(max_length=200, blank=True)
    reason_mapped = models.BooleanField(default=True)
    count = models.PositiveBigIntegerField(default=0)
    retryable_count = models.PositiveBigIntegerField(default=0)
    contradiction_count = models.PositiveBigIntegerField(default=0)
    # Of `count`, the records Quality Lab's own runs sent (source QUALITY_LAB_SOURCE): a
    # group with fewer of them than records has runtime traffic, which is what the triage
    # page shows by default. One comparison of two columns, where a look through the
    # group's source facets cost every page a probe per group.
    quality_lab_count = models.PositiveBigIntegerField(default=0, db_default=0)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    lane = models.CharField(max_length=24, choices=_LANE_CHOICES)
    status = models.CharField(
        max_length=16, choices=GroupStatus.choices, default=GroupStatus.OPEN, db_index=True
    )
    status_changed_at = models.DateTimeField(null=True, blank=True)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    muted_until = models.DateTimeField(null=True, blank=True)
    mute_remaining_count = models.PositiveIntegerField(null=True, blank=True)
    # Retention (triage/upkeep/retention.py) removes old records and takes them out of the counters
    # above; these say how many it removed and the newest cutoff it applied, so a group whose
    # records are gone can say why. first_seen and last_seen stay as history.
    pruned_count = models.PositiveBigIntegerField(default=0)
    pruned_before = models.DateTimeField(null=True, blank=True)
    # "Resolved in a release": records of earlier releases of the collection leave a resolved
    # group resolved; one of this release or a later one (by deployed_at) reopens it. With
    # `resolved_in_next_release`, the release is the first deployed after the resolution
    # (status_changed_at). Read only while the group is resolved (triage/intake/ingest.py).
    # Database defaults: ingest inserts new groups with its own SQL, naming its columns.
    resolved_in_release = models.CharField(
        max_length=RELEASE_VERSION_MAX_LENGTH, blank=True, default="", db_default=""
    )
    resolved_in_next_release = models.BooleanField(default=False, db_default=False)
    # The release of the records that last reopened the group ("" when none was named).
    regressed_in_release = models.CharField(
        max_length=RELEASE_VERSION_MAX_LENGTH, blank=True, default="", db_default=""
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "stage", "reason", "tool"], name="failure_group_unique"
            )
        ]
        permissions = [("act_on_group", "Can acknowledge, assign, resolve, mute and reopen groups")]

    def __str__(self) -> str:
        return f"{self.stage}/{self.reason} {self.tool or '-'} ({self.collection or '-'})"


class FailureGroupBucket(models.Model):
    """Records per group per hour, for window counts and sparklines without raw scans."""

    # No index of its own: the unique constraint, which starts with the group, serves
    # lookups by group, and one index fewer is one write fewer per counter update.
    group = models.ForeignKey(
        FailureGroup, on_delete=models.CASCADE, related_name="buckets", db_index=False
    )
    hour = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "hour"], name="group_bucket_unique")
        ]
        # With count in the key, a window's sums are read from the index alone
        # (an index-only scan), without visiting the table's pages.
        indexes = [models.Index(fields=["hour", "group", "count"], name="bucket_hour_group_count")]

    def __str__(self) -> str:
        return f"group {self.group_id} @ {self.hour:%Y-%m-%d %H}h: {self.count}"


class FailureReasonBucket(models.Model):
    """Records per (stage, reason) per hour, across all groups: a sparkline's day reads a
    row per reason and hour (about 1,300 rows) instead of a bucket per group and hour (39,282
    at ten million records a month). Kept by ingest and retention with the group buckets, in
    the same transactions; a group's stage and reason never change, so neither does the row
    its records are counted in. Pages that show only some groups take away the buckets of
    the groups they leave out (see triage.selectors._Spark)."""

    stage = models.CharField(max_length=64)
    reason = models.CharField(max_length=100)
    hour = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        # Hour first: a window reads a range of hours; ingest's upserts find their row by
        # the whole key.
        constraints = [
            models.UniqueConstraint(fields=["hour", "stage", "reason"], name="reason_bucket_unique")
        ]

    def __str__(self) -> str:
        return f"{self.stage}/{self.reason} @ {self.hour:%Y-%m-%d %H}h: {self.count}"


class FailureGroupDay(models.Model):
    """Records per group per UTC day: windows of days read one row per day, not 24 buckets."""

    # No index of its own: the unique constraint, which starts with the group, serves
    # lookups by group, and one index fewer is one write fewer per counter update.
    group = models.ForeignKey(
        FailureGroup, on_delete=models.CASCADE, related_name="days", db_index=False
    )
    day = models.DateTimeField()  # midnight UTC
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "day"], name="group_day_unique")]
        # Without the count in an index, ingest's updates of today's rows stay on their
        # page (HOT, with the free space the migration leaves on each page): the table
        # stays compact. Windows of days read it by a sequential or bitmap scan either way.
        indexes = [models.Index(fields=["day", "group"], name="day_group")]

    def __str__(self) -> str:
        return f"group {self.group_id} on {self.day:%Y-%m-%d}: {self.count}"


class FailureGroupFacet(models.Model):
    """Records per group by source, lane and execution state (the filterable mixes)."""

    # No index of its own: the unique constraint, which starts with the group, serves
    # lookups by group, and one index fewer is one write fewer per counter update.
    group = models.ForeignKey(
        FailureGroup, on_delete=models.CASCADE, related_name="facets", db_index=False
    )
    dimension = models.CharField(max_length=20)  # source | lane | execution_state | release
    value = models.CharField(max_length=RELEASE_VERSION_MAX_LENGTH)
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["group", "dimension", "value"], name="group_facet_unique"
            )
        ]
        indexes = [models.Index(fields=["dimension", "value"], name="facet_dimension_value")]

    def __str__(self) -> str:
        return f"group {self.group_id} {self.dimension}={self.value}: {self.count}"


class RunnerEvent(models.Model):
    """A PlanRunner event as a runtime forwarded it, scrubbed."""

    batch = models.ForeignKey(IngestBatch, on_delete=models.CASCADE, related_name="+")
    collection = models.CharField(max_length=200, blank=True)
    event_type = models.CharField(max_length=40, db_index=True)
    plan_id = models.CharField(max_length=200, blank=True, db_index=True)
    step_id = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    stage = models.CharField(max_length=64, blank=True)
    occurred_at = models.DateTimeField(db_index=True)
    graph_tool_call_version = models.CharField(max_length=40, blank=True)
    payload = models.JSONField(default=dict)
    # Fields where the desk replaced NUL or lone surrogates with U+FFFD (triage.intake.storable).
    replaced_characters = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"{self.event_type} {self.plan_id} {self.step_id}"


class FailureRecord(models.Model):
    """One normalized failure (seed 000's record plus execution facts of seed 004)."""

    # No database constraints on the links below: on PostgreSQL the table is partitioned by
    # day (triage/upkeep/partitions.py), and a constraint would make each day's detach and
    # drop lock the groups, batches and events tables, against ingest and the pages. The
    # desk writes the links itself (ingest), groups are never deleted, and retention clears
    # what points at a pruned event or record; Django still applies PROTECT and SET_NULL.
    # No index of its own either: record_group_time and record_group_release start with the
    # group and serve every read by group; a third index on it only cost each ingested
    # record an insert, and each statement on the records a plan per day's partition.
    group = models.ForeignKey(
        FailureGroup,
        on_delete=models.PROTECT,
        related_name="records",
        db_constraint=False,
        db_index=False,
    )
    batch = models.ForeignKey(
        IngestBatch, null=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False
    )
    client_id = models.CharField(max_length=200, blank=True)
    runner_event = models.OneToOneField(
        RunnerEvent,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="failure",
        db_constraint=False,
    )
    collection = models.CharField(max_length=200, blank=True)
    source = models.CharField(max_length=20, choices=_SOURCE_CHOICES, default="runtime")
    stage = models.CharField(max_length=64)
    reason = models.CharField(max_length=100)
    reason_mapped = models.BooleanField(default=True)
    message = models.TextField(blank=True)
    tool = models.CharField(max_length=200, blank=True)
    side_effect = models.CharField(max_length=20, blank=True)
    # The grade as the runtime sent it ("" when it sent none): `side_effect` is the policy's
    # when a policy names the tool, and the contracts page counts what runtimes send.
    sent_side_effect = models.CharField(max_length=20, blank=True, default="")
    plan_id = models.CharField(max_length=200, blank=True)
    step_id = models.CharField(max_length=200, blank=True)
    retryable = models.BooleanField()
    operator_action = models.CharField(max_length=100)
    lane = models.CharField(max_length=24, choices=_LANE_CHOICES)
    execution_state = models.CharField(max_length=24, choices=_STATE_CHOICES)
    # What the runtime itself claimed; kept even when it contradicts the derivation.
    sent_retryable = models.BooleanField(null=True)
    sent_lane = models.CharField(max_length=24, blank=True)
    sent_execution_state = models.CharField(max_length=24, blank=True)
    contradictions = models.JSONField(default=list, blank=True)
    evidence = models.JSONField(default=dict, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    # Fields where the desk replaced NUL or lone surrogates with U+FFFD (triage.intake.storable).
    replaced_characters = models.JSONField(default=list, blank=True)
    idempotency_key = models.CharField(max_length=300, blank=True, db_index=True)
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(default=timezone.now)
    graph_tool_call_version = models.CharField(max_length=40, blank=True)
    taxonomy_version = models.CharField(max_length=20)
    # The failed call's OpenTelemetry span (W3C hex), when a door knows it: a span and a
    # report of the same call are one record (triage.intake.ingest merges the second).
    # NULL, not "", for "no span": `trace_id = <value>` implies NOT NULL, so the planner can
    # use the partial index below for a lookup by values it does not know in advance.
    trace_id = models.CharField(max_length=32, null=True, blank=True)  # noqa: DJ001
    span_id = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001
    # The runtime's release (Release.version in this collection) as sent; "" when none.
    release = models.CharField(
        max_length=RELEASE_VERSION_MAX_LENGTH, blank=True, default="", db_default=""
    )

    class Meta:
        indexes = [
            models.Index(fields=["group", "-occurred_at"], name="record_group_time"),
            # A group's first and last record of each release, read as two index endpoints
            # (the group page's per-release table), never by scanning the group's records.
            models.Index(fields=["group", "release", "occurred_at"], name="record_group_release"),
            # By time, with each record's group: the triage page counts the records of a
            # window's edges per group from this index alone (an index-only scan), not by
            # visiting each record's row (at ten million records those rows lie far apart).
            # SQLite has no included columns (models.W040, silenced): an index by time.
            models.Index(fields=["occurred_at"], include=["group"], name="record_time_group"),
            models.Index(fields=["collection", "-occurred_at"], name="record_collection_time"),
            # Partial: only records with a span are indexed, so records without one cost
            # nothing; ingest finds a batch's spans through it in one query. Not unique: the
            # same ids a day apart are another call (triage.intake.ingest.SAME_CALL_WINDOW),
            # and ingest keeps one record per call under a lock per span.
            models.Index(
                fields=["trace_id", "span_id"],
                condition=models.Q(trace_id__isnull=False),
                name="record_one_per_span",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stage}/{self.reason} at {self.occurred_at:%Y-%m-%d %H:%M}"


class Receipt(models.Model):
    """A tool-run receipt (seed 004): what a tool run claims happened, failures included."""

    batch = models.ForeignKey(IngestBatch, null=True, on_delete=models.SET_NULL, related_name="+")
    client_id = models.CharField(max_length=200, blank=True)
    collection = models.CharField(max_length=200, blank=True)
    tool_run_id = models.CharField(max_length=200, db_index=True)
    tool = models.CharField(max_length=200)
    tool_version = models.CharField(max_length=60, blank=True)
    side_effect = models.CharField(max_length=20, blank=True)
    sent_side_effect = models.CharField(max_length=20, blank=True, default="")  # as sent
    authority_scope = models.CharField(max_length=300, blank=True)
    target_fingerprint = models.CharField(max_length=200, blank=True)
    payload_hash = models.CharField(max_length=200, blank=True)
    attempt = models.PositiveIntegerField(default=1)
    result = models.CharField(max_length=40)
    code = models.CharField(max_length=100, blank=True)
    reason = models.CharField(max_length=100, blank=True)
    execution_state = models.CharField(max_length=24, choices=_STATE_CHOICES)
    next_action = models.CharField(max_length=100, blank=True)
    lane = models.CharField(max_length=24, choices=_LANE_CHOICES, blank=True)
    sent_lane = models.CharField(max_length=24, blank=True)
    retryable = models.BooleanField(null=True)
    idempotency_key = models.CharField(max_length=300, blank=True, db_index=True)
    evidence_ref = models.CharField(max_length=500, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    retry_count = models.PositiveIntegerField(default=0)
    stop_reason = models.CharField(max_length=200, blank=True)
    contradictions = models.JSONField(default=list, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    # Fields where the desk replaced NUL or lone surrogates with U+FFFD (triage.intake.storable).
    replaced_characters = models.JSONField(default=list, blank=True)
    received_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        indexes = [
            models.Index(fields=["execution_state", "-received_at"], name="receipt_state"),
            models.Index(fields=["lane", "-received_at"], name="receipt_lane"),
        ]
        permissions = [("reconcile_receipt", "Can record what reconciling uncertain work found")]

    def __str__(self) -> str:
        return f"{self.tool_run_id} {self.tool} {self.result}"

    @property
    def verdict(self) -> str:
        """The one lane a page shows for the run: its own, raised to what the row itself
        calls for. Uncertain work that may have written is never retried blind (at least
        reconcile_first); a failed external write without an idempotency key cannot be
        looked up, only investigated. A plain success has no lane and gets none."""
        if not self.lane:
            return ""
        floors = [self.lane]
        if self.execution_state in UNCERTAIN_STATES and self.side_effect != "read":
            floors.append("reconcile_first")
        if self.side_effect == "external_write" and not self.idempotency_key:
            floors.append("manual_investigation")
        return most_cautious_lane(*floors)


class AuditEvent(models.Model):
    """An outbound call the runtime's own audit observed; used to check receipts' claims."""

    batch = models.ForeignKey(IngestBatch, null=True, on_delete=models.SET_NULL, related_name="+")
    client_id = models.CharField(max_length=200, blank=True)
    collection = models.CharField(max_length=200, blank=True)
    tool_run_id = models.CharField(max_length=200, blank=True, db_index=True)
    idempotency_key = models.CharField(max_length=300, blank=True, db_index=True)
    tool = models.CharField(max_length=200, blank=True)
    method = models.CharField(max_length=10, blank=True)
    host = models.CharField(max_length=255, blank=True)
    path = models.CharField(max_length=500, blank=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    occurred_at = models.DateTimeField()
    extra = models.JSONField(default=dict, blank=True)
    # Fields where the desk replaced NUL or lone surrogates with U+FFFD (triage.intake.storable).
    replaced_characters = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"{self.method} {self.host} {self.status}"


class GroupAction(models.TextChoices):
    ACKNOWLEDGE = "acknowledge", gettext_lazy("acknowledge")
    ASSIGN = "assign", gettext_lazy("assign")
    RESOLVE = "resolve", gettext_lazy("resolve")
    MUTE = "mute", gettext_lazy("mute")
    REOPEN = "reopen", gettext_lazy("reopen")
    NOTE = "note", gettext_lazy("note")
    UNDO = "undo", gettext_lazy("undo")


class BulkAction(models.Model):
    """One action applied to every group a filter showed; keeps what it changed, for undo."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=16, choices=GroupAction.choices)
    query = models.CharField(max_length=1000, blank=True)  # the triage filter, as a URL query
    group_count = models.PositiveIntegerField()
    previous = models.JSONField(default=dict)  # group id -> fields before the action
    created_at = models.DateTimeField(default=timezone.now)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    def __str__(self) -> str:
        return f"{self.action} on {self.group_count} groups"


class GroupEvent(models.Model):
    """Append-only history of a group: who changed what, when and why."""

    group = models.ForeignKey(FailureGroup, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    action = models.CharField(max_length=16)  # a GroupAction, or "regressed" / "unmuted"
    status_before = models.CharField(max_length=16, blank=True)
    status_after = models.CharField(max_length=16, blank=True)
    note = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    bulk_action = models.ForeignKey(
        BulkAction, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"group {self.group_id}: {self.action}"

    @classmethod
    def unmuted(cls, *, group_id: int, now: datetime) -> GroupEvent:
        """The history row of a mute that ran out (by time or by count of new records)."""
        return cls(
            group_id=group_id,
            action="unmuted",
            status_before=GroupStatus.MUTED,
            status_after=GroupStatus.OPEN,
            note="the mute ran out",
            created_at=now,
        )


class ReconciliationFinding(models.TextChoices):
    APPLIED = "applied", gettext_lazy("applied: the remote side did it")
    NOT_APPLIED = "not_applied", gettext_lazy("not applied: nothing happened remotely")
    PARTIALLY_APPLIED = "partially_applied", gettext_lazy("partially applied")


class Reconciliation(models.Model):
    """What an operator found when checking uncertain work (seed 004's reconcile_first)."""

    receipt = models.ForeignKey(Receipt, on_delete=models.CASCADE, related_name="reconciliations")
    finding = models.CharField(max_length=20, choices=ReconciliationFinding.choices)
    note = models.TextField()
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    # The finding this one corrects: history is never rewritten, a correction is a new row.
    # One-to-one: each finding is corrected at most once, so the history is a single line.
    corrects = models.OneToOneField(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="corrected_by",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["receipt"],
                condition=models.Q(corrects__isnull=True),
                name="reconciliation_first_finding_once",
            )
        ]

    def __str__(self) -> str:
        return f"{self.receipt_id}: {self.finding}"


class RetentionStatus(models.TextChoices):
    RUNNING = "running", gettext_lazy("running")
    DONE = "done", gettext_lazy("done: nothing older than the cutoff is left")
    PARTIAL = "partial", gettext_lazy("partial: stopped at its time budget, the next run continues")
    SKIPPED = "skipped", gettext_lazy("skipped: another prune was running")
    FAILED = "failed", gettext_lazy("failed")
    INTERRUPTED = "interrupted", gettext_lazy("interrupted: its process stopped before it finished")


class RetentionRun(models.Model):
    """One prune of old records (the retention ledger): its cutoff, what it removed, how it
    ended. Counts are written in each batch's transaction, so they match what was committed."""

    channel = models.CharField(max_length=10)  # beat | cli
    days = models.PositiveIntegerField()
    cutoff = models.DateTimeField()  # records that occurred before it are removed
    batch_size = models.PositiveIntegerField()
    status = models.CharField(
        max_length=12, choices=RetentionStatus.choices, default=RetentionStatus.RUNNING
    )
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    batches = models.PositiveIntegerField(default=0)
    records_deleted = models.PositiveBigIntegerField(default=0)
    runner_events_deleted = models.PositiveBigIntegerField(default=0)
    groups_touched = models.PositiveIntegerField(default=0)
    groups_emptied = models.PositiveIntegerField(default=0)  # left with no record at all
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"retention {self.pk}: {self.records_deleted} records before {self.cutoff:%Y-%m-%d}"

    @property
    def is_finished(self) -> bool:
        return self.status != RetentionStatus.RUNNING


class PersonPreference(models.Model):
    """What one person chose for how the pages read: their time zone and their language.

    Blank means "not chosen": the browser's time zone and the browser's Accept-Language
    apply until the person picks. Stored per user so a choice follows them across browsers.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference"
    )
    time_zone = models.CharField(max_length=64, blank=True, default="")
    language = models.CharField(max_length=16, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        zone = self.time_zone or "browser zone"
        return f"{self.user} ({zone}, {self.language or 'browser language'})"

    @classmethod
    def for_user(cls, user: object) -> PersonPreference | None:
        """The stored preference of a signed-in user, or None (nothing chosen yet)."""
        if not getattr(user, "is_authenticated", False):
            return None
        return cls.objects.filter(user=user).first()


class RunbookSubject(models.TextChoices):
    REASON = "reason", "reason"
    TOOL = "tool", "tool"


# A runbook's note is a pointer for the first minute of an incident, not the runbook itself.
RUNBOOK_NOTE_MAX_LENGTH = 500
RUNBOOK_URL_MAX_LENGTH = 500


class Runbook(models.Model):
    """The runbook link and short note operators keep for a reason code or for a tool.

    A reason's runbook is keyed by the code alone, as the taxonomy's advice is. A tool's is
    keyed by (collection, tool) like a ToolPolicy, collection "" meaning the tool in every
    collection: the same tool name in two collections usually has two owners.
    """

    subject = models.CharField(max_length=8, choices=RunbookSubject.choices)
    reason = models.CharField(max_length=100, blank=True, default="")
    collection = models.CharField(max_length=200, blank=True, default="")
    tool = models.CharField(max_length=200, blank=True, default="")
    url = models.CharField(max_length=RUNBOOK_URL_MAX_LENGTH, blank=True, default="")
    note = models.CharField(max_length=RUNBOOK_NOTE_MAX_LENGTH, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subject", "reason", "collection", "tool"], name="runbook_unique"
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(subject="reason", collection="", tool="") & ~models.Q(reason="")
                )
                | (models.Q(subject="tool", reason="") & ~models.Q(tool="")),
                name="runbook_subject_keys",
            ),
        ]

    def __str__(self) -> str:
        if self.subject == RunbookSubject.REASON:
            return f"runbook of reason {self.reason}"
        return f"runbook of tool {self.collection or '*'}/{self.tool}"

    @property
    def is_empty(self) -> bool:
        return not (self.url or self.note)


class RunbookRevision(models.Model):
    """Append-only history of a runbook: who changed its link or note, when, from what."""

    runbook = models.ForeignKey(Runbook, on_delete=models.CASCADE, related_name="revisions")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    url_before = models.CharField(max_length=RUNBOOK_URL_MAX_LENGTH, blank=True)
    url_after = models.CharField(max_length=RUNBOOK_URL_MAX_LENGTH, blank=True)
    note_before = models.CharField(max_length=RUNBOOK_NOTE_MAX_LENGTH, blank=True)
    note_after = models.CharField(max_length=RUNBOOK_NOTE_MAX_LENGTH, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.runbook}: revision {self.pk}"
