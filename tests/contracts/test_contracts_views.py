"""The contracts page, its findings list, the API and the CLI."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from contracts import selectors
from contracts.scan import contracts_scan
from tests.factories import ToolPolicyFactory, failure_item, receipt_item

pytestmark = pytest.mark.django_db

PAGE = reverse("contracts:home")
FINDINGS = reverse("contracts:findings")
API = "/api/v1/contracts"


def _ingest(client: APIClient, *items: dict[str, Any]) -> None:
    response = client.post(
        "/api/v1/ingest", data=json.dumps({"items": list(items)}), content_type="application/json"
    )
    assert response.status_code == 200, response.content


def _ago(minutes: float) -> str:
    return (timezone.now() - timedelta(hours=3) + timedelta(minutes=minutes)).isoformat()


@pytest.fixture
def counted(ingest_client: APIClient) -> None:
    ToolPolicyFactory(collection="shop", tool="createRefund", side_effect="external_write")
    blocked = {"result": "blocked", "code": "", "execution_state": "not_started"}
    _ingest(
        ingest_client,
        failure_item(tool="createRefund", occurred_at=_ago(1)),
        receipt_item(tool="publish", idempotency_key="p-1", started_at=_ago(2), **blocked),
        receipt_item(tool="publish", idempotency_key="p-1", started_at=_ago(9), **blocked),
    )
    contracts_scan(now=timezone.now() + timedelta(minutes=5))
    selectors.forget_memo()


def test_a_viewer_sees_the_ranking_the_rules_and_the_self_reports(
    client_as: Any, counted: None
) -> None:
    response = client_as("viewer").get(PAGE)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Contract these first" in page
    assert "createRefund" in page and "first batch" in page
    assert 'href="/contracts/findings?days=30&amp;kind=policy_block_retry&amp;tool=publish' in page
    assert "Self-report checks" in page


def test_the_page_reads_counters_in_a_fixed_number_of_queries(
    client_as: Any, counted: None, django_assert_max_num_queries: Any
) -> None:
    client = client_as("viewer")
    with django_assert_max_num_queries(12):
        assert client.get(PAGE).status_code == 200


def test_the_contracts_page_is_in_the_top_bar(client_as: Any) -> None:
    page = client_as("viewer").get(reverse("triage:home")).content.decode()
    assert f'href="{PAGE}"' in page


def test_someone_without_a_role_is_refused(client_as: Any) -> None:
    assert client_as("").get(PAGE).status_code == 403


@pytest.mark.parametrize(
    "query",
    ["days=0", "days=366", "days=abc", "collection=%20bad", "tool=get%0AOrder", "kind=nonsense"],
)
def test_bad_filters_get_a_400_that_names_them(client_as: Any, query: str) -> None:
    response = client_as("viewer").get(f"{PAGE}?{query}")
    assert response.status_code == 400
    assert "cannot show what the address asks for" in response.content.decode()
    assert client_as("viewer").get(f"{FINDINGS}?{query}").status_code == 400


def test_the_findings_list_links_each_example(client_as: Any, counted: None) -> None:
    response = client_as("viewer").get(f"{FINDINGS}?kind=policy_block_retry&tool=publish")
    assert response.status_code == 200
    page = response.content.decode()
    assert "policy_block_retry" in page and "receipt " in page
    assert "/triage/groups/" in page or "/?tool=publish" in page


def test_the_api_answers_a_read_key_with_the_same_figures(make_api_key: Any, counted: None) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('reader', scopes=('read',))}")
    response = client.get(f"{API}?days=30")
    assert response.status_code == 200
    document = response.json()
    tools = {tool["tool"]: tool for tool in document["tools"]}
    assert tools["publish"]["retry_rules_broken"]["policy_block_retry"] == 1
    assert tools["createRefund"]["side_effect"] == "external_write"
    assert "createRefund" in document["first_batch"]
    filtered = client.get(f"{API}?tool=publish").json()
    assert [tool["tool"] for tool in filtered["tools"]] == ["publish"]


def test_the_api_refuses_bad_filters_with_a_stable_code(make_api_key: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('reader', scopes=('read',))}")
    response = client.get(f"{API}?days=9999")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "max_value"
    assert response.json()["error"]["field"] == "days"


def test_the_api_needs_the_read_scope(make_api_key: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('sender', scopes=('ingest',))}")
    assert client.get(API).status_code == 403


def test_the_weekly_report_as_json(counted: None, tmp_path: Path) -> None:
    out = tmp_path / "contracts.json"
    call_command("contracts", "report", "--days", "30", "--json", str(out))
    document = json.loads(out.read_text())
    assert document["days"] == 30
    assert {tool["tool"] for tool in document["tools"]} >= {"publish", "createRefund"}


def test_the_report_refuses_a_bad_window() -> None:
    with pytest.raises(CommandError, match="--days"):
        call_command("contracts", "report", "--days", "0")


def test_the_scan_command_counts_what_arrived(ingest_client: APIClient, capsys: Any) -> None:
    _ingest(ingest_client, failure_item(tool="fresh", occurred_at=_ago(1)))
    call_command("contracts", "scan")
    # The row is younger than the settle line: counted by a later scan, not lost.
    assert "Counted" in capsys.readouterr().out


def test_a_first_batch_tool_without_the_fields_is_badged_on_triage_and_group_pages(
    client_as: Any, counted: None
) -> None:
    from triage.models import FailureGroup

    client = client_as("viewer")
    page = client.get(reverse("triage:home") + "?window=7d").content.decode()
    assert 'id="contract-note"' in page
    assert "createRefund" in page.split('id="contract-note"')[1].split("</p>")[0]
    group = FailureGroup.objects.get(tool="createRefund")
    group_page = client.get(reverse("triage:group", args=[group.pk])).content.decode()
    assert "no contract" in group_page
    assert "/contracts/?tool=createRefund" in group_page


def test_a_tool_that_sends_the_fields_is_not_badged(
    client_as: Any, ingest_client: APIClient
) -> None:
    ToolPolicyFactory(collection="shop", tool="chargeCard", side_effect="external_write")
    _ingest(
        ingest_client,
        failure_item(
            tool="chargeCard",
            occurred_at=_ago(1),
            side_effect="external_write",
            idempotency_key="c-1",
            execution_state="started_unknown",
            next_action="query_by_idempotency_key",
            evidence_ref="req_1",
        ),
    )
    contracts_scan(now=timezone.now() + timedelta(minutes=5))
    selectors.forget_memo()
    page = client_as("viewer").get(reverse("triage:home") + "?window=7d").content.decode()
    assert 'id="contract-note"' not in page


def test_the_badge_costs_the_triage_page_one_query_at_most_every_30_seconds(
    client_as: Any, counted: None
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_as("viewer")
    client.get("/")  # the session and the person's preferences, as every later page
    selectors.settle_memo()
    with CaptureQueriesContext(connection) as warm:
        client.get("/")
    selectors.forget_memo()
    with CaptureQueriesContext(connection) as cold:
        client.get("/")
    assert len(cold) == len(warm) + 1
    assert any("contracts_standing" in query["sql"] for query in cold.captured_queries)


def test_the_seed_is_quoted_as_written() -> None:
    import re
    from pathlib import Path

    from contracts.templatetags.contract_figures import SEED_QUOTES

    seed = next((Path(__file__).parents[1] / "seeds").glob("004_*.txt")).read_text()
    seed = re.sub(r"\s+", " ", seed)
    for quote in SEED_QUOTES.values():
        for sentence in re.split(r"(?<=다\.) ", quote):
            assert sentence in seed, sentence
