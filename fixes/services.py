"""Recording a fix: with a resolution, or as a resolution a Quality Lab run decides."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils.translation import gettext

from fixes import measure
from fixes.models import Fix, FixKind, Verification
from qualitylab.models import CaseRun, Collection, QualityCase
from qualitylab.services import CollectionError, QueueUnavailable, run_start
from triage.models import FailureGroup, GroupAction, GroupEvent, Release, Runbook
from triage.selectors import runbooks_for
from triage.services import GroupActionError, group_act_undoable


class FixError(ValueError):
    """The fix cannot be recorded as asked (shown to the person as a form error)."""


@dataclass(frozen=True)
class Recorded:
    fix: Fix | None  # None: resolved without a fix
    undoable_id: int | None  # the resolve to offer an undo for (None while verifying)


def group_runbooks(group: FailureGroup) -> list[Runbook]:
    """The runbooks that apply to the group, as its page shows them (its reason's, its
    tool's): a runbook step names one of them."""
    found = runbooks_for(reason=group.reason, tool=group.tool, collection=group.collection)
    return [runbook for runbook in (found.reason, found.tool) if runbook is not None]


def verification_cases(group: FailureGroup) -> tuple[Collection | None, list[str]]:
    """The active cases made from the group's failures that a verification runs: those of the
    collection holding most of them (a run is of one collection)."""
    rows = list(
        QualityCase.objects.filter(failure_group=group, active=True)
        .order_by("case_id")
        .values_list("collection_id", "case_id")
    )
    if not rows:
        return None, []
    collection_id = Counter(row[0] for row in rows).most_common(1)[0][0]
    return (
        Collection.objects.get(pk=collection_id),
        [case_id for owner, case_id in rows if owner == collection_id],
    )


def fix_record(
    *,
    group: FailureGroup,
    actor: Any,
    kind: str,
    url: str = "",
    note: str = "",
    runbook: Runbook | None = None,
    resolved_in_release: str = "",
    resolved_in_next_release: bool = False,
    verify: bool = False,
    query: str = "",
) -> Recorded:
    """Resolve `group` with the fix that resolved it (`kind` "" for none).

    With `verify`, the group is not resolved now: the cases made from its failures run in the
    worker, and the run resolves it when every case passes (fixes.verification); a failed run
    leaves it open, with the run linked."""
    if kind and kind not in FixKind.values:
        raise FixError(gettext("Unknown kind of fix %(kind)r.") % {"kind": kind})
    if kind == FixKind.CODE_CHANGE and not url:
        raise FixError(gettext("A code change needs its link (the commit or pull request)."))
    if kind == FixKind.RUNBOOK_STEP and runbook is None:
        raise FixError(gettext("A runbook step needs the runbook: save the group's runbook first."))
    if verify and not kind:
        raise FixError(gettext("Say what the fix was: a verification checks a fix."))
    fields: dict[str, Any] = {
        "kind": kind,
        "url": url,
        "note": note,
        "runbook": runbook,
        "resolved_in_release": resolved_in_release,
        "resolved_in_next_release": resolved_in_next_release,
    }
    if verify:
        # The resolve waits for the run: its release is checked now, not when it passes.
        if (
            resolved_in_release
            and not Release.objects.filter(
                collection=group.collection, version=resolved_in_release
            ).exists()
        ):
            raise FixError(
                gettext("The desk knows no release %(release)s of this collection.")
                % {"release": resolved_in_release}
            )
        return _record_verifying(group=group, actor=actor, **fields)
    with transaction.atomic():
        try:
            bulk = group_act_undoable(
                group=group,
                actor=actor,
                action=GroupAction.RESOLVE,
                note=note,
                query=query,
                resolved_in_release=resolved_in_release,
                resolved_in_next_release=resolved_in_next_release,
            )
        except GroupActionError as exc:
            raise FixError(str(exc)) from exc
        if not kind:
            return Recorded(None, bulk.pk)
        event = GroupEvent.objects.filter(bulk_action=bulk).order_by("-id").first()
        fix = _fix_create(group=group, actor=actor, resolution=event, **fields)
    return Recorded(fix, bulk.pk)


def _verification_start(group: FailureGroup, actor: Any) -> CaseRun:
    collection, case_ids = verification_cases(group)
    if collection is None:
        raise FixError(
            gettext("No Quality Lab case was made from this group: create one to verify a fix.")
        )
    try:
        return run_start(collection=collection, user=actor, case_ids=case_ids)
    except (CollectionError, QueueUnavailable) as exc:
        raise FixError(gettext("The verification could not start: %(why)s") % {"why": exc}) from exc


def _record_verifying(*, group: FailureGroup, actor: Any, **fields: Any) -> Recorded:
    run = _verification_start(group, actor)
    fix = _fix_create(
        group=group,
        actor=actor,
        verification=Verification.RUNNING,
        verification_run=run,
        **fields,
    )
    return Recorded(fix, None)


def fix_verify(*, fix: Fix, actor: Any) -> Fix:
    """Verify a recorded fix with the cases made from its group's failures (again)."""
    if fix.group is None:
        raise FixError(gettext("A promoted suggestion is verified by its shadow runs."))
    if fix.verification == Verification.RUNNING:
        raise FixError(gettext("A verification of this fix is already running."))
    run = _verification_start(fix.group, actor)
    Fix.objects.filter(pk=fix.pk).update(verification=Verification.RUNNING, verification_run=run)
    fix.refresh_from_db()
    return fix


def _fix_create(*, group: FailureGroup, actor: Any, **fields: Any) -> Fix:
    """The fix, measured at once: its page shows the span before it from the start."""
    fix = Fix.objects.create(
        group=group,
        collection=group.collection,
        tool=group.tool,
        actor=actor,
        actor_label=actor.get_username() if actor is not None else "",
        **fields,
    )
    return measure.fix_measure(fix)
