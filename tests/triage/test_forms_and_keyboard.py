"""Small things a person expects: refused forms say why in words and keep what was typed;
the triage and group pages carry what their keyboard shortcuts need; a skip link; the group
timeline's axes are labelled."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.factories import failure_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup, GroupStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def groups() -> list[FailureGroup]:
    now = timezone.now()
    batch_ingest(
        owner="keys",
        items=[
            failure_item(tool="getDelivery", occurred_at=(now - timedelta(minutes=5)).isoformat()),
            failure_item(tool="getOrder", occurred_at=(now - timedelta(minutes=4)).isoformat()),
            failure_item(reason="timeout", occurred_at=(now - timedelta(minutes=3)).isoformat()),
        ],
    )
    return list(FailureGroup.objects.order_by("pk"))


def test_a_mute_in_the_past_says_so_in_words_and_keeps_the_typed_moment(
    groups: list[FailureGroup], client_as: Any
) -> None:
    group = groups[0]
    operator = client_as("operator")
    response = operator.post(
        f"/triage/groups/{group.pk}/act",
        {"action": "mute", "muted_until": "2020-01-02T03:04"},
        follow=True,
    )
    html = response.content.decode()
    assert "Mute until: The mute must end in the future." in html
    assert "muted_until:" not in html
    assert 'value="2020-01-02T03:04"' in html  # the typed moment is still in the field
    assert 'aria-invalid="true"' in html
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN


def test_a_refused_note_keeps_nothing_else_and_a_refused_assign_keeps_its_form_apart(
    groups: list[FailureGroup], client_as: Any
) -> None:
    group = groups[0]
    operator = client_as("operator")
    html = operator.post(
        f"/triage/groups/{group.pk}/act", {"action": "note", "note": "   "}, follow=True
    ).content.decode()
    assert "Note: Write the note." in html
    html = operator.post(
        f"/triage/groups/{group.pk}/act", {"action": "assign"}, follow=True
    ).content.decode()
    assert "Assignee: Choose whom to assign." in html
    # The error sits in the assign form, not in the mute or note forms.
    assign_form = html[html.index('value="assign"') : html.index('value="mute"')]
    assert "Choose whom to assign." in assign_form


def test_a_refused_bulk_action_says_why_and_keeps_the_note(
    groups: list[FailureGroup], client_as: Any
) -> None:
    operator = client_as("operator")
    count = len(operator.get("/").context["overview"].group_ids)
    response = operator.post(
        "/triage/bulk",
        {"action": "assign", "confirm_count": str(count), "query": "", "note": "handover"},
        follow=True,
    )
    html = response.content.decode()
    assert "Assignee: Choose whom to assign." in html and "assignee:" not in html
    assert 'value="handover"' in html
    assert re.search(r'<option value="assign"\s+selected>', html)
    assert not FailureGroup.objects.exclude(assignee=None).exists()


def test_a_row_shortcut_acts_on_the_row_and_comes_back_to_the_whole_list(
    groups: list[FailureGroup], client_as: Any
) -> None:
    operator = client_as("operator")
    response = operator.post(
        "/triage/bulk",
        {
            "action": "acknowledge",
            "confirm_count": "2",
            "query": "sort=last_seen&stage=execute&reason=http_5xx",
            "return_query": "sort=last_seen",
        },
    )
    assert response.status_code == 302 and response["Location"] == "/?sort=last_seen"
    statuses = dict(FailureGroup.objects.values_list("reason", "status").distinct())
    assert statuses == {"http_5xx": GroupStatus.ACKNOWLEDGED, "timeout": GroupStatus.OPEN}
    # A return address the triage page would refuse is ignored: back to the acted-on view.
    response = operator.post(
        "/triage/bulk",
        {"action": "resolve", "confirm_count": "1", "query": "reason=timeout",
         "return_query": "window=forever&evil=1"},
    )  # fmt: skip
    assert response["Location"] == "/?reason=timeout"
    # From the default view (no query at all) it comes back to the default view.
    batch_ingest(owner="keys", items=[failure_item(reason="timeout")])
    response = operator.post(
        "/triage/bulk",
        {"action": "acknowledge", "confirm_count": "1", "query": "stage=execute&reason=timeout",
         "return_query": ""},
    )  # fmt: skip
    assert response["Location"] == "/"


def test_a_group_view_row_shortcut_acts_on_that_group_only(
    groups: list[FailureGroup], client_as: Any
) -> None:
    """ "a" and "r" on a row of the group view post its one group: the reason's other group
    is left alone, and the list it came from (the group view) comes back."""
    operator = client_as("operator")
    html = operator.get("/?view=groups").content.decode()
    delivery = next(group for group in groups if group.tool == "getDelivery")
    assert (
        f'<tr class="group-row" data-shortcut-row data-group="{delivery.pk}" data-stage="execute" '
        'data-reason="http_5xx" data-groups="1" data-name="http_5xx · getDelivery · shop">'
    ) in html
    assert 'data-confirm-acknowledge-group="Acknowledge the group {group}?"' in html
    response = operator.post(
        "/triage/bulk",
        {"action": "acknowledge", "confirm_count": "1", "groups": str(delivery.pk),
         "query": "view=groups&stage=execute&reason=http_5xx", "return_query": "view=groups"},
    )  # fmt: skip
    assert response.status_code == 302 and response["Location"] == "/?view=groups"
    statuses = dict(FailureGroup.objects.values_list("tool", "status"))
    assert statuses["getDelivery"] == GroupStatus.ACKNOWLEDGED
    assert statuses["getOrder"] == GroupStatus.OPEN
    # A group the filter does not show (timeout under http_5xx), or no group's id, changes
    # nothing.
    timeout = next(group for group in groups if group.reason == "timeout")
    for chosen, said in ((str(timeout.pk), "now shows 0 groups"), ("1;2", "not rows of this page")):
        refused = operator.post(
            "/triage/bulk",
            {"action": "resolve", "confirm_count": "1", "groups": chosen,
             "query": "stage=execute&reason=http_5xx", "return_query": "view=groups"},
            follow=True,
        )  # fmt: skip
        assert said in refused.content.decode()
    assert not FailureGroup.objects.filter(status=GroupStatus.RESOLVED).exists()


def test_the_triage_page_carries_its_shortcuts(groups: list[FailureGroup], client_as: Any) -> None:
    html = client_as("operator").get("/").content.decode()
    assert '<a class="skip-link" href="#main">' in html and '<main id="main"' in html
    assert "data-shortcut-search" in html and 'id="shortcuts"' in html
    assert re.search(r'<tr class="reason" data-shortcut-row data-stage="execute" '
                     r'data-reason="http_5xx" data-groups="2">', html)  # fmt: skip
    assert 'id="row-action"' in html
    # A viewer gets the list and the moves, not the form that acts.
    viewer_html = client_as("viewer").get("/").content.decode()
    assert 'id="shortcuts"' in viewer_html and 'id="row-action"' not in viewer_html


def test_the_group_page_carries_its_shortcuts_and_a_labelled_timeline(
    groups: list[FailureGroup], client_as: Any
) -> None:
    group = groups[0]
    html = client_as("operator").get(f"/triage/groups/{group.pk}/").content.decode()
    assert 'data-shortcut="a"' in html and 'data-shortcut="r"' in html
    assert "data-shortcut-search-link" in html and "data-shortcut-row" in html
    figure = html[html.index('<figure class="timeline-figure">') : html.index("</figure>")]
    assert "Records per hour over the last 14 days, peak 1 per hour" in figure
    assert "Up: records per hour" in figure and "Along: days (UTC)" in figure
    assert figure.count('class="day') >= 13  # a label at each day boundary of 14 days
    # The days are the person's days, and the caption says whose.
    seoul = client_as("operator")
    seoul.cookies["desk_tz"] = "Asia/Seoul"
    html = seoul.get(f"/triage/groups/{group.pk}/").content.decode()
    figure = html[html.index('<figure class="timeline-figure">') : html.index("</figure>")]
    assert "Along: days (KST)" in figure


def test_a_long_tool_name_is_cut_on_the_list_with_the_whole_name_on_hover(
    client_as: Any,
) -> None:
    long_name = "getCustomerSubscriptionBillingHistoryWithInvoiceLineItemsAndTaxBreakdownV2Beta"
    long_name = long_name + "X" * (84 - len(long_name))
    batch_ingest(owner="long", items=[failure_item(tool=long_name)])
    html = client_as("viewer").get("/").content.decode()
    assert f'<span class="code truncate" title="{long_name}">{long_name}</span>' in html
    group = FailureGroup.objects.get(tool=long_name)
    group_html = client_as("operator").get(f"/triage/groups/{group.pk}/").content.decode()
    assert f'class="code truncate" title="{long_name}"' in group_html


def test_a_draft_is_for_the_page_it_was_refused_on_not_a_visit_much_later(
    groups: list[FailureGroup], client_as: Any, monkeypatch: Any
) -> None:
    from core import drafts

    group = groups[0]
    operator = client_as("operator")
    operator.post(f"/triage/groups/{group.pk}/act", {"action": "note", "note": " "})
    later = drafts.time.time() + drafts.DRAFT_LIFETIME_SECONDS + 1
    monkeypatch.setattr(drafts.time, "time", lambda: later)
    html = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert "Write the note." in html  # the message says what happened
    assert "form-errors" not in html  # but the form no longer holds the old draft


@pytest.mark.services("postgres")
def test_the_people_to_assign_are_read_in_one_statement_without_a_server_side_cursor() -> None:
    """Django reads a model select's choices through QuerySet.iterator(), a server-side
    cursor on PostgreSQL (DECLARE, FETCH, CLOSE: three round trips on every triage page);
    the bulk bar's people are read in one statement, their names and nothing else."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from triage.forms import BulkActionForm

    people = get_user_model()
    for name in ("zoe", "ahn", "min"):
        people.objects.create_user(name, password="a-long-enough-password")
    people.objects.create_user("left", password="a-long-enough-password", is_active=False)
    with CaptureQueriesContext(connection) as captured:
        html = str(BulkActionForm()["assignee"])
    (statement,) = [query["sql"] for query in captured]
    assert statement.startswith("SELECT") and '"password"' not in statement
    names = re.findall(r'<option value="\d+">([^<]+)</option>', html)
    assert names == ["ahn", "min", "zoe"]
