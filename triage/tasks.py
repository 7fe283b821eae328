"""Celery tasks of triage: they take ids (or nothing) and call a service."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from triage import services


@shared_task
def unmute_expired_groups() -> None:
    """Beat: groups whose mute time ran out are open again (count mutes end on ingest)."""
    services.groups_unmute_expired(now=timezone.now())
