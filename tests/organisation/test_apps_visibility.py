"""Learning, Quality Lab, alerts, contracts and fixes by team: team A owns "alpha", team B owns
"bravo", each with data in every app. A member of A sees nothing of bravo in any list, count,
export or partial; bravo's things by id or name are not found; actions on them are refused and
change nothing; a role held in a team acts in that team only. Admins see everything, and while
no team exists everything is as before."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from alerts import selectors as alert_selectors
from alerts import services as alert_services
from alerts.models import Channel, ChannelKind, Delivery, Rule
from contracts import selectors as contract_selectors
from contracts.scan import contracts_scan
from fixes import selectors as fix_selectors
from fixes.models import Fix, FixKind
from learning.models import Suggestion, SuggestionStatus
from organisation.models import Membership, OwnedCollection, Team
from organisation.roles import ROLES, ensure_role_group
from qualitylab import demo
from qualitylab import services as lab_services
from qualitylab.models import (
    CaseResult,
    CaseRun,
    Collection,
    CollectionVersion,
    QualityCase,
    RunStatus,
    Suite,
)
from tests.factories import failure_item, receipt_item
from tests.learning.conftest import attempt_item, derive_on_commit, ingest_attempts
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, GroupStatus, Runbook
from triage.services import api_key_create

__all__ = ["derive_on_commit", "ingest_attempts"]  # fixtures, used by name

pytestmark = pytest.mark.django_db

NAMES = ("alpha", "bravo")


@dataclass
class Side:
    """One collection's things in every app."""

    collection: Collection
    suggestion: Suggestion
    group: FailureGroup
    case: QualityCase
    run: CaseRun
    result: CaseResult
    rule: Rule
    fix: Fix


@dataclass
class World:
    alpha: Side
    bravo: Side
    desk_rule: Rule  # no collection: the whole desk's
    channel: Channel
    team_a: Team
    team_b: Team


def _quality_lab(collection: Collection) -> tuple[QualityCase, CaseRun, CaseResult]:
    version = CollectionVersion.objects.create(
        collection=collection, number=1, spec_source="{}", spec_sha256="0" * 64, status="ready"
    )
    case = QualityCase.objects.create(
        collection=collection,
        case_id=f"{collection.name}-case",
        mode="search",
        query=f"find {collection.name} orders",
        expected_target=f"{collection.name}Tool",
    )
    Suite.objects.create(collection=collection, name=f"{collection.name}-suite").cases.add(case)
    now = timezone.now()
    run = CaseRun.objects.create(
        collection=collection, version=version, status=RunStatus.DONE, total=1, done=1,
        failed=1, case_ids=[case.pk], started_at=now, finished_at=now,
    )  # fmt: skip
    result = CaseResult.objects.create(
        run=run, case=case, passed=False, failure_reason=f"{collection.name}_reason"
    )
    return case, run, result


