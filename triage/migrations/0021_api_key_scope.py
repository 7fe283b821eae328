"""API keys scoped to collections and/or a team (organisation.access.key_q), and each key's
last use per collection (the key page)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("organisation", "0001_teams"),
        ("triage", "0020_records_partitioned_by_day"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="collections",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="apikey",
            name="team",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="api_keys",
                to="organisation.team",
            ),
        ),
        migrations.CreateModel(
            name="ApiKeyCollectionUse",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("collection", models.CharField(blank=True, max_length=100)),
                ("last_used_at", models.DateTimeField()),
                (
                    "api_key",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="collection_uses",
                        to="triage.apikey",
                    ),
                ),
            ],
            options={
                "ordering": ["collection"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("api_key", "collection"), name="api_key_collection_use_unique"
                    )
                ],
            },
        ),
    ]
