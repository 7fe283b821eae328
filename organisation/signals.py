"""Role changes are audited wherever they are made: a person's groups are their roles, and
the Django admin, the teams page, sign-in and commands all change them through
``User.groups``, so one ``m2m_changed`` receiver sees every one (wired in apps.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from organisation import audit

_ACTIONS = {"post_add": "role.granted", "post_remove": "role.removed", "post_clear": "role.removed"}


def groups_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **_: Any
) -> None:
    """One entry per (person, role) added or removed. ``reverse``: the change was made from
    the group's side (``group.user_set``), so ``pk_set`` holds people, not groups."""
    if action == "pre_clear":
        # The clear does not say what it removed: note it before it happens.
        related = instance.user_set if reverse else instance.groups
        instance._audit_cleared = set(related.values_list("pk", flat=True))
        return
    if action not in _ACTIONS:
        return
    ids = instance.__dict__.pop("_audit_cleared", set()) if action == "post_clear" else pk_set
    if not ids:
        return
    if reverse:
        people = list(get_user_model()._default_manager.filter(pk__in=ids))
        pairs = [(person, instance.name) for person in people]
    else:
        names = Group.objects.filter(pk__in=ids).values_list("name", flat=True)
        pairs = [(instance, name) for name in sorted(names)]
    actor = audit.acting_person()
    for person, role in pairs:
        audit.record(
            actor,
            _ACTIONS[action],
            person.get_username(),
            detail={"person": person.get_username(), "role": role},
        )
