"""Writes other than ingest: API keys, triage actions on groups, reconciliations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext

from core.collection_names import INVALID_COLLECTION_NAME, collection_name_problem
from core.storable import EARLIEST_TIMESTAMP, identifier_problem
from organisation import audit
from organisation.models import Team
from triage.intake.ingest import COLLECTION_NOT_ALLOWED, DESK_OWNER, owner_is_reserved
from triage.models import (
    RELEASE_URL_MAX_LENGTH,
    RELEASE_VERSION_MAX_LENGTH,
    ApiKey,
    ApiKeyScope,
    BulkAction,
    FailureGroup,
    GroupAction,
    GroupEvent,
    GroupStatus,
    PersonPreference,
    Receipt,
    Reconciliation,
    ReconciliationFinding,
    Release,
    Runbook,
    RunbookRevision,
    RunbookSubject,
)


def person_language_set(*, user: Any, language: str) -> PersonPreference:
    """Remember the language a person reads the pages in (their time zone is left as is)."""
    preference, _ = PersonPreference.objects.get_or_create(user=user)
    if preference.language != language:
        preference.language = language
        preference.save(update_fields=["language", "updated_at"])
    return preference


class ApiKeyError(ValueError):
    pass


def _key_scope(collections: Iterable[str]) -> list[str]:
    """The collection names a key is scoped to, each checked by the one rule for names."""
    names = sorted(set(collections))
    for name in names:
        if (problem := collection_name_problem(name)) is not None:
            raise ApiKeyError(gettext("The collection name %(problem)s.") % {"problem": problem})
    return names


def _scope_detail(api_key: ApiKey) -> dict[str, Any]:
    team = api_key.team.name if api_key.team_id is not None and api_key.team else None
    return {"collections": list(api_key.collections), "team": team}


def api_key_create(
    *,
    name: str,
    scopes: list[str],
    owner: str = "",
    expires_days: int | None = None,
    collections: Iterable[str] = (),
    team: Team | None = None,
    actor: Any = None,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret, which is shown once and never stored.
    ``collections`` and ``team`` scope it (organisation.access.key_q); neither: every
    collection."""
    unknown = sorted(set(scopes) - set(ApiKeyScope.values))
    if unknown or not scopes:
        allowed = ", ".join(ApiKeyScope.values)
        raise ApiKeyError(
            gettext("Scopes must be among %(allowed)s; got %(got)s.")
            % {"allowed": allowed, "got": ", ".join(scopes) or gettext("none")}
        )
    if owner_is_reserved(name) or owner_is_reserved(owner):
        raise ApiKeyError(
            gettext("%(owner)s is reserved for Quality Lab's own records; choose another name.")
            % {"owner": DESK_OWNER}
        )
    if ApiKey.objects.filter(name=name).exists():
        raise ApiKeyError(gettext("An API key named %(name)r already exists.") % {"name": name})
    if expires_days is not None and expires_days < 1:
        raise ApiKeyError(gettext("expires_days must be at least 1."))
    names = _key_scope(collections)
    full_key, lookup_id, secret_hash = ApiKey.new_key_material()
    with transaction.atomic():
        api_key = ApiKey.objects.create(
            name=name,
            owner=owner or name,
            lookup_id=lookup_id,
            secret_hash=secret_hash,
            scopes=sorted(set(scopes)),
            expires_at=timezone.now() + timedelta(days=expires_days) if expires_days else None,
            collections=names,
            team=team,
        )
        audit.record(
            actor or audit.acting_person(),
            "key.created",
            f"key {api_key.name}",
            detail={"scopes": api_key.scopes, **_scope_detail(api_key)},
        )
    return api_key, full_key


