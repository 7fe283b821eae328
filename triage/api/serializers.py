"""The read API's input and output shapes (the ingest door's are in triage.intake.serializers)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from rest_framework import serializers

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from triage.forms import window_moment
from triage.models import FailureGroup, FailureRecord, GroupStatus
from triage.vocabulary import taxonomy


class FailureFilterSerializer(serializers.Serializer[Any]):
    collection = serializers.CharField(required=False, max_length=COLLECTION_NAME_MAX_LENGTH)
    stage = serializers.CharField(required=False, max_length=64)
    reason = serializers.CharField(required=False, max_length=100)
    tool = serializers.CharField(required=False, max_length=200)
    lane = serializers.ChoiceField(required=False, choices=list(taxonomy.LANES))
    execution_state = serializers.ChoiceField(
        required=False, choices=list(taxonomy.EXECUTION_STATES)
    )
    source = serializers.ChoiceField(  # type: ignore[assignment]
        required=False, choices=list(taxonomy.SOURCES)
    )
    status = serializers.ChoiceField(required=False, choices=GroupStatus.values)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)

    def _moment(self, value: datetime) -> datetime:
        try:
            moment = window_moment(value, now=timezone.now())
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None
        assert moment is not None
        return moment

    def validate_since(self, value: datetime) -> datetime:
        return self._moment(value)

    def validate_until(self, value: datetime) -> datetime:
        return self._moment(value)


class FailureRecordSerializer(serializers.ModelSerializer[FailureRecord]):
    class Meta:
        model = FailureRecord
        fields = [
            "id",
            "group",
            "client_id",
            "collection",
            "source",
            "stage",
            "reason",
            "reason_mapped",
            "message",
            "tool",
            "side_effect",
            "plan_id",
            "step_id",
            "retryable",
            "operator_action",
            "lane",
            "execution_state",
            "sent_retryable",
            "sent_lane",
            "sent_execution_state",
            "contradictions",
            "evidence",
            "extra",
            "replaced_characters",
            "idempotency_key",
            "occurred_at",
            "received_at",
            "graph_tool_call_version",
            "taxonomy_version",
        ]


class FailureGroupSerializer(serializers.ModelSerializer[FailureGroup]):
    class Meta:
        model = FailureGroup
        fields = [
            "id",
            "collection",
            "stage",
            "reason",
            "tool",
            "reason_mapped",
            "count",
            "retryable_count",
            "contradiction_count",
            "first_seen",
            "last_seen",
            "lane",
            "status",
            "status_changed_at",
        ]
