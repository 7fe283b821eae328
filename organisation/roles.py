"""The four roles (auth groups made by a migration) and the permissions pages check."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy

ROLES = ("viewer", "operator", "reviewer", "admin")
# What the pages call each role (the group names stay these codes).
ROLE_LABELS = {
    "viewer": gettext_lazy("viewer"),
    "operator": gettext_lazy("operator"),
    "reviewer": gettext_lazy("reviewer"),
    "admin": gettext_lazy("admin"),
}

ACT_ON_GROUP = "triage.act_on_group"
RECONCILE_RECEIPT = "triage.reconcile_receipt"
CHANGE_TOOL_POLICY = "triage.change_toolpolicy"
ADD_TOOL_POLICY = "triage.add_toolpolicy"
MANAGE_API_KEYS = "triage.manage_api_keys"
RUN_QUALITY_LAB = "qualitylab.run_quality_lab"
ADD_COLLECTION = "qualitylab.add_collection"
CHANGE_CASE = "qualitylab.change_qualitycase"
CHANGE_COLLECTION = "qualitylab.change_collection"
REVIEW_SUGGESTION = "learning.review_suggestion"
VIEW_ALERTS = "alerts.view_rule"
CHANGE_ALERT_RULES = "alerts.change_rule"
# Every channel, email ones too (admins); webhook and Slack-compatible channels only
# (operators and admins): their URLs are judged by the same outbound rule either way.
CHANGE_ALERT_CHANNELS = "alerts.change_channel"
MANAGE_WEBHOOK_CHANNELS = "alerts.manage_webhook_channel"


def user_roles(user: Any) -> list[str]:
    # An API key's principal (triage.intake.auth) is authenticated but is no person: no groups.
    if not user.is_authenticated or not hasattr(user, "groups"):
        return []
    if user.is_superuser:
        return ["admin"]
    names = _role_names(user, "_group_names_cache")
    if names is None:
        names = {group.name for group in user.groups.all()}
    return [role for role in ROLES if role in names]


def _role_names(user: Any, cache: str) -> set[str] | None:
    """The role names the desk's authentication backend read with the person's permissions
    (triage.language.PreferenceModelBackend: roles held outside teams and in teams, one
    query), reading them now if no permission was checked yet; None under another backend."""
    if not hasattr(user, cache) and user.is_active:
        user.get_group_permissions()
    return getattr(user, cache, None)


def team_only_roles(user: Any) -> list[str]:
    """The roles ``user`` holds in teams and not outside them: each applies to the
    collections of its team only. Read with the permissions (see _role_names)."""
    if not user.is_authenticated or not hasattr(user, "groups") or user.is_superuser:
        return []
    names = _role_names(user, "_team_role_names_cache")
    if names is None:
        from organisation.models import Membership

        names = set(Membership.objects.filter(person_id=user.pk).values_list("role", flat=True))
    held = user_roles(user)
    return [role for role in ROLES if role in names and role not in held]


# What each role may do ("app_label.codename"). The migrations that create the groups hold
# frozen copies; tests/triage/test_roles.py keeps them equal to this.
_VIEW = (
    "triage.view_failuregroup",
    "triage.view_failurerecord",
    "triage.view_receipt",
    "triage.view_auditevent",
    "triage.view_toolpolicy",
    "triage.view_ingestbatch",
    "triage.view_apikey",
    "qualitylab.view_collection",
    "qualitylab.view_collectionversion",
    "qualitylab.view_qualitycase",
    "qualitylab.view_suite",
    "qualitylab.view_caserun",
    "qualitylab.view_caseresult",
    "learning.view_learningattempt",
    "learning.view_suggestion",
    "learning.view_review",
    "learning.view_shadowobservation",
    "alerts.view_rule",
    "alerts.view_channel",
    "alerts.view_delivery",
)
_ALERT_RULES_WRITE = ("alerts.add_rule", "alerts.change_rule", "alerts.delete_rule")
_ALERT_CHANNELS_WRITE = ("alerts.add_channel", "alerts.change_channel", "alerts.delete_channel")
_QUALITY_LAB_WRITE = (
    "qualitylab.add_collection",
    "qualitylab.change_collection",
    "qualitylab.add_qualitycase",
    "qualitylab.change_qualitycase",
    "qualitylab.add_suite",
    "qualitylab.change_suite",
    "qualitylab.run_quality_lab",
)
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "viewer": _VIEW,
    "operator": (
        *_VIEW,
        "triage.act_on_group",
        "triage.reconcile_receipt",
        "triage.change_toolpolicy",
        *_QUALITY_LAB_WRITE,
        *_ALERT_RULES_WRITE,
        MANAGE_WEBHOOK_CHANNELS,
    ),
    "reviewer": (*_VIEW, "learning.review_suggestion"),
    "admin": (
        *_VIEW,
        "triage.act_on_group",
        "triage.reconcile_receipt",
        "triage.add_toolpolicy",
        "triage.change_toolpolicy",
        "triage.delete_toolpolicy",
        "triage.manage_api_keys",
        *_QUALITY_LAB_WRITE,
        "qualitylab.delete_collection",
        "qualitylab.delete_qualitycase",
        "qualitylab.delete_suite",
        "learning.review_suggestion",
        *_ALERT_RULES_WRITE,
        *_ALERT_CHANNELS_WRITE,
        MANAGE_WEBHOOK_CHANNELS,
    ),
}


# What a role held in a team does not grant: these are not about one collection (keys that
# may serve any collection, the alert channels every team's rules send to), so only a role
# held outside teams grants them.
NOT_FROM_TEAMS = frozenset(
    {
        MANAGE_API_KEYS,
        CHANGE_ALERT_CHANNELS,
        MANAGE_WEBHOOK_CHANNELS,
        "alerts.add_channel",
        "alerts.delete_channel",
    }
)


def team_role_permissions(role: str) -> frozenset[str]:
    """What ``role`` held in a team grants on that team's collections."""
    return frozenset(ROLE_PERMISSIONS[role]) - NOT_FROM_TEAMS


def ensure_role_group(role: str) -> Any:
    """The role's auth group with its permissions (for a database flushed after migrating)."""
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=role)
    for permission in ROLE_PERMISSIONS[role]:
        app_label, codename = permission.split(".")
        group.permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return group
