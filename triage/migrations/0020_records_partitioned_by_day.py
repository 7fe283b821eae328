"""Failure records partitioned by UTC day on PostgreSQL (triage/upkeep/partitions.py says
why and how); SQLite keeps its one table. The records' links lose their database
constraints first (the model says why). The conversion copies every record once, in one
transaction: how long it took at a million records is in docs/retention.md."""

from collections.abc import Callable

import django.db.models.deletion
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps
from django.utils import timezone

from triage.upkeep import partitions


def _convert(to_partitioned: bool) -> Callable[[StateApps, BaseDatabaseSchemaEditor], None]:
    def run(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            partitions.convert(
                cursor, to_partitioned=to_partitioned, today=timezone.now().date()
            )

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("triage", "0019_record_group_release_index"),
        # Its foreign key to the records goes first too: a partitioned table's key is
        # (id, occurred_at).
        ("qualitylab", "0008_failure_record_without_constraint"),
    ]

    operations = [
        migrations.AlterField(
            model_name="failurerecord",
            name="batch",
            field=models.ForeignKey(
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="triage.ingestbatch",
            ),
        ),
        migrations.AlterField(
            model_name="failurerecord",
            name="group",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="records",
                to="triage.failuregroup",
            ),
        ),
        migrations.AlterField(
            model_name="failurerecord",
            name="runner_event",
            field=models.OneToOneField(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="failure",
                to="triage.runnerevent",
            ),
        ),
        # One record per call is ingest's to keep (a lock per span, within a day of the
        # span's time): the index that finds a span is no longer unique.
        migrations.RemoveConstraint(model_name="failurerecord", name="record_one_per_span"),
        migrations.AddIndex(
            model_name="failurerecord",
            index=models.Index(
                condition=models.Q(("trace_id__isnull", False)),
                fields=["trace_id", "span_id"],
                name="record_one_per_span",
            ),
        ),
        migrations.RunPython(_convert(True), _convert(False), elidable=False),
    ]
