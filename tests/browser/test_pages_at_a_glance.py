"""What a person sees first, in Chromium under the Content-Security-Policy: no template
text leaks onto the page, the run's progress bar is drawn and follows the run, the main
navigation stays on a phone's screen, and collection links keep names with URL characters."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from learning.models import LearningAttempt
from qualitylab import demo, services
from qualitylab.models import CaseRun, RunStatus
from tests.factories import demo_collection, failure_item
from triage.intake.ingest import batch_ingest

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
    return seen


def _bar_widths(page: Any) -> tuple[float, float]:
    """The drawn widths (px) of the passed and failed parts of the run's progress bar."""
    passed = page.locator("#progress .progress-ok").bounding_box()
    failed = page.locator("#progress .progress-failed").bounding_box()
    return (passed["width"] if passed else 0.0, failed["width"] if failed else 0.0)


def test_the_run_progress_bar_is_drawn_and_follows_the_run(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(services, "_send", lambda task, **kwargs: None)
    collection, version = services.collection_create(
        name="shop", spec_text=demo.SPEC_PATH.read_text(encoding="utf-8")
    )
    run = CaseRun.objects.create(
        collection=collection, version=version, status=RunStatus.RUNNING,
        total=4, done=2, passed=1, failed=1,
    )  # fmt: skip
    violations = _violations(page)
    sign_in("operator")
    page.goto(f"{live_server.url}/qualitylab/runs/{run.pk}/")
    passed, failed = _bar_widths(page)
    # A quarter passed and a quarter failed of a bar as wide as the region.
    assert passed > 50 and abs(passed - failed) < 2, (passed, failed)
    CaseRun.objects.filter(pk=run.pk).update(done=4, passed=3, status=RunStatus.DONE)
    expect(page.locator("#progress .run-status")).to_have_text("done", timeout=8_000)
    grown, _ = _bar_widths(page)
    assert grown > passed * 2.5, (passed, grown)
    screenshot("run-progress-bar")
    assert "{#" not in page.locator("body").inner_text()
    assert not violations, violations


def test_on_a_phone_the_navigation_stays_on_screen_and_tables_scroll_inside(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any
) -> None:
    demo_collection()  # built: the collection page shows its readiness and versions
    batch_ingest(owner="phone", items=[failure_item(), failure_item(reason="timeout")])
    sign_in("operator")
    page.set_viewport_size({"width": 390, "height": 844})
    for path in (
        "/",
        "/receipts/",
        "/ingestion/",
        "/qualitylab/",
        "/qualitylab/shop/",
        "/learning/",
    ):
        page.goto(f"{live_server.url}{path}")
        assert "{#" not in page.locator("body").inner_text(), path
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, (path, width)
        for link in ("Ingestion", "Learning"):
            box = page.locator(".mainnav").get_by_role("link", name=link).bounding_box()
            assert box is not None and box["x"] + box["width"] <= 390, (path, link, box)
        sign_out = page.get_by_role("button", name="Sign out").bounding_box()
        assert sign_out is not None and sign_out["x"] + sign_out["width"] <= 390, path
    screenshot("phone-triage")


def test_a_collection_link_keeps_a_name_with_url_characters(
    page: Any, live_server: Any, sign_in: Any
) -> None:
    name = "team a&b #1"
    batch_ingest(
        owner="names",
        items=[
            {
                "type": "learning_attempt",
                "id": "names-1",
                "body": {"query": "order", "collection": name, "selected_target": "getOrder",
                         "success": True},
            }
        ],
    )  # fmt: skip
    assert LearningAttempt.objects.filter(collection__name=name).exists()
    sign_in("reviewer")
    page.goto(f"{live_server.url}/learning/")
    page.get_by_role("link", name=name, exact=True).first.click()
    page.wait_for_load_state()
    assert "collection=team+a%26b+%231" in page.url or "collection=team%20a%26b%20%231" in page.url
    expect(page.locator("select[name=collection], input[name=collection]").first).to_have_value(
        name
    )
