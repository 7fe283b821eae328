from __future__ import annotations

from django.contrib import admin

from triage.models import ApiKey, FailureGroup, IngestBatch, ToolPolicy


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
