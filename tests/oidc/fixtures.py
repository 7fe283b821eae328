"""The real OpenID Connect provider the tests sign in through (tests/oidc/provider/, run by
django-oauth-toolkit in a process of its own on loopback), and the desk's settings pointing
at it. tests/oidc/conftest.py and the browser tests import these fixtures."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID = "triage-desk"
CLIENT_SECRET = "desk-client-secret-for-tests-only"
PASSWORD = "provider-Passw0rd!"
ROLE_GROUPS = {"admin": ("desk-admins",), "operator": ("desk-ops", "sre")}
TEAM_GROUPS = (
    ("checkout", "operator", ("checkout-ops",)),
    # Several entries for one team: the first the person's groups match decides the role.
    ("search", "operator", ("search-ops",)),
    ("search", "viewer", ("search-all", "search-ops")),
)


@dataclass
class Provider:
    url: str
    control_token: str
    directory: Path

    @property
    def issuer(self) -> str:
        return f"{self.url}/o"

    @property
    def private_key_pem(self) -> str:
        return (self.directory / "key.pem").read_text()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = requests.post(
            f"{self.url}{path}", json=body, headers={"X-Test-Control": self.control_token},
            timeout=10,
        )  # fmt: skip
        response.raise_for_status()
        return dict(response.json())

    def person(self, username: str, *groups: str, email: str = "") -> str:
        """Create or change a person at the provider; returns their subject."""
        body = {
            "username": username,
            "password": PASSWORD,
            "groups": list(groups),
            "email": email or f"{username}@example.com",
            "given_name": username.title(),
        }
        return str(self._post("/test/people", body)["sub"])

    def id_tokens(self, mode: str) -> None:
        """Spoil the ID tokens issued from now on (tests/oidc/provider/tokens.py)."""
        self._post("/test/id-token", {"mode": mode})

    def redirect_to(self, uri: str) -> None:
        self._post("/test/client", {"client_id": CLIENT_ID, "redirect_uri": uri})


@pytest.fixture(scope="session")
def provider(tmp_path_factory: Any) -> Iterator[Provider]:
    directory = tmp_path_factory.mktemp("oidc-provider")
    token = secrets.token_urlsafe(16)
    env = {**os.environ, "OIDC_PROVIDER_CONTROL_TOKEN": token}
    with (directory / "server.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.oidc.provider.serve", "--dir", str(directory),
             "--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        if not port.isdigit():
            process.wait(timeout=10)
            pytest.fail(
                f"the test provider did not start:\n{(directory / 'server.log').read_text()}"
            )
        started = Provider(f"http://127.0.0.1:{port}", token, directory)
        deadline = time.monotonic() + 30
        while True:
            try:
                discovery = f"{started.issuer}/.well-known/openid-configuration"
                if requests.get(discovery, timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the test provider's discovery document never answered")
            time.sleep(0.1)
        yield started
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def oidc_on(provider: Provider, settings: Any) -> Provider:
    """The desk signs in with the test provider: groups desk-admins and desk-ops/sre give the
    admin and operator roles; checkout-ops makes an operator of checkout; search-all a viewer
    of search, search-ops an operator of it."""
    from config.oidc import forget_provider_metadata

    scopes = "openid email profile groups"
    settings.TRIAGE_OIDC_ENABLED = True
    settings.TRIAGE_OIDC_ISSUER = provider.issuer
    settings.TRIAGE_OIDC_CLIENT_ID = settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.TRIAGE_OIDC_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.TRIAGE_OIDC_SCOPES = settings.OIDC_RP_SCOPES = scopes
    settings.TRIAGE_OIDC_PROVIDER_NAME = "Test provider"
    settings.TRIAGE_OIDC_ROLE_GROUPS = ROLE_GROUPS
    settings.TRIAGE_OIDC_TEAM_GROUPS = TEAM_GROUPS
    settings.AUTHENTICATION_BACKENDS = [
        *settings.AUTHENTICATION_BACKENDS,
        "config.oidc.ProviderBackend",
    ]
    forget_provider_metadata()
    provider.id_tokens("valid")
    return provider


def through_provider(client: Any, provider: Provider, username: str) -> Any:
    """Sign in at the desk (Django's test client) through the provider's own login form (a
    plain HTTP client); returns the desk's answer at its callback."""
    from urllib.parse import parse_qs, urljoin, urlsplit

    desk = "http://testserver"
    provider.redirect_to(f"{desk}/oidc/callback/")
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302, start
    session = requests.Session()
    login_page = session.get(start["Location"], timeout=10)
    assert urlsplit(login_page.url).path == "/accounts/login/", login_page.url
    answer = session.post(
        login_page.url,
        data={"username": username, "password": PASSWORD,
              "next": parse_qs(urlsplit(login_page.url).query)["next"][0],
              "csrfmiddlewaretoken": session.cookies["provider_csrf"]},
        allow_redirects=False, timeout=10,
    )  # fmt: skip
    location = answer.headers["Location"]
    while not location.startswith(desk):
        answer = session.get(urljoin(provider.url, location), allow_redirects=False, timeout=10)
        assert answer.status_code == 302, (answer.status_code, answer.text[:500])
        location = answer.headers["Location"]
    return client.get(location.removeprefix(desk))