@pytest.fixture
def world(ingest_attempts: Callable[..., Any]) -> World:
    for name in NAMES:
        ingest_attempts(
            attempt_item(collection_id=name, selected_target=f"{name}Tool",
                         plan_tools=[f"{name}Tool"], query=f"{name} orders"),
            attempt_item(collection_id=name, selected_target=f"{name}Tool",
                         plan_tools=[f"{name}Tool"], query=f"{name} orders"),
        )  # fmt: skip
    blocked = {"result": "blocked", "code": "", "execution_state": "not_started"}
    ago = (timezone.now() - timedelta(hours=3)).isoformat()
    batch_ingest(
        owner="runtime-a",
        items=[
            item
            for name in NAMES
            for item in (
                failure_item(collection=name, tool=f"{name}Tool", reason="http_5xx"),
                receipt_item(collection=name, tool=f"{name}Publish", idempotency_key=f"{name}-1",
                             started_at=ago, **blocked),
                receipt_item(collection=name, tool=f"{name}Publish", idempotency_key=f"{name}-1",
                             started_at=ago, **blocked),
            )
        ],
    )  # fmt: skip
    contracts_scan(now=timezone.now() + timedelta(minutes=5))
    contract_selectors.forget_memo()
    with override_settings(ALERTS_ALLOWED_HOSTS=["127.0.0.1"]):
        channel, _ = alert_services.channel_create(
            name="hook", kind=ChannelKind.WEBHOOK, target="http://127.0.0.1:9/hook"
        )
    runbook = Runbook.objects.create(subject="reason", reason="http_5xx", url="", note="retry")
    sides = {}
    for name in NAMES:
        collection = Collection.objects.get(name=name)
        case, run, result = _quality_lab(collection)
        group = FailureGroup.objects.get(collection=name)
        rule = alert_services.rule_create(
            name=f"{name}-new", kind="new_group", channels=[channel], collection=name
        )
        Delivery.objects.create(
            rule=rule, channel=channel, idempotency_key=f"{name}-key", subject=f"group:{group.pk}",
            summary=f"new group in {name}", status="sent",
        )  # fmt: skip
        fix = Fix.objects.create(
            group=group, collection=name, tool=f"{name}Tool", kind=FixKind.RUNBOOK_STEP,
            runbook=runbook, note=f"{name} fix", actor_label=f"{name}-person",
        )  # fmt: skip
        sides[name] = Side(
            collection=collection,
            suggestion=Suggestion.objects.filter(collection=collection).first(),  # type: ignore[arg-type]
            group=group, case=case, run=run, result=result, rule=rule, fix=fix,
        )  # fmt: skip
    desk_rule = alert_services.rule_create(
        name="desk-new", kind="new_group", channels=[channel], collection=""
    )
    team_a = Team.objects.create(name="team-a")
    team_b = Team.objects.create(name="team-b")
    OwnedCollection.objects.create(collection="alpha", team=team_a)
    OwnedCollection.objects.create(collection="bravo", team=team_b)
    for role in ROLES:
        ensure_role_group(role)
    return World(
        alpha=sides["alpha"], bravo=sides["bravo"], desk_rule=desk_rule, channel=channel,
        team_a=team_a, team_b=team_b,
    )  # fmt: skip


@pytest.fixture
def member(world: World) -> Callable[..., Client]:
    """A client signed in as a person holding roles in teams only: member(a="viewer")."""

    def make(**held: str) -> Client:
        person = get_user_model().objects.create_user("-".join(f"{t}{r}" for t, r in held.items()))
        for team, role in held.items():
            Membership.objects.create(
                team=world.team_a if team == "a" else world.team_b, person=person, role=role
            )
        client = Client()
        client.force_login(person)
        return client

    return make


def _admin() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("boss"))
    return client


# What each list, export, partial and API answer is, and a text only alpha's data shows.
LISTS = [
    ("/learning/", {}, "alphaTool"),
    ("/learning/", {"HX-Request": "true"}, "alphaTool"),
    ("/qualitylab/", {}, "alpha"),
    ("/qualitylab/alpha/", {}, "alpha-case"),
    ("/qualitylab/alpha/cases/export.json", {}, "alpha-case"),
    ("/alerts/", {}, "alpha-new"),
    ("/alerts/", {"HX-Request": "true"}, "new group in alpha"),
    ("/contracts/", {}, "alphaPublish"),
    ("/contracts/findings", {}, "alphaPublish"),
    ("/fixes/", {}, "alpha fix"),
    ("/api/v1/learning/suggestions?collection=alpha", {}, "alphaTool"),
    ("/api/v1/contracts", {}, "alphaPublish"),
    ("/api/v1/fixes", {}, "alpha fix"),
]


@pytest.mark.parametrize(("url", "headers", "alpha_text"), LISTS)
def test_a_member_of_a_sees_nothing_of_bravo(
    member: Callable[..., Client], url: str, headers: dict[str, str], alpha_text: str
) -> None:
    response = member(a="viewer").get(url, headers=headers)
    assert response.status_code == 200, response.content[:300]
    body = response.content.decode()
    assert alpha_text in body
    assert "bravo" not in body


CSRF = re.compile(r'(csrfmiddlewaretoken" value="|X-CSRFToken": ")[^"]+')


