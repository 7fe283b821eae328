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
