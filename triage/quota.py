"""Per-key ingest quota, counted in items per minute with one atomic UPDATE."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from triage.models import ApiKey, ApiKeyQuotaWindow


def quota_consume(*, api_key: ApiKey, items: int) -> int | None:
    """Charge `items` to the key's current minute; return seconds to wait when over quota.

    The conditional UPDATE (used <= limit - items) is the whole check, so concurrent
    requests can never overshoot the quota together.
    """
    limit = api_key.quota_per_minute or settings.TRIAGE_INGEST_QUOTA_PER_MINUTE
    now = timezone.now()
    window_start = now.replace(second=0, microsecond=0)
    retry_after = max(1, 60 - now.second)
    if items > limit:
        return retry_after
    window, created = ApiKeyQuotaWindow.objects.get_or_create(
        api_key=api_key, window_start=window_start
    )
    if created:
        ApiKeyQuotaWindow.objects.filter(
            api_key=api_key, window_start__lt=window_start - timedelta(hours=1)
        ).delete()
    charged = ApiKeyQuotaWindow.objects.filter(pk=window.pk, used__lte=limit - items).update(
        used=F("used") + items
    )
    return None if charged else retry_after