def api_key_scope_set(
    *, api_key: ApiKey, collections: Iterable[str], team: Team | None, actor: Any = None
) -> ApiKey:
    """Change what a key serves; the change is audited with the scope before and after."""
    names = _key_scope(collections)
    before = _scope_detail(api_key)
    with transaction.atomic():
        api_key.collections = names
        api_key.team = team
        api_key.save(update_fields=["collections", "team"])
        after = _scope_detail(api_key)
        if after != before:
            audit.record(
                actor or audit.acting_person(),
                "key.scope_changed",
                f"key {api_key.name}",
                detail={"before": before, "after": after},
            )
    return api_key


def api_key_revoke(*, api_key: ApiKey, actor: Any = None) -> ApiKey:
    if api_key.revoked_at is None:
        with transaction.atomic():
            api_key.revoked_at = timezone.now()
            api_key.save(update_fields=["revoked_at"])
            audit.record(actor or audit.acting_person(), "key.revoked", f"key {api_key.name}")
    return api_key


# --- group actions ------------------------------------------------------------------------


class GroupActionError(ValueError):
    """The action does not apply to the group as it is (shown to the user as a form error)."""


_STATUS_AFTER = {
    GroupAction.ACKNOWLEDGE: GroupStatus.ACKNOWLEDGED,
    GroupAction.RESOLVE: GroupStatus.RESOLVED,
    GroupAction.MUTE: GroupStatus.MUTED,
    GroupAction.REOPEN: GroupStatus.OPEN,
}
# What the audit of people's actions calls each action a person is accountable for (a note
# changes nothing; an undo is audited where it is applied).
_AUDITED = {
    GroupAction.ACKNOWLEDGE: "group.acknowledged",
    GroupAction.ASSIGN: "group.assigned",
    GroupAction.RESOLVE: "group.resolved",
    GroupAction.MUTE: "group.muted",
    GroupAction.REOPEN: "group.reopened",
}
# Fields an action may change; their values before a bulk action are kept for undo.
_UNDO_FIELDS = ("status", "status_changed_at", "assignee_id", "muted_until", "mute_remaining_count",
                "resolved_in_release", "resolved_in_next_release")  # fmt: skip


def group_act(
    *,
    group: FailureGroup,
    actor: Any,
    action: str,
    note: str = "",
    assignee: Any = None,
    muted_until: datetime | None = None,
    mute_count: int | None = None,
    resolved_in_release: str = "",
    resolved_in_next_release: bool = False,
    bulk_action: BulkAction | None = None,
    event_data: Mapping[str, Any] | None = None,
) -> GroupEvent:
    """Apply one triage action to one group and append it to the group's history.

    `event_data` is kept in the history entry beside what the action itself records (another
    app's word on it: the Quality Lab run that verified a resolution).

    A resolve may name the release it is resolved in (a release of the group's collection
    the desk knows) or say "the next release": records of earlier releases then leave the
    group resolved (triage.releases)."""
    if action not in GroupAction.values or action == GroupAction.UNDO:
        raise GroupActionError(gettext("Unknown action %(action)r.") % {"action": action})
    now = timezone.now()
    with transaction.atomic():
        group = FailureGroup.objects.select_for_update().get(pk=group.pk)
        before = group.status
        data: dict[str, Any] = {}
        if action == GroupAction.NOTE:
            if not note.strip():
                raise GroupActionError(gettext("A note needs some text."))
        elif action == GroupAction.ASSIGN:
            group.assignee = assignee
            data["assignee"] = assignee.get_username() if assignee is not None else None
        elif action == GroupAction.MUTE:
            if (muted_until is None) == (mute_count is None):
                raise GroupActionError(
                    gettext("Mute until a time, or for a number of new records.")
                )
            if muted_until is not None and muted_until <= now:
                raise GroupActionError(gettext("The mute must end in the future."))
            if mute_count is not None and mute_count < 1:
                raise GroupActionError(gettext("Mute for at least one new record."))
            group.muted_until = muted_until
            group.mute_remaining_count = mute_count
            data = {
                "muted_until": muted_until.isoformat() if muted_until else None,
                "mute_count": mute_count,
            }
        elif action == GroupAction.RESOLVE:
            data = _resolution_release(
                group, release=resolved_in_release, next_release=resolved_in_next_release
            )
        if action in _STATUS_AFTER:
            if action == GroupAction.REOPEN and before == GroupStatus.OPEN:
                raise GroupActionError(gettext("The group is already open."))
            group.status = _STATUS_AFTER[GroupAction(action)]
            group.status_changed_at = now
            if action != GroupAction.MUTE:
                group.muted_until = None
                group.mute_remaining_count = None
            if action != GroupAction.RESOLVE:  # they mean something only while resolved
                group.resolved_in_release = ""
                group.resolved_in_next_release = False
        group.save()
        if action in _AUDITED:
            audit.record(
                actor,
                _AUDITED[GroupAction(action)],
                f"group {group.pk}",
                collection=group.collection,
                detail={
                    "stage": group.stage,
                    "reason": group.reason,
                    "tool": group.tool,
                    "status_before": before,
                    "status_after": group.status,
                    **data,
                    **({"bulk_action": bulk_action.pk} if bulk_action is not None else {}),
                },
            )
        return GroupEvent.objects.create(
            group=group,
            actor=actor,
            action=action,
            status_before=before,
            status_after=group.status,
            note=note.strip(),
            data={**(event_data or {}), **data},
            bulk_action=bulk_action,
            created_at=now,
        )


