from __future__ import annotations

from celery import shared_task

from fixes import measure, verification


@shared_task
def measure_fixes() -> int:
    """Track newly promoted suggestions, conclude verifications whose run ended unheard, and
    measure every fix whose week after has not closed (the beat runs it every 5 minutes)."""
    measure.suggestions_track()
    verification.verifications_conclude()
    return measure.fixes_measure()
