"""Signing in through a real OpenID Connect provider (django-oauth-toolkit on loopback,
tests/oidc/provider/) with Chromium: the provider's own login page, the desk's roles and
teams from the groups, a group left, tokens the desk must refuse, and local passwords off."""

from __future__ import annotations

import re
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from organisation.models import Membership
from organisation.roles import user_roles
from tests.browser.conftest import shot
from tests.oidc.fixtures import PASSWORD, Provider, oidc_on, provider

__all__ = ["oidc_on", "provider"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


@pytest.fixture
def desk(oidc_on: Provider, live_server: Any) -> Provider:
    oidc_on.redirect_to(f"{live_server.url}/oidc/callback/")
    return oidc_on


@pytest.fixture
def through_provider(
    open_tab: Callable[..., Any], live_server: Any, desk: Provider
) -> Callable[[str], Any]:
    """Sign in as a provider's person in a new browser, at the provider's login page."""

    def sign_in(username: str) -> Any:
        tab = open_tab(width=1280)
        tab.goto(f"{live_server.url}/accounts/login/")
        tab.click("#sign-in-provider")
        tab.wait_for_url(re.compile(re.escape(f"{desk.url}/accounts/login/")))
        tab.fill("input[name=username]", username)
        tab.fill("input[name=password]", PASSWORD)
        tab.click("button[type=submit]")
        tab.wait_for_url(re.compile(re.escape(live_server.url)))
        return tab

    return sign_in


def holdings(username: str) -> tuple[list[str], dict[str, str]]:
    person = get_user_model().objects.get(username=username)
    teams = {m.team.name: m.role for m in Membership.objects.filter(person=person)}
    return user_roles(person), teams


def test_groups_give_roles_and_teams_and_take_them_back(
    desk: Provider, through_provider: Callable[[str], Any], live_server: Any
) -> None:
    desk.person("nora", "desk-ops", "checkout-ops")
    tab = through_provider("nora")
    assert tab.url == f"{live_server.url}/"
    expect(tab.locator("header")).to_contain_text("nora")
    assert holdings("nora") == (["operator"], {"checkout": "operator"})
    shot(tab, "oidc-signed-in")

    desk.person("nora", "search-all")
    tab = through_provider("nora")
    assert holdings("nora") == ([], {"search": "viewer"})

    desk.person("nora", "left-the-company")
    tab = through_provider("nora")
    expect(tab.locator("#sign-in-refusal")).to_contain_text("is in no group that gives access")
    expect(tab.locator("#sign-in-provider")).to_be_visible()
    assert holdings("nora") == ([], {})
    shot(tab, "oidc-refused-no-group")
    tab.goto(f"{live_server.url}/")
    assert "/accounts/login/" in tab.url


@pytest.mark.parametrize("mode", ["wrong-audience", "expired", "tampered"])
def test_an_id_token_the_desk_must_refuse_signs_no_one_in(
    desk: Provider, through_provider: Callable[[str], Any], live_server: Any, mode: str
) -> None:
    desk.person("omar", "desk-admins")
    desk.id_tokens(mode)

    tab = through_provider("omar")

    expect(tab.locator("#sign-in-refusal")).to_contain_text("did not pass the desk")
    assert "/oidc/callback/" in tab.url
    assert not get_user_model().objects.filter(username="omar").exists()
    tab.goto(f"{live_server.url}/")
    assert "/accounts/login/" in tab.url


def test_with_local_passwords_off_only_the_provider_and_break_glass_remain(
    desk: Provider, through_provider: Callable[[str], Any], open_tab: Callable[..., Any],
    live_server: Any, settings: Any,
) -> None:  # fmt: skip
    settings.TRIAGE_LOCAL_LOGIN = False
    get_user_model().objects.create_superuser("pat", "pat@example.com", "pat-local-Passw0rd")
    tab = open_tab(width=1280)

    tab.goto(f"{live_server.url}/accounts/login/")
    expect(tab.locator("#sign-in-provider")).to_have_text(re.compile("Sign in with Test provider"))
    expect(tab.locator("input[name=password]")).to_have_count(0)
    shot(tab, "oidc-passwords-off")

    # The form a break-glass admin opens takes no one else's password.
    tab.goto(f"{live_server.url}/accounts/login/?break_glass=1")
    tab.fill("input[name=username]", "pat")
    tab.fill("input[name=password]", "pat-local-Passw0rd")
    with tab.expect_response(re.compile("/accounts/login/")) as posted:
        tab.click("button[type=submit]")
    assert posted.value.status == 403
    expect(tab.locator("#sign-in-refusal")).to_contain_text("turned off")

    out = StringIO()
    call_command("break_glass_admin", "keeper", stdout=out)
    password = re.search(r"^Password: (\S+)$", out.getvalue(), re.MULTILINE).group(1)  # type: ignore[union-attr]
    tab.fill("input[name=username]", "keeper")
    tab.fill("input[name=password]", password)
    tab.click("button[type=submit]")
    tab.wait_for_url(f"{live_server.url}/")
    expect(tab.locator("header")).to_contain_text("keeper")

    desk.person("quinn", "desk-ops")
    assert through_provider("quinn").url == f"{live_server.url}/"
