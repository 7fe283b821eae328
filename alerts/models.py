"""Alert channels (where a notification goes), rules (when one is sent), the state that keeps
a rule quiet within its minimum interval, and the delivery log."""

from __future__ import annotations

import secrets
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from triage.vocabulary import taxonomy


class ChannelKind(models.TextChoices):
    EMAIL = "email", _("email")
    WEBHOOK = "webhook", _("webhook (JSON, signed)")
    SLACK = "slack", _("Slack-compatible webhook")


# A webhook URL on these hosts is a Slack-compatible webhook when the kind is not chosen.
SLACK_HOSTS = ("hooks.slack.com",)


def kind_for_target(target: str) -> str | None:
    """The kind an address is, from its form: an http(s) URL is a webhook (Slack-compatible
    on a Slack host), an address with @ and no scheme is an email address, anything else is
    neither (None). Whether the address may be used is the services' to judge."""
    target = target.strip()
    scheme, separator, _rest = target.partition("://")
    if separator:
        if scheme.lower() not in ("http", "https"):
            return None
        try:
            host = urlsplit(target).hostname
        except ValueError:  # a malformed host: a webhook the URL check refuses by name
            host = None
        return ChannelKind.SLACK if host in SLACK_HOSTS else ChannelKind.WEBHOOK
    return ChannelKind.EMAIL if "@" in target else None


class Channel(models.Model):
    """Where notifications go: an email address, a signed JSON webhook or a Slack webhook.

    A webhook URL is a secret (whoever holds a Slack URL can post to the channel): pages and
    logs show `masked_target`, never `target`. The signing secret is shown once, at creation.
    """

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    target = models.CharField(max_length=2000)  # an email address or a URL
    signing_secret = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["name"]
        permissions = [
            (
                "manage_webhook_channel",
                "Can add, change, test and delete webhook and Slack-compatible channels",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def is_webhook(self) -> bool:
        return self.kind in (ChannelKind.WEBHOOK, ChannelKind.SLACK)

    @property
    def masked_target(self) -> str:
        """The address without what makes it a secret: scheme and host, or the mailbox."""
        if not self.is_webhook:
            return self.target
        parts = urlsplit(self.target)
        return f"{parts.scheme}://{parts.hostname or '?'}/••••"

    @staticmethod
    def new_signing_secret() -> str:
        return secrets.token_hex(32)


class RuleKind(models.TextChoices):
    NEW_GROUP = "new_group", _("new group: the first record of a group")
    REGRESSION = "regression", _("regression: a record on a resolved group")
    SPIKE = "spike", _("spike: N records in a window and X times the window before")
    RECONCILE_WAITING = "reconcile_waiting", _("uncertain work not reconciled after T minutes")
    RETRY_BUDGET = "retry_budget", _("an operation over its retry budget")
    QUALITYLAB_REGRESSION = (
        "qualitylab_regression",
        _("Quality Lab: a case that passed fails, or the pass rate falls under R"),
    )
    SUGGESTION_WAITING = (
        "suggestion_waiting",
        _("a promotable suggestion not decided after T minutes"),
    )
    CONTRACT_VIOLATION = (
        "contract_violation",
        _("a tool broke a retry rule of its next-action contract (seed 004)"),
    )


# Judged from what ingest publishes at commit; every other kind by the beat task.
INGEST_KINDS = (RuleKind.NEW_GROUP, RuleKind.REGRESSION)
GROUP_KINDS = (RuleKind.NEW_GROUP, RuleKind.REGRESSION, RuleKind.SPIKE)
FILTERS = ("collection", "stage", "reason", "tool", "lane", "source", "execution_state")
# A rule's source "production": every source but Quality Lab's test runs (the triage page's
# default). New rules of the kinds that filter by source take it by default, so a test run
# never pages anyone unless a rule asks for it.
PRODUCTION_SOURCE = "production"
# The filters each kind can apply (the others describe nothing the kind looks at).
KIND_FILTERS: dict[str, tuple[str, ...]] = {
    RuleKind.NEW_GROUP: FILTERS,
    RuleKind.REGRESSION: FILTERS,
    RuleKind.SPIKE: FILTERS,
    RuleKind.RECONCILE_WAITING: ("collection", "reason", "tool", "lane", "execution_state"),
    RuleKind.RETRY_BUDGET: ("collection", "tool"),
    RuleKind.QUALITYLAB_REGRESSION: ("collection",),
    RuleKind.SUGGESTION_WAITING: ("collection",),
    RuleKind.CONTRACT_VIOLATION: ("collection", "tool"),
}


class Rule(models.Model):
    """When to notify: a kind, filters (blank: any), its parameters and its channels."""

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=24, choices=RuleKind.choices)
    enabled = models.BooleanField(default=True)
    channels = models.ManyToManyField(Channel, related_name="rules")
    collection = models.CharField(max_length=200, blank=True)
    stage = models.CharField(max_length=64, blank=True)
    reason = models.CharField(max_length=100, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    lane = models.CharField(max_length=24, blank=True)
    source = models.CharField(max_length=20, blank=True, default=PRODUCTION_SOURCE)
    execution_state = models.CharField(max_length=24, blank=True)
    # A subject (a group, an operation, a suite...) alerts at most once per this interval.
    min_interval_minutes = models.PositiveIntegerField(default=60)
    # spike: at least spike_count records in spike_window_hours, and at least spike_factor
    # times the count of the window before.
    spike_count = models.PositiveIntegerField(null=True, blank=True)
    spike_factor = models.FloatField(null=True, blank=True)
    spike_window_hours = models.PositiveIntegerField(null=True, blank=True)
    # reconcile_waiting and suggestion_waiting: how long the work or the suggestion waited.
    wait_minutes = models.PositiveIntegerField(null=True, blank=True)
    # qualitylab_regression: also when a run's pass rate falls under this (0-1).
    pass_rate_floor = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["kind", "enabled"], name="alert_rule_kind")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def min_interval(self) -> timedelta:
        return timedelta(minutes=self.min_interval_minutes)

    def filters(self) -> dict[str, str]:
        """The filters set on this rule (blank ones match anything)."""
        return {name: getattr(self, name) for name in FILTERS if getattr(self, name)}

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.source == PRODUCTION_SOURCE and "source" not in KIND_FILTERS.get(self.kind, ()):
            self.source = ""  # the default, on a kind that reads no source
        if self.source not in ("", PRODUCTION_SOURCE, *taxonomy.SOURCES):
            errors["source"] = str(_("Choose any, production, or one of the sources."))
        unused = [name for name in self.filters() if name not in KIND_FILTERS.get(self.kind, ())]
        for name in unused:
            errors[name] = str(_("This filter does not apply to the kind %(kind)s.")) % {
                "kind": self.kind
            }
        if self.kind == RuleKind.SPIKE:
            if not self.spike_count:
                errors["spike_count"] = str(_("A spike rule needs N, at least 1 record."))
            if self.spike_factor is None or self.spike_factor < 1:
                errors["spike_factor"] = str(_("A spike rule needs X, at least 1."))
            if not self.spike_window_hours or self.spike_window_hours > 168:
                errors["spike_window_hours"] = str(_("The window is 1 to 168 hours."))
        if self.kind in (RuleKind.RECONCILE_WAITING, RuleKind.SUGGESTION_WAITING) and (
            not self.wait_minutes
        ):
            errors["wait_minutes"] = str(_("This kind needs T, at least 1 minute."))
        if self.pass_rate_floor is not None and not 0 <= self.pass_rate_floor <= 1:
            errors["pass_rate_floor"] = str(_("The pass rate floor is between 0 and 1."))
        if errors:
            raise ValidationError(errors)


class RuleSubjectState(models.Model):
    """When a rule last fired for one subject (a group, an operation, a suite...): keeps it
    quiet within its minimum interval, and from firing twice for one window."""

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="states")
    subject = models.CharField(max_length=300)
    last_fired_at = models.DateTimeField()
    last_window = models.CharField(max_length=100, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rule", "subject"], name="alert_state_unique")
        ]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.subject} @ {self.last_fired_at:%Y-%m-%d %H:%M}"


