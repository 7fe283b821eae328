"""Give the roles their learning permissions: everyone reads, reviewers and admins decide."""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEW = ["view_learningattempt", "view_suggestion", "view_review", "view_shadowobservation"]
ROLES = {
    "viewer": VIEW,
    "operator": VIEW,
    "reviewer": [*VIEW, "review_suggestion"],
    "admin": [*VIEW, "review_suggestion"],
}


def grant(apps, schema_editor):
    app_config = apps.get_app_config("learning")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(
            *Permission.objects.filter(content_type__app_label="learning", codename__in=codenames)
        )


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for group in apps.get_model("auth", "Group").objects.filter(name__in=list(ROLES)):
        group.permissions.remove(*Permission.objects.filter(content_type__app_label="learning"))


class Migration(migrations.Migration):
    dependencies = [("learning", "0001_initial"), ("triage", "0003_roles")]

    operations = [migrations.RunPython(grant, revoke)]
