"""The admins' teams page: teams, members with a role (local ones only), owned collections;
every change audited."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from organisation.models import ActivityEntry, Membership, MembershipSource, OwnedCollection, Team
from triage.services import api_key_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client_as: Any) -> Client:
    client = client_as("admin")
    ActivityEntry.objects.all().delete()  # the role the fixture granted
    return client


def actions() -> list[str]:
    return list(ActivityEntry.objects.order_by("id").values_list("action", flat=True))


def test_only_admins_reach_the_teams_pages(client_as: Any) -> None:
    team = Team.objects.create(name="checkout")
    for url in ("/organisation/teams/", f"/organisation/teams/{team.pk}/"):
        assert client_as("admin").get(url).status_code == 200
        for role in ("operator", "viewer", "reviewer", ""):
            assert client_as(role).get(url).status_code == 403
    assert client_as("operator").post("/organisation/teams/new", {"name": "x"}).status_code == 403
    assert not Team.objects.filter(name="x").exists()


def test_a_team_member_who_is_admin_in_that_team_does_not_manage_teams(client_as: Any) -> None:
    team = Team.objects.create(name="checkout")
    user = get_user_model().objects.create_user("team-admin")
    Membership.objects.create(team=team, person=user, role="admin")
    client = Client()
    client.force_login(user)
    assert client.get("/organisation/teams/").status_code == 403


def test_the_nav_links_to_teams_for_admins_only(client_as: Any) -> None:
    assert 'href="/organisation/teams/"' in client_as("admin").get("/").content.decode()
    assert 'href="/organisation/teams/"' not in client_as("operator").get("/").content.decode()


def test_create_rename_and_delete_a_team(admin: Client) -> None:
    response = admin.post("/organisation/teams/new", {"name": "checkout"})
    team = Team.objects.get(name="checkout")
    assert response.status_code == 302 and response["Location"] == f"/organisation/teams/{team.pk}/"
    assert admin.post("/organisation/teams/new", {"name": "checkout"}).status_code == 400
    admin.post(f"/organisation/teams/{team.pk}/rename", {"name": "payments"})
    team.refresh_from_db()
    assert team.name == "payments"
    assert admin.post(f"/organisation/teams/{team.pk}/delete").status_code == 302
    assert not Team.objects.exists()
    assert actions() == ["team.created", "team.renamed", "team.deleted"]
    renamed = ActivityEntry.objects.get(action="team.renamed")
    assert renamed.actor_name == "admin-user"
    assert renamed.detail == {"before": "checkout", "after": "payments"}


def test_a_team_a_key_is_scoped_to_is_not_deleted_and_the_page_says_why(admin: Client) -> None:
    team = Team.objects.create(name="checkout")
    api_key_create(name="checkout-runtime", scopes=["ingest"], team=team)
    response = admin.post(f"/organisation/teams/{team.pk}/delete")
    assert response.status_code == 400
    assert "checkout-runtime" in response.content.decode()
    assert Team.objects.filter(pk=team.pk).exists()
    assert "team.deleted" not in actions()


def test_members_are_added_changed_and_removed(admin: Client) -> None:
    team = Team.objects.create(name="checkout")
    kim = get_user_model().objects.create_user("kim")
    url = f"/organisation/teams/{team.pk}/members"
    assert admin.post(url, {"username": "kim", "role": "viewer"}).status_code == 302
    assert admin.post(url, {"username": "kim", "role": "operator"}).status_code == 302
    membership = Membership.objects.get(team=team, person=kim)
    assert membership.role == "operator"
    page = admin.get(f"/organisation/teams/{team.pk}/").content.decode()
    assert "kim" in page and "local" in page
    remove = f"/organisation/teams/{team.pk}/members/{membership.pk}/remove"
    assert admin.post(remove).status_code == 302
    assert not Membership.objects.exists()
    assert actions() == ["team.member_added", "team.member_changed", "team.member_removed"]


def test_only_people_who_exist_are_added(admin: Client) -> None:
    team = Team.objects.create(name="checkout")
    response = admin.post(
        f"/organisation/teams/{team.pk}/members", {"username": "ghost", "role": "viewer"}
    )
    assert response.status_code == 400
    assert "Nobody is called ghost" in response.content.decode()
    assert not Membership.objects.exists() and actions() == []


def test_provider_memberships_are_shown_and_not_editable(admin: Client) -> None:
    team = Team.objects.create(name="checkout")
    kim = get_user_model().objects.create_user("kim")
    membership = Membership.objects.create(
        team=team, person=kim, role="viewer", source=MembershipSource.PROVIDER
    )
    page = admin.get(f"/organisation/teams/{team.pk}/").content.decode()
    assert "identity provider" in page and "managed by sign-in" in page
    remove = admin.post(f"/organisation/teams/{team.pk}/members/{membership.pk}/remove")
    assert remove.status_code == 400
    change = admin.post(
        f"/organisation/teams/{team.pk}/members", {"username": "kim", "role": "admin"}
    )
    assert change.status_code == 400
    membership.refresh_from_db()
    assert membership.role == "viewer" and actions() == []


def test_collections_are_given_and_taken_and_one_owner_at_most(admin: Client) -> None:
    checkout = Team.objects.create(name="checkout")
    search = Team.objects.create(name="search")
    give = f"/organisation/teams/{checkout.pk}/collections"
    assert admin.post(give, {"collection": "shop"}).status_code == 302
    response = admin.post(f"/organisation/teams/{search.pk}/collections", {"collection": "shop"})
    assert response.status_code == 400
    assert "owned by the team checkout" in response.content.decode()
    bad = admin.post(give, {"collection": " shop"})
    assert bad.status_code == 400
    owned = OwnedCollection.objects.get()
    assert owned.team == checkout
    take = f"/organisation/teams/{checkout.pk}/collections/{owned.pk}/remove"
    assert admin.post(take).status_code == 302
    assert not OwnedCollection.objects.exists()
    assert actions() == ["team.collection_added", "team.collection_removed"]
    assert ActivityEntry.objects.filter(collection="shop").count() == 2


def test_another_teams_member_or_collection_is_a_404(admin: Client) -> None:
    checkout = Team.objects.create(name="checkout")
    search = Team.objects.create(name="search")
    owned = OwnedCollection.objects.create(team=search, collection="find")
    take = f"/organisation/teams/{checkout.pk}/collections/{owned.pk}/remove"
    assert admin.post(take).status_code == 404
    assert admin.get("/organisation/teams/999/").status_code == 404


def test_the_teams_list_costs_one_query_for_any_number_of_teams(
    admin: Client, django_assert_max_num_queries: Any
) -> None:
    for n in range(20):
        team = Team.objects.create(name=f"team-{n}")
        OwnedCollection.objects.create(team=team, collection=f"c-{n}")
    with django_assert_max_num_queries(6):
        response = admin.get("/organisation/teams/")
    assert response.content.decode().count("/organisation/teams/") >= 20
