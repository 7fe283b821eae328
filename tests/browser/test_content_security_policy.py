"""The pages work under the Content-Security-Policy in a real browser: Chromium reports no
violation on any page, htmx still swaps, the confirmations (static/js/desk.js, no inline
handler) still ask before a form posts, and the API docs' Swagger UI renders."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.factories import failure_item
from triage.intake.ingest import batch_ingest
from triage.models import ApiKey, FailureGroup, GroupStatus
from triage.services import api_key_create

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _violations(page: Any) -> list[str]:
    seen: list[str] = []
    page.on(
        "console",
        lambda message: (
            seen.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.on("pageerror", lambda error: seen.append(f"page error: {error}"))
    return seen


def test_no_page_breaks_the_policy_and_the_confirmations_still_ask(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any
) -> None:
    now = timezone.now().isoformat()
    batch_ingest(
        owner="browser-csp",
        items=[failure_item(occurred_at=now), failure_item(reason="timeout", occurred_at=now)],
    )
    api_key_create(name="csp-runtime", scopes=["ingest"])
    violations = _violations(page)
    sign_in("admin")
    group = FailureGroup.objects.first()
    assert group is not None
    for path in ("/", f"/triage/groups/{group.pk}/", "/receipts/", "/ingestion/",
                 "/qualitylab/", "/learning/"):  # fmt: skip
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
    assert not violations, violations

    # htmx still swaps the table (a filter change), and the bulk bar asks first.
    page.goto(f"{live_server.url}/")
    page.select_option("select[name=lane]", "retry_safe")
    expect(page).to_have_url(
        f"{live_server.url}/?window=1h&source=production&lane=retry_safe&status=active&sort=count"
    )
    asked: list[str] = []

    def answer_no(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", answer_no)
    page.select_option("form.bulkbar select[name=action]", "acknowledge")
    page.click("form.bulkbar button[type=submit], form.bulkbar button:not([type])")
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith("Apply acknowledge to ")
    assert not FailureGroup.objects.filter(status=GroupStatus.ACKNOWLEDGED).exists()

    # Revoking a key: dismissed, nothing happens; accepted, the key is revoked.
    page.goto(f"{live_server.url}/ingestion/")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("button:has-text('Revoke')")
    page.wait_for_timeout(300)
    assert ApiKey.objects.get(name="csp-runtime").revoked_at is None
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Revoke')")
    page.wait_for_load_state()
    expect(page.locator("button:has-text('Revoke')")).to_have_count(0)
    assert ApiKey.objects.get(name="csp-runtime").revoked_at is not None

    # Swagger UI renders from its own script URL.
    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Triage Desk API")
    screenshot("api-docs-under-csp")
    assert not violations, violations
