"""Operators manage webhook and Slack-compatible channels (an allowed URL is checked the
same for them as for admins); email channels and every other channel stay admins'."""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations

CODENAME = "manage_webhook_channel"
ROLES = ("operator", "admin")


def grant(apps, schema_editor):
    app_config = apps.get_app_config("alerts")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    permission = Permission.objects.get(content_type__app_label="alerts", codename=CODENAME)
    for role in ROLES:
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(permission)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    permissions = Permission.objects.filter(content_type__app_label="alerts", codename=CODENAME)
    for group in apps.get_model("auth", "Group").objects.filter(name__in=ROLES):
        group.permissions.remove(*permissions)


class Migration(migrations.Migration):
    dependencies = [("alerts", "0003_rule_source_default_production")]

    operations = [
        migrations.AlterModelOptions(
            name="channel",
            options={
                "ordering": ["name"],
                "permissions": [
                    (
                        "manage_webhook_channel",
                        "Can add, change, test and delete webhook and Slack-compatible channels",
                    )
                ],
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