class DeliveryStatus(models.TextChoices):
    QUEUED = "queued", _("queued")
    SENDING = "sending", _("sending")
    RETRYING = "retrying", _("retrying")
    SENT = "sent", _("sent")
    FAILED = "failed", _("failed")


class Delivery(models.Model):
    """One notification to one channel, and what happened to it (the delivery log).

    `idempotency_key` is rule + subject + window; with the channel it is unique, so an
    evaluation that runs twice (a redelivered task) queues nothing twice, and a delivery is
    claimed with a conditional UPDATE before it is sent.
    """

    rule = models.ForeignKey(
        Rule, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    idempotency_key = models.CharField(max_length=400)
    subject = models.CharField(max_length=300, blank=True)
    summary = models.CharField(max_length=500)  # what it says, in one line
    payload = models.JSONField(default=dict)  # the webhook body without sent_at
    is_digest = models.BooleanField(default=False)
    is_test = models.BooleanField(default=False)
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.QUEUED
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    lease_until = models.DateTimeField(null=True, blank=True)
    answer_code = models.CharField(max_length=20, blank=True)  # HTTP status or SMTP "250"
    error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "idempotency_key"], name="alert_delivery_once"
            )
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="alert_delivery_due"),
            models.Index(fields=["rule", "-created_at"], name="alert_delivery_rule"),
        ]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.idempotency_key} -> {self.channel_id}: {self.status}"


class PendingEvaluation(models.Model):
    """What a batch did that could not be handed to the queue (the broker was down): the
    beat task evaluates it once the broker is back."""

    batch_id = models.BigIntegerField()
    new_group_ids = models.JSONField(default=list)
    regressed_group_ids = models.JSONField(default=list)
    committed_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"batch {self.batch_id}"
