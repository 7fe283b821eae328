"""Create the four roles as auth groups with their permissions."""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEW = [
    "view_failuregroup",
    "view_failurerecord",
    "view_receipt",
    "view_auditevent",
    "view_toolpolicy",
    "view_ingestbatch",
    "view_apikey",
]
ROLES = {
    "viewer": VIEW,
    "operator": [*VIEW, "act_on_group", "reconcile_receipt", "change_toolpolicy"],
    "reviewer": VIEW,
    "admin": [
        *VIEW,
        "act_on_group",
        "reconcile_receipt",
        "add_toolpolicy",
        "change_toolpolicy",
        "delete_toolpolicy",
        "manage_api_keys",
    ],
}


def create_roles(apps, schema_editor):
    # Permissions are normally created after all migrations; the roles need them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(
            *Permission.objects.filter(content_type__app_label="triage", codename__in=codenames)
        )


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=list(ROLES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("triage", "0002_triage_actions"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
