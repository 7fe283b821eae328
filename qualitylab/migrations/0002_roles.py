"""Give the roles their Quality Lab permissions."""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEW = ["view_collection", "view_collectionversion", "view_qualitycase", "view_suite",
        "view_caserun", "view_caseresult"]  # fmt: skip
WRITE = ["add_collection", "change_collection", "add_qualitycase", "change_qualitycase",
         "add_suite", "change_suite", "run_quality_lab"]  # fmt: skip
ROLES = {
    "viewer": VIEW,
    "operator": [*VIEW, *WRITE],
    "reviewer": VIEW,
    "admin": [*VIEW, *WRITE, "delete_collection", "delete_qualitycase", "delete_suite"],
}


def grant(apps, schema_editor):
    app_config = apps.get_app_config("qualitylab")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(
            *Permission.objects.filter(content_type__app_label="qualitylab", codename__in=codenames)
        )


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for group in apps.get_model("auth", "Group").objects.filter(name__in=list(ROLES)):
        group.permissions.remove(*Permission.objects.filter(content_type__app_label="qualitylab"))


class Migration(migrations.Migration):
    dependencies = [("qualitylab", "0001_initial"), ("triage", "0003_roles")]

    operations = [migrations.RunPython(grant, revoke)]
