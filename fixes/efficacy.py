"""Whether a fix held: the rule, pure (no ORM), so the pages, the API and the docs agree.

A span's failure rate is failures / (failures + successes) when the desk saw successes of
the tool on either side of the fix, so that quieter traffic does not pass for a fix: fewer
failures because fewer calls leave the rate where it was. Without any success the rate is
the failure count per span (both sides span the same time), and the verdict says so.

The verdict compares the rate after with the rate before:
- held: it fell by at least 90%;
- partly held: by at least 50%;
- did not hold: by less (or it rose);
- cannot tell: no failure before the fix, or no call at all after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

HELD_DROP = 0.9
PARTLY_HELD_DROP = 0.5
SPAN_LENGTH = {"day": timedelta(hours=24), "week": timedelta(days=7)}
# Records may arrive a while after they occurred: a window is final this long after it ends.
SETTLE = timedelta(hours=1)


@dataclass(frozen=True)
class Reading:
    verdict: str  # a fixes.models.Verdict value
    normalised: bool  # rates over successes (True) or counts (False)
    rate_before: float | None
    rate_after: float | None
    drop: float | None  # 0.95 = the rate fell by 95%; negative when it rose
    why: str = ""  # for "cannot tell": no_failures_before | no_calls_after


def rate(failures: int, successes: int, *, normalised: bool) -> float | None:
    if not normalised:
        return float(failures)
    calls = failures + successes
    return failures / calls if calls else None


def read(
    *, failures_before: int, successes_before: int, failures_after: int, successes_after: int
) -> Reading:
    normalised = bool(successes_before or successes_after)
    before = rate(failures_before, successes_before, normalised=normalised)
    after = rate(failures_after, successes_after, normalised=normalised)
    if not failures_before or not before:
        return Reading("unmeasurable", normalised, before, after, None, "no_failures_before")
    if after is None:  # successes before, and no call at all after
        return Reading("unmeasurable", normalised, before, after, None, "no_calls_after")
    drop = 1 - after / before
    if drop >= HELD_DROP:
        verdict = "held"
    elif drop >= PARTLY_HELD_DROP:
        verdict = "partly_held"
    else:
        verdict = "not_held"
    return Reading(verdict, normalised, before, after, drop)


def closed_spans(fixed_at: datetime, now: datetime) -> list[str]:
    """The spans whose "after" window has ended and settled, narrowest first."""
    return [span for span, length in SPAN_LENGTH.items() if now >= fixed_at + length + SETTLE]


def windows(fixed_at: datetime, span: str) -> dict[str, tuple[datetime, datetime]]:
    """The span's two windows, [start, end) each: the same length before and after."""
    length = SPAN_LENGTH[span]
    return {"before": (fixed_at - length, fixed_at), "after": (fixed_at, fixed_at + length)}


def all_windows(fixed_at: datetime) -> dict[str, tuple[datetime, datetime]]:
    """Every window of a fix by its figures' key ("before_day" ... "after_week")."""
    return {
        f"{side}_{span}": window
        for span in SPAN_LENGTH
        for side, window in windows(fixed_at, span).items()
    }
