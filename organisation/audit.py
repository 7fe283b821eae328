"""The audit of people's actions: ``record`` writes one entry, in the caller's transaction.

Every app that changes something a person is accountable for calls ``record`` with one of
``ACTIONS``: roles and teams, API keys, group mutes and resolutions, learning reviews, alert
rules. Retention never prunes these entries (docs/retention.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.utils.translation import gettext_lazy

from organisation.models import ActivityEntry

# The codes an entry may carry, with what the audit page calls them.
ACTIONS: dict[str, Any] = {
    "role.granted": gettext_lazy("role granted"),
    "role.removed": gettext_lazy("role removed"),
    "team.created": gettext_lazy("team created"),
    "team.deleted": gettext_lazy("team deleted"),
    "team.member_added": gettext_lazy("member added"),
    "team.member_changed": gettext_lazy("member's role changed"),
    "team.member_removed": gettext_lazy("member removed"),
    "team.collection_added": gettext_lazy("collection given to a team"),
    "team.collection_removed": gettext_lazy("collection taken from a team"),
    "key.created": gettext_lazy("API key created"),
    "key.revoked": gettext_lazy("API key revoked"),
    "key.scope_changed": gettext_lazy("API key scope changed"),
    "group.acknowledged": gettext_lazy("group acknowledged"),
    "group.assigned": gettext_lazy("group assigned"),
    "group.resolved": gettext_lazy("group resolved"),
    "group.reopened": gettext_lazy("group reopened"),
    "group.muted": gettext_lazy("group muted"),
    "group.action_undone": gettext_lazy("group action undone"),
    "team.renamed": gettext_lazy("team renamed"),
    "suggestion.reviewed": gettext_lazy("suggestion reviewed"),
    "alert_rule.created": gettext_lazy("alert rule created"),
    "alert_rule.changed": gettext_lazy("alert rule changed"),
    "alert_rule.deleted": gettext_lazy("alert rule deleted"),
}


# The person whose request is being served (organisation.middleware sets it): what a change
# made outside a service that names its actor (the Django admin's group edits) is credited to.
_acting_person: ContextVar[Any] = ContextVar("acting_person", default=None)


def acting_person() -> Any:
    """The signed-in person of the request being served, or None (a command, a task)."""
    person = _acting_person.get()
    if person is None or not getattr(person, "is_authenticated", False):
        return None
    # request.user is a lazy object: hand on the account itself (a foreign key wants it).
    return getattr(person, "_wrapped", person)


@contextmanager
def acting_as(person: Any) -> Iterator[None]:
    token = _acting_person.set(person)
    try:
        yield
    finally:
        _acting_person.reset(token)


def record(
    actor: Any,
    action: str,
    subject: str = "",
    *,
    collection: str = "",
    detail: dict[str, Any] | None = None,
) -> ActivityEntry:
    """Write one entry. ``actor`` is the person (or None for the system); an unknown
    ``action`` is a programming error, not a silent entry."""
    if action not in ACTIONS:
        raise ValueError(f"Unknown audit action {action!r}: add it to organisation.audit.ACTIONS.")
    is_person = getattr(actor, "pk", None) is not None and hasattr(actor, "get_username")
    person = actor if is_person else None
    return ActivityEntry.objects.create(
        actor=person,
        actor_name=(person.get_username() if person is not None else ""),
        action=action,
        subject=subject[:300],
        collection=collection[:100],
        detail=detail or {},
    )