def _resolution_release(group: FailureGroup, *, release: str, next_release: bool) -> dict[str, Any]:
    """Set the release `group` is resolved in; the event data that says so."""
    if release and next_release:
        raise GroupActionError(gettext("Resolve in the next release or in a named one, not both."))
    if (
        release
        and not Release.objects.filter(collection=group.collection, version=release).exists()
    ):
        raise GroupActionError(
            gettext("The desk knows no release %(release)s of this collection.")
            % {"release": release}
        )
    group.resolved_in_release = release
    group.resolved_in_next_release = next_release
    if release:
        return {"resolved_in_release": release}
    return {"resolved_in_next_release": True} if next_release else {}


def groups_bulk_act(
    *,
    groups: Iterable[FailureGroup],
    actor: Any,
    action: str,
    query: str,
    note: str = "",
    assignee: Any = None,
    muted_until: datetime | None = None,
    mute_count: int | None = None,
) -> BulkAction:
    """Apply one action to exactly the given groups, remembering their state for undo."""
    if action not in (
        GroupAction.ACKNOWLEDGE,
        GroupAction.RESOLVE,
        GroupAction.MUTE,
        GroupAction.REOPEN,
        GroupAction.ASSIGN,
    ):
        raise GroupActionError(
            gettext("%(action)r cannot be applied in bulk.") % {"action": action}
        )
    targets = list(groups)
    if not targets:
        raise GroupActionError(gettext("No group matches this filter."))
    with transaction.atomic():
        ids = [group.pk for group in targets]
        previous = _undo_snapshot(ids)
        bulk = BulkAction.objects.create(
            actor=actor, action=action, query=query[:1000], group_count=len(ids), previous=previous
        )
        for group in targets:
            if action == GroupAction.REOPEN and group.status == GroupStatus.OPEN:
                continue
            group_act(
                group=group,
                actor=actor,
                action=action,
                note=note,
                assignee=assignee,
                muted_until=muted_until,
                mute_count=mute_count,
                bulk_action=bulk,
            )
    return bulk


def _undo_snapshot(ids: list[int]) -> dict[str, dict[str, Any]]:
    """The fields an undo puts back, per group id, locking the groups."""
    return {
        str(row["id"]): {
            field: value.isoformat() if isinstance(value, datetime) else value
            for field, value in row.items()
            if field != "id"
        }
        for row in FailureGroup.objects.select_for_update()
        .filter(pk__in=ids)
        .values("id", *_UNDO_FIELDS)
    }


