"""Per-key ingest quota, counted in items and in body bytes per minute with one atomic UPDATE."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from triage.models import ApiKey, ApiKeyQuotaWindow


def quota_consume(*, api_key: ApiKey, items: int, body_bytes: int = 0) -> int | None:
    """Charge `items` and `body_bytes` (decompressed) to the key's current minute; return
    seconds to wait when either is over quota.

    The conditional UPDATE (used <= limit - items, and the same for bytes) is the whole
    check, so concurrent requests can never overshoot the quota together. Bytes are counted
    because what a batch costs the desk (parsing, scrubbing) follows its size, not only its
    number of items.
    """
    limit = api_key.quota_per_minute or settings.TRIAGE_INGEST_QUOTA_PER_MINUTE
    byte_limit = settings.TRIAGE_INGEST_QUOTA_BYTES_PER_MINUTE
    now = timezone.now()
    window_start = now.replace(second=0, microsecond=0)
    retry_after = max(1, 60 - now.second)
    if items > limit or body_bytes > byte_limit:
        return retry_after
    window, created = ApiKeyQuotaWindow.objects.get_or_create(
        api_key=api_key, window_start=window_start
    )
    if created:
        ApiKeyQuotaWindow.objects.filter(
            api_key=api_key, window_start__lt=window_start - timedelta(hours=1)
        ).delete()
    charged = ApiKeyQuotaWindow.objects.filter(
        pk=window.pk, used__lte=limit - items, used_bytes__lte=byte_limit - body_bytes
    ).update(used=F("used") + items, used_bytes=F("used_bytes") + body_bytes)
    return None if charged else retry_after