@pytest.mark.parametrize(
    ("url", "htmx"),
    [
        ("/learning/?collection={}", False),
        ("/learning/?collection={}", True),
        ("/contracts/?collection={}", False),
        ("/contracts/findings?collection={}", False),
        ("/fixes/?collection={}", False),
        ("/api/v1/learning/suggestions?collection={}", False),
        ("/api/v1/contracts?collection={}", False),
        ("/api/v1/fixes?collection={}", False),
        ("/alerts/?rule={}", False),
        ("/alerts/?rule={}", True),
    ],
)
def test_asking_for_bravo_answers_as_for_a_name_nobody_has(
    world: World, member: Callable[..., Client], url: str, htmx: bool
) -> None:
    viewer = member(a="viewer")
    asked, unknown = ("bravo", "charlie")
    if "rule=" in url:  # a rule's id, compared where the page echoes the address
        url = url.replace("rule={}", "{}")
        asked, unknown = (f"rule={world.bravo.rule.pk}", "rule=999999")
    headers = {"HX-Request": "true"} if htmx else {}
    answers = [viewer.get(url.format(name), headers=headers) for name in (asked, unknown)]
    assert answers[0].status_code == answers[1].status_code < 500
    bodies = [CSRF.sub(r"\1", answer.content.decode()) for answer in answers]
    assert bodies[0].replace(asked, unknown) == bodies[1]


def test_counts_and_rollups_are_of_the_teams_collections(
    world: World, member: Callable[..., Client]
) -> None:
    viewer = member(a="viewer")
    alpha_suggestions = Suggestion.objects.filter(collection__name="alpha").count()
    learning = viewer.get("/learning/").context
    assert sum(learning["counts"].values()) == alpha_suggestions == learning["page"].paginator.count
    assert [c.name for c in learning["collections"]] == ["alpha"]
    assert {review.suggestion.collection.name for review in learning["reviews"]} <= {"alpha"}
    assert [row.collection.name for row in viewer.get("/qualitylab/").context["rows"]] == ["alpha"]
    overview = viewer.get("/alerts/").context["overview"]
    assert [rule.name for rule in overview.rules] == ["alpha-new"]
    assert [channel.rule_count for channel in overview.channels] == [1]  # of 3 rules
    assert [d.summary for d in overview.log.deliveries] == ["new group in alpha"]
    contracts = viewer.get("/contracts/").context["overview"]
    assert {tool.collection for tool in contracts.tools} == {"alpha"}
    assert sorted(tool.rank for tool in contracts.tools) == list(range(1, len(contracts.tools) + 1))
    fixes = viewer.get("/fixes/").context["overview"]
    assert fixes.total == 1 and [t.total for t in fixes.by_runbook] == [1]
    assert [t.key for t in fixes.by_person] == ["alpha-person"]
    person = get_user_model().objects.get(username="aviewer")
    runbook = world.alpha.fix.runbook_id
    assert runbook is not None
    assert fix_selectors.runbook_tallies([runbook], user=person)[runbook].total == 1
    assert fix_selectors.runbook_tallies([runbook])[runbook].total == 2  # the CLI: every fix


def _details(world: World) -> list[str]:
    bravo = world.bravo
    return [
        f"/learning/suggestions/{bravo.suggestion.pk}/",
        "/qualitylab/bravo/",
        "/qualitylab/bravo/cases/export.json",
        "/qualitylab/bravo/settings",
        f"/qualitylab/bravo/cases/{bravo.case.case_id}/edit",
        "/qualitylab/bravo/suites/bravo-suite/edit",
        f"/qualitylab/runs/{bravo.run.pk}/",
        f"/qualitylab/results/{bravo.result.pk}/",
        f"/qualitylab/cases/new?group={bravo.group.pk}",
        f"/alerts/rules/{bravo.rule.pk}/edit",
        f"/alerts/rules/{world.desk_rule.pk}/edit",
    ]


def test_bravos_things_by_id_or_name_are_not_found(
    world: World, member: Callable[..., Client]
) -> None:
    operator = member(a="operator")
    for url in _details(world):
        assert operator.get(url).status_code == 404, url
        assert operator.get(url, headers={"HX-Request": "true"}).status_code == 404, url


