"""The triage app by team: every triage page, htmx partial, API answer, count and action of a
member of team A, over a desk where team A owns "alpha", team B owns "bravo" and nobody owns
"charlie". Nothing of bravo shows (lists, counts, search, partials); a bravo thing asked for
by id is a 404, and an action on it changes nothing; a team role allows what it allows on
its team's collections only; admins see everything, the unowned collection's team sees
charlie, and with no team at all everyone sees everything, in as many queries."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from organisation.models import Membership, OwnedCollection, Team
from organisation.roles import ensure_role_group
from tests.factories import ToolPolicyFactory, failure_item, receipt_item
from triage.intake.ingest import batch_ingest
from triage.models import (
    ApiKey,
    BulkAction,
    FailureGroup,
    GroupStatus,
    IngestBatch,
    Receipt,
    Reconciliation,
    ToolPolicy,
)
from triage.services import api_key_create, groups_bulk_act

pytestmark = pytest.mark.django_db

ALPHA, BRAVO, CHARLIE = "alpha", "bravo", "charlie"
COLLECTIONS = (ALPHA, BRAVO, CHARLIE)


def recent(minutes: int = 5) -> str:
    return (timezone.now() - timedelta(minutes=minutes)).isoformat()


def items_of(collection: str) -> list[dict[str, Any]]:
    """One collection's traffic; every name in it carries the collection's name, so a page
    that shows any of it shows that name."""
    return [
        failure_item(
            f"{collection}-f1",
            collection=collection,
            tool=f"{collection}Tool",
            occurred_at=recent(),
            idempotency_key="shared-key",
        ),
        failure_item(
            f"{collection}-f2",
            collection=collection,
            tool=f"{collection}Tool",
            reason=f"{collection}_unmapped",
            occurred_at=recent(),
        ),
        # Waiting for reconciliation, with the key alpha's failure carries too.
        receipt_item(
            f"{collection}-r1",
            collection=collection,
            tool=f"{collection}Tool",
            tool_run_id=f"tr-{collection}-uncertain",
            result="uncertain",
            execution_state="started_unknown",
            idempotency_key="shared-key",
        ),
        # Blocked by policy (the factory's default receipt).
        receipt_item(
            f"{collection}-r2",
            collection=collection,
            tool=f"{collection}Tool",
            tool_run_id=f"tr-{collection}-blocked",
        ),
    ]


def person(name: str, *, global_role: str = "", **teams: str) -> Any:
    user = get_user_model().objects.create(username=name)
    if global_role:
        user.groups.add(ensure_role_group(global_role))
    for team_name, role in teams.items():
        team, _ = Team.objects.get_or_create(name=team_name)
        Membership.objects.create(team=team, person=user, role=role)
    return user


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def desk() -> SimpleNamespace:
    team_a = Team.objects.create(name="A")
    team_b = Team.objects.create(name="B")
    OwnedCollection.objects.create(collection=ALPHA, team=team_a)
    OwnedCollection.objects.create(collection=BRAVO, team=team_b)
    batch_ingest(owner="runtime", items=[item for name in COLLECTIONS for item in items_of(name)])
    key_a, _ = api_key_create(name="alpha-runtime", scopes=["ingest", "read"], team=team_a)
    key_b, _ = api_key_create(name="bravo-runtime", scopes=["ingest", "read"], team=team_b)
    for key, collection in ((key_a, ALPHA), (key_b, BRAVO)):
        batch_ingest(
            owner=key.name,
            api_key=key,
            items=[
                failure_item(
                    f"{collection}-keyed", collection=collection, tool=f"{collection}KeyedTool"
                )
            ],
        )
    for collection in COLLECTIONS:
        ToolPolicyFactory(collection=collection, tool=f"{collection}Policy")
    ToolPolicyFactory(collection="", tool="everyPolicy")
    return SimpleNamespace(
        team_a=team_a,
        team_b=team_b,
        group={
            name: FailureGroup.objects.get(collection=name, reason="http_5xx", tool=f"{name}Tool")
            for name in COLLECTIONS
        },
        receipt={
            name: Receipt.objects.get(tool_run_id=f"tr-{name}-uncertain") for name in COLLECTIONS
        },
        batch={
            name: IngestBatch.objects.get(owner=f"{name}-runtime").pk for name in (ALPHA, BRAVO)
        },
        runtime_batch=IngestBatch.objects.get(owner="runtime").pk,
        policy={name: ToolPolicy.objects.get(tool=f"{name}Policy") for name in COLLECTIONS},
        every_policy=ToolPolicy.objects.get(tool="everyPolicy"),
        viewer=person("viewer-a", A="viewer"),
        operator=person("operator-a", A="operator"),
        # Reads alpha, acts on bravo only.
        mixed=person("mixed", A="viewer", B="operator"),
        admin=person("admin", global_role="admin"),
    )


def shows_alpha_only(html: str) -> None:
    assert ALPHA in html
    assert BRAVO not in html and CHARLIE not in html


# --- the triage page and its partials -----------------------------------------------------

TRIAGE_VIEWS = [
    "/",
    "/?window=7d&status=all&source=any",
    "/?view=groups&window=7d&status=all",
    "/?q=Tool&window=7d",
    "/?sort=trend&window=24h",
]


@pytest.mark.parametrize("url", TRIAGE_VIEWS)
@pytest.mark.parametrize("partial", [False, True])
def test_the_triage_page_shows_and_counts_the_teams_collections_only(
    desk: SimpleNamespace, url: str, partial: bool
) -> None:
    headers = {"HX-Request": "true"} if partial else {}
    response = signed_in(desk.viewer).get(url, headers=headers)
    assert response.status_code == 200
    shows_alpha_only(response.content.decode())
    overview = response.context["overview"]
    seen = FailureGroup.objects.filter(pk__in=overview.group_ids)
    assert set(seen.values_list("collection", flat=True)) == {ALPHA}
    # Alpha's three records (two groups of its runtime, one of its key), not bravo's.
    assert overview.total == 3
    assert overview.uncertain_waiting == 1  # alpha's run, not bravo's or charlie's
    assert all(set(row.source_mix) <= {"runtime"} for s in overview.sections for row in s.rows)
    # Every record is recent, so each line's bars hold its records: alpha's, though bravo and
    # charlie fail for the same reason (their buckets are left out of the reason's).
    assert all(sum(row.spark) == row.count for s in overview.sections for row in s.rows)


def test_filtering_the_triage_page_by_another_teams_collection_shows_nothing(
    desk: SimpleNamespace,
) -> None:
    response = signed_in(desk.viewer).get(f"/?collection={BRAVO}&window=7d&status=all")
    assert response.status_code == 200
    overview = response.context["overview"]
    assert overview.group_ids == [] and overview.total == 0
    assert "bravoTool" not in response.content.decode()


def test_an_admin_sees_every_collection(desk: SimpleNamespace) -> None:
    client = signed_in(desk.admin)
    overview = client.get("/?window=7d").context["overview"]
    seen = FailureGroup.objects.filter(pk__in=overview.group_ids)
    assert set(seen.values_list("collection", flat=True)) == set(COLLECTIONS)
    assert overview.total == 8 and overview.uncertain_waiting == 3
    assert client.get(f"/triage/groups/{desk.group[BRAVO].pk}/").status_code == 200
    receipts = client.get("/receipts/").content.decode()
    assert all(f"tr-{name}-uncertain" in receipts for name in COLLECTIONS)


# --- the group page -----------------------------------------------------------------------


@pytest.mark.parametrize("partial", [False, True])
def test_another_teams_group_is_not_found(desk: SimpleNamespace, partial: bool) -> None:
    headers = {"HX-Request": "true"} if partial else {}
    client = signed_in(desk.viewer)
    for name in (BRAVO, CHARLIE):
        response = client.get(f"/triage/groups/{desk.group[name].pk}/", headers=headers)
        assert response.status_code == 404
    missing = client.get("/triage/groups/999999/", headers=headers)
    assert missing.status_code == 404  # the same answer as for a group that does not exist


def test_the_group_page_lists_no_sibling_or_receipt_of_another_team(
    desk: SimpleNamespace,
) -> None:
    response = signed_in(desk.viewer).get(f"/triage/groups/{desk.group[ALPHA].pk}/")
    assert response.status_code == 200
    shows_alpha_only(response.content.decode())
    # Bravo's and charlie's http_5xx groups are other teams': alpha's own keyed one is left.
    assert [group.tool for group in response.context["siblings"]] == ["alphaKeyedTool"]
    # Bravo's run shares alpha's idempotency key: it is still bravo's.
    receipts = response.context["receipts"]
    assert {receipt.collection for receipt in receipts} == {ALPHA}
    assert not response.context["can_act"]  # a viewer in A


# --- actions ------------------------------------------------------------------------------


def test_an_operator_of_a_acts_on_alphas_groups(desk: SimpleNamespace) -> None:
    client = signed_in(desk.operator)
    group = desk.group[ALPHA]
    assert client.get(f"/triage/groups/{group.pk}/").context["can_act"]
    response = client.post(f"/triage/groups/{group.pk}/act", {"action": "acknowledge"})
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.status == GroupStatus.ACKNOWLEDGED


@pytest.mark.parametrize("name", [BRAVO, CHARLIE])
def test_actions_on_another_teams_group_are_not_found_and_change_nothing(
    desk: SimpleNamespace, name: str
) -> None:
    client = signed_in(desk.operator)
    group = desk.group[name]
    undo = BulkAction.objects.create(
        action="acknowledge", group_count=1, previous={str(group.pk): {}}
    )
    for url, data in (
        (f"/triage/groups/{group.pk}/act", {"action": "resolve"}),
        (f"/triage/groups/{group.pk}/runbook", {"subject": "reason", "url": "https://x.test"}),
        (f"/triage/groups/{group.pk}/undo/{undo.pk}", {}),
        (f"/triage/bulk/{undo.pk}/undo", {}),
    ):
        assert client.post(url, data).status_code == 404, url
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN
    assert not group.events.exists()


def test_a_viewer_of_a_cannot_act_on_alpha(desk: SimpleNamespace) -> None:
    group = desk.group[ALPHA]
    response = signed_in(desk.viewer).post(f"/triage/groups/{group.pk}/act", {"action": "resolve"})
    assert response.status_code == 403
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN


def test_an_operator_elsewhere_cannot_act_where_their_role_is_viewer(
    desk: SimpleNamespace,
) -> None:
    """The mixed person operates in B (so the act permission is theirs) but only views A."""
    client = signed_in(desk.mixed)
    group = desk.group[ALPHA]
    assert client.get(f"/triage/groups/{group.pk}/").context["can_act"] is False
    assert client.post(f"/triage/groups/{group.pk}/act", {"action": "resolve"}).status_code == 403
    query = f"collection={ALPHA}&window=24h"
    bulk = client.post("/triage/bulk", {"action": "resolve", "confirm_count": "3", "query": query})
    assert bulk.status_code == 403
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN
    bravo = desk.group[BRAVO]
    assert client.post(f"/triage/groups/{bravo.pk}/act", {"action": "resolve"}).status_code == 302
    bravo.refresh_from_db()
    assert bravo.status == GroupStatus.RESOLVED


def test_a_group_is_assigned_only_to_someone_who_sees_its_collection(
    desk: SimpleNamespace,
) -> None:
    client = signed_in(desk.operator)
    group = desk.group[ALPHA]
    outsider = person("bravo-only", B="operator")
    refused = client.post(
        f"/triage/groups/{group.pk}/act", {"action": "assign", "assignee": outsider.pk}
    )
    assert refused.status_code == 302
    group.refresh_from_db()
    assert group.assignee_id is None
    client.post(f"/triage/groups/{group.pk}/act", {"action": "assign", "assignee": desk.viewer.pk})
    group.refresh_from_db()
    assert group.assignee_id == desk.viewer.pk


def test_a_bulk_action_acts_on_the_teams_groups_only(desk: SimpleNamespace) -> None:
    client = signed_in(desk.operator)
    query = "window=24h&status=all&source=any"
    shown = client.get(f"/?{query}").context["overview"].group_ids
    assert len(shown) == 3  # alpha's runtime groups and its key's
    response = client.post(
        "/triage/bulk", {"action": "acknowledge", "confirm_count": "3", "query": query}
    )
    assert response.status_code == 302
    acknowledged = FailureGroup.objects.filter(status=GroupStatus.ACKNOWLEDGED)
    assert set(acknowledged.values_list("collection", flat=True)) == {ALPHA}
    assert sorted(acknowledged.values_list("pk", flat=True)) == sorted(shown)


def test_a_bulk_action_naming_another_teams_group_changes_nothing(
    desk: SimpleNamespace,
) -> None:
    client = signed_in(desk.operator)
    bravo = desk.group[BRAVO]
    client.post(
        "/triage/bulk",
        {
            "action": "resolve",
            "confirm_count": "1",
            "query": "window=24h&status=all&source=any",
            "groups": [str(bravo.pk)],
        },
    )
    bravo.refresh_from_db()
    assert bravo.status == GroupStatus.OPEN
    assert not FailureGroup.objects.filter(status=GroupStatus.RESOLVED).exists()


def test_undoing_an_admins_bulk_that_touched_bravo_is_not_found(desk: SimpleNamespace) -> None:
    groups = [desk.group[ALPHA], desk.group[BRAVO]]
    bulk = groups_bulk_act(groups=groups, actor=desk.admin, action="resolve", query="")
    client = signed_in(desk.operator)
    assert client.post(f"/triage/bulk/{bulk.pk}/undo").status_code == 404
    alpha = desk.group[ALPHA]
    undo_url = f"/triage/groups/{alpha.pk}/undo/{bulk.pk}"
    assert client.post(undo_url).status_code == 404  # it would undo bravo's too
    assert FailureGroup.objects.filter(status=GroupStatus.RESOLVED).count() == 2
    assert signed_in(desk.admin).post(f"/triage/bulk/{bulk.pk}/undo").status_code == 302
    assert not FailureGroup.objects.filter(status=GroupStatus.RESOLVED).exists()


# --- receipts -----------------------------------------------------------------------------


@pytest.mark.parametrize("partial", [False, True])
def test_the_receipts_page_shows_the_teams_runs_only(desk: SimpleNamespace, partial: bool) -> None:
    headers = {"HX-Request": "true"} if partial else {}
    response = signed_in(desk.viewer).get("/receipts/", headers=headers)
    assert response.status_code == 200
    html = response.content.decode()
    assert "tr-alpha-uncertain" in html
    assert "tr-bravo" not in html and "tr-charlie" not in html
    if not partial:
        overview = response.context["overview"]
        assert overview.queue.total == 1
        assert "tr-alpha-blocked" in html
        assert {r.collection for r in overview.policy_blocks.receipts} == {ALPHA}


def test_reconciling_another_teams_run_is_not_found(desk: SimpleNamespace) -> None:
    data = {"finding": "applied", "note": "seen", "step": "confirm"}
    client = signed_in(desk.operator)
    for name in (BRAVO, CHARLIE):
        response = client.post(f"/receipts/{desk.receipt[name].pk}/reconcile", data)
        assert response.status_code == 404
    assert not Reconciliation.objects.exists()
    # A viewer of A (operator of B) may not reconcile alpha's run.
    mixed = signed_in(desk.mixed).post(f"/receipts/{desk.receipt[ALPHA].pk}/reconcile", data)
    assert mixed.status_code == 403
    assert not Reconciliation.objects.exists()
    done = client.post(f"/receipts/{desk.receipt[ALPHA].pk}/reconcile", data)
    assert done.status_code == 302
    assert Reconciliation.objects.get().receipt == desk.receipt[ALPHA]


# --- ingestion and tool policies ----------------------------------------------------------


def test_the_ingestion_page_counts_the_teams_batches_and_reasons_only(
    desk: SimpleNamespace,
) -> None:
    response = signed_in(desk.viewer).get("/ingestion/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "alpha_unmapped" in html and "alpha-runtime" in html
    assert "bravo" not in html and "charlie" not in html
    assert [batch.pk for batch in response.context["ledger"].batches] == [desk.batch[ALPHA]]
    assert response.context["totals"].batches == 1
    assert response.context["totals"].items == 1
    # Desk-wide figures that carry no collection are admins'.
    assert response.context["rejected_codes"] == []
    assert [key.name for key in response.context["api_keys"]] == ["alpha-runtime"]
    admin = signed_in(desk.admin).get("/ingestion/")
    assert admin.context["totals"].batches == 3
    assert len(admin.context["api_keys"]) == 2


@pytest.mark.parametrize("partial", [False, True])
def test_another_teams_batch_is_shown_as_no_batch(desk: SimpleNamespace, partial: bool) -> None:
    headers = {"HX-Request": "true"} if partial else {}
    client = signed_in(desk.viewer)
    for batch in (desk.batch[BRAVO], desk.runtime_batch):
        response = client.get(f"/ingestion/?batch={batch}", headers=headers)
        assert response.context["detail"] is None
        assert "bravo" not in response.content.decode()
    own = client.get(f"/ingestion/?batch={desk.batch[ALPHA]}", headers=headers)
    assert own.context["detail"].batch.pk == desk.batch[ALPHA]


@pytest.mark.parametrize("partial", [False, True])
def test_the_policies_page_lists_the_teams_and_everyones_policies(
    desk: SimpleNamespace, partial: bool
) -> None:
    headers = {"HX-Request": "true"} if partial else {}
    response = signed_in(desk.viewer).get("/policies/?q=Policy", headers=headers)
    assert response.status_code == 200
    tools = {policy.tool for policy in response.context["policies"]}
    assert tools == {"alphaPolicy", "everyPolicy"}
    assert "bravo" not in response.content.decode()


def test_tool_policies_are_edited_where_the_team_role_allows(desk: SimpleNamespace) -> None:
    client = signed_in(desk.operator)
    assert client.get(f"/policies/{desk.policy[BRAVO].pk}/edit").status_code == 404
    assert client.get(f"/policies/{desk.policy[CHARLIE].pk}/edit").status_code == 404
    # The policies for every collection apply to B's too: not a team role's to change.
    assert client.get(f"/policies/{desk.every_policy.pk}/edit").status_code == 403
    alpha = desk.policy[ALPHA]
    assert client.get(f"/policies/{alpha.pk}/edit").status_code == 200
    assert signed_in(desk.mixed).get(f"/policies/{alpha.pk}/edit").status_code == 403
    data = _policy_post(alpha, collection=BRAVO)
    moved = client.post(f"/policies/{alpha.pk}/edit", data)
    assert moved.status_code == 400  # not into bravo
    alpha.refresh_from_db()
    assert alpha.collection == ALPHA
    kept = client.post(f"/policies/{alpha.pk}/edit", _policy_post(alpha, side_effect="read"))
    assert kept.status_code == 302


def _policy_post(policy: ToolPolicy, **changes: Any) -> dict[str, Any]:
    from triage.forms import ToolPolicyForm

    form = ToolPolicyForm(instance=policy)
    data = {name: form[name].value() for name in form.fields}
    data.update(changes)
    return {key: value for key, value in data.items() if value not in (False, None)}


# --- the read API -------------------------------------------------------------------------


def _reader(**scope: Any) -> APIClient:
    """An API client with a new read key of this scope (collections, team, or none)."""
    _, secret = api_key_create(name=f"reader-{ApiKey.objects.count()}", scopes=["read"], **scope)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def _collections(response: Any) -> set[str]:
    assert response.status_code == 200, response.content
    return {row["collection"] for row in response.json()["results"]}


@pytest.mark.parametrize("endpoint", ["/api/v1/failures", "/api/v1/groups"])
def test_the_read_api_answers_a_person_with_their_teams_collections(
    desk: SimpleNamespace, endpoint: str
) -> None:
    client = signed_in(desk.viewer)
    assert _collections(client.get(endpoint)) == {ALPHA}
    assert _collections(client.get(f"{endpoint}?collection={BRAVO}")) == set()
    assert _collections(signed_in(desk.admin).get(endpoint)) == set(COLLECTIONS)


@pytest.mark.parametrize("endpoint", ["/api/v1/failures", "/api/v1/groups"])
def test_a_read_key_reads_only_its_collections(desk: SimpleNamespace, endpoint: str) -> None:
    assert _collections(_reader(collections=[ALPHA]).get(endpoint)) == {ALPHA}
    assert _collections(_reader(team=desk.team_b).get(endpoint)) == {BRAVO}
    assert _collections(_reader().get(endpoint)) == set(COLLECTIONS)
    scoped = _reader(collections=[ALPHA])
    assert _collections(scoped.get(f"{endpoint}?collection={BRAVO}")) == set()


def test_a_key_reads_the_tool_policies_of_its_collections_only(desk: SimpleNamespace) -> None:
    client = _reader(collections=[ALPHA])
    assert client.get(f"/api/v1/tool-policies?collection={ALPHA}").status_code == 200
    for name in (BRAVO, "nosuchcollection"):
        refused = client.get(f"/api/v1/tool-policies?collection={name}")
        assert refused.status_code == 404  # as for no such collection: names do not leak
        assert refused.json()["error"]["code"] == "collection_not_allowed"
    person_answer = signed_in(desk.viewer).get(f"/api/v1/tool-policies?collection={BRAVO}")
    assert person_answer.status_code == 404


# --- collections nobody owns, and a desk without teams ------------------------------------


def test_an_unowned_collection_is_seen_by_admins_and_the_named_team_only(
    desk: SimpleNamespace,
) -> None:
    member = person("unowned-member", U="viewer")
    charlie = desk.group[CHARLIE]
    with override_settings(TRIAGE_UNOWNED_COLLECTIONS_TEAM="U"):
        client = signed_in(member)
        seen = client.get("/?window=7d").context["overview"].group_ids
        shown = FailureGroup.objects.filter(pk__in=seen).values_list("collection", flat=True)
        assert set(shown) == {CHARLIE}
        assert client.get(f"/triage/groups/{charlie.pk}/").status_code == 200
        assert client.get(f"/triage/groups/{desk.group[ALPHA].pk}/").status_code == 404
        assert signed_in(desk.viewer).get(f"/triage/groups/{charlie.pk}/").status_code == 404
        assert signed_in(desk.admin).get(f"/triage/groups/{charlie.pk}/").status_code == 200
    assert signed_in(member).get(f"/triage/groups/{charlie.pk}/").status_code == 404


def test_without_any_team_everyone_sees_everything(db: Any) -> None:
    batch_ingest(owner="runtime", items=[item for name in COLLECTIONS for item in items_of(name)])
    client = signed_in(person("plain-viewer", global_role="viewer"))
    overview = client.get("/?window=7d").context["overview"]
    assert overview.total == 6 and overview.uncertain_waiting == 3
    bravo = FailureGroup.objects.get(collection=BRAVO, reason="http_5xx")
    assert client.get(f"/triage/groups/{bravo.pk}/").status_code == 200
    assert BRAVO in client.get("/receipts/").content.decode()
    assert _collections(client.get("/api/v1/groups")) == set(COLLECTIONS)
    operator = signed_in(person("plain-operator", global_role="operator"))
    assert operator.post(f"/triage/groups/{bravo.pk}/act", {"action": "resolve"}).status_code == 302


def test_the_triage_page_costs_the_same_queries_with_teams_on_and_off(db: Any) -> None:
    batch_ingest(owner="runtime", items=[item for name in COLLECTIONS for item in items_of(name)])
    viewer = person("counted", global_role="viewer", A="viewer")
    OwnedCollection.objects.create(collection=ALPHA, team=Team.objects.get(name="A"))
    OwnedCollection.objects.create(collection=BRAVO, team=Team.objects.create(name="B"))
    client = signed_in(viewer)

    def page_queries() -> tuple[int, Any]:
        client.get("/?window=7d")  # warm: the session and the first screen's reads settle
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/?window=7d")
        return len(queries), response.context["overview"]

    with_teams, filtered = page_queries()
    Team.objects.all().delete()
    without_teams, everything = page_queries()
    assert filtered.total == 2 and everything.total == 6  # the filter was on, then off
    assert with_teams == without_teams


def test_the_team_filter_is_part_of_the_window_statement(desk: SimpleNamespace) -> None:
    """The groups and their window counts are one statement: the team filter joins it."""
    client = signed_in(desk.viewer)
    with CaptureQueriesContext(connection) as queries:
        client.get("/?window=7d")
    window_statements = [q["sql"] for q in queries if "counted.current" in q["sql"]]
    assert len(window_statements) == 1
    assert "organisation_ownedcollection" in window_statements[0]


def test_the_group_page_costs_the_same_queries_for_a_team_role_as_for_a_desk_role(
    db: Any,
) -> None:
    """What a team role allows on the group is read with the group (team_role_column)."""
    batch_ingest(owner="runtime", items=items_of(ALPHA))
    group = FailureGroup.objects.filter(collection=ALPHA).first()
    assert group is not None

    def page_queries(client: Client) -> tuple[int, bool]:
        client.get(f"/triage/groups/{group.pk}/")
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/triage/groups/{group.pk}/")
        return len(queries), response.context["can_act"]

    desk_operator = signed_in(person("desk-op", global_role="operator"))
    without_teams = page_queries(desk_operator)
    team_operator = person("team-op", A="operator")
    OwnedCollection.objects.create(collection=ALPHA, team=Team.objects.get(name="A"))
    assert page_queries(signed_in(team_operator)) == without_teams == (without_teams[0], True)
    team_viewer = person("team-viewer", A="viewer")
    assert page_queries(signed_in(team_viewer))[1] is False


def test_the_header_names_a_role_held_in_teams_only_as_such(db: Any) -> None:
    """A lead who is an operator of their team only reads "operator in teams", not "no
    role"; a role held outside teams is named plainly, and never twice."""
    lead = signed_in(person("lead", A="operator"))
    header = lead.get("/").content.decode().split('<div class="who">')[1].split("</div>")[0]
    assert "operator in teams" in header and "no role" not in header
    both = signed_in(person("both", global_role="viewer", A="viewer", B="operator"))
    header = both.get("/").content.decode().split('<div class="who">')[1].split("</div>")[0]
    assert '<span class="muted">viewer, operator in teams</span>' in header
    assert "viewer in teams" not in header
