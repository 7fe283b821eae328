"""Reads of the learning review: the queue, one suggestion's evidence, history, export.

What a page lists is filtered to the collections its reader sees (organisation.access): the
queue, its counts, the decisions and the collections' policies. A suggestion's own evidence
(attempts, failures, shadow cases) is of its collection, so finding the suggestion through
``visible_suggestions`` is the one check its page needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Count, IntegerField, Prefetch, Q, QuerySet, Value, When

from learning.models import (
    QUEUE_ORDER,
    LearningAttempt,
    Review,
    ShadowObservation,
    Suggestion,
    SuggestionStatus,
)
from organisation.access import visible_q
from qualitylab.models import Collection

ATTEMPTS_IN_QUEUE = 5


@dataclass(frozen=True)
class QueueFilters:
    collection: str = ""
    type: str = ""
    status: str = ""
    family: str = ""  # part of the query family

    def __bool__(self) -> bool:
        return any((self.collection, self.type, self.status, self.family))


def _queue_rank() -> Case:
    return Case(
        *(When(status=status, then=Value(index)) for index, status in enumerate(QUEUE_ORDER)),
        default=Value(len(QUEUE_ORDER)),
        output_field=IntegerField(),
    )


def visible_suggestions(*, user: Any) -> QuerySet[Suggestion]:
    """The suggestions of the collections ``user`` sees (another team's: not found)."""
    return Suggestion.objects.filter(visible_q(user, "collection__name"))


def suggestion_queue(*, filters: QueueFilters, user: Any) -> QuerySet[Suggestion]:
    """Promotable first (what a reviewer can act on), then suggested, promoted, rejected;
    newest evidence first within each. Rejected suggestions stay listed."""
    suggestions = visible_suggestions(user=user)
    if filters.collection:
        suggestions = suggestions.filter(collection__name=filters.collection)
    if filters.type:
        suggestions = suggestions.filter(type=filters.type)
    if filters.status:
        suggestions = suggestions.filter(status=filters.status)
    if filters.family:
        suggestions = suggestions.filter(query_family__icontains=filters.family)
    return (
        suggestions.select_related("collection", "promoted_by")
        .annotate(queue_rank=_queue_rank(), attempt_count=Count("attempts", distinct=True))
        .prefetch_related(
            Prefetch(
                "attempts",
                queryset=LearningAttempt.objects.order_by("-occurred_at", "-id")[
                    :ATTEMPTS_IN_QUEUE
                ],
                to_attr="latest_attempts",
            ),
            Prefetch(
                "reviews",
                queryset=Review.objects.select_related("actor").order_by("-created_at", "-id"),
                to_attr="history",
            ),
        )
        .order_by("queue_rank", "-last_seen_at", "-id")
    )


def status_counts(*, user: Any, collection: str = "") -> dict[str, int]:
    suggestions = visible_suggestions(user=user)
    if collection:
        suggestions = suggestions.filter(collection__name=collection)
    counts = dict(suggestions.values_list("status").annotate(n=Count("id")).order_by())
    return {status: counts.get(status, 0) for status in SuggestionStatus.values}


def suggestion_attempts(*, suggestion: Suggestion, limit: int = 50) -> list[LearningAttempt]:
    return list(suggestion.attempts.order_by("-occurred_at", "-id")[:limit])


def family_failures(*, suggestion: Suggestion, limit: int = 20) -> list[LearningAttempt]:
    """Failed attempts of the suggestion's query family that used its target (the ones
    the gate's failure ratio counts), newest first."""
    failures = LearningAttempt.objects.filter(
        collection_id=suggestion.collection_id,
        query_fingerprint=suggestion.query_fingerprint,
        success=False,
    ).order_by("-occurred_at", "-id")[: limit * 10]
    # Plan tools are a JSON list: matched here, as SQLite has no JSON containment lookup.
    return [attempt for attempt in failures if attempt.uses_target(suggestion.target)][:limit]


def shadow_cases(*, suggestion: Suggestion) -> list[ShadowObservation]:
    """The latest shadow observation of each Quality Lab case the suggestion touches."""
    latest: dict[str, ShadowObservation] = {}
    for observation in suggestion.shadow_observations.select_related("result").order_by(
        "-created_at", "-id"
    ):
        latest.setdefault(observation.case_id, observation)
    return sorted(latest.values(), key=lambda o: (-(o.rank_delta or 0), o.case_id))


def suggestion_history(*, suggestion: Suggestion) -> list[Review]:
    return list(suggestion.reviews.select_related("actor").order_by("-created_at", "-id"))


def recent_reviews(*, user: Any, collection: str = "", limit: int = 30) -> list[Review]:
    reviews = Review.objects.filter(visible_q(user, "suggestion__collection__name")).select_related(
        "suggestion", "suggestion__collection", "actor"
    )
    if collection:
        reviews = reviews.filter(suggestion__collection__name=collection)
    return list(reviews.order_by("-created_at", "-id")[:limit])


def learning_collections(*, user: Any) -> list[Collection]:
    """The collections ``user`` sees, with their suggestions counted."""
    return list(
        Collection.objects.filter(visible_q(user, "name"))
        .annotate(
            suggestion_count=Count("suggestions", distinct=True),
            promotable_count=Count(
                "suggestions",
                filter=Q(suggestions__status=SuggestionStatus.PROMOTABLE),
                distinct=True,
            ),
            promoted_count=Count(
                "suggestions",
                filter=Q(suggestions__status=SuggestionStatus.PROMOTED),
                distinct=True,
            ),
        )
        .order_by("name")
    )


def export_suggestions(*, collection: Collection, status: str = "") -> list[dict[str, Any]]:
    """The collection's suggestions in graph-tool-call's shape, each with its status."""
    suggestions = Suggestion.objects.filter(collection=collection).select_related("collection")
    if status:
        suggestions = suggestions.filter(status=status)
    return [
        row.as_library()
        for row in suggestions.annotate(queue_rank=_queue_rank()).order_by(
            "queue_rank", "-last_seen_at", "-id"
        )
    ]
