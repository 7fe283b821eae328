"""organisation.access: who sees which collection and who may act on it, as filters and as
answers, on the rules its docstring states."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from organisation import access
from organisation.models import ActivityEntry, Membership, OwnedCollection, Team
from organisation.roles import ACT_ON_GROUP, REVIEW_SUGGESTION, ensure_role_group

pytestmark = pytest.mark.django_db

# alpha is team A's, bravo team B's; charlie and "" (no collection) are nobody's.
NAMES = ("alpha", "bravo", "charlie", "")


def person(name: str, *, global_role: str = "", **teams: str) -> Any:
    user = get_user_model().objects.create(username=name)
    if global_role:
        user.groups.add(ensure_role_group(global_role))
    for team_name, role in teams.items():
        Membership.objects.create(team=Team.objects.get(name=team_name), person=user, role=role)
    # A fresh object, as each request gets one (the permission caches live on it).
    return get_user_model().objects.get(pk=user.pk)


def seen(user: Any) -> set[str]:
    """The names the filter keeps, asked of the database as a page asks it: one row per name
    in a table with a collection column (the audit's, here)."""
    return set(
        ActivityEntry.objects.filter(access.visible_q(user)).values_list("collection", flat=True)
    )


def seen_one_by_one(user: Any) -> set[str]:
    return {name for name in NAMES if access.can_see(user, name)}


@pytest.fixture(autouse=True)
def rows() -> None:
    for name in NAMES:
        ActivityEntry.objects.create(action="team.created", collection=name)


@pytest.fixture
def teams() -> None:
    a = Team.objects.create(name="A")
    b = Team.objects.create(name="B")
    OwnedCollection.objects.create(collection="alpha", team=a)
    OwnedCollection.objects.create(collection="bravo", team=b)


def test_without_teams_everyone_sees_everything() -> None:
    viewer = person("v", global_role="viewer")
    nobody = person("n")
    assert seen(viewer) == seen(nobody) == set(NAMES)
    assert seen_one_by_one(viewer) == set(NAMES)


def test_a_member_sees_their_teams_collections_only(teams: None) -> None:
    member = person("m", global_role="viewer", A="viewer")
    both = person("b", A="viewer", B="operator")
    assert seen(member) == seen_one_by_one(member) == {"alpha"}
    assert seen(both) == seen_one_by_one(both) == {"alpha", "bravo"}


def test_a_person_in_no_team_sees_nothing_once_teams_exist(teams: None) -> None:
    loner = person("l", global_role="operator")
    assert seen(loner) == seen_one_by_one(loner) == set()


def test_admins_see_everything(teams: None) -> None:
    admin = person("a", global_role="admin")
    superuser = get_user_model().objects.create(username="root", is_superuser=True)
    assert seen(admin) == seen(superuser) == set(NAMES)
    # A team's admin role is that team's only.
    team_admin = person("ta", A="admin")
    assert seen(team_admin) == {"alpha"}


def test_unowned_collections_go_to_the_team_the_setting_names(teams: None) -> None:
    member_a = person("ma", A="viewer")
    member_b = person("mb", B="viewer")
    with override_settings(TRIAGE_UNOWNED_COLLECTIONS_TEAM="B"):
        assert seen(member_a) == seen_one_by_one(member_a) == {"alpha"}
        assert seen(member_b) == seen_one_by_one(member_b) == {"bravo", "charlie", ""}


def test_nobody_signed_in_sees_nothing(teams: None) -> None:
    assert seen(AnonymousUser()) == set()
    inactive = person("i", A="viewer")
    inactive.is_active = False
    assert seen(inactive) == set()


def test_a_key_serves_its_collections_and_its_teams() -> None:
    a = Team.objects.create(name="A")
    OwnedCollection.objects.create(collection="alpha", team=a)
    unscoped = SimpleNamespace(api_key=SimpleNamespace(collections=[], team_id=None))
    by_name = SimpleNamespace(api_key=SimpleNamespace(collections=["charlie"], team_id=None))
    by_team = SimpleNamespace(api_key=SimpleNamespace(collections=["charlie"], team_id=a.pk))
    assert seen(unscoped) == seen_one_by_one(unscoped) == set(NAMES)
    assert seen(by_name) == seen_one_by_one(by_name) == {"charlie"}
    assert seen(by_team) == seen_one_by_one(by_team) == {"alpha", "charlie"}
    assert access.key_collections(by_team.api_key) == {"alpha", "charlie"}
    assert access.key_collections(unscoped.api_key) is None


def test_a_team_role_grants_its_permissions_on_that_teams_collections_only(teams: None) -> None:
    # Viewer everywhere they see, operator in A: may act on alpha's groups, not bravo's.
    user = person("o", global_role="viewer", A="operator", B="viewer")
    assert user.has_perm(ACT_ON_GROUP)  # the pages show the buttons...
    assert access.has_collection_perm(user, ACT_ON_GROUP, "alpha")
    assert not access.has_collection_perm(user, ACT_ON_GROUP, "bravo")  # ...the act checks
    assert not access.has_collection_perm(user, REVIEW_SUGGESTION, "alpha")
    # The role shown beside the person's name stays the one held outside teams.
    from organisation.roles import user_roles

    assert user_roles(user) == ["viewer"]


def test_a_role_held_outside_teams_applies_to_every_collection_seen(teams: None) -> None:
    user = person("r", global_role="reviewer", A="viewer", B="viewer")
    assert access.has_collection_perm(user, REVIEW_SUGGESTION, "alpha")
    assert access.has_collection_perm(user, REVIEW_SUGGESTION, "bravo")
    assert not access.has_collection_perm(user, ACT_ON_GROUP, "alpha")


def test_the_unowned_team_role_applies_to_unowned_collections(teams: None) -> None:
    user = person("u", B="operator")
    with override_settings(TRIAGE_UNOWNED_COLLECTIONS_TEAM="B"):
        assert access.has_collection_perm(user, ACT_ON_GROUP, "charlie")
        assert not access.has_collection_perm(user, ACT_ON_GROUP, "alpha")
    assert not access.has_collection_perm(user, ACT_ON_GROUP, "charlie")


def test_the_filter_is_part_of_the_pages_statement(
    teams: None, django_assert_num_queries: Any
) -> None:
    member = person("m", global_role="viewer", A="viewer")
    member.get_all_permissions()  # the request's one query for roles, done before the page
    with django_assert_num_queries(1):
        assert seen(member) == {"alpha"}


def test_a_teams_admin_role_does_not_grant_what_is_not_one_collections(teams: None) -> None:
    from organisation.roles import CHANGE_ALERT_CHANNELS, MANAGE_API_KEYS, RUN_QUALITY_LAB

    team_admin = person("ta", A="admin")
    assert team_admin.has_perm(RUN_QUALITY_LAB)
    assert not team_admin.has_perm(MANAGE_API_KEYS)
    assert not team_admin.has_perm(CHANGE_ALERT_CHANNELS)
    assert not access.has_collection_perm(team_admin, MANAGE_API_KEYS, "alpha")
    assert access.has_collection_perm(team_admin, RUN_QUALITY_LAB, "alpha")
    assert person("ga", global_role="admin").has_perm(MANAGE_API_KEYS)


def test_the_role_read_with_the_row_answers_as_the_query_does(teams: None) -> None:
    people = [
        person("o", global_role="viewer", A="operator", B="viewer"),
        person("u", B="operator"),
        person("n"),
    ]
    for unowned_team in ("", "B"):
        with override_settings(TRIAGE_UNOWNED_COLLECTIONS_TEAM=unowned_team):
            for user in people:
                rows = ActivityEntry.objects.annotate(role=access.team_role_column(user))
                for row in rows:
                    for perm in (ACT_ON_GROUP, REVIEW_SUGGESTION):
                        assert access.has_collection_perm(
                            user, perm, row.collection, team_role=row.role
                        ) == access.has_collection_perm(user, perm, row.collection), (
                            user.username, unowned_team, row.collection, perm
                        )  # fmt: skip