def group_act_undoable(
    *,
    group: FailureGroup,
    actor: Any,
    action: str,
    query: str = "",
    note: str = "",
    assignee: Any = None,
    muted_until: datetime | None = None,
    mute_count: int | None = None,
    resolved_in_release: str = "",
    resolved_in_next_release: bool = False,
    event_data: Mapping[str, Any] | None = None,
) -> BulkAction:
    """Apply one action to one group like group_act, remembering its state so that
    bulk_action_undo can put it back (an action on one group of one)."""
    if action == GroupAction.NOTE:
        raise GroupActionError(gettext("A note changes nothing to undo: add it with group_act."))
    with transaction.atomic():
        bulk = BulkAction.objects.create(
            actor=actor,
            action=action,
            query=query[:1000],
            group_count=1,
            previous=_undo_snapshot([group.pk]),
        )
        group_act(
            group=group,
            actor=actor,
            action=action,
            note=note,
            assignee=assignee,
            muted_until=muted_until,
            mute_count=mute_count,
            resolved_in_release=resolved_in_release,
            resolved_in_next_release=resolved_in_next_release,
            bulk_action=bulk,
            event_data=event_data,
        )
    return bulk


def bulk_action_undo(*, bulk: BulkAction, actor: Any) -> int:
    """Put back the groups a bulk action changed, unless someone changed them since.

    Returns how many groups were restored.
    """
    with transaction.atomic():
        bulk = BulkAction.objects.select_for_update().get(pk=bulk.pk)
        if bulk.undone_at is not None:
            raise GroupActionError(gettext("This bulk action was already undone."))
        now = timezone.now()
        restored = 0
        last_events = {
            event.group_id: event
            for event in GroupEvent.objects.filter(bulk_action=bulk).order_by("created_at")
        }
        for group in FailureGroup.objects.select_for_update().filter(pk__in=last_events):
            latest = group.events.order_by("-created_at", "-id").first()
            if latest is None or latest.bulk_action_id != bulk.pk:
                continue  # changed by someone else since; leave it
            before = bulk.previous[str(group.pk)]
            status_before = group.status
            group.status = before["status"]
            group.status_changed_at = _parse(before["status_changed_at"])
            group.assignee_id = before["assignee_id"]
            group.muted_until = _parse(before["muted_until"])
            group.mute_remaining_count = before["mute_remaining_count"]
            # Snapshots from before releases existed hold neither.
            group.resolved_in_release = before.get("resolved_in_release", "")
            group.resolved_in_next_release = before.get("resolved_in_next_release", False)
            group.save()
            GroupEvent.objects.create(
                group=group,
                actor=actor,
                action=GroupAction.UNDO,
                status_before=status_before,
                status_after=group.status,
                note=f"undo of bulk {bulk.action} #{bulk.pk}",
                created_at=now,
            )
            audit.record(
                actor,
                "group.action_undone",
                f"group {group.pk}",
                collection=group.collection,
                detail={
                    "undone": bulk.action,
                    "bulk_action": bulk.pk,
                    "status_before": status_before,
                    "status_after": group.status,
                },
            )
            restored += 1
        bulk.undone_at = now
        bulk.undone_by = actor
        bulk.save(update_fields=["undone_at", "undone_by"])
    return restored


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def groups_unmute_expired(*, now: datetime) -> int:
    """Reopen groups whose mute ran out in time; mutes by count end during ingest."""
    expired = list(
        FailureGroup.objects.filter(status=GroupStatus.MUTED, muted_until__lte=now).values_list(
            "pk", flat=True
        )
    )
    if not expired:
        return 0
    with transaction.atomic():
        changed = FailureGroup.objects.filter(
            pk__in=expired, status=GroupStatus.MUTED, muted_until__lte=now
        ).update(status=GroupStatus.OPEN, status_changed_at=now, muted_until=None)
        GroupEvent.objects.bulk_create(GroupEvent.unmuted(group_id=pk, now=now) for pk in expired)
    return changed


# --- receipts -----------------------------------------------------------------------------


