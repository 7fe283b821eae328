"""Celery tasks of Quality Lab: they take ids and call a service."""

from __future__ import annotations

from celery import shared_task

from qualitylab import services


@shared_task(acks_late=True, reject_on_worker_lost=True)
def build_collection_version(*, version_id: int) -> None:
    services.version_build(version_id=version_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def execute_case_run(*, run_id: int) -> None:
    services.run_execute(run_id=run_id)


@shared_task
def requeue_stale_runs() -> None:
    """Beat: runs whose worker died or whose message was lost are sent again."""
    services.runs_requeue_stale()
