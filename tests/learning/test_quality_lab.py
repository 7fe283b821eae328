"""Quality Lab runs record learning attempts and, in shadow mode, each suggestion's delta."""

from __future__ import annotations

from typing import Any

import pytest

from learning.models import LearningAttempt, ShadowObservation, SuggestionStatus
from qualitylab.models import CaseResult, LearningMode
from tests.learning.conftest import attempt_item, suggestion

pytestmark = pytest.mark.django_db


def test_two_runs_of_one_case_are_two_observations_but_one_piece_of_evidence(
    shop: Any, run_cases: Any
) -> None:
    run_cases(shop, "plan-order-detail-chain")
    run_cases(shop, "plan-order-detail-chain")
    preference = suggestion("shop", target="getOrderDetail")
    assert preference.query_family == "show me the order detail"
    assert preference.observations == 2
    assert preference.attempts.count() == 2
    assert (preference.test_observations, preference.test_cases) == (2, 1)
    assert (preference.production_observations, preference.production_sessions) == (0, 0)
    # The same case twice says nothing new: the gate needs two distinct pieces of evidence.
    assert preference.status == SuggestionStatus.SUGGESTED
    [check] = [c for c in preference.gate if c["name"] == "repeated_success"]
    assert not check["passed"]
    assert check["detail"].startswith("1 distinct piece of evidence: 0 production session(s)")


def test_repetitions_do_not_inflate_the_evidence(shop: Any, run_cases: Any) -> None:
    run_cases(shop, "plan-order-detail-chain", repeat=5)
    preference = suggestion("shop", target="getOrderDetail")
    assert preference.observations == 5
    assert (preference.test_observations, preference.test_cases) == (5, 1)
    assert preference.distinct_evidence == 1
    assert preference.status == SuggestionStatus.SUGGESTED


def test_a_case_and_a_production_session_together_pass_the_gate(
    shop: Any, run_cases: Any, ingest_attempts: Any
) -> None:
    run_cases(shop, "plan-order-detail-chain")
    ingest_attempts(
        attempt_item(collection_id="shop", query="show me the order detail",
                     selected_target="getOrderDetail", plan_tools=["getOrderDetail"])
    )  # fmt: skip
    preference = suggestion("shop", target="getOrderDetail")
    assert (preference.production_sessions, preference.test_cases) == (1, 1)
    # The demo collection is write-capable: promotable, never promoted without a reviewer.
    assert preference.status == SuggestionStatus.PROMOTABLE


def test_every_executed_case_is_an_attempt_through_ingest(
    shop: Any, run_cases: Any, derive_on_commit: Any
) -> None:
    run = run_cases(shop, "plan-order-detail-chain", "plan-track-llm-mismatch", "search-coupons-en")
    attempts = {a.extra["quality_lab"]["case"]: a for a in LearningAttempt.objects.all()}
    assert set(attempts) == {
        "plan-order-detail-chain",
        "plan-track-llm-mismatch",
        "search-coupons-en",
    }
    chain = attempts["plan-order-detail-chain"]
    assert chain.source == "quality_lab" and chain.success
    assert chain.selected_target == "getOrderDetail" and chain.plan_tools[-1] == "getOrderDetail"
    assert chain.quality_lab["run"] == run.pk
    assert (
        chain.quality_lab_result_id
        == CaseResult.objects.get(case__case_id=chain.quality_lab["case"]).pk
    )
    mismatch = attempts["plan-track-llm-mismatch"]
    assert not mismatch.success and mismatch.failure_reason == "llm_target_mismatch"
    assert attempts["search-coupons-en"].selected_target == ""
    # Merged by the run's own task: no derivation task is queued for a Quality Lab run.
    assert LearningAttempt.objects.filter(derived_at__isnull=True).count() == 0
    assert not derive_on_commit.called


def test_shadow_metrics_show_a_positive_delta_for_a_helpful_suggestion(
    shop: Any, run_cases: Any, ingest_attempts: Any
) -> None:
    shop.learning_mode = LearningMode.SHADOW
    shop.save()
    # Runtimes found listInvoices for this query four times; retrieval ranks it 4th.
    ingest_attempts(*(
        attempt_item(collection_id="shop", query="tax invoice for order",
                     selected_target="listInvoices", plan_tools=["listInvoices"])
        for _ in range(4)
    ))  # fmt: skip
    helpful = suggestion("shop", target="listInvoices")
    assert helpful.observations == 4
    run = run_cases(shop, "search-tax-invoice-weak")
    result = CaseResult.objects.get(run=run)
    learning = result.sections["learning"]
    assert learning["mode"] == "shadow"
    assert (learning["current_rank"], learning["shadow_rank"], learning["rank_delta"]) == (4, 3, 1)
    assert learning["signals"][0]["target"] == "listInvoices"
    observation = ShadowObservation.objects.get(suggestion=helpful, result=result)
    assert observation.rank_delta == 1 > 0
    helpful.refresh_from_db()
    assert helpful.shadow["rank_delta"] > 0 and helpful.shadow["improved"] == 1


def test_a_collection_in_observe_mode_gets_no_shadow_comparison(shop: Any, run_cases: Any) -> None:
    run = run_cases(shop, "search-tax-invoice-weak")
    assert CaseResult.objects.get(run=run).sections["learning"] is None
    assert ShadowObservation.objects.count() == 0


def test_the_suggestion_page_links_attempts_and_shadow_cases_to_their_results(
    shop: Any, run_cases: Any, client_as: Any
) -> None:
    shop.learning_mode = LearningMode.SHADOW
    shop.save()
    run_cases(shop, "plan-order-detail-chain")
    run = run_cases(shop, "plan-order-detail-chain", "search-order-detail-en")
    preference = suggestion("shop", target="getOrderDetail")
    response = client_as("viewer").get(f"/learning/suggestions/{preference.pk}/")
    assert response.status_code == 200
    content = response.content.decode()
    result = CaseResult.objects.get(run=run, case__case_id="plan-order-detail-chain")
    assert f'href="/qualitylab/results/{result.pk}/"' in content
    assert "search-order-detail-en" in content  # a shadow case of the family
