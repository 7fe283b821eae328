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


@pytest.fixture
def sign_in(page: Any, live_server: Any) -> Callable[[str], Any]:
    from django.contrib.auth import get_user_model

    from triage.roles import ensure_role_group

    def login(role: str) -> Any:
        user = get_user_model().objects.create_user(username=f"{role}-browser", password=PASSWORD)
        # Transactional tests flush the tables, the migration's role groups with them.
        user.groups.add(ensure_role_group(role))
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", user.username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return user

    return login
