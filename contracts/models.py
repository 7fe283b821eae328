"""What the contracts page reads: per-tool daily counters, each operation's trail of
attempts, and the findings judged from them (seed 004's rollout plan and retry rules).

The scan (contracts.scan) fills these from stored records, receipts, runner events, audit
events and reconciliations, once per row, so the page never reads raw records."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy

# Seed 004's five fields, in its order, as they are counted "as sent".
CONTRACT_FIELDS = ("side_effect", "idempotency", "execution_state", "next_action", "evidence_ref")
# The seed's envelope, field by field (dotted where it nests).
ENVELOPE_FIELDS = (
    "status",
    "code",
    "retry.allowed",
    "retry.next_action",
    "execution.state",
    "execution.idempotency_key",
    "evidence",
    "user_safe_message",
)


def _column(field: str) -> str:
    return field.replace(".", "_")


class ToolDay(models.Model):
    """One tool's counters for one day (UTC) of when things happened."""

    collection = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200)
    day = models.DateField()
    failures = models.PositiveIntegerField(default=0)  # production failure records
    successes_runner = models.PositiveIntegerField(default=0)  # step.completed events
    successes_receipts = models.PositiveIntegerField(default=0)  # completed receipts
    receipts = models.PositiveIntegerField(default=0)  # every receipt but status lookups
    retries = models.PositiveIntegerField(default=0)
    uncertain = models.PositiveIntegerField(default=0)  # reconcile_first: a lookup is owed
    not_started_claims = models.PositiveIntegerField(default=0)
    # How many failures and receipts carried each of the five fields as the runtime sent it.
    sent_side_effect = models.PositiveIntegerField(default=0)
    sent_idempotency = models.PositiveIntegerField(default=0)
    sent_execution_state = models.PositiveIntegerField(default=0)
    sent_next_action = models.PositiveIntegerField(default=0)
    sent_evidence_ref = models.PositiveIntegerField(default=0)
    envelopes = models.PositiveIntegerField(default=0)
    envelope_status = models.PositiveIntegerField(default=0)
    envelope_code = models.PositiveIntegerField(default=0)
    envelope_retry_allowed = models.PositiveIntegerField(default=0)
    envelope_retry_next_action = models.PositiveIntegerField(default=0)
    envelope_execution_state = models.PositiveIntegerField(default=0)
    envelope_execution_idempotency_key = models.PositiveIntegerField(default=0)
    envelope_evidence = models.PositiveIntegerField(default=0)
    envelope_user_safe_message = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "tool", "day"], name="tool_day_unique")
        ]
        indexes = [models.Index(fields=["day"], name="tool_day_day")]

    def __str__(self) -> str:
        return f"{self.collection}/{self.tool} {self.day}"

    COUNTERS: tuple[str, ...] = (
        "failures",
        "successes_runner",
        "successes_receipts",
        "receipts",
        "retries",
        "uncertain",
        "not_started_claims",
        *(f"sent_{field}" for field in CONTRACT_FIELDS),
        "envelopes",
        *(f"envelope_{_column(field)}" for field in ENVELOPE_FIELDS),
    )


class OperationTrail(models.Model):
    """The attempts of one operation (a tool's idempotency key, else one run), in the order
    they happened: what the retry rules are judged on. Capped to the newest attempts."""

    collection = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200)
    operation = models.CharField(max_length=320)  # "key:<idempotency key>" or "run:<id>"
    attempts = models.JSONField(default=list)
    retries_counted = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "tool", "operation"], name="operation_trail_unique"
            )
        ]
        indexes = [models.Index(fields=["updated_at"], name="operation_trail_idle")]

    def __str__(self) -> str:
        return f"{self.collection}/{self.tool} {self.operation}"


class FindingKind(models.TextChoices):
    # Seed 004's retry rules.
    READ_RETRY_LIMIT = (
        "read_retry_limit",
        gettext_lazy("more retries of a retry-safe read than allowed"),
    )
    RETRY_AFTER_STOP = (
        "retry_after_stop",
        gettext_lazy("a retry after the failures that stop retrying"),
    )
    RECONCILE_RETRY = (
        "reconcile_retry",
        gettext_lazy("a retry of reconcile_first work before a finding"),
    )
    POLICY_BLOCK_RETRY = "policy_block_retry", gettext_lazy("a retry of a policy block")
    LOOKUP_NOT_ESCALATED = "lookup_not_escalated", gettext_lazy("a lookup timeout not escalated")
    # Evidence against a tool's own word, and duplicate work.
    NOT_STARTED_CONTRADICTED = (
        "not_started_contradicted",
        gettext_lazy("not_started, but the audit saw the call"),
    )
    DOUBLE_COMPLETION = "double_completion", gettext_lazy("one operation completed twice")


RETRY_RULE_KINDS = (
    FindingKind.READ_RETRY_LIMIT,
    FindingKind.RETRY_AFTER_STOP,
    FindingKind.RECONCILE_RETRY,
    FindingKind.POLICY_BLOCK_RETRY,
    FindingKind.LOOKUP_NOT_ESCALATED,
)


class ContractFinding(models.Model):
    """One broken rule of one operation (or one receipt's contradicted claim), counted once."""

    kind = models.CharField(max_length=32, choices=FindingKind.choices)
    collection = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200)
    operation = models.CharField(max_length=320)
    occurred_at = models.DateTimeField()  # when the attempt that broke the rule happened
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The example: a receipt or a failure record (plain ids: retention may delete either).
    example_type = models.CharField(max_length=8)  # "receipt" | "record"
    example_id = models.BigIntegerField()
    group_id = models.BigIntegerField(null=True, blank=True)  # a record's group
    detail = models.JSONField(default=dict, blank=True)  # run id, key, times, the limit

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "collection", "tool", "operation"], name="contract_finding_once"
            )
        ]
        indexes = [
            models.Index(fields=["occurred_at"], name="contract_finding_when"),
            models.Index(fields=["collection", "tool", "kind"], name="contract_finding_tool"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.collection}/{self.tool} {self.operation}"


class ScanMark(models.Model):
    """How far the scan has read one source table (rows with a larger id are new)."""

    source = models.CharField(max_length=20, primary_key=True)
    last_id = models.BigIntegerField(default=0)
    scanned_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.source} > {self.last_id}"


class Standing(models.Model):
    """The newest ranking's first batch (one row), for the triage pages' badge: which tools
    the seed would contract first and whether their runtimes send any of the five fields."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    first_batch = models.JSONField(default=list)  # [{"collection", "tool", "sends_none"}]
    window_days = models.PositiveSmallIntegerField(default=30)
    computed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"first batch at {self.computed_at}"
