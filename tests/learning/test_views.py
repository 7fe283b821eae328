"""The review page, the suggestion page, decisions by role, and collection policies."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from learning import services
from learning.models import Decision, Review, Suggestion, SuggestionStatus
from qualitylab.models import Collection
from tests.learning.conftest import attempt_item, suggestion
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, batch_ingest

pytestmark = pytest.mark.django_db

HOME = "/learning/"


@pytest.fixture
def queue(ingest_attempts: Any) -> None:
    """bo-dev: promotable target preference and plan path, a suggested pair, a sensitive pair."""
    ingest_attempts(attempt_item(), attempt_item())
    ingest_attempts(attempt_item(query="list coupons", selected_target="listCoupons",
                                 plan_tools=["listCoupons"]))  # fmt: skip
    ingest_attempts(
        attempt_item(query="member points", selected_target="getMemberPoints",
                     plan_tools=["getMemberPoints"], headers={"Authorization": "Bearer sk-live-1"})
    )  # fmt: skip


def _url(suggestion: Suggestion, action: str) -> str:
    return f"/learning/suggestions/{suggestion.pk}/{action}"


def test_the_review_page_lists_promotable_first(client_as: Any, queue: None) -> None:
    response = client_as("viewer").get(HOME)
    assert response.status_code == 200
    assert response.templates[0].name == "learning/review.html"
    order = ["promotable", "suggested", "promoted", "rejected"]
    statuses = [s.status for s in response.context["page"].object_list]
    assert statuses == sorted(statuses, key=order.index) and statuses[0] == "promotable"
    content = response.content.decode()
    assert "getRefundableOrders" in content and "sensitive_evidence" in content
    assert "sk-live-1" not in content
    assert "form" not in "".join(content.split('class="decision"')[1:2])  # no decision forms
    assert 'class="decision"' not in content


def test_an_htmx_filter_swaps_only_the_queue(client_as: Any, queue: None) -> None:
    client = client_as("reviewer")
    response = client.get(
        HOME, {"type": "plan_path", "family": "coupons"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith('<section id="queue">')
    assert "<html" not in content
    assert content.count('class="suggestion"') == 1
    assert "listCoupons" in content and "getRefundableOrders" not in content
    assert response.headers["HX-Push-Url"] == "/learning/?type=plan_path&family=coupons"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status": "promotable"}, {"getRefundableOrders"}),
        ({"collection": "bo-dev", "type": "target_preference", "status": "suggested"},
         {"listCoupons", "getMemberPoints"}),
        ({"family": "member"}, {"getMemberPoints"}),
        ({"collection": "elsewhere"}, set()),  # not a choice: the filter is ignored
    ],
)  # fmt: skip
def test_the_queue_filters(
    client_as: Any, queue: None, params: dict[str, str], expected: set[str]
) -> None:
    response = client_as("viewer").get(HOME, params)
    targets = {s.target for s in response.context["page"].object_list}
    if expected:
        assert targets == expected
    else:
        assert len(targets) == 3


def test_the_page_stays_cheap(
    client_as: Any, queue: None, ingest_attempts: Any, django_assert_max_num_queries: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_as("reviewer")
    client.get(HOME)
    with CaptureQueriesContext(connection) as few:
        assert client.get(HOME).status_code == 200
    ingest_attempts(*(attempt_item(query=f"family {word}", selected_target=f"tool{word}",
                                   plan_tools=[f"tool{word}"])
                      for word in ("alpha", "beta", "gamma", "delta")))  # fmt: skip
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get(HOME).status_code == 200
    assert len(few.captured_queries) <= 12


def test_the_suggestion_page_shows_its_evidence(client_as: Any, queue: None) -> None:
    preference = suggestion()
    response = client_as("viewer").get(f"/learning/suggestions/{preference.pk}/")
    assert response.status_code == 200
    content = response.content.decode()
    for text in (
        "repeated_success",
        "find refund-ready orders",
        "shape_match",
        "1430 ms",
        "No shadow comparison yet",
    ):
        assert text in content, text  # fmt: skip
    assert 'class="decision"' not in content


def test_the_suggestion_page_marks_an_attempt_whose_characters_were_replaced(
    client_as: Any, ingest_attempts: Any
) -> None:
    ingest_attempts(attempt_item(), attempt_item(note="sent with a \u0000 in it"))
    response = client_as("viewer").get(f"/learning/suggestions/{suggestion().pk}/")
    assert response.status_code == 200
    content = response.content.decode()
    assert content.count("characters replaced") == 1
    assert "in: body.extra.note" in content


@pytest.mark.parametrize(
    ("role", "allowed"),
    [("", False), ("viewer", False), ("operator", False), ("reviewer", True), ("admin", True)],
)
def test_only_reviewers_and_admins_decide_and_each_decision_leaves_a_history_row(
    client_as: Any, queue: None, role: str, allowed: bool
) -> None:
    client = client_as(role)
    preference = suggestion()
    path = suggestion(type="plan_path", target="getRefundableOrders")
    decisions = [
        (preference, "approve", {"reason": "wins every run"}, SuggestionStatus.PROMOTED),
        (path, "reject", {"reason": "unstable_target", "note": "two paths"},
         SuggestionStatus.REJECTED),
        (preference, "demote", {"reason": "hides the new endpoint"}, SuggestionStatus.PROMOTABLE),
    ]  # fmt: skip
    for row, action, data, status in decisions:
        response = client.post(_url(row, action), {**data, "next": HOME})
        row.refresh_from_db()
        if not allowed:
            assert response.status_code == 403
            continue
        assert response.status_code == 302
        assert response["Location"] == f"{HOME}#suggestion-{row.pk}"
        assert row.status == status
    if not allowed:
        assert not Review.objects.exists()
        assert Suggestion.objects.filter(status=SuggestionStatus.PROMOTABLE).count() == 2
        return
    history = list(
        Review.objects.order_by("id").values_list(
            "decision", "actor__username", "status_before", "status_after"
        )
    )
    user = f"{role}-user"
    assert history == [
        (Decision.APPROVE, user, "promotable", "promoted"),
        (Decision.REJECT, user, "promotable", "rejected"),
        (Decision.DEMOTE, user, "promoted", "promotable"),
    ]
    page = client.get(HOME).content.decode()
    assert "wins every run" in page and "two paths" in page and "hides the new endpoint" in page


def test_a_decision_needs_its_reason(client_as: Any, queue: None) -> None:
    client = client_as("reviewer")
    preference = suggestion()
    response = client.post(_url(preference, "approve"), {"reason": "  "}, follow=True)
    assert "needs a reason" in response.content.decode()
    response = client.post(_url(preference, "reject"), {"reason": "operator_rejected"}, follow=True)
    assert "needs a reason code and a note" in response.content.decode()
    response = client.post(
        _url(preference, "reject"), {"reason": "because", "note": "x"}, follow=True
    )
    assert "needs a reason code and a note" in response.content.decode()
    preference.refresh_from_db()
    assert preference.status == SuggestionStatus.PROMOTABLE and not Review.objects.exists()


def test_a_decision_that_no_longer_fits_is_refused(client_as: Any, queue: None) -> None:
    client = client_as("reviewer")
    suggested = suggestion(target="listCoupons")
    response = client.post(_url(suggested, "approve"), {"reason": "looks right"}, follow=True)
    assert "Only a promotable suggestion can be approved" in response.content.decode()
    response = client.post(_url(suggested, "demote"), {"reason": "x"}, follow=True)
    assert "Only a promoted suggestion can be demoted" in response.content.decode()
    assert not Review.objects.exists()


def test_next_only_goes_back_into_the_learning_pages(client_as: Any, queue: None) -> None:
    preference = suggestion()
    response = client_as("reviewer").post(
        _url(preference, "approve"), {"reason": "ok", "next": "https://evil.example/"}
    )
    assert (
        response["Location"] == f"/learning/suggestions/{preference.pk}/#suggestion-{preference.pk}"
    )


def test_operators_change_a_collection_policy_and_viewers_cannot(
    client_as: Any, queue: None
) -> None:
    url = "/learning/collections/bo-dev/policy"
    data = {"learning_mode": "shadow", "learning_allowed": "on"}
    assert client_as("viewer").post(url, data).status_code == 403
    assert client_as("reviewer").post(url, data).status_code == 403
    response = client_as("operator").post(url, data, follow=True)
    assert "bo-dev: mode observe -&gt; shadow." in response.content.decode()
    collection = Collection.objects.get(name="bo-dev")
    assert (collection.learning_mode, collection.learning_allowed) == ("shadow", True)
    client_as("operator").post(url, {"learning_mode": "shadow"})
    collection.refresh_from_db()
    assert not collection.learning_allowed
    assert not Suggestion.objects.filter(status=SuggestionStatus.PROMOTABLE).exists()


def test_an_empty_queue_says_where_suggestions_come_from(client_as: Any) -> None:
    content = client_as("viewer").get(HOME).content.decode()
    assert "No suggestions yet" in content and "learning_attempt" in content


def test_people_without_a_role_cannot_read_it(client_as: Any) -> None:
    assert client_as("").get(HOME).status_code == 403


# --- distinct evidence, production and test apart ------------------------------------------


def _lab_attempts(case: str, *, count: int) -> list[dict[str, Any]]:
    return [
        attempt_item(session_id=None, source="quality_lab",
                     quality_lab={"run": 1, "case": case, "repetition": n, "mode": "plan"})
        for n in range(1, count + 1)
    ]  # fmt: skip


def test_the_pages_show_production_and_test_evidence_apart(
    client_as: Any, ingest_attempts: Any
) -> None:
    # The suggestion: 14 observations, none from production, two cases repeated.
    outcome = batch_ingest(
        owner=DESK_OWNER,
        channel=DESK_CHANNEL,
        items=[*_lab_attempts("refund-a", count=7), *_lab_attempts("refund-b", count=7)],
    )
    assert outcome.all_stored
    services.suggestions_derive(collection_id=Collection.objects.get(name="bo-dev").pk)
    preference = suggestion()
    assert preference.observations == 14
    assert (preference.test_observations, preference.test_cases) == (14, 2)
    assert (preference.production_observations, preference.production_sessions) == (0, 0)
    client = client_as("viewer")

    content = client.get(HOME).content.decode()
    row = content.split(f'id="suggestion-{preference.pk}"')[1].split("</tbody>")[0]
    assert "production: 0 sessions" in row
    assert "Quality Lab: 2 cases" in row and "(14 observations)" in row
    assert "a production session or a Quality Lab case counts once" in content

    page = client.get(f"/learning/suggestions/{preference.pk}/").content.decode()
    production = page.split('id="evidence-production">')[1].split("</dd>")[0]
    test = page.split('id="evidence-test">')[1].split("</dd>")[0]
    assert "0 runtime sessions" in production
    assert "2 cases" in test and "14 successful results" in test
    assert "the gate needs 2" in page


def test_the_export_keeps_graph_tool_calls_shape(client_as: Any, ingest_attempts: Any) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    exported = suggestion().as_library()
    assert exported["observations"] == 2
    assert not {"production_sessions", "test_cases", "distinct_evidence"} & set(exported)


def test_a_shadow_delta_of_zero_everywhere_says_promoting_changes_nothing_yet(
    client_as: Any, ingest_attempts: Any
) -> None:
    ingest_attempts(attempt_item(), attempt_item())
    preference = suggestion()
    preference.shadow = {"cases": 3, "rank_delta": 0, "improved": 0, "worsened": 0,
                         "selected_target_changed": 0, "failure_reason_changed": 0}  # fmt: skip
    preference.save()
    client = client_as("viewer")
    message = (
        "Shadow delta 0 on every one of its 3 cases: promoting it changes nothing observed yet."
    )
    assert message in client.get(HOME).content.decode()
    assert message in client.get(f"/learning/suggestions/{preference.pk}/").content.decode()

    preference.shadow = {**preference.shadow, "rank_delta": 1, "improved": 1}
    preference.save()
    assert "changes nothing observed yet" not in client.get(HOME).content.decode()
    preference.shadow = {}
    preference.save()
    assert not preference.shadow_changes_nothing


def test_first_seen_is_never_after_last_seen_even_for_an_attempt_sent_late(
    client_as: Any, ingest_attempts: Any
) -> None:
    """First and last seen are when the suggestion's attempts occurred: the oldest and the
    newest, whatever order they arrived in (a spool sent late), never when the desk derived it
    (which is after every attempt, and was shown as "first seen")."""
    now = timezone.now()
    two_hours_ago, five_hours_ago = now - timedelta(hours=2), now - timedelta(hours=5)
    ingest_attempts(attempt_item(created_at=two_hours_ago.isoformat()))
    ingest_attempts(attempt_item(created_at=five_hours_ago.isoformat()))  # older, sent later
    preference = suggestion()
    assert preference.first_seen_at == five_hours_ago
    assert preference.last_seen_at == two_hours_ago
    html = client_as("viewer").get(f"/learning/suggestions/{preference.pk}/").content.decode()
    seen = re.findall(r'<dt>(first seen|last seen)</dt><dd><time datetime="([^"]+)"', html)
    assert [label for label, _ in seen] == ["first seen", "last seen"]
    first, last = (datetime.fromisoformat(moment) for _, moment in seen)
    assert first == five_hours_ago.replace(microsecond=0)
    assert last == two_hours_ago.replace(microsecond=0)
    assert first <= last
