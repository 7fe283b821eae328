from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from triage.models import ApiKey, FailureGroup, IngestBatch, RetentionRun, ToolPolicy


@admin.register(ToolPolicy)
class ToolPolicyAdmin(admin.ModelAdmin):
    list_display = [
        "tool",
        "collection",
        "side_effect",
        "idempotency_required",
        "approval_required",
        "retry_max_attempts",
        "retry_budget_failures",
        "retry_budget_window_seconds",
    ]
    list_filter = ["side_effect", "approval_required", "idempotency_required"]
    search_fields = ["tool", "collection"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "owner",
        "scopes",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    readonly_fields = ["lookup_id", "secret_hash", "last_used_at"]


@admin.register(FailureGroup)
class FailureGroupAdmin(admin.ModelAdmin):
    list_display = ["stage", "reason", "tool", "collection", "count", "lane", "status", "last_seen"]
    list_filter = ["stage", "status", "lane"]
    search_fields = ["reason", "tool", "collection"]


@admin.register(IngestBatch)
class IngestBatchAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "owner",
        "channel",
        "received_at",
        "item_count",
        "accepted",
        "duplicates",
        "conflicts",
        "rejected",
    ]


@admin.register(RetentionRun)
class RetentionRunAdmin(admin.ModelAdmin):
    """The retention ledger, read-only: rows are written by the prune itself."""

    list_display = [
        "pk",
        "started_at",
        "channel",
        "status",
        "days",
        "cutoff",
        "records_deleted",
        "runner_events_deleted",
        "batches",
        "groups_touched",
        "groups_emptied",
    ]
    list_filter = ["status", "channel"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