class ReconcileError(ValueError):
    """The reconciliation cannot be recorded as asked."""


def receipt_reconcile(
    *,
    receipt: Receipt,
    actor: Any,
    finding: str,
    note: str,
    corrects: Reconciliation | None = None,
) -> Reconciliation:
    """Record what checking uncertain work found; the receipt then leaves the queue.

    With `corrects`, the new finding corrects that earlier one, which must be the receipt's
    current finding: both stay in the history, the newest is what the page acts on. The
    receipt row is locked so two operators reconciling at once record one finding, and the
    database refuses a second first finding or a second correction of the same one.
    """
    if finding not in ReconciliationFinding.values:
        raise ReconcileError(
            gettext("The finding must be one of %(findings)s.")
            % {"findings": ", ".join(ReconciliationFinding.values)}
        )
    if not note.strip():
        raise ReconcileError(gettext("Say what you checked and what you found."))
    with transaction.atomic():
        Receipt.objects.select_for_update().filter(pk=receipt.pk).first()
        findings = Reconciliation.objects.filter(receipt=receipt)
        if corrects is None:
            if findings.exists():
                raise ReconcileError(
                    gettext("%(run)s was already reconciled; correct its finding instead.")
                    % {"run": receipt.tool_run_id}
                )
        elif corrects.receipt_id != receipt.pk:
            raise ReconcileError(gettext("That finding belongs to another run."))
        elif findings.filter(corrects=corrects).exists():
            raise ReconcileError(
                gettext("Someone corrected that finding already; correct the newest one.")
            )
        return Reconciliation.objects.create(
            receipt=receipt, actor=actor, finding=finding, note=note.strip(), corrects=corrects
        )


# --- runbooks -----------------------------------------------------------------------------


def runbook_set(
    *,
    subject: str,
    reason: str = "",
    collection: str = "",
    tool: str = "",
    url: str,
    note: str,
    actor: Any,
) -> Runbook:
    """Set the runbook link and note of a reason (by code) or a tool (in a collection, or
    in every collection with collection ""), keeping the change in its history. Saving what
    is already there records nothing; an empty link and note clear it (kept in history)."""
    if subject == RunbookSubject.REASON:
        collection, tool = "", ""
    else:
        reason = ""
    with transaction.atomic():
        runbook, _ = Runbook.objects.get_or_create(
            subject=subject, reason=reason, collection=collection, tool=tool
        )
        runbook = Runbook.objects.select_for_update().get(pk=runbook.pk)
        if (runbook.url, runbook.note) == (url, note):
            return runbook
        RunbookRevision.objects.create(
            runbook=runbook,
            actor=actor,
            url_before=runbook.url,
            url_after=url,
            note_before=runbook.note,
            note_after=note,
        )
        runbook.url, runbook.note = url, note
        runbook.updated_at, runbook.updated_by = timezone.now(), actor
        runbook.save(update_fields=["url", "note", "updated_at", "updated_by"])
    return runbook


def person_time_zone_set(*, user: Any, time_zone: str) -> PersonPreference:
    """The person's zone for every page ("" follows their browser); their language stays."""
    preference, _ = PersonPreference.objects.update_or_create(
        user=user, defaults={"time_zone": time_zone}
    )
    return preference


# --- releases -----------------------------------------------------------------------------


