"""The learning queue's search finds a query family typed in Hangul, composed or as jamo."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest

from tests.learning.conftest import attempt_item
from triage.intake.ingest import batch_ingest

pytestmark = pytest.mark.django_db


def test_the_learning_search_finds_a_korean_query_family(
    client_as: Any, derive_on_commit: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        batch_ingest(
            owner="hangul",
            items=[
                attempt_item("ko-1", query="주문 상세를 보여줘", selected_target="getOrderDetail"),
                attempt_item("ko-2", query="주문 상세를 보여줘", selected_target="getOrderDetail"),
                attempt_item("en-1", query="find refund-ready orders"),
            ],
        )
    client = client_as("reviewer", HTTP_ACCEPT_LANGUAGE="ko")
    for family in ("주문 상세", unicodedata.normalize("NFD", "주문 상세")):
        page = client.get("/learning/", {"family": family})
        assert page.status_code == 200
        shown = list(page.context["page"].object_list)
        assert shown and all("주문" in suggestion.query_family for suggestion in shown)
