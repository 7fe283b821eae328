"""Celery tasks of alerts: they take ids and call a service."""

from __future__ import annotations

from celery import shared_task

from alerts import services


@shared_task(acks_late=True, reject_on_worker_lost=True)
def evaluate_batch(
    *, batch_id: int, new_group_ids: list[int], regressed_group_ids: list[int]
) -> int:
    """What one ingest batch created or regressed, against the new_group and regression
    rules. A redelivered message finds its subjects already fired and queues nothing."""
    return len(
        services.batch_evaluate(
            new_group_ids=new_group_ids, regressed_group_ids=regressed_group_ids
        )
    )


@shared_task(acks_late=True, reject_on_worker_lost=True)
def evaluate_rules() -> int:
    """Beat, every minute: the counter-read kinds, batches the broker missed, lost deliveries."""
    return len(services.rules_evaluate().queued)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def deliver(self, *, delivery_id: int) -> str:  # type: ignore[no-untyped-def]
    """Send one delivery; retried with backoff (the row counts the attempts and decides)."""
    outcome = services.delivery_attempt(delivery_id=delivery_id)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status
