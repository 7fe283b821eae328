"""The native door's request and response shapes, for its OpenAPI schema."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class IngestItemSerializer(serializers.Serializer[Any]):
    """Documents one item; items are validated by triage.intake.normalize so that a bad item
    is rejected alone instead of failing the batch."""

    type = serializers.ChoiceField(
        choices=[
            "failure",
            "runner_event",
            "receipt",
            "audit_event",
            "learning_attempt",
            "envelope",
        ]
    )
    id = serializers.CharField(max_length=200, help_text="Your idempotency id for this item.")
    body = serializers.DictField(
        help_text=(
            "The record; see the README for each type's fields. An `envelope` is seed 004's "
            "error envelope (status failed|uncertain|blocked, code, retry{allowed, reason, "
            "next_action}, execution{state, idempotency_key}, evidence, user_safe_message) "
            "with `tool` and `collection` beside it; its code names a reason through the "
            "table GET /api/v1/taxonomy lists as envelope_codes."
        )
    )


class IngestRequestSerializer(serializers.Serializer[Any]):
    items = IngestItemSerializer(many=True)


class IngestErrorSerializer(serializers.Serializer[Any]):
    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField()


class IngestItemResultSerializer(serializers.Serializer[Any]):
    index = serializers.IntegerField()
    id = serializers.CharField()
    status = serializers.ChoiceField(choices=["accepted", "duplicate", "conflict", "rejected"])
    error = IngestErrorSerializer(required=False)


class IngestResponseSerializer(serializers.Serializer[Any]):
    batch_id = serializers.IntegerField()
    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    conflicts = serializers.IntegerField()
    rejected = serializers.IntegerField(help_text="Rejected items, conflicts included.")
    items = IngestItemResultSerializer(many=True)
