from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from core.side_reads import close_side_connections
from triage.services import api_key_create

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"

# CI replays the same generated examples on every run (HYPOTHESIS_PROFILE=ci, set by
# .ci/run), so a red build always means a change broke something; local runs draw new
# examples each time and keep exploring (a failure found there is saved and replayed).
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True, scope="session")
def _loopback_servers_allowed() -> Any:
    """The sandbox API and the tests' own HTTP servers listen on 127.0.0.1, which execute
    cases may call only when an administrator allows it: the tests allow exactly that
    address, here and in the workers and commands they start. Tests of the refusals set
    QUALITYLAB_ALLOWED_PRIVATE_HOSTS themselves."""
    previous_setting = settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS
    previous_env = os.environ.get("QUALITYLAB_ALLOWED_PRIVATE_HOSTS")
    settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS = ["127.0.0.1"]
    os.environ["QUALITYLAB_ALLOWED_PRIVATE_HOSTS"] = "127.0.0.1"
    yield
    settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS = previous_setting
    if previous_env is None:
        os.environ.pop("QUALITYLAB_ALLOWED_PRIVATE_HOSTS", None)
    else:
        os.environ["QUALITYLAB_ALLOWED_PRIVATE_HOSTS"] = previous_env


@pytest.fixture(autouse=True)
def _contract_badges_settled() -> Any:
    """The triage pages read the contracts badge at most every 30 s per process; each test
    starts as the steady state does, with nothing badged (a test of the badge forgets it)."""
    from contracts.selectors import settle_memo

    settle_memo()
    yield


def _service_missing(name: str) -> str | None:
    if name == "postgres":
        if connection.vendor != "postgresql":
            return "needs PostgreSQL (set DATABASE_URL=postgres://...)"
        return None
    if name == "redis":
        if not settings.REDIS_URL:
            return "needs Redis (set REDIS_URL=redis://...)"
        import redis

        try:
            redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1).ping()
        except redis.RedisError as exc:
            return f"Redis at REDIS_URL is unreachable ({exc.__class__.__name__})"
        return None
    raise ValueError(f"unknown service {name}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers(name="services"):
        for name in marker.args:
            missing = _service_missing(name)
            if missing is None:
                continue
            if REQUIRE_SERVICES:
                pytest.fail(f"REQUIRE_SERVICES=1 but this test {missing}", pytrace=False)
            pytest.skip(missing)


@pytest.fixture(autouse=True)
def _side_connections_closed() -> Iterator[None]:
    """A test that read beside its page (core.side_reads: outside a transaction, on
    PostgreSQL) leaves no connection open: the test database is flushed after it and
    dropped at the end."""
    yield
    close_side_connections()


@pytest.fixture
def make_api_key(db: Any) -> Callable[..., str]:
    def make(
        name: str = "runtime-a", scopes: tuple[str, ...] = ("ingest", "read"), **kw: Any
    ) -> str:
        _, key = api_key_create(name=name, scopes=list(scopes), **kw)
        return key

    return make


@pytest.fixture
def ingest_client(make_api_key: Callable[..., str]) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key()}")
    return client


@pytest.fixture
def user_with_role(db: Any) -> Callable[[str], Any]:
    """A signed-in-able user holding one of the roles made by migration (or none: "")."""
    from django.contrib.auth import get_user_model

    from organisation.roles import ensure_role_group

    def make(role: str) -> Any:
        user, created = get_user_model().objects.get_or_create(username=f"{role or 'nobody'}-user")
        if created and role:
            user.groups.add(ensure_role_group(role))
        return user

    return make


@pytest.fixture
def client_as(user_with_role: Callable[[str], Any]) -> Callable[[str], Any]:
    """A test client signed in with the given role (force_login: django-axes wants a request
    on every authenticate call, which the test client's login() does not pass)."""
    from django.test import Client

    def make(role: str, **kwargs: Any) -> Client:
        client = Client(**kwargs)
        client.force_login(user_with_role(role))
        return client

    return make
