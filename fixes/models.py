"""A fix recorded with a resolution (or a promoted learning suggestion), and whether it held.

A fix is measured against the failures it should have stopped: its group's records (a
suggestion's, its tool's), per 24 hours and per 7 days after it against the same span before,
normalised by the tool's successes where the desk has them (fixes.efficacy). The figures are
stored on the fix, so the pages read one row per fix; what retention prunes inside a window is
carried into `carried` first, so the verdicts stay exact after records are gone.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy


class FixKind(models.TextChoices):
    RUNBOOK_STEP = "runbook_step", gettext_lazy("runbook step")
    CODE_CHANGE = "code_change", gettext_lazy("code change")
    TOOL_POLICY = "tool_policy", gettext_lazy("tool policy change")
    PROMOTED_SUGGESTION = "promoted_suggestion", gettext_lazy("promoted suggestion")
    OTHER = "other", gettext_lazy("other")


class Verdict(models.TextChoices):
    MEASURING = "measuring", gettext_lazy("measuring")
    HELD = "held", gettext_lazy("held")
    PARTLY_HELD = "partly_held", gettext_lazy("partly held")
    NOT_HELD = "not_held", gettext_lazy("did not hold")
    UNMEASURABLE = "unmeasurable", gettext_lazy("cannot tell")


class Verification(models.TextChoices):
    NONE = "", gettext_lazy("not verified")
    RUNNING = "running", gettext_lazy("verifying")
    PASSED = "passed", gettext_lazy("verified")
    FAILED = "failed", gettext_lazy("verification failed")


# The figures a fix keeps: (side, span) pairs of failures and successes.
SPANS = ("day", "week")
FIGURES = tuple(
    f"{what}_{side}_{span}"
    for span in SPANS
    for side in ("before", "after")
    for what in ("failures", "successes")
)


class Fix(models.Model):
    # A group's fix; a promoted suggestion's has no group and is measured on its tool.
    group = models.ForeignKey(
        "triage.FailureGroup", null=True, blank=True, on_delete=models.CASCADE, related_name="fixes"
    )
    collection = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=24, choices=FixKind.choices)
    url = models.CharField(max_length=2000, blank=True)  # the code change, the pull request
    note = models.TextField(blank=True, max_length=4000)
    runbook = models.ForeignKey(
        "triage.Runbook", null=True, blank=True, on_delete=models.SET_NULL, related_name="fixes"
    )
    suggestion = models.OneToOneField(
        "learning.Suggestion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="production_fix",
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=150, blank=True)  # kept when the account goes
    # The moment it took effect: the line between "before" and "after".
    fixed_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The resolve it was recorded with (none while a verification decides it).
    resolution = models.ForeignKey(
        "triage.GroupEvent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_in_release = models.CharField(max_length=100, blank=True)
    resolved_in_next_release = models.BooleanField(default=False)
    verification = models.CharField(
        max_length=10, choices=Verification.choices, blank=True, default=""
    )
    verification_run = models.ForeignKey(
        "qualitylab.CaseRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    failures_before_day = models.PositiveBigIntegerField(default=0)
    successes_before_day = models.PositiveBigIntegerField(default=0)
    failures_after_day = models.PositiveBigIntegerField(default=0)
    successes_after_day = models.PositiveBigIntegerField(default=0)
    failures_before_week = models.PositiveBigIntegerField(default=0)
    successes_before_week = models.PositiveBigIntegerField(default=0)
    failures_after_week = models.PositiveBigIntegerField(default=0)
    successes_after_week = models.PositiveBigIntegerField(default=0)
    # What retention pruned inside the windows, per figure and source, before it went.
    carried = models.JSONField(default=dict, blank=True)
    verdict = models.CharField(max_length=12, choices=Verdict.choices, default=Verdict.MEASURING)
    # The widest window closed so far ("", "day", "week"): the verdict reads it.
    verdict_span = models.CharField(max_length=4, blank=True)
    measured_at = models.DateTimeField(null=True, blank=True)
    settled = models.BooleanField(default=False)  # the week after closed: figures final

    class Meta:
        ordering = ["-fixed_at", "-id"]
        indexes = [
            models.Index(fields=["settled", "fixed_at"], name="fix_unsettled"),
            models.Index(fields=["group", "-fixed_at"], name="fix_group"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(group__isnull=False) | models.Q(suggestion__isnull=False),
                name="fix_has_subject",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} fix of {self.group_id or self.tool} ({self.verdict})"

    @property
    def is_verified(self) -> bool:
        return self.verification == Verification.PASSED

    def figures(self, span: str) -> dict[str, int]:
        return {
            f"{what}_{side}": getattr(self, f"{what}_{side}_{span}")
            for side in ("before", "after")
            for what in ("failures", "successes")
        }
