"""Playwright driving Debian's Chromium against a live server on 127.0.0.1."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("TRIAGE_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"
PASSWORD = "browser-test-Passw0rd!"

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# around it are synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        message = f"needs Chromium at {CHROMIUM} (apt-get install -y chromium; make test does)"
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(10_000)
    yield tab
    context.close()


@pytest.fixture
def screenshot(page: Any) -> Callable[[str], None]:
    """Save a full-page screenshot under var/test-artifacts/ for a reviewer to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> None:
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    return take


def sign_in_tab(tab: Any, live_server: Any, *roles: str, username: str) -> Any:
    """Create a user holding `roles` and sign in as them in `tab`; returns the user."""
    from django.contrib.auth import get_user_model

    from organisation.roles import ensure_role_group

    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    for role in roles:
        # Transactional tests flush the tables, the migration's role groups with them.
        user.groups.add(ensure_role_group(role))
    tab.goto(f"{live_server.url}/accounts/login/")
    tab.fill("input[name=username]", user.username)
    tab.fill("input[name=password]", PASSWORD)
    tab.click("button[type=submit]")
    tab.wait_for_url(f"{live_server.url}/")
    return user


@pytest.fixture
def sign_in(page: Any, live_server: Any) -> Callable[[str], Any]:
    def login(role: str) -> Any:
        return sign_in_tab(page, live_server, role, username=f"{role}-browser")

    return login


@pytest.fixture
def open_tab(browser: Any) -> Iterator[Callable[..., Any]]:
    """Open tabs in new browser contexts (a width, a time zone, a colour scheme), each
    closed after the test. The browser's zone is checked: a test in Seoul runs in Seoul."""
    contexts: list[Any] = []

    def open_one(*, width: int, timezone_id: str = "Asia/Seoul", scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport={"width": width, "height": 900}, timezone_id=timezone_id,
            color_scheme=scheme,
        )  # fmt: skip
        contexts.append(context)
        tab = context.new_page()
        tab.set_default_timeout(10_000)
        tab.width = width
        zone = tab.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
        assert zone == timezone_id, zone
        return tab

    yield open_one
    for context in contexts:
        context.close()


@pytest.fixture
def operator(open_tab: Callable[..., Any], live_server: Any) -> Callable[..., Any]:
    """A signed-in operator's tab in a zone, a language and a width (with `roles`, a person
    holding those roles instead)."""

    def signed_in(
        *, width: int, zone: str, language: str, roles: tuple[str, ...] = ("operator",)
    ) -> Any:
        from triage.services import person_language_set

        tab = open_tab(width=width, timezone_id=zone)
        user = sign_in_tab(tab, live_server, *roles, username=f"op-{width}-{language}")
        if language != "en":
            person_language_set(user=user, language=language)
            tab.reload()
        return tab

    return signed_in


def shot(tab: Any, name: str, *, full_page: bool = True) -> None:
    """Save a screenshot of `tab` (the whole page, or what the screen shows) under
    var/test-artifacts/ for a reviewer."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)
