"""An operator adds the demo collection, imports its cases, runs the search cases and opens a
failure, with the build and the run done by background threads instead of a worker."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from qualitylab import demo, services, tasks
from qualitylab.models import CaseRun, RunStatus

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _in_background(work: Callable[[], Any], *, delay: float) -> None:
    """What a worker would do, a little later, so the page really polls for it."""

    def target() -> None:
        try:
            time.sleep(delay)
            work()
        finally:
            connection.close()

    threading.Thread(target=target, daemon=True).start()


@pytest.fixture
def background_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    def build(*, kwargs: dict[str, Any], **_: Any) -> None:
        _in_background(lambda: services.version_build(**kwargs), delay=1.0)

    def execute(*, kwargs: dict[str, Any], **_: Any) -> None:
        # A short pause per case, so the progress bar has something to show.
        _in_background(
            lambda: services.run_execute(**kwargs, on_case=lambda _result: time.sleep(0.4)),
            delay=0.5,
        )

    monkeypatch.setattr(tasks.build_collection_version, "apply_async", build)
    monkeypatch.setattr(tasks.execute_case_run, "apply_async", execute)


def test_operator_builds_the_demo_collection_runs_search_cases_and_opens_a_failure(
    page: Any, live_server: Any, sign_in: Any, screenshot: Any, background_worker: None
) -> None:
    sign_in("operator")
    page.click("nav >> text=Quality Lab")
    page.wait_for_url("**/qualitylab/")
    expect(page.locator("text=No collection yet")).to_be_visible()

    page.fill("input[name=name]", "shop")
    page.fill("input[name=title]", "Demo shop")
    page.set_input_files("input[name=spec_file]", str(demo.SPEC_PATH))
    page.fill("input[name=auth_secret_env]", "QUALITYLAB_SECRET_SHOP")
    page.click("button:has-text('Add and build')")
    page.wait_for_url("**/qualitylab/shop/")
    expect(page.locator("#build")).to_contain_text(re.compile("queued|building"))
    # The region polls every 2 s; the first finished build reloads the page.
    expect(page.locator("#build")).to_contain_text("Readiness of v1", timeout=15_000)
    expect(page.locator("#build")).to_contain_text("21 operations")
    expect(page.locator("#run button:has-text('Start run')")).to_be_visible()

    page.click("a:has-text('Import JSON')")
    page.set_input_files("input[name=cases_file]", str(demo.CASES_PATH))
    page.click("button:has-text('Import')")
    page.wait_for_url("**/qualitylab/shop/#cases")
    expect(page.locator(".messages")).to_contain_text("33 cases added")
    screenshot("qualitylab-collection")

    page.select_option("select[name=mode]", "search")
    page.click("button:has-text('Start run')")
    page.wait_for_url(re.compile(r"/qualitylab/runs/\d+/$"))
    # The progress region polls every 2 s while the background "worker" runs the cases.
    expect(page.locator("#progress")).to_contain_text("running", timeout=10_000)
    expect(page.locator("#progress")).to_contain_text(re.compile(r"[1-9]\d* / 11"))
    screenshot("qualitylab-run-progress")
    expect(page.locator(".lab-results")).to_be_visible(timeout=20_000)
    expect(page.locator("#progress")).to_contain_text("11 / 11")
    run = CaseRun.objects.get()
    assert run.status == RunStatus.DONE and run.failed == 4
    screenshot("qualitylab-run")

    failed_row = page.locator("tr#case-search-receipt-en-miss")
    expect(failed_row).to_contain_text("retrieve / not_retrieved")
    failed_row.locator("a:has-text('details')").click()
    detail = page.locator(".result-detail")
    expect(detail).to_contain_text("Failure record")
    expect(detail.locator("table.search-rows tr")).to_have_count(6)  # header + the Top-5
    screenshot("qualitylab-run-detail")
    detail.locator("a:has-text('own page')").click()
    page.wait_for_url(re.compile(r"/qualitylab/results/\d+/$"))
    expect(page.locator("h1")).to_contain_text("failed")
    expect(page.locator(".detail-head")).to_contain_text("retrieve / not_retrieved")
    screenshot("qualitylab-result")

    page.goto(f"{live_server.url}/qualitylab/")
    expect(page.locator("table.lab-collections")).to_contain_text("64%")
    screenshot("qualitylab-home")
