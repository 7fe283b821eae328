"""Merge pending learning attempts into suggestions now (what the Celery task does).

Attempts wait for the derivation task queued after they commit; if the broker was down
then, they stay pending until the collection's next attempt. This command catches up.
With --gate it also runs the promotion gate again on every suggestion, as after an upgrade
that changed the gate's rules (distinct evidence) or its thresholds in the settings.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from learning.models import LearningAttempt
from learning.services import DERIVE_BATCH, gate_refresh, suggestions_derive
from qualitylab.models import Collection


class Command(BaseCommand):
    help = "Derive suggestions from every pending learning attempt (or one collection's)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--collection", help="only this collection (its name)")
        parser.add_argument(
            "--gate",
            action="store_true",
            help="then run the promotion gate again on every suggestion of the collections",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        pending = LearningAttempt.objects.filter(derived_at__isnull=True)
        collections = Collection.objects.order_by("pk")
        if options["collection"]:
            collection = Collection.objects.filter(name=options["collection"]).first()
            if collection is None:
                raise CommandError(f"No collection named {options['collection']!r}.")
            pending = pending.filter(collection=collection)
            collections = collections.filter(pk=collection.pk)
        total = 0
        for collection_id in sorted(set(pending.values_list("collection_id", flat=True))):
            while merged := suggestions_derive(collection_id=collection_id, limit=DERIVE_BATCH):
                total += merged
        self.stdout.write(f"Merged {total} pending attempt{'' if total == 1 else 's'}.")
        if options["gate"]:
            gated = 0
            for collection in collections.filter(suggestions__isnull=False).distinct():
                with transaction.atomic():
                    # The derivation's lock: a gate run never interleaves with a merge.
                    locked = Collection.objects.select_for_update().get(pk=collection.pk)
                    gate_refresh(collection=locked)
                gated += 1
            self.stdout.write(f"Ran the gate on the suggestions of {gated} collection(s).")
