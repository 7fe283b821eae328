from __future__ import annotations

from django.apps import AppConfig


class LearningConfig(AppConfig):
    name = "learning"
    verbose_name = "Learning review"

    def ready(self) -> None:
        from learning.ingest import ITEM_TYPE, parse_attempt, store_attempts
        from learning.models import LearningAttempt
        from learning.services import collections_for_ids
        from triage.intake.ingest import ItemType, on_collections_seen, register_item_type

        register_item_type(ItemType(ITEM_TYPE, parse_attempt, store_attempts, LearningAttempt))

        def register(names: set[str]) -> None:
            collections_for_ids(names=names)

        # A failure for a collection the desk does not know registers it, like an attempt.
        on_collections_seen(register)
