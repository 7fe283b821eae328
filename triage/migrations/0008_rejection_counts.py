# Rejected items per code as a running counter (the ingestion page's "rejected by code"),
# counted once from the rejections stored so far.

from django.db import migrations, models
from django.db.models import Count


def count_rejections(apps, schema_editor):
    rejection = apps.get_model("triage", "IngestRejection")
    counter = apps.get_model("triage", "RejectionCount")
    counter.objects.bulk_create(
        counter(code=row["code"], count=row["n"])
        for row in rejection.objects.values("code").annotate(n=Count("id")).order_by()
    )


class Migration(migrations.Migration):
    dependencies = [
        ("triage", "0007_counter_tables_one_index_fewer"),
    ]

    operations = [
        migrations.CreateModel(
            name="RejectionCount",
            fields=[
                ("code", models.CharField(max_length=40, primary_key=True, serialize=False)),
                ("count", models.PositiveBigIntegerField(default=0)),
            ],
            options={
                "ordering": ["-count", "code"],
            },
        ),
        migrations.RunPython(count_rejections, migrations.RunPython.noop),
    ]