class ReleaseError(ValueError):
    """A release declaration the desk refuses; code and field are part of the API contract."""

    def __init__(self, code: str, field: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.field = field
        self.message = message


# How far ahead of the desk's clock a deployment may claim to be (clocks drift).
_RELEASE_CLOCK_SKEW = timedelta(hours=1)


def _release_version(value: object) -> str:
    if value is None or value == "":
        raise ReleaseError("missing_field", "version", "version is required.")
    if not isinstance(value, str):
        raise ReleaseError("invalid_field", "version", "version must be a string.")
    if len(value) > RELEASE_VERSION_MAX_LENGTH:
        raise ReleaseError(
            "value_too_long",
            "version",
            f"version is {len(value)} characters; at most {RELEASE_VERSION_MAX_LENGTH} are stored.",
        )
    if (problem := identifier_problem(value)) is not None:
        raise ReleaseError(
            "invalid_character", "version", f"version holds {problem}, which it may not hold."
        )
    if value != value.strip():
        raise ReleaseError("invalid_field", "version", "version starts or ends with a space.")
    return value


def _release_deployed_at(value: object, *, now: datetime) -> datetime:
    if value is None or value == "":
        raise ReleaseError("missing_field", "deployed_at", "deployed_at is required.")
    moment = value if isinstance(value, datetime) else None
    if isinstance(value, str):
        try:
            moment = parse_datetime(value)
        except ValueError:  # well-formed but impossible: month 13, offset >= 24h
            moment = None
    if moment is None or moment.tzinfo is None:
        raise ReleaseError(
            "invalid_field",
            "deployed_at",
            "deployed_at must be an ISO 8601 timestamp with a time zone.",
        )
    try:
        in_utc = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        in_utc = None
    if in_utc is None or in_utc < EARLIEST_TIMESTAMP or in_utc > now + _RELEASE_CLOCK_SKEW:
        raise ReleaseError(
            "timestamp_out_of_range",
            "deployed_at",
            "deployed_at must be between 1970-01-01 and an hour from now.",
        )
    return in_utc


def _release_url(value: object) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise ReleaseError("invalid_field", "url", "url must be a string.")
    if len(value) > RELEASE_URL_MAX_LENGTH:
        raise ReleaseError(
            "value_too_long", "url", f"url is longer than {RELEASE_URL_MAX_LENGTH} characters."
        )
    try:
        URLValidator(schemes=["http", "https"])(value)
    except ValidationError:
        raise ReleaseError(
            "invalid_url", "url", "url must be a full http:// or https:// address."
        ) from None
    if "@" in value.split("://", 1)[1].split("/", 1)[0]:
        raise ReleaseError(
            "invalid_url", "url", "url may not hold a user name or password: pages show it."
        )
    return value


def release_declare(
    *,
    collection: object,
    version: object,
    deployed_at: object,
    url: object = "",
    now: datetime | None = None,
    served: frozenset[str] | None = None,
) -> tuple[Release, bool]:
    """Record that `version` of `collection` was deployed at `deployed_at`; returns the
    release and whether it is new. Declaring the same release again changes nothing; a
    declaration that says another time (or another url) for a known version is refused
    (`release_conflict`): resolutions compare releases by their deployment times.
    ``served``: the collections the declaring key serves (None: every one)."""
    now = now or timezone.now()
    if collection is None or collection == "":
        raise ReleaseError("missing_field", "collection", "collection is required.")
    if (problem := collection_name_problem(collection)) is not None:
        raise ReleaseError(INVALID_COLLECTION_NAME, "collection", f"collection {problem}.")
    assert isinstance(collection, str)
    if served is not None and collection not in served:
        # A scoped key declares releases of its own collections only, as it ingests them.
        raise ReleaseError(
            COLLECTION_NOT_ALLOWED, "collection", "this API key does not serve this collection."
        )
    values = {
        "version": _release_version(version),
        "deployed_at": _release_deployed_at(deployed_at, now=now),
        "url": _release_url(url),
    }
    existing = Release.objects.filter(collection=collection, version=values["version"]).first()
    if existing is None:
        try:
            with transaction.atomic():
                return Release.objects.create(collection=collection, **values), True
        except IntegrityError:  # declared by a concurrent request
            existing = Release.objects.get(collection=collection, version=values["version"])
    if existing.deployed_at != values["deployed_at"] or (
        values["url"] and values["url"] != existing.url
    ):
        raise ReleaseError(
            "release_conflict",
            "version",
            f"release {existing.version} of {collection} was declared with another "
            "deployed_at or url; a release is declared once.",
        )
    return existing, False
