"""Runbooks: a link and a short note per reason and per tool, edited on the group page,
kept with history, and read by one selector that alerts can call."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import failure_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, Runbook, RunbookRevision
from triage.selectors import runbooks_for
from triage.services import runbook_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def group() -> FailureGroup:
    batch_ingest(owner="runbooks", items=[failure_item(tool="getDelivery", collection="logistics")])
    return FailureGroup.objects.get(tool="getDelivery")


def _save(client: Any, group: FailureGroup, **fields: str) -> Any:
    return client.post(f"/triage/groups/{group.pk}/runbook", fields)


def test_a_saved_reason_runbook_shows_beside_the_catalog_advice_as_a_safe_link(
    group: FailureGroup, client_as: Any
) -> None:
    operator = client_as("operator")
    response = _save(
        operator, group, subject="reason", url="https://wiki.example.com/5xx", note="Page #payments"
    )
    assert response.status_code == 302 and response["Location"].endswith("#runbooks")
    html = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert (
        '<a href="https://wiki.example.com/5xx" rel="noopener noreferrer" target="_blank"' in html
    )
    assert "Page #payments" in html
    # Beside the catalog's advice: the runbook card follows the "what usually fixes it" card.
    assert html.index("What it means and what usually fixes it") < html.index('id="runbooks"')
    assert html.index('id="runbooks"') < html.index("<h3>Act</h3>")


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "ftp://files.example.com/runbook",
        "wiki/runbook",
        "https://",
        "https://user:secret@wiki.example.com/x",
        "https://wiki.example.com/" + "x" * 600,
        "https://wiki.example.com/\x00",
    ],
)
def test_a_link_that_is_not_plain_http_is_refused_in_words_and_the_typing_is_kept(
    group: FailureGroup, client_as: Any, url: str
) -> None:
    operator = client_as("operator")
    response = _save(operator, group, subject="reason", url=url, note="kept note")
    assert response.status_code == 302
    page = operator.get(response["Location"])
    html = page.content.decode()
    assert "Runbook link:" in html and "url:" not in html
    assert "kept note" in html  # what was typed is still in the form
    assert not Runbook.objects.exists()
    # The draft is shown once: reloading shows the saved state again.
    assert "kept note" not in operator.get(f"/triage/groups/{group.pk}/").content.decode()


def test_a_tool_runbook_of_the_collection_wins_over_the_tool_everywhere(
    group: FailureGroup, client_as: Any, django_assert_num_queries: Any
) -> None:
    operator = client_as("operator")
    _save(operator, group, subject="tool", scope="every", url="https://w.example/any", note="")
    with django_assert_num_queries(1):
        found = runbooks_for(reason="http_5xx", tool="getDelivery", collection="logistics")
    assert found.tool is not None and found.tool.url == "https://w.example/any"
    assert found.reason is None
    _save(operator, group, subject="tool", scope="collection", url="https://w.example/log")
    found = runbooks_for(reason="http_5xx", tool="getDelivery", collection="logistics")
    assert found.tool is not None and found.tool.url == "https://w.example/log"
    # Another collection's getDelivery still gets the one for every collection.
    other = runbooks_for(reason="http_5xx", tool="getDelivery", collection="shop")
    assert other.tool is not None and other.tool.url == "https://w.example/any"
    assert not runbooks_for(reason="timeout", tool="otherTool", collection="logistics")


def test_every_change_is_kept_with_who_when_before_and_after(
    group: FailureGroup, user_with_role: Any
) -> None:
    alice, bob = user_with_role("operator"), user_with_role("admin")
    runbook_set(
        subject="reason", reason="http_5xx", url="https://a.example/1", note="", actor=alice
    )
    runbook_set(subject="reason", reason="http_5xx", url="https://a.example/1", note="", actor=bob)
    runbook_set(
        subject="reason", reason="http_5xx", url="https://a.example/2", note="call", actor=bob
    )
    runbook_set(subject="reason", reason="http_5xx", url="", note="", actor=alice)  # cleared
    revisions = list(RunbookRevision.objects.order_by("id"))
    assert [(r.actor, r.url_before, r.url_after, r.note_after) for r in revisions] == [
        (alice, "", "https://a.example/1", ""),
        (bob, "https://a.example/1", "https://a.example/2", "call"),
        (alice, "https://a.example/2", "", ""),
    ]  # saving what was already there is no change
    assert not runbooks_for(reason="http_5xx", tool="", collection="")  # cleared is absent


def test_the_group_page_lists_the_runbook_history(group: FailureGroup, client_as: Any) -> None:
    operator = client_as("operator")
    _save(operator, group, subject="reason", url="https://a.example/old", note="")
    _save(operator, group, subject="reason", url="https://a.example/new", note="")
    html = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert "2 changes" in html
    assert "https://a.example/old</span> → <span" in html


def test_viewers_read_runbooks_but_cannot_edit_them(group: FailureGroup, client_as: Any) -> None:
    runbook_set(subject="reason", reason="http_5xx", url="https://a.example/", note="", actor=None)
    viewer = client_as("viewer")
    html = viewer.get(f"/triage/groups/{group.pk}/").content.decode()
    assert "https://a.example/" in html and "Edit the reason" not in html
    assert _save(viewer, group, subject="reason", url="https://b.example/").status_code == 403
    assert Runbook.objects.get().url == "https://a.example/"


def test_a_group_without_a_tool_has_no_tool_runbook(client_as: Any) -> None:
    batch_ingest(owner="runbooks", items=[failure_item(tool="", reason="timeout")])
    group = FailureGroup.objects.get(reason="timeout")
    operator = client_as("operator")
    response = _save(operator, group, subject="tool", url="https://a.example/")
    assert response.status_code == 302 and not Runbook.objects.exists()
    html = operator.get(response["Location"]).content.decode()
    assert "This group has no tool" in html


def test_a_note_over_the_limit_is_refused_with_the_note_kept(
    group: FailureGroup, client_as: Any
) -> None:
    operator = client_as("operator")
    response = _save(operator, group, subject="reason", url="", note="n" * 501)
    html = operator.get(response["Location"]).content.decode()
    assert "Note: Ensure this value has at most 500 characters" in html
    assert "n" * 501 in html
    assert not Runbook.objects.exists()
