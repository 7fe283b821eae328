"""Production first and the sort choice, as an on-call operator sees them in Seoul."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import sign_in_tab
from tests.factories import failure_item
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, batch_ingest

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _traffic() -> None:
    now = timezone.now()

    def ago(minutes: int) -> str:
        return (now - timedelta(minutes=minutes)).isoformat()

    batch_ingest(
        owner="browser-test",
        items=[
            *(
                failure_item(stage="xgen_transport", reason="sse_dropped", occurred_at=ago(n))
                for n in range(1, 7)
            ),
            failure_item(
                stage="synthesize",
                reason="unsatisfied_field",
                tool="getOrderDetail",
                occurred_at=ago(3),
                evidence={"field_name": "orderNo"},
            ),
        ],
    )
    batch_ingest(
        owner=DESK_OWNER,
        channel=DESK_CHANNEL,
        items=[
            failure_item(
                stage="retrieve", reason="not_retrieved", tool="labOnly", occurred_at=ago(2),
                source="quality_lab",
            )
            for _ in range(9)
        ],
    )  # fmt: skip


@pytest.fixture(params=[1280, 390], ids=["desktop", "phone"])
def seoul_page(request: Any, open_tab: Callable[..., Any], live_server: Any) -> Any:
    tab = open_tab(width=request.param)
    sign_in_tab(tab, live_server, "operator", username="operator-seoul")
    return tab


def test_default_view_is_production_by_count_and_the_sort_lives_in_the_url(
    seoul_page: Any, live_server: Any
) -> None:
    _traffic()
    page = seoul_page
    page.goto(f"{live_server.url}/")
    assert page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone") == "Asia/Seoul"
    note = page.locator("#source-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("Showing production")
    assert page.locator("tr.reason:has-text('not_retrieved')").count() == 0
    # By count: the largest row comes first, whatever its stage.
    expect(page.locator("tr.reason").first).to_contain_text("sse_dropped")

    page.select_option("select[name=sort]", "stage")
    expect(page).to_have_url(re.compile(r"sort=stage"))
    expect(page.locator("tr.reason").first).to_contain_text("unsatisfied_field")
    page.reload()
    expect(page.locator("select[name=sort]")).to_have_value("stage")
    expect(page.locator("tr.reason").first).to_contain_text("unsatisfied_field")

    page.locator("#source-note a").click()
    expect(page).to_have_url(re.compile(r"source=any"))
    expect(page.locator("tr.reason:has-text('not_retrieved')")).to_be_visible()
    expect(page.locator("#source-note")).to_have_count(0)
    expect(page.locator("select[name=sort]")).to_have_value("stage")
