"""The demo shows a tool in every state of the contracts page."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from contracts import demo
from contracts.selectors import ContractsFilters, contracts_overview
from triage.demo_data import demo_items
from triage.intake.ingest import batch_ingest

pytestmark = pytest.mark.django_db


def test_the_demo_has_tools_kept_broken_and_first_in_line() -> None:
    now = timezone.now()

    def ingest(items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), 500):
            batch_ingest(owner="demo", items=items[start : start + 500])

    ingest(list(demo_items(now=now)))
    assert demo.install(now=now, ingest=ingest) > 100
    tools = {
        tool.key: tool for tool in contracts_overview(now=now, filters=ContractsFilters()).tools
    }
    assert tools[("billing", "getInvoice")].state == "keeping"
    assert tools[("billing", "sendInvoice")].state == "violating"
    assert tools[("billing", "sendInvoice")].findings == {"reconcile_retry": 1}
    first_in_line = [tool for tool in tools.values() if tool.state == "first_in_line"]
    assert first_in_line and all(tool.coverage != "all" for tool in first_in_line)
