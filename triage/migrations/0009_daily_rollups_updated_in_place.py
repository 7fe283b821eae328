# Daily rollups updated in place: no count in the day index, and on PostgreSQL a fill
# factor that leaves room on each page, so ingest's updates of a day's row are HOT updates
# (no new index entries, no row moved to another page) and the table stays compact.

from django.db import migrations, models


def leave_room(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE triage_failuregroupday SET (fillfactor = 70)")


def fill_pages(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE triage_failuregroupday RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [
        ("triage", "0008_rejection_counts"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="failuregroupday",
            name="day_group_count",
        ),
        migrations.AddIndex(
            model_name="failuregroupday",
            index=models.Index(fields=["day", "group"], name="day_group"),
        ),
        migrations.RunPython(leave_room, fill_pages),
    ]
