"""Read-only admin views: attempts are never rewritten, and decisions go through the review
page (which keeps the history); the admin is for looking things up."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from learning.models import LearningAttempt, Review, Suggestion


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(LearningAttempt)
class LearningAttemptAdmin(_ReadOnly):
    list_display = ["occurred_at", "collection", "source", "query_family", "selected_target",
                    "success", "failure_reason", "carried_secret", "derived_at"]  # fmt: skip
    list_filter = ["source", "success", "carried_secret"]
    search_fields = ["query_family", "selected_target", "client_id"]


@admin.register(Suggestion)
class SuggestionAdmin(_ReadOnly):
    list_display = ["suggestion_id", "collection", "type", "target", "status", "observations",
                    "sensitive_evidence", "last_seen_at"]  # fmt: skip
    list_filter = ["status", "type", "sensitive_evidence"]
    search_fields = ["query_family", "target", "suggestion_id"]


@admin.register(Review)
class ReviewAdmin(_ReadOnly):
    list_display = ["created_at", "actor_label", "decision", "reason_code", "status_before",
                    "status_after", "suggestion"]  # fmt: skip
    list_filter = ["decision", "reason_code"]
