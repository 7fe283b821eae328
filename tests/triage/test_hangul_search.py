"""Every search box finds what is typed in Hangul: names stored in Korean, a reason described
in Korean words, Hangul typed as separate jamo (NFD). Run on SQLite and on PostgreSQL (CI's
DATABASE_URL): both compare Hangul exactly, whatever their case folding does to Latin.
The learning queue's search is in tests/learning/test_hangul_search.py."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from django.utils import translation

from tests.factories import failure_item
from triage.intake.ingest import batch_ingest
from triage.models import ToolPolicy
from triage.selectors import reasons_described_by

pytestmark = pytest.mark.django_db

KOREAN = {"HTTP_ACCEPT_LANGUAGE": "ko"}


def _reasons_on_triage(client: Any, q: str) -> set[str]:
    page = client.get("/", {"q": q, "window": "24h", "status": "all", "source": "any"})
    assert page.status_code == 200, page.content[:500]
    return {row.reason for section in page.context["overview"].sections for row in section.rows}


@pytest.fixture
def korean_failures() -> None:
    batch_ingest(
        owner="hangul",
        items=[
            failure_item(collection="체크아웃", tool="주문조회", reason="timeout"),
            failure_item(collection="shop", tool="getOrderDetail", reason="auth_failed"),
            failure_item(collection="shop", tool="getOrderDetail", reason="unsatisfied_field",
                         stage="synthesize"),
        ],
    )  # fmt: skip


@pytest.mark.usefixtures("korean_failures")
@pytest.mark.parametrize("header", [KOREAN, {"HTTP_ACCEPT_LANGUAGE": "en"}])
def test_the_triage_search_finds_a_collection_and_a_tool_named_in_hangul(
    client_as: Any, header: dict[str, str]
) -> None:
    client = client_as("viewer", **header)
    assert _reasons_on_triage(client, "체크아웃") == {"timeout"}
    assert _reasons_on_triage(client, "주문") == {"timeout"}
    # The same word typed as separate jamo (NFD) finds the composed name that is stored.
    decomposed = unicodedata.normalize("NFD", "체크아웃")
    assert decomposed != "체크아웃"
    assert _reasons_on_triage(client, decomposed) == {"timeout"}


@pytest.mark.usefixtures("korean_failures")
def test_the_triage_search_finds_a_reason_by_its_korean_meaning(client_as: Any) -> None:
    client = client_as("viewer", **KOREAN)
    # The catalog's words: auth_failed is "다운스트림 API가 401 또는 403 반환".
    assert _reasons_on_triage(client, "401 또는 403") == {"auth_failed"}
    # unsatisfied_field: "필수 입력 필드를 채울 수 없음".
    assert "unsatisfied_field" in _reasons_on_triage(client, "채울 수 없음")
    # timeout: "요청이 timeout을 초과함".
    assert "timeout" in _reasons_on_triage(client, "초과함")
    # English words still find it in Korean, and codes always do.
    assert "auth_failed" in _reasons_on_triage(client, "returned 401")
    assert _reasons_on_triage(client, "auth_failed") == {"auth_failed"}


def test_a_reason_s_words_are_read_in_the_reader_s_language() -> None:
    with translation.override("ko"):
        assert "auth_failed" in reasons_described_by("401 또는 403")
    with translation.override("en"):
        assert "auth_failed" in reasons_described_by("401 or 403")
        assert reasons_described_by("   ") == []


def test_the_policy_search_finds_a_collection_in_hangul(client_as: Any) -> None:
    ToolPolicy.objects.create(collection="결제", tool="createRefund", side_effect="external_write")
    ToolPolicy.objects.create(collection="shop", tool="getOrder")
    client = client_as("viewer", **KOREAN)
    for q in ("결제", unicodedata.normalize("NFD", "결제")):
        page = client.get("/policies/", {"q": q})
        assert page.status_code == 200
        assert [policy.tool for policy in page.context["policies"]] == ["createRefund"]
