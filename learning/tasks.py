"""Celery tasks of the learning review: they take ids and call a service."""

from __future__ import annotations

from celery import shared_task

from learning import services


@shared_task(acks_late=True, reject_on_worker_lost=True)
def derive_suggestions(*, collection_id: int) -> None:
    services.suggestions_derive(collection_id=collection_id)
