"""The four roles (auth groups made by a migration) and the permissions pages check."""

from __future__ import annotations

from typing import Any

ROLES = ("viewer", "operator", "reviewer", "admin")

ACT_ON_GROUP = "triage.act_on_group"
RECONCILE_RECEIPT = "triage.reconcile_receipt"
CHANGE_TOOL_POLICY = "triage.change_toolpolicy"
ADD_TOOL_POLICY = "triage.add_toolpolicy"
MANAGE_API_KEYS = "triage.manage_api_keys"


def user_roles(user: Any) -> list[str]:
    if not user.is_authenticated:
        return []
    if user.is_superuser:
        return ["admin"]
    names = {group.name for group in user.groups.all()}
    return [role for role in ROLES if role in names]


# What each role may do. The migration that creates the groups holds a frozen copy;
# tests/triage/test_roles.py keeps the two equal.
_VIEW = (
    "view_failuregroup",
    "view_failurerecord",
    "view_receipt",
    "view_auditevent",
    "view_toolpolicy",
    "view_ingestbatch",
    "view_apikey",
)
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "viewer": _VIEW,
    "operator": (*_VIEW, "act_on_group", "reconcile_receipt", "change_toolpolicy"),
    "reviewer": _VIEW,
    "admin": (
        *_VIEW,
        "act_on_group",
        "reconcile_receipt",
        "add_toolpolicy",
        "change_toolpolicy",
        "delete_toolpolicy",
        "manage_api_keys",
    ),
}


def ensure_role_group(role: str) -> Any:
    """The role's auth group with its permissions (for a database flushed after migrating)."""
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=role)
    group.permissions.add(
        *Permission.objects.filter(
            content_type__app_label="triage", codename__in=ROLE_PERMISSIONS[role]
        )
    )
    return group
