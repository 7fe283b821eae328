"""Local passwords turned off (TRIAGE_LOCAL_LOGIN=0): the sign-in page offers the provider
only, every password is refused (the Django admin's sign-in too), but the break-glass
admin's, once per `manage.py break_glass_admin`."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from organisation.models import ActivityEntry, BreakGlassAccount, ProviderIdentity
from tests.oidc.fixtures import Provider, through_provider

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-local-Passw0rd"


@pytest.fixture
def passwords_off(oidc_on: Provider, settings: Any) -> Provider:
    settings.TRIAGE_LOCAL_LOGIN = False
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return oidc_on


def break_glass(username: str) -> str:
    out = StringIO()
    call_command("break_glass_admin", username, stdout=out)
    found = re.search(r"^Password: (\S+)$", out.getvalue(), re.MULTILINE)
    assert found, out.getvalue()
    return found.group(1)


def sign_in(client: Client, username: str, password: str, *, url: str) -> Any:
    return client.post(url, {"username": username, "password": password})


def test_the_page_offers_the_provider_only(passwords_off: Provider) -> None:
    page = Client().get("/accounts/login/").content.decode()
    assert "Sign in with Test provider" in page
    assert 'name="password"' not in page


def test_a_right_password_is_refused(passwords_off: Provider) -> None:
    get_user_model().objects.create_user("ivy", password=PASSWORD)
    client = Client()

    answer = sign_in(client, "ivy", PASSWORD, url="/accounts/login/")

    assert answer.status_code == 403
    assert "Signing in with a password is turned off" in answer.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_django_admin_takes_no_password_either(passwords_off: Provider) -> None:
    get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    client = Client()

    sign_in(client, "root", PASSWORD, url="/admin/login/")

    assert "_auth_user_id" not in client.session


def test_a_session_opened_with_a_password_ends_when_passwords_are_turned_off(
    settings: Any,
) -> None:
    person = get_user_model().objects.create_superuser("jo", "jo@example.com", PASSWORD)
    client = Client()
    client.force_login(person, backend="config.login.LocalPasswordBackend")
    assert client.get("/").status_code == 200
    settings.TRIAGE_LOCAL_LOGIN = False

    assert client.get("/")["Location"].startswith("/accounts/login/")


def test_the_break_glass_admin_signs_in_once_per_password(passwords_off: Provider) -> None:
    password = break_glass("keeper")
    first, second = Client(), Client()

    page = first.get("/accounts/login/?break_glass=1").content.decode()
    assert 'name="password"' in page
    answer = sign_in(first, "keeper", password, url="/accounts/login/?break_glass=1")
    again = sign_in(second, "keeper", password, url="/accounts/login/?break_glass=1")

    assert answer.status_code == 302
    assert first.get("/").status_code == 200, "the session outlives the spent password"
    assert again.status_code == 403
    keeper = get_user_model().objects.get(username="keeper")
    assert keeper.is_superuser and not keeper.has_usable_password()
    assert (
        sign_in(Client(), "keeper", break_glass("keeper"), url="/admin/login/").status_code == 302
    )


def test_break_glass_moves_to_the_account_named_last(passwords_off: Provider) -> None:
    old_password = break_glass("keeper")
    new_password = break_glass("warden")

    assert BreakGlassAccount.objects.get().person.username == "warden"
    keeper = get_user_model().objects.get(username="keeper")
    assert not keeper.is_superuser and not keeper.has_usable_password()
    assert sign_in(Client(), "keeper", old_password, url="/accounts/login/").status_code == 403
    assert sign_in(Client(), "warden", new_password, url="/accounts/login/").status_code == 302
    moves = list(ActivityEntry.objects.order_by("id").values_list("action", "subject"))
    assert moves == [("role.granted", "keeper"), ("role.removed", "keeper"),
                     ("role.granted", "warden")]  # fmt: skip


def test_break_glass_is_never_a_provider_account(passwords_off: Provider) -> None:
    passwords_off.person("kim", "desk-ops")
    through_provider(Client(), passwords_off, "kim")
    assert ProviderIdentity.objects.filter(person__username="kim").exists()

    with pytest.raises(CommandError, match="signs in with the identity provider"):
        call_command("break_glass_admin", "kim", stdout=StringIO())


def test_break_glass_wants_a_username(passwords_off: Provider) -> None:
    with pytest.raises(CommandError, match="is not a username"):
        call_command("break_glass_admin", "no spaces please", stdout=StringIO())


def test_the_provider_still_signs_people_in(passwords_off: Provider) -> None:
    passwords_off.person("lee", "desk-ops")
    assert through_provider(Client(), passwords_off, "lee").status_code == 302
