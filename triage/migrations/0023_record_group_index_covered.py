"""The records' plain index on their group goes: the two indexes that start with the group
(record_group_time, record_group_release) serve every read by group (triage.models.FailureRecord).
On PostgreSQL the drop reaches every day's partition."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('triage', '0022_record_time_covers_group'),
    ]

    operations = [
        migrations.AlterField(
            model_name='failurerecord',
            name='group',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='records', to='triage.failuregroup'),
        ),
    ]
