"""Suggestion.first_seen_at: the oldest of its attempts. The pages showed created_at (when
the desk derived it, always after its attempts) as "first seen", so first seen came after
last seen. Existing suggestions take the oldest linked attempt, else the earlier of
created_at and last_seen_at."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce, Least
import django.utils.timezone


def backfill(apps, schema_editor):
    Suggestion = apps.get_model("learning", "Suggestion")
    SuggestionAttempt = apps.get_model("learning", "SuggestionAttempt")
    oldest = (
        SuggestionAttempt.objects.filter(suggestion=OuterRef("pk"))
        .order_by("attempt__occurred_at")
        .values("attempt__occurred_at")[:1]
    )
    Suggestion.objects.update(
        first_seen_at=Coalesce(Subquery(oldest), Least("created_at", "last_seen_at"))
    )


class Migration(migrations.Migration):

    dependencies = [
        ("learning", "0005_review_decision_reopen"),
    ]

    operations = [
        migrations.AddField(
            model_name="suggestion",
            name="first_seen_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