def _actions(world: World) -> list[tuple[str, dict[str, Any]]]:
    bravo = world.bravo
    return [
        (f"/learning/suggestions/{bravo.suggestion.pk}/reject",
         {"reason": "operator_rejected", "note": "no"}),
        (f"/learning/suggestions/{bravo.suggestion.pk}/approve", {"reason": "yes"}),
        ("/learning/collections/bravo/policy", {"learning_mode": "promoted"}),
        ("/qualitylab/bravo/runs/start", {}),
        ("/qualitylab/bravo/rebuild", {}),
        (f"/qualitylab/bravo/cases/{bravo.case.case_id}/active", {}),
        ("/qualitylab/bravo/suites/new", {"name": "mine", "cases": [bravo.case.case_id]}),
        (f"/qualitylab/runs/{bravo.run.pk}/rerun-failed", {}),
        (f"/qualitylab/runs/{bravo.run.pk}/cancel", {}),
        (f"/alerts/rules/{bravo.rule.pk}/delete", {}),
        (f"/alerts/rules/{world.desk_rule.pk}/delete", {}),
        (f"/alerts/rules/{bravo.rule.pk}/edit",
         {"name": "mine", "kind": "new_group", "channels": [world.channel.pk],
          "min_interval_minutes": "1", "collection": "alpha"}),
        (f"/fixes/resolve/{bravo.group.pk}", {"action": "resolve"}),
        (f"/fixes/{bravo.fix.pk}/verify", {}),
    ]  # fmt: skip


def _state() -> list[Any]:
    return [
        sorted(Suggestion.objects.values_list("pk", "status")),
        sorted(Collection.objects.values_list("name", "learning_mode")),
        sorted(QualityCase.objects.values_list("pk", "active")),
        sorted(Suite.objects.values_list("name", flat=True)),
        sorted(CaseRun.objects.values_list("pk", "status", "cancel_requested")),
        sorted(CollectionVersion.objects.values_list("pk", flat=True)),
        sorted(Rule.objects.values_list("pk", "name", "collection")),
        sorted(FailureGroup.objects.values_list("pk", "status")),
        sorted(Fix.objects.values_list("pk", "verification")),
    ]


def test_actions_on_bravo_are_not_found_and_change_nothing(
    world: World, member: Callable[..., Client]
) -> None:
    before = _state()
    for held in ({"a": "operator"}, {"a": "reviewer"}, {"a": "admin"}):
        client = member(**held)
        for url, data in _actions(world):
            status = client.post(url, data).status_code
            # 403 only where the role lacks the permission whatever the collection.
            assert status in (403, 404), (held, url, status)
            if held == {"a": "admin"}:
                assert status == 404, (url, status)
    assert _state() == before


def test_a_role_in_a_team_acts_in_that_team_only(
    world: World, member: Callable[..., Client]
) -> None:
    both = member(a="operator", b="viewer")  # sees bravo, operates alpha only
    assert both.get("/qualitylab/bravo/").status_code == 200
    assert both.get("/qualitylab/bravo/").context["can_run"] is False
    assert both.get("/qualitylab/alpha/").context["can_run"] is True
    overview = both.get("/alerts/").context["overview"]
    assert {rule.name: rule.editable for rule in overview.rules} == {
        "alpha-new": True, "bravo-new": False,
    }  # fmt: skip
    before = _state()
    bravo = world.bravo
    for url, data in [
        (f"/qualitylab/bravo/cases/{bravo.case.case_id}/active", {}),
        ("/qualitylab/bravo/runs/start", {}),
        (f"/qualitylab/runs/{bravo.run.pk}/cancel", {}),
        ("/learning/collections/bravo/policy", {"learning_mode": "promoted"}),
        (f"/alerts/rules/{bravo.rule.pk}/delete", {}),
        (f"/fixes/resolve/{bravo.group.pk}", {"action": "resolve"}),
    ]:
        assert both.post(url, data).status_code == 403, url
    assert both.get(f"/alerts/rules/{bravo.rule.pk}/edit").status_code == 403
    assert _state() == before
    # The same actions on alpha go through.
    alpha = world.alpha
    assert both.post(f"/qualitylab/alpha/cases/{alpha.case.case_id}/active").status_code == 302
    assert not QualityCase.objects.get(pk=alpha.case.pk).active
    assert both.post(f"/alerts/rules/{alpha.rule.pk}/delete").status_code == 302
    assert not Rule.objects.filter(pk=alpha.rule.pk).exists()
    assert both.post(f"/fixes/resolve/{alpha.group.pk}", {"action": "resolve"}).status_code == 302
    assert FailureGroup.objects.get(pk=alpha.group.pk).status == GroupStatus.RESOLVED


