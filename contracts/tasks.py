from __future__ import annotations

from celery import shared_task

from contracts.scan import contracts_scan


@shared_task
def scan_contracts() -> int:
    """Count what arrived since the last scan (the beat runs it every minute)."""
    return contracts_scan().total
