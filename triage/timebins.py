"""The time bins of the counters: hours and days, always in UTC.

Hourly buckets and daily rollups must agree on where a bin starts whatever offset a
runtime sent (a +05:30 timestamp floored in its own zone would start a bucket at :30).
"""

from __future__ import annotations

from datetime import UTC, datetime


def hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def day_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
