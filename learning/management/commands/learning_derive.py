"""Merge pending learning attempts into suggestions now (what the Celery task does).

Attempts wait for the derivation task queued after they commit; if the broker was down
then, they stay pending until the collection's next attempt. This command catches up.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from learning.models import LearningAttempt
from learning.services import DERIVE_BATCH, suggestions_derive
from qualitylab.models import Collection


class Command(BaseCommand):
    help = "Derive suggestions from every pending learning attempt (or one collection's)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--collection", help="only this collection (its name)")

    def handle(self, *args: Any, **options: Any) -> None:
        pending = LearningAttempt.objects.filter(derived_at__isnull=True)
        if options["collection"]:
            collection = Collection.objects.filter(name=options["collection"]).first()
            if collection is None:
                raise CommandError(f"No collection named {options['collection']!r}.")
            pending = pending.filter(collection=collection)
        total = 0
        for collection_id in sorted(set(pending.values_list("collection_id", flat=True))):
            while merged := suggestions_derive(collection_id=collection_id, limit=DERIVE_BATCH):
                total += merged
        self.stdout.write(f"Merged {total} pending attempt{'' if total == 1 else 's'}.")
