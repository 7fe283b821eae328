"""Celery tasks of triage: they take ids (or nothing) and call a service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from triage import services
from triage.upkeep import partitions, retention


@shared_task
def unmute_expired_groups() -> None:
    """Beat: groups whose mute time ran out are open again (count mutes end on ingest)."""
    services.groups_unmute_expired(now=timezone.now())


@shared_task
def prune_old_records() -> int | None:
    """Beat, hourly: prune records older than TRIAGE_RETENTION_DAYS (0: retention is off).
    Returns the ledger row's id; the outcome, failures included, is on that row."""
    days = settings.TRIAGE_RETENTION_DAYS
    if not days:
        return None
    run = retention.records_prune(
        days=days,
        batch_size=settings.TRIAGE_RETENTION_BATCH_SIZE,
        max_seconds=settings.TRIAGE_RETENTION_MAX_SECONDS,
        channel="beat",
    )
    return run.pk


@shared_task
def keep_record_partitions() -> int:
    """Beat, hourly (PostgreSQL): a partition for each day retention keeps and the days
    ahead, so that records land in their day and retention can drop it whole. Returns how
    many it created (none on SQLite, which keeps one table)."""
    days = partitions.window_days(now=timezone.now(), retention_days=settings.TRIAGE_RETENTION_DAYS)
    return len(partitions.ensure_days(days))
