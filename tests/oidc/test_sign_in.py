"""Signing in through the real test provider (django-oauth-toolkit in its own process): the
account made at the first sign-in, roles and teams from the groups, and what changes when
the groups do. The desk is Django's test client; the provider's login form is posted over
HTTP (tests/browser/test_oidc_sign_in.py clicks the same through Chromium)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from organisation.models import ActivityEntry, Membership, MembershipSource, ProviderIdentity, Team
from organisation.roles import user_roles
from tests.oidc.fixtures import Provider, through_provider

pytestmark = pytest.mark.django_db


def roles_of(username: str) -> list[str]:
    return user_roles(get_user_model().objects.get(username=username))


def teams_of(username: str) -> dict[str, tuple[str, str]]:
    return {
        membership.team.name: (membership.role, membership.source)
        for membership in Membership.objects.filter(person__username=username)
    }


def test_first_sign_in_makes_the_account_with_its_roles_and_teams(oidc_on: Provider) -> None:
    subject = oidc_on.person("ana", "desk-ops", "checkout-ops", "search-all", "unrelated")
    client = Client()

    answer = through_provider(client, oidc_on, "ana")

    assert answer.status_code == 302 and answer["Location"] == "/"
    assert client.get("/").status_code == 200
    person = get_user_model().objects.get(username="ana")
    assert person.email == "ana@example.com" and not person.has_usable_password()
    assert ProviderIdentity.objects.get(person=person).subject == subject
    assert roles_of("ana") == ["operator"]
    assert teams_of("ana") == {
        "checkout": ("operator", MembershipSource.PROVIDER),
        "search": ("viewer", MembershipSource.PROVIDER),
    }
    entries = ActivityEntry.objects.filter(actor=None).order_by("id")
    assert {(entry.action, entry.subject) for entry in entries} == {
        ("role.granted", "ana"),
        ("team.created", "checkout"),
        ("team.created", "search"),
        ("team.member_added", "checkout"),
        ("team.member_added", "search"),
    }
    assert all(entry.detail["by"] == "identity provider" for entry in entries)


def test_a_group_left_at_the_provider_is_taken_away_at_the_next_sign_in(
    oidc_on: Provider,
) -> None:
    oidc_on.person("ben", "desk-admins", "desk-ops", "checkout-ops", "search-all")
    through_provider(Client(), oidc_on, "ben")
    checkout = Team.objects.get(name="checkout")
    # An admin also put him in a team by hand: sign-in leaves that membership alone.
    payments = Team.objects.create(name="payments")
    Membership.objects.create(team=payments, person=get_user_model().objects.get(username="ben"),
                              role="viewer")  # fmt: skip

    oidc_on.person("ben", "desk-ops", "search-ops")
    answer = through_provider(Client(), oidc_on, "ben")

    assert answer.status_code == 302
    assert roles_of("ben") == ["operator"]
    assert teams_of("ben") == {
        "search": ("operator", MembershipSource.PROVIDER),
        "payments": ("viewer", MembershipSource.LOCAL),
    }
    assert Team.objects.filter(pk=checkout.pk).exists(), "the team stays; the membership went"
    entries = ActivityEntry.objects.filter(detail__person="ben").order_by("id")
    changes = [(e.action, e.detail.get("role"), e.detail.get("previous_role")) for e in entries]
    assert changes[-3:] == [
        ("role.removed", "admin", None),
        ("team.member_changed", "operator", "viewer"),
        ("team.member_removed", "operator", None),
    ]


def test_a_person_whose_groups_give_nothing_is_refused_and_loses_what_they_had(
    oidc_on: Provider,
) -> None:
    oidc_on.person("cy", "desk-ops", "checkout-ops")
    through_provider(Client(), oidc_on, "cy")
    oidc_on.person("cy", "unrelated")
    client = Client()

    answer = through_provider(client, oidc_on, "cy")

    assert answer.status_code == 403
    assert "is in no group that gives access" in answer.content.decode()
    assert roles_of("cy") == [] and teams_of("cy") == {}
    assert client.get("/")["Location"].startswith("/accounts/login/")


def test_a_newcomer_whose_groups_give_nothing_gets_no_account(oidc_on: Provider) -> None:
    oidc_on.person("dee", "unrelated")

    answer = through_provider(Client(), oidc_on, "dee")

    assert answer.status_code == 403
    assert not get_user_model().objects.filter(username="dee").exists()
    assert not ProviderIdentity.objects.exists()


def test_the_account_follows_the_subject_not_the_email(oidc_on: Provider) -> None:
    oidc_on.person("eve", "desk-ops", email="eve@old.example.com")
    through_provider(Client(), oidc_on, "eve")
    oidc_on.person("eve", "desk-ops", email="eve@new.example.com")

    through_provider(Client(), oidc_on, "eve")

    assert get_user_model().objects.filter(username__startswith="eve").count() == 1
    assert get_user_model().objects.get(username="eve").email == "eve@new.example.com"


def test_a_local_account_of_the_same_name_is_not_taken_over(oidc_on: Provider) -> None:
    local = get_user_model().objects.create_superuser("fay", "fay@example.com", "a-password-1")
    oidc_on.person("fay", "desk-ops")

    through_provider(Client(), oidc_on, "fay")

    identity = ProviderIdentity.objects.select_related("person").get()
    assert identity.person != local and identity.person.username.startswith("fay-")
    assert not identity.person.is_superuser


# Each spoilt token is refused for its own fault (PyJWT's words, in the desk's log).
@pytest.mark.parametrize(
    ("mode", "fault"),
    [("wrong-audience", "Audience doesn't match"), ("wrong-issuer", "Invalid issuer"),
     ("expired", "Signature has expired"), ("tampered", "Signature verification failed")],
)  # fmt: skip
def test_a_spoilt_id_token_from_the_provider_signs_no_one_in(
    oidc_on: Provider, mode: str, fault: str, caplog: Any
) -> None:
    oidc_on.person("gus", "desk-admins")
    oidc_on.id_tokens(mode)
    client = Client()

    answer = through_provider(client, oidc_on, "gus")

    assert answer.status_code == 400
    assert "did not pass the desk" in answer.content.decode()
    assert f"The ID token was refused: {fault}" in caplog.text
    assert not get_user_model().objects.filter(username="gus").exists()
    assert "_auth_user_id" not in client.session


def test_a_code_is_used_once(oidc_on: Provider) -> None:
    oidc_on.person("hal", "desk-ops")
    client = Client()
    answer = through_provider(client, oidc_on, "hal")
    assert answer.status_code == 302
    replayed = client.get(answer.wsgi_request.get_full_path())
    assert replayed.status_code == 400  # the state was spent: a replay is refused


def test_an_unreachable_provider_is_a_page_that_says_so(oidc_on: Provider, settings: Any) -> None:
    from config.oidc import forget_provider_metadata

    settings.TRIAGE_OIDC_ISSUER = "http://127.0.0.1:9/o"
    forget_provider_metadata()

    answer = Client().get("/oidc/authenticate/")

    assert answer.status_code == 503
    assert "Test provider did not answer" in answer.content.decode()


def test_the_sign_in_page_offers_the_provider(oidc_on: Provider) -> None:
    page = Client().get("/accounts/login/?next=/receipts/").content.decode()
    assert 'href="/oidc/authenticate/?next=/receipts/"' in page
    assert "Sign in with Test provider" in page
    assert 'name="password"' in page  # local passwords are still on


def test_the_provider_doors_are_closed_while_it_is_off() -> None:
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert Client().get("/oidc/callback/?code=a&state=b").status_code == 404
    assert "oidc" not in Client().get("/accounts/login/").content.decode()
