"""Attempts become suggestions through graph-tool-call's derive and merge, counted once,
then the gate decides: suggested, promotable, or promoted by policy."""

from __future__ import annotations

import io
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from graph_tool_call.learning import build_trace_learning_record

from learning import services
from learning.models import Decision, LearningAttempt, Review, Suggestion, SuggestionStatus
from qualitylab.models import Collection, LearningMode
from tests.learning.conftest import attempt_item, suggestion

pytestmark = pytest.mark.django_db


def test_two_attempts_give_two_observations_not_three(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item())
    assert suggestion().observations == 1
    ingest_attempts(attempt_item())
    preference = suggestion()
    assert preference.observations == 2
    assert preference.attempts.count() == 2
    assert preference.status == SuggestionStatus.PROMOTABLE


def test_a_second_derivation_of_the_same_attempts_counts_nothing(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    collection = Collection.objects.get(name="bo-dev")
    assert services.suggestions_derive(collection_id=collection.pk) == 0  # a redelivered task
    assert suggestion().observations == 2


def test_derivation_waits_for_the_commit(db: Any, django_capture_on_commit_callbacks: Any) -> None:
    from triage.intake.ingest import batch_ingest

    with mock.patch("learning.tasks.derive_suggestions.apply_async") as send:
        with django_capture_on_commit_callbacks() as callbacks:
            batch_ingest(owner="runtime-a", items=[attempt_item()])
            assert not send.called and not Suggestion.objects.exists()
        assert len(callbacks) == 1
        callbacks[0]()
    collection = Collection.objects.get(name="bo-dev")
    send.assert_called_once_with(kwargs={"collection_id": collection.pk}, retry=False)


def test_the_same_suggestion_as_the_library_shape(ingest_attempts: Any) -> None:
    edge = {"source": "searchOrders", "target": "getRefundableOrders",
            "data_flow": {"to_field": "orderNo"}}  # fmt: skip
    ingest_attempts(attempt_item(trace_edges=[edge]))
    record = build_trace_learning_record(
        query="find refund-ready orders", collection_id="bo-dev",
        selected_target="getRefundableOrders", success=True,
    )  # fmt: skip
    types = set(Suggestion.objects.values_list("type", flat=True))
    assert types == {"target_preference", "plan_path", "data_flow_edge"}
    preference = suggestion()
    assert preference.query_fingerprint == record["query_fingerprint"]
    exported = preference.as_library()
    assert exported["id"].startswith("target_preference:")
    assert exported["evidence"]["selected_target"] == "getRefundableOrders"
    assert exported["collection_id"] == "bo-dev" and exported["status"] == "suggested"
    flow = suggestion(type="data_flow_edge")
    assert flow.data["edge"]["data_flow"] == {"to_field": "orderNo"}


def test_two_successes_with_three_failures_stay_suggested(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    assert suggestion().status == SuggestionStatus.PROMOTABLE
    ingest_attempts(*(attempt_item(success=False, failure_reason="http_5xx") for _ in range(3)))
    preference = suggestion()
    assert preference.observations == 2
    assert preference.status == SuggestionStatus.SUGGESTED
    assert preference.blocked_checks[0]["name"] == "failure_ratio"
    assert (preference.recent_failures, preference.recent_attempts) == (3, 5)


def test_failures_that_used_another_target_do_not_count(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    ingest_attempts(*(
        attempt_item(success=False, failure_reason="not_retrieved", selected_target="listOrders",
                     plan_tools=["listOrders"])
        for _ in range(3)
    ))  # fmt: skip
    assert suggestion().status == SuggestionStatus.PROMOTABLE


def test_an_unstable_target_stays_suggested(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    ingest_attempts(*(
        attempt_item(selected_target="getOrderDetail", plan_tools=["getOrderDetail"])
        for _ in range(2)
    ))  # fmt: skip
    preference = suggestion(target="getRefundableOrders")
    assert preference.status == SuggestionStatus.SUGGESTED
    assert [check["name"] for check in preference.blocked_checks] == ["stable_target"]


def test_a_secret_marks_the_suggestions_sensitive(ingest_attempts: Any) -> None:
    ingest_attempts(
        attempt_item(),
        attempt_item(target_selector={"note": "called with Bearer sk-live-abcdef0123456789"}),
    )
    preference = suggestion()
    assert preference.sensitive_evidence
    assert preference.status == SuggestionStatus.SUGGESTED
    assert "sk-live" not in str(preference.data)
    assert LearningAttempt.objects.filter(carried_secret=True).count() == 1


def test_suggestions_stay_in_their_collection(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item(collection_id="other"))
    assert Suggestion.objects.filter(type="target_preference").count() == 2
    assert {s.collection.name: s.observations for s in Suggestion.objects.filter(
        type="target_preference")} == {"bo-dev": 1, "other": 1}  # fmt: skip


def test_policy_promotes_in_a_read_only_collection_in_promoted_mode(ingest_attempts: Any) -> None:
    Collection.objects.create(name="bo-dev", learning_mode=LearningMode.PROMOTED)
    ingest_attempts(attempt_item(), attempt_item())
    preference = suggestion()
    assert preference.status == SuggestionStatus.PROMOTED
    assert preference.promoted_by_label == "policy" and preference.promoted_at is not None
    review = Review.objects.get(suggestion=preference)
    assert (review.decision, review.actor, review.status_after) == (
        Decision.AUTO_PROMOTE,
        None,
        "promoted",
    )


def test_a_write_capable_collection_never_promotes_without_a_reviewer(
    ingest_attempts: Any,
) -> None:
    Collection.objects.create(
        name="bo-dev", learning_mode=LearningMode.PROMOTED, mutations_allowed=True
    )
    ingest_attempts(*(attempt_item() for _ in range(5)))
    assert suggestion().status == SuggestionStatus.PROMOTABLE
    assert not Review.objects.exists()


def test_a_policy_change_reruns_the_gate_with_a_history_row(ingest_attempts: Any) -> None:
    Collection.objects.create(name="bo-dev", learning_mode=LearningMode.PROMOTED)
    ingest_attempts(attempt_item(), attempt_item())
    operator = get_user_model().objects.create(username="olga")
    collection = Collection.objects.get(name="bo-dev")
    changes = services.collection_learning_policy_set(
        collection=collection, actor=operator, learning_mode="promoted",
        learning_allowed=True, write_capable=True,
    )  # fmt: skip
    assert changes == ["write-capable"]
    preference = suggestion()
    assert preference.status == SuggestionStatus.PROMOTABLE  # waits for a reviewer now
    demotion = preference.reviews.get(decision=Decision.DEMOTE)
    assert demotion.actor_label == "policy" and "write-capable" in demotion.note
    services.collection_learning_policy_set(
        collection=collection, actor=operator, learning_mode="promoted",
        learning_allowed=False, write_capable=True,
    )  # fmt: skip
    preference.refresh_from_db()
    assert preference.status == SuggestionStatus.SUGGESTED
    assert "collection_allows_learning" in [c["name"] for c in preference.blocked_checks]


def test_turning_learning_off_demotes_what_a_reviewer_promoted(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    reviewer = get_user_model().objects.create(username="rita")
    services.suggestion_approve(suggestion=suggestion(), reviewer=reviewer, reason="good")
    collection = Collection.objects.get(name="bo-dev")
    services.collection_learning_policy_set(
        collection=collection, actor=reviewer, learning_mode="observe",
        learning_allowed=False, write_capable=False,
    )  # fmt: skip
    preference = suggestion()
    assert preference.status == SuggestionStatus.SUGGESTED
    last = preference.reviews.first()
    assert last is not None
    assert (last.decision, last.reason_code) == (Decision.DEMOTE, "collection_policy_blocked")


def test_promotion_changes_only_the_suggestion(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    before = list(LearningAttempt.objects.order_by("pk").values())
    reviewer = get_user_model().objects.create(username="rita")
    promoted = services.suggestion_approve(
        suggestion=suggestion(), reviewer=reviewer, reason="wins every run"
    )
    assert promoted.status == SuggestionStatus.PROMOTED
    assert (promoted.promoted_by, promoted.promotion_reason) == (reviewer, "wins every run")
    assert list(LearningAttempt.objects.order_by("pk").values()) == before


def test_new_evidence_keeps_a_decision(ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    reviewer = get_user_model().objects.create(username="rita")
    services.suggestion_reject(
        suggestion=suggestion(), reviewer=reviewer, reason="operator_rejected", note="no"
    )
    ingest_attempts(attempt_item())
    rejected = suggestion()
    assert rejected.status == SuggestionStatus.REJECTED and rejected.observations == 3


def test_a_demoted_suggestion_is_not_promoted_again_by_policy(ingest_attempts: Any) -> None:
    Collection.objects.create(name="bo-dev", learning_mode=LearningMode.PROMOTED)
    ingest_attempts(attempt_item(), attempt_item())
    reviewer = get_user_model().objects.create(username="rita")
    demoted = services.suggestion_demote(
        suggestion=suggestion(), reviewer=reviewer, reason="hides a newer endpoint"
    )
    assert demoted.status == SuggestionStatus.PROMOTABLE
    assert demoted.promoted_at is None and demoted.promotion_reason == ""
    ingest_attempts(attempt_item())
    assert suggestion().status == SuggestionStatus.PROMOTABLE


def test_a_rejected_suggestion_is_reopened_with_a_reason_and_waits_for_a_reviewer(
    ingest_attempts: Any,
) -> None:
    """Reopening undoes a rejection: the gate decides its status again, the rejection stays
    in the history, and policy does not promote what a person reopened."""
    Collection.objects.create(name="bo-dev", learning_mode=LearningMode.PROMOTED)
    reviewer = get_user_model().objects.create(username="rita")
    with mock.patch.object(services, "_apply_verdict"):  # rejected before policy acts
        ingest_attempts(attempt_item(), attempt_item())
    services.suggestion_reject(
        suggestion=suggestion(), reviewer=reviewer, reason="unstable_target", note="two paths"
    )
    with pytest.raises(services.DecisionError):
        services.suggestion_reopen(suggestion=suggestion(), reviewer=reviewer, reason=" ")
    reopened = services.suggestion_reopen(
        suggestion=suggestion(), reviewer=reviewer, reason="the target is stable now"
    )
    assert reopened.status == SuggestionStatus.PROMOTABLE
    assert (reopened.rejection_reason, reopened.rejection_note) == ("", "")
    assert [(r.decision, r.note) for r in reopened.reviews.order_by("pk")][-2:] == [
        ("reject", "two paths"),
        ("reopen", "the target is stable now"),
    ]
    ingest_attempts(attempt_item())
    assert suggestion().status == SuggestionStatus.PROMOTABLE  # never promoted by policy
    with pytest.raises(services.DecisionError, match="Only a rejected suggestion"):
        services.suggestion_reopen(suggestion=suggestion(), reviewer=reviewer, reason="again")


def test_with_the_broker_down_attempts_wait_and_the_command_catches_up(
    db: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from django.core.management import call_command
    from kombu.exceptions import OperationalError

    from triage.intake.ingest import batch_ingest

    with (
        mock.patch(
            "learning.tasks.derive_suggestions.apply_async", side_effect=OperationalError("down")
        ),
        django_capture_on_commit_callbacks(execute=True),
    ):
        outcome = batch_ingest(owner="runtime-a", items=[attempt_item(), attempt_item()])
    assert outcome.all_stored  # ingest never fails because derivation could not be queued
    assert LearningAttempt.objects.filter(derived_at__isnull=True).count() == 2
    call_command("learning_derive", stdout=mock.MagicMock())
    assert suggestion().observations == 2
    assert not LearningAttempt.objects.filter(derived_at__isnull=True).exists()


# --- distinct evidence ----------------------------------------------------------------------


def test_one_session_repeating_itself_is_one_piece_of_evidence(ingest_attempts: Any) -> None:
    ingest_attempts(*(attempt_item(session_id="one-person") for _ in range(3)))
    preference = suggestion()
    assert preference.observations == 3
    assert (preference.production_observations, preference.production_sessions) == (3, 1)
    assert preference.status == SuggestionStatus.SUGGESTED
    ingest_attempts(attempt_item(session_id="another-person"))
    preference = suggestion()
    assert preference.production_sessions == 2
    assert preference.status == SuggestionStatus.PROMOTABLE


def test_attempts_without_a_session_count_as_one_session(ingest_attempts: Any) -> None:
    ingest_attempts(*(attempt_item(session_id=None) for _ in range(4)))
    preference = suggestion()
    assert (preference.production_observations, preference.production_sessions) == (4, 1)
    assert preference.status == SuggestionStatus.SUGGESTED


def test_the_gate_command_counts_evidence_again(ingest_attempts: Any) -> None:
    from django.core.management import call_command

    ingest_attempts(*(attempt_item(session_id="one-person") for _ in range(3)))
    # As stored before the distinct counts existed: inflated, and promotable on them.
    Suggestion.objects.update(production_sessions=3, status=SuggestionStatus.PROMOTABLE)
    call_command("learning_derive", "--gate", stdout=io.StringIO())
    preference = suggestion()
    assert preference.production_sessions == 1
    assert preference.status == SuggestionStatus.SUGGESTED


def test_the_migration_gives_existing_suggestions_their_oldest_attempt_as_first_seen(
    ingest_attempts: Any,
) -> None:
    """Suggestions from before first_seen_at had only created_at (when the desk derived them,
    after their attempts): the migration takes the oldest linked attempt instead, or, with no
    attempt left, the earlier of created_at and last_seen_at."""
    from datetime import timedelta
    from importlib import import_module

    from django.apps import apps
    from django.utils import timezone

    backfill = import_module("learning.migrations.0006_suggestion_first_seen_at").backfill
    now = timezone.now()
    ingest_attempts(attempt_item(created_at=(now - timedelta(hours=1)).isoformat()))
    ingest_attempts(attempt_item(created_at=(now - timedelta(hours=3)).isoformat()))
    linked = suggestion()
    orphan = Suggestion.objects.create(
        collection=linked.collection, suggestion_id="orphan", type="plan_path",
        created_at=now, last_seen_at=now - timedelta(hours=2),
    )  # fmt: skip
    Suggestion.objects.update(first_seen_at=now)  # as the new column's default left them
    backfill(apps, None)
    linked.refresh_from_db()
    orphan.refresh_from_db()
    assert linked.first_seen_at == now - timedelta(hours=3)
    assert orphan.first_seen_at == now - timedelta(hours=2)
    assert all(s.first_seen_at <= s.last_seen_at for s in Suggestion.objects.all())
