"""Give the roles their alerts permissions: everyone reads, operators and admins edit rules,
admins edit channels (a channel's address is a secret and an outbound target)."""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEW = ["view_rule", "view_channel", "view_delivery"]
RULES = ["add_rule", "change_rule", "delete_rule"]
CHANNELS = ["add_channel", "change_channel", "delete_channel"]
ROLES = {
    "viewer": VIEW,
    "operator": [*VIEW, *RULES],
    "reviewer": VIEW,
    "admin": [*VIEW, *RULES, *CHANNELS],
}


def grant(apps, schema_editor):
    app_config = apps.get_app_config("alerts")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(
            *Permission.objects.filter(content_type__app_label="alerts", codename__in=codenames)
        )


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for group in apps.get_model("auth", "Group").objects.filter(name__in=list(ROLES)):
        group.permissions.remove(*Permission.objects.filter(content_type__app_label="alerts"))


class Migration(migrations.Migration):
    dependencies = [("alerts", "0001_initial"), ("triage", "0003_roles")]

    operations = [migrations.RunPython(grant, revoke)]
