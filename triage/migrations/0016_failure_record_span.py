"""FailureRecord.trace_id / span_id, and the partial unique index ingest finds spans by.

The fields are nullable without a default, so adding them rewrites nothing. On PostgreSQL
the index is built CONCURRENTLY (this migration is not atomic for that): every existing
row has no span, but the build still reads the whole table, and a plain CREATE INDEX
would hold ingest's writes for as long as that takes at millions of rows.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

TABLE = "triage_failurerecord"
INDEX = "record_one_per_span"


def create_index(apps: Any, schema_editor: Any) -> None:
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(
        f"CREATE UNIQUE INDEX {concurrently}IF NOT EXISTS {INDEX} ON {TABLE} "
        "(trace_id, span_id) WHERE trace_id IS NOT NULL"
    )


def drop_index(apps: Any, schema_editor: Any) -> None:
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"DROP INDEX {concurrently}IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("triage", "0015_reconciliation_corrections"),
    ]

    operations = [
        migrations.AddField(
            model_name="failurerecord",
            name="span_id",
            field=models.CharField(blank=True, max_length=16, null=True),
        ),
        migrations.AddField(
            model_name="failurerecord",
            name="trace_id",
            field=models.CharField(blank=True, max_length=32, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddConstraint(
                    model_name="failurerecord",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("trace_id__isnull", False)),
                        fields=("trace_id", "span_id"),
                        name=INDEX,
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(create_index, drop_index)],
        ),
    ]
