"""Releases: whether records of some releases reopen a group resolved "in a release".

The rule, in one place (ingest applies it to a batch, the docs describe it): a group
resolved in release X stays resolved by records of releases deployed before X in its
collection; a record of X or of a release deployed after it reopens the group. Resolved "in
the next release", X is the first release deployed after the resolution, so a record reopens
it when its release was deployed after the resolution. A record without a release, or with
one the desk does not know, reopens the group as before releases existed. No model here:
ingest reads the deployment times it needs (one query a batch) and passes them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Reopening:
    """Whether a batch's records reopen a resolved group, and the release to name for it."""

    reopens: bool
    release: str = ""


def reopening(
    *,
    resolved_in: str,
    resolved_in_next: bool,
    resolved_at: datetime | None,
    seen: Iterable[str],
    deployed: Mapping[str, datetime],
) -> Reopening:
    """Whether records of the releases `seen` ("" for none) reopen a group resolved in
    release `resolved_in` (or in the next release after `resolved_at`), given when each
    release of the group's collection the desk knows was deployed.

    The release named is the earliest-deployed known release among those that reopen it,
    else the first unknown one sent, else "" (records without a release)."""
    seen = sorted(set(seen))
    if resolved_in_next and resolved_at is not None:

        def reopens(when: datetime) -> bool:
            return when > resolved_at

    elif resolved_in and resolved_in in deployed:
        threshold = deployed[resolved_in]

        def reopens(when: datetime) -> bool:
            return when >= threshold

    else:  # resolved without a release (or in one the desk no longer knows)

        def reopens(when: datetime) -> bool:
            return True

    known = sorted(
        (deployed[release], release)
        for release in seen
        if release in deployed and reopens(deployed[release])
    )
    if known:
        return Reopening(True, known[0][1])
    unknown = [release for release in seen if release not in deployed]
    if unknown:
        named = [release for release in unknown if release]
        return Reopening(True, named[0] if named else "")
    return Reopening(False)
