"""What the pages ask of organisation.access before they show or change one thing: is it
of a collection the person sees (else 404, as for no such thing, so another team's ids do
not leak), and does their role in the team that owns it allow the action (else 403)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.shortcuts import get_object_or_404

from organisation.access import has_collection_perm
from triage.selectors import seen_by

Thing = TypeVar("Thing", bound=Model)


def visible_or_404(
    queryset: QuerySet[Thing], *, user: Any, field: str = "collection", **lookup: Any
) -> Thing:
    """The one row ``lookup`` names among those ``user`` may see, or a 404."""
    return get_object_or_404(queryset.filter(seen_by(user, field)), **lookup)


def require_collection_perm(user: Any, perm: str, collections: Iterable[str]) -> None:
    """Refuse (403) unless ``user``'s role allows ``perm`` in every one of ``collections``
    (their role outside teams, or their role in the team owning each one)."""
    for collection in sorted(set(collections)):
        if not has_collection_perm(user, perm, collection):
            raise PermissionDenied