def test_a_reviewer_reviews_their_teams_suggestions_only(
    world: World, member: Callable[..., Client]
) -> None:
    reviewer = member(a="reviewer", b="viewer")
    page = reviewer.get("/learning/").context["page"]
    assert {s.collection.name: s.reviewable for s in page.object_list} == {
        "alpha": True, "bravo": False,
    }  # fmt: skip
    reject = {"reason": "operator_rejected", "note": "seen wrong"}
    bravo = world.bravo.suggestion
    assert reviewer.post(f"/learning/suggestions/{bravo.pk}/reject", reject).status_code == 403
    assert Suggestion.objects.get(pk=bravo.pk).status == bravo.status
    alpha = world.alpha.suggestion
    assert reviewer.post(f"/learning/suggestions/{alpha.pk}/reject", reject).status_code == 302
    assert Suggestion.objects.get(pk=alpha.pk).status == SuggestionStatus.REJECTED


def test_forms_offer_and_take_only_the_teams_collections(
    world: World, member: Callable[..., Client]
) -> None:
    operator = member(a="operator")
    form = operator.get(f"/qualitylab/cases/new?group={world.alpha.group.pk}").context["form"]
    assert [c.name for c in form.fields["collection"].queryset] == ["alpha"]
    case = {"group": world.alpha.group.pk, "collection": "bravo", "case_id": "mine",
            "mode": "search", "query": "find orders", "expected_top_k": "5"}  # fmt: skip
    refused = operator.post("/qualitylab/cases/new", case)
    assert refused.status_code == 400 and "collection" in refused.context["form"].errors
    rule = {"name": "mine", "kind": "new_group", "channels": [world.channel.pk],
            "min_interval_minutes": "60"}  # fmt: skip
    for collection, error in [
        ("bravo", "Choose one of your team's collections."),
        ("charlie", "Choose one of your team's collections."),  # no team's: unseen
        ("", "A rule with no collection watches every team's collections"),
    ]:
        response = operator.post("/alerts/rules/new", {**rule, "collection": collection})
        assert response.status_code == 400, collection
        assert error in response.context["rule_form"].errors["collection"][0]
    assert operator.post("/alerts/rules/new", {**rule, "collection": "alpha"}).status_code == 302
    assert Rule.objects.get(name="mine").collection == "alpha"
    spec = {"spec_paste": demo.SPEC_PATH.read_text(encoding="utf-8")}
    for name in ("bravo", "bravo-next"):  # B's, and nobody's
        response = operator.post("/qualitylab/collections/new", {**spec, "name": name})
        assert response.status_code == 400
        assert "No team of yours owns this name" in response.context["form"].errors["name"][0]
    assert not Collection.objects.filter(name="bravo-next").exists()
    OwnedCollection.objects.create(collection="alpha-next", team=world.team_a)
    with mock.patch.object(lab_services, "_send"):
        response = operator.post("/qualitylab/collections/new", {**spec, "name": "alpha-next"})
    assert response.status_code == 302, response.content[-500:]
    assert Collection.objects.filter(name="alpha-next").exists()


def test_a_teams_alert_rule_matches_its_collection_only(world: World) -> None:
    rules = [world.alpha.rule, world.bravo.rule, world.desk_rule]
    fired = alert_selectors.ingest_matches(
        rules,
        new_group_ids=[world.alpha.group.pk, world.bravo.group.pk],
        regressed_group_ids=[],
        now=timezone.now(),
    )
    matched = {rule.name: sorted(m.group["collection"] for m in matches) for rule, matches in fired}
    assert matched == {
        "alpha-new": ["alpha"], "bravo-new": ["bravo"], "desk-new": ["alpha", "bravo"],
    }  # fmt: skip


