"""A fix verified by Quality Lab: the cases made from the group's failures, run in the worker.

The run ends (Quality Lab's `run_finished`) and decides:
- every case passed: the fix is verified. A group whose resolve waited for it is resolved now,
  by the person who asked, and its history names the run ("verified by run #12, 3/3");
- a case failed, or the run was cancelled or failed: the group stays open with the run linked.
  A group already resolved by this fix is reopened, naming the run.
The beat task concludes any verification whose run ended without the signal reaching here.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from fixes.models import Fix, Verification
from qualitylab.models import CaseRun, RunStatus
from triage.models import FailureGroup, GroupAction, GroupEvent, GroupStatus
from triage.services import GroupActionError, group_act


def run_passed(run: CaseRun) -> bool:
    return run.status == RunStatus.DONE and run.total > 0 and run.passed == run.total


def run_summary(run: CaseRun) -> dict[str, int]:
    return {"run": run.pk, "passed": run.passed, "total": run.total}


def run_finished(sender: Any, run: CaseRun, **kwargs: Any) -> None:
    """Quality Lab's signal: conclude the verifications this run was for."""
    for fix_id in Fix.objects.filter(
        verification_run=run, verification=Verification.RUNNING
    ).values_list("pk", flat=True):
        verification_conclude(fix_id=fix_id, run=run)


def verification_conclude(*, fix_id: int, run: CaseRun) -> Fix | None:
    with transaction.atomic():
        fix = (
            Fix.objects.select_for_update()
            .filter(pk=fix_id, verification=Verification.RUNNING, verification_run=run)
            .first()
        )
        if fix is None or fix.group_id is None:
            return None  # concluded already (the signal and the beat both came)
        group = FailureGroup.objects.get(pk=fix.group_id)
        if run_passed(run):
            fix.verification = Verification.PASSED
            if fix.resolution_id is None and group.status != GroupStatus.RESOLVED:
                fix.resolution = _resolve(fix, group, run)
        else:
            fix.verification = Verification.FAILED
            if _resolved_by(fix, group):
                group_act(
                    group=group,
                    actor=fix.actor,
                    action=GroupAction.REOPEN,
                    event_data={"verification_failed": run_summary(run)},
                )
        fix.save(update_fields=["verification", "resolution"])
    return fix


def _resolve(fix: Fix, group: FailureGroup, run: CaseRun) -> GroupEvent:
    options: dict[str, Any] = {
        "group": group,
        "actor": fix.actor,
        "action": GroupAction.RESOLVE,
        "note": fix.note,
        "event_data": {"verified": run_summary(run)},
    }
    try:
        return group_act(
            **options,
            resolved_in_release=fix.resolved_in_release,
            resolved_in_next_release=fix.resolved_in_next_release,
        )
    except GroupActionError:  # the release named is no longer known: resolve it now
        return group_act(**options)


def _resolved_by(fix: Fix, group: FailureGroup) -> bool:
    """Whether the group is resolved by this fix's resolve (not by a later one)."""
    if group.status != GroupStatus.RESOLVED or fix.resolution_id is None:
        return False
    latest = group.events.filter(action=GroupAction.RESOLVE).order_by("-created_at", "-id").first()
    return latest is not None and latest.pk == fix.resolution_id


def verifications_conclude() -> int:
    """Conclude verifications whose run ended while nobody listened (the beat task)."""
    pending = Fix.objects.filter(
        verification=Verification.RUNNING,
        verification_run__status__in=[RunStatus.DONE, RunStatus.CANCELLED, RunStatus.FAILED],
    ).select_related("verification_run")
    # A run deleted since (its collection went): the verification cannot pass any more.
    concluded = Fix.objects.filter(
        verification=Verification.RUNNING, verification_run__isnull=True
    ).update(verification=Verification.FAILED)
    for fix in pending:
        assert fix.verification_run is not None
        concluded += verification_conclude(fix_id=fix.pk, run=fix.verification_run) is not None
    return concluded