def test_rules_without_a_collection_are_seen_by_admins_and_the_unowned_collections_team(
    world: World, member: Callable[..., Client]
) -> None:
    names = lambda client: [r.name for r in client.get("/alerts/").context["overview"].rules]  # noqa: E731
    assert names(_admin()) == ["alpha-new", "bravo-new", "desk-new"]
    viewer = member(a="operator")
    assert names(viewer) == ["alpha-new"]
    with override_settings(TRIAGE_UNOWNED_COLLECTIONS_TEAM="team-a"):
        assert names(viewer) == ["alpha-new", "desk-new"]
        assert viewer.get(f"/alerts/rules/{world.desk_rule.pk}/edit").status_code == 200


def test_channels_are_shared_and_managed_by_roles_outside_teams(
    world: World, member: Callable[..., Client], client_as: Callable[..., Client]
) -> None:
    team_operator = member(a="operator")
    page = team_operator.get("/alerts/")
    assert [c.name for c in page.context["overview"].channels] == ["hook"]
    assert page.context["can_edit_webhooks"] is False
    new = {"name": "mine", "target": "http://127.0.0.1:9/mine"}
    assert team_operator.post("/alerts/channels/new", new).status_code == 403
    assert team_operator.post(f"/alerts/channels/{world.channel.pk}/delete").status_code == 403
    assert Channel.objects.count() == 1
    with override_settings(ALERTS_ALLOWED_HOSTS=["127.0.0.1"]):
        assert client_as("operator").post("/alerts/channels/new", new).status_code == 200
    assert Channel.objects.count() == 2


def test_admins_see_every_team(world: World) -> None:
    admin = _admin()
    assert [r.collection.name for r in admin.get("/qualitylab/").context["rows"]] == list(NAMES)
    for url in ("/learning/", "/alerts/", "/contracts/", "/fixes/"):
        body = admin.get(url).content.decode()
        assert "alpha" in body and "bravo" in body, url
    for url in _details(world):
        assert admin.get(url).status_code == 200, url


def test_without_any_team_everything_is_as_before(
    world: World, client_as: Callable[..., Client]
) -> None:
    OwnedCollection.objects.all().delete()
    Team.objects.all().delete()
    viewer = client_as("viewer")
    for url in ("/learning/", "/qualitylab/", "/alerts/", "/contracts/", "/fixes/",
                "/api/v1/fixes", "/api/v1/contracts"):  # fmt: skip
        body = viewer.get(url).content.decode()
        assert "alpha" in body and "bravo" in body, url
    assert viewer.get("/qualitylab/bravo/").status_code == 200
    assert viewer.get(f"/learning/suggestions/{world.bravo.suggestion.pk}/").status_code == 200
    operator = client_as("operator")
    response = operator.post(f"/qualitylab/bravo/cases/{world.bravo.case.case_id}/active")
    assert response.status_code == 302
    assert not QualityCase.objects.get(pk=world.bravo.case.pk).active


def test_a_key_scoped_to_alpha_reads_alpha_only(world: World) -> None:
    _, secret = api_key_create(name="alpha-reader", scopes=["read"], collections=["alpha"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    fixes = client.get("/api/v1/fixes").json()
    assert [fix["collection"] for fix in fixes["fixes"]] == ["alpha"]
    contracts = client.get("/api/v1/contracts").json()
    assert {tool["collection"] for tool in contracts["tools"]} == {"alpha"}
    assert client.get("/api/v1/learning/suggestions?collection=alpha").json()["registered"]
    refused = client.get("/api/v1/learning/suggestions?collection=bravo")
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "collection_not_allowed"
    _, team_secret = api_key_create(name="b-reader", scopes=["read"], team=world.team_b)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {team_secret}")
    assert [fix["collection"] for fix in client.get("/api/v1/fixes").json()["fixes"]] == ["bravo"]


def test_a_members_pages_cost_what_they_did(
    member: Callable[..., Client], django_assert_max_num_queries: Any
) -> None:
    viewer = member(a="viewer")
    for url, budget in (("/alerts/", 12), ("/contracts/", 12), ("/fixes/", 12)):
        with django_assert_max_num_queries(budget):
            assert viewer.get(url).status_code == 200, url
