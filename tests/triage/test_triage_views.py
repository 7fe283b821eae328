from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.intake.ingest import DESK_CHANNEL, DESK_OWNER, batch_ingest
from triage.models import BulkAction, FailureGroup, GroupEvent, GroupStatus
from triage.services import group_act

pytestmark = pytest.mark.django_db


def ingest(client: APIClient, items: list[dict[str, Any]]) -> None:
    response = client.post(
        "/api/v1/ingest", data=json.dumps({"items": items}), content_type="application/json"
    )
    assert response.status_code == 200, response.content


def _from_quality_lab(*items: dict[str, Any]) -> None:
    """Quality Lab's records come only through its own channel."""
    outcome = batch_ingest(owner=DESK_OWNER, channel=DESK_CHANNEL, items=list(items))
    assert outcome.as_dict()["accepted"] == len(items)


def recent(minutes: int = 5) -> str:
    return (timezone.now() - timedelta(minutes=minutes)).isoformat()


@pytest.fixture
def traffic(ingest_client: APIClient) -> APIClient:
    ingest(
        ingest_client,
        [
            failure_item(occurred_at=recent(), tool="getDelivery", collection="logistics"),
            failure_item(occurred_at=recent(), tool="getDelivery", collection="logistics"),
            failure_item(occurred_at=recent(), tool="getOrder", collection="orders"),
            failure_item(
                stage="synthesize",
                reason="unsatisfied_field",
                tool="getOrderDetail",
                collection="orders",
                occurred_at=recent(),
                evidence={"field_name": "orderNo"},
            ),
            failure_item(stage="xgen_transport", reason="sse_dropped", occurred_at=recent()),
            failure_item(occurred_at=recent(60 * 24 * 3), tool="oldTool"),
        ],
    )
    return ingest_client


def test_anonymous_visitors_are_sent_to_sign_in(db: Any) -> None:
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_triage_page_groups_by_stage_in_lifecycle_order(traffic: Any, client_as: Any) -> None:
    response = client_as("viewer").get("/?sort=stage")
    assert response.status_code == 200
    assert next(t.name for t in response.templates) == "triage/triage.html"
    html = response.content.decode()
    assert html.index('id="stage-synthesize"') < html.index('id="stage-execute"')
    assert html.index('id="stage-execute"') < html.index('id="stage-xgen_transport"')
    assert "adapter stage" in html and "unmapped" in html
    assert (
        "required consume field" in html
        or "cannot be supplied" in html.lower()
        or "usual fix" in html
    )
    overview = response.context["overview"]
    assert overview.total == 5  # the 3-day-old record is outside the default 24h window


def test_htmx_requests_get_only_the_results(traffic: Any, client_as: Any) -> None:
    response = client_as("viewer").get("/?lane=retry_safe", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="results" ')
    assert "<html" not in html


@pytest.mark.parametrize(
    ("query", "reasons"),
    [
        ("collection=orders", {"http_5xx", "unsatisfied_field"}),
        ("tool=getDelivery", {"http_5xx"}),
        ("lane=input_stale", {"unsatisfied_field"}),
        ("q=sse", {"sse_dropped"}),
        ("window=7d&tool=oldTool", {"http_5xx"}),
        ("tool=oldTool", set()),
        ("source=quality_lab", set()),
        ("execution_state=not_started", {"unsatisfied_field"}),
    ],
)
def test_filters_narrow_the_page(
    traffic: Any, client_as: Any, query: str, reasons: set[str]
) -> None:
    overview = client_as("viewer").get(f"/?{query}").context["overview"]
    assert {row.reason for section in overview.sections for row in section.rows} == reasons


def test_status_filter_hides_resolved_groups_by_default(traffic: Any, client_as: Any) -> None:
    FailureGroup.objects.filter(reason="sse_dropped").update(status=GroupStatus.RESOLVED)
    client = client_as("viewer")
    assert "sse_dropped" not in client.get("/").content.decode()
    assert "sse_dropped" in client.get("/?status=resolved").content.decode()


def test_a_bad_custom_window_is_a_form_error(traffic: Any, client_as: Any) -> None:
    response = client_as("viewer").get("/?window=custom")
    assert response.status_code == 400
    assert "A custom window needs a start." in response.content.decode()


@pytest.mark.parametrize(
    "query",
    [
        # Each answered 500 (OverflowError) or took seconds and hundreds of MB before.
        "status=all&window=custom&since=0001-01-01T00:00&until=9999-12-31T23:00",
        "window=custom&since=0001-01-01T00:00&until=0001-01-01T01:00",
        "window=custom&since=9999-12-31T22:00",
        "window=custom&since=2000-01-01T00:00",  # longer than TRIAGE_MAX_WINDOW_DAYS
        "window=forever",
        "status=all&lane=nowhere&collection=" + "x" * 300,
        "q=a%00b",
    ],
)
def test_a_window_or_filter_the_page_cannot_use_is_a_400_showing_why(
    traffic: Any, client_as: Any, query: str
) -> None:
    response = client_as("viewer").get(f"/?{query}")
    assert response.status_code == 400
    html = response.content.decode()
    assert "cannot show what the address asks for" in html
    # The page, with the refused filters left out (and its first screen's window).
    assert re.search(r"failures in the last (24 hours|60 minutes)", html)
    assert "xxxx" not in html.split('id="results"')[1]  # links never carry a refused value
    partial = client_as("viewer").get(f"/?{query}", headers={"HX-Request": "true"})
    assert partial.status_code == 400
    assert "cannot show what the address asks for" in partial.content.decode()


def test_a_refused_filter_leaves_the_others_applied(traffic: Any, client_as: Any) -> None:
    response = client_as("viewer").get("/?collection=logistics&window=custom&since=zzz")
    assert response.status_code == 400
    overview = response.context["overview"]
    assert {
        row.group.collection for s in overview.sections for r in s.rows for row in r.groups
    } == {"logistics"}


def test_a_group_page_cursor_that_is_not_one_is_a_400_over_the_newest_records(
    traffic: Any, client_as: Any
) -> None:
    group = FailureGroup.objects.get(collection="orders", reason="http_5xx")
    client = client_as("viewer")
    stamp = "2026-01-01T00:00:00"
    junks = ("zzz", "0001-01-01T00:00:00+14:00_1", f"{stamp}_1", f"{stamp}+00:00_x",
             f"{stamp}+00:00_" + "9" * 40)  # fmt: skip
    for junk in junks:
        response = client.get(f"/triage/groups/{group.pk}/", {"before": junk})
        assert response.status_code == 400, junk
        html = response.content.decode()
        assert "Not a page of this group" in html and "Showing the newest records." in html
        assert "downstream returned 503" in html  # the newest record is listed


def test_empty_states_say_what_to_send(client_as: Any) -> None:
    html = client_as("viewer").get("/").content.decode()
    assert "POST /api/v1/ingest" in html and "/api/docs/" in html
    html = client_as("viewer").get("/?tool=nothing").content.decode()
    assert "No failure matches these filters" in html


def _many_groups(count: int) -> None:
    now = timezone.now()
    from triage.models import FailureGroupBucket, FailureGroupFacet

    groups = FailureGroup.objects.bulk_create(
        FailureGroup(
            collection=f"c{n % 5}",
            stage=("execute", "synthesize", "retrieve")[n % 3],
            reason=("http_5xx", "enum_required", "not_retrieved", "timeout")[n % 4],
            tool=f"tool{n}",
            count=3,
            first_seen=now,
            last_seen=now,
            lane="retry_safe",
        )
        for n in range(count)
    )
    hour = now.replace(minute=0, second=0, microsecond=0)
    FailureGroupBucket.objects.bulk_create(
        FailureGroupBucket(group=g, hour=hour - timedelta(hours=h), count=1)
        for g in groups
        for h in range(3)
    )
    FailureGroupFacet.objects.bulk_create(
        FailureGroupFacet(group=g, dimension=dimension, value=value, count=3)
        for g in groups
        for dimension, value in (("execution_state", "completed"), ("source", "runtime"))
    )


@pytest.mark.parametrize("count", [10, 1000])
def test_triage_page_query_count_does_not_grow_with_groups(
    client_as: Any, django_assert_max_num_queries: Any, count: int
) -> None:
    _many_groups(count)
    client = client_as("operator")
    with django_assert_max_num_queries(12):
        response = client.get("/")
    assert len(response.context["overview"].group_ids) == count


@pytest.mark.parametrize("count", [10, 1000])
def test_group_page_query_count_does_not_grow_with_records(
    ingest_client: APIClient, client_as: Any, django_assert_max_num_queries: Any, count: int
) -> None:
    for start in range(0, count, 500):
        ingest(
            ingest_client,
            [failure_item(occurred_at=recent()) for _ in range(min(500, count - start))],
        )
    group = FailureGroup.objects.get()
    client = client_as("operator")
    # 16: the per-release table (one grouped query) and the resolve form's releases of the
    # collection (one) joined the page's reads; then the fixes panel (the cases a verification
    # would run and whether the group has fixes, one query; its fixes only when it has some),
    # and the person's roles came with their groups' permissions (one query fewer).
    with django_assert_max_num_queries(16):
        response = client.get(f"/triage/groups/{group.pk}/")
    assert response.status_code == 200
    assert len(response.context["page"].records) == min(25, count)


def test_group_page_pages_records_newest_first(ingest_client: APIClient, client_as: Any) -> None:
    ingest(ingest_client, [failure_item(f"r{n}", occurred_at=recent(n)) for n in range(30)])
    group = FailureGroup.objects.get()
    client = client_as("viewer")
    first = client.get(f"/triage/groups/{group.pk}/").context["page"]
    assert [r.client_id for r in first.records][:2] == ["r0", "r1"]
    second = client.get(f"/triage/groups/{group.pk}/", {"before": first.older_cursor})
    assert [r.client_id for r in second.context["page"].records] == [f"r{n}" for n in range(25, 30)]
    partial = client.get(
        f"/triage/groups/{group.pk}/",
        {"before": first.older_cursor},
        headers={"HX-Request": "true"},
    ).content.decode()
    assert partial.lstrip().startswith('<section id="records">') and "<html" not in partial


ACTIONS = [
    {"action": "acknowledge"},
    {"action": "resolve"},
    {"action": "reopen"},
    {"action": "note", "note": "looked at it"},
    {"action": "mute", "mute_count": "3"},
]


@pytest.mark.parametrize("role", ["", "viewer", "reviewer", "operator", "admin"])
@pytest.mark.parametrize("data", ACTIONS, ids=[a["action"] for a in ACTIONS])
def test_only_operators_and_admins_act_on_groups(
    traffic: Any, client_as: Any, role: str, data: dict[str, str]
) -> None:
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    if data["action"] == "reopen":
        FailureGroup.objects.filter(pk=group.pk).update(status=GroupStatus.RESOLVED)
    response = client_as(role).post(f"/triage/groups/{group.pk}/act", data)
    events = GroupEvent.objects.filter(group=group, actor__isnull=False)
    if role in ("operator", "admin"):
        assert response.status_code == 302
        assert events.get().action == data["action"]
    else:
        assert response.status_code == 403
        assert not events.exists()


@pytest.mark.parametrize("url", ["/triage/groups/{pk}/act", "/triage/bulk"])
def test_a_post_without_csrf_token_fails(traffic: Any, client_as: Any, url: str) -> None:
    group = FailureGroup.objects.first()
    assert group is not None
    client = client_as("operator", enforce_csrf_checks=True)
    response = client.post(url.format(pk=group.pk), {"action": "resolve", "confirm_count": "1"})
    assert response.status_code == 403
    assert not GroupEvent.objects.filter(actor__isnull=False).exists()


def test_viewers_see_no_action_buttons(traffic: Any, client_as: Any) -> None:
    group = FailureGroup.objects.first()
    assert group is not None
    for path in ("/", f"/triage/groups/{group.pk}/"):
        html = client_as("viewer").get(path).content.decode()
        assert "Resolve</button>" not in html and "Apply to" not in html


def test_every_status_change_keeps_who_when_and_why(traffic: Any, client_as: Any) -> None:
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    client = client_as("operator")
    client.post(f"/triage/groups/{group.pk}/act", {"action": "resolve", "note": "added a default"})
    event = GroupEvent.objects.get(group=group)
    assert (event.status_before, event.status_after, event.note) == (
        "open",
        "resolved",
        "added a default",
    )
    assert event.actor is not None and event.actor.username == "operator-user"
    page = client.get(f"/triage/groups/{group.pk}/").content.decode()
    assert "added a default" in page


def test_a_resolved_group_that_sees_a_new_record_shows_as_regressed(
    traffic: APIClient, client_as: Any
) -> None:
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    group_act(group=group, actor=None, action="resolve")
    ingest(
        traffic,
        [failure_item(stage="synthesize", reason="unsatisfied_field", tool="getOrderDetail",
                      collection="orders", occurred_at=recent(1))],
    )  # fmt: skip
    group.refresh_from_db()
    assert group.status == GroupStatus.REGRESSED
    assert GroupEvent.objects.filter(group=group, action="regressed").exists()
    overview = client_as("viewer").get("/").context["overview"]
    assert overview.regressed_groups == 1


def test_mute_until_count_ends_after_that_many_new_records(traffic: APIClient) -> None:
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    group_act(group=group, actor=None, action="mute", mute_count=2)
    again = {"stage": "synthesize", "reason": "unsatisfied_field", "tool": "getOrderDetail",
             "collection": "orders"}  # fmt: skip
    ingest(traffic, [failure_item(**again, occurred_at=recent(1))])
    group.refresh_from_db()
    assert (group.status, group.mute_remaining_count) == (GroupStatus.MUTED, 1)
    ingest(traffic, [failure_item(**again, occurred_at=recent(1))])
    group.refresh_from_db()
    assert (group.status, group.mute_remaining_count) == (GroupStatus.OPEN, None)
    assert GroupEvent.objects.filter(group=group, action="unmuted").exists()


def test_mute_needs_a_time_or_a_count(traffic: Any, client_as: Any) -> None:
    group = FailureGroup.objects.first()
    assert group is not None
    response = client_as("operator").post(
        f"/triage/groups/{group.pk}/act", {"action": "mute"}, follow=True
    )
    assert (
        "Mute for a preset time, until a time, or for a number of new records: choose one."
        in response.content.decode()
    )
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN


def test_bulk_acts_on_exactly_the_filtered_groups_and_can_be_undone(
    traffic: Any, client_as: Any
) -> None:
    client = client_as("operator")
    query = "collection=logistics&window=24h"
    shown = client.get(f"/?{query}").context["overview"].group_ids
    assert len(shown) == 1
    response = client.post(
        "/triage/bulk", {"action": "resolve", "confirm_count": "1", "query": query}
    )
    assert response.status_code == 302 and response["Location"] == f"/?{query}"
    resolved = FailureGroup.objects.filter(status=GroupStatus.RESOLVED)
    assert list(resolved.values_list("pk", flat=True)) == shown
    bulk = BulkAction.objects.get()
    page = client.get(f"/?{query}").content.decode()  # the view it was applied from
    assert f"/triage/bulk/{bulk.pk}/undo" in page
    undone = client.post(f"/triage/bulk/{bulk.pk}/undo")
    assert undone["Location"] == f"/?{query}"  # back to that view
    assert not FailureGroup.objects.filter(status=GroupStatus.RESOLVED).exists()
    assert GroupEvent.objects.filter(action="undo").count() == 1


def test_bulk_on_the_first_screen_acts_on_its_window(
    ingest_client: APIClient, client_as: Any
) -> None:
    """A view without a window in its URL shows the last 60 minutes when something failed in
    them: the bulk bar acts on those groups, not on the last 24 hours'."""
    ingest(
        ingest_client,
        [
            failure_item(occurred_at=recent(5), tool="now"),
            failure_item(occurred_at=recent(180), tool="earlier"),
        ],
    )
    client = client_as("operator")
    shown = client.get("/").context["overview"].group_ids
    assert [FailureGroup.objects.get(pk=pk).tool for pk in shown] == ["now"]
    client.post("/triage/bulk", {"action": "acknowledge", "confirm_count": "1", "query": ""})
    acknowledged = FailureGroup.objects.filter(status=GroupStatus.ACKNOWLEDGED)
    assert list(acknowledged.values_list("tool", flat=True)) == ["now"]


def test_the_undo_offer_is_gone_once_the_view_changes(traffic: Any, client_as: Any) -> None:
    client = client_as("operator")
    query = "collection=logistics&window=24h"
    client.post("/triage/bulk", {"action": "acknowledge", "confirm_count": "1", "query": query})
    bulk = BulkAction.objects.get()
    assert f"/triage/bulk/{bulk.pk}/undo" not in client.get("/?window=7d").content.decode()
    # Gone for good: coming back to the first view does not bring it back.
    assert f"/triage/bulk/{bulk.pk}/undo" not in client.get(f"/?{query}").content.decode()


def test_ticked_rows_narrow_the_bulk_action_to_their_groups(traffic: Any, client_as: Any) -> None:
    client = client_as("operator")
    page = client.get("/?window=24h").content.decode()
    assert (
        '<input type="checkbox" class="choose-row" name="rows" value="execute/http_5xx" '
        'form="bulk-form" data-groups="2" aria-label="http_5xx">'
    ) in page
    response = client.post(
        "/triage/bulk",
        {
            "action": "acknowledge",
            "confirm_count": "1",
            "query": "window=24h",
            "rows": ["xgen_transport/sse_dropped"],
        },
    )
    assert response.status_code == 302
    acknowledged = FailureGroup.objects.filter(status=GroupStatus.ACKNOWLEDGED)
    assert list(acknowledged.values_list("reason", flat=True)) == ["sse_dropped"]
    for rows in (["execute"], ["Execute/HTTP"], ["a/b"] * 501):
        refused = client.post(
            "/triage/bulk",
            {"action": "resolve", "confirm_count": "0", "query": "window=24h", "rows": rows},
            follow=True,
        )
        assert "not rows of this page" in refused.content.decode()
    assert not FailureGroup.objects.filter(status=GroupStatus.RESOLVED).exists()
    viewer = client_as("viewer").get("/?window=24h").content.decode()
    assert 'class="choose-row"' not in viewer  # no bar to act with, no ticks


def test_bulk_refuses_when_the_filter_now_shows_another_count(traffic: Any, client_as: Any) -> None:
    client = client_as("operator")
    response = client.post(
        "/triage/bulk",
        {"action": "resolve", "confirm_count": "7", "query": "window=24h"},
        follow=True,
    )
    assert "nothing was changed" in response.content.decode()
    assert not FailureGroup.objects.filter(status=GroupStatus.RESOLVED).exists()


def test_undo_leaves_groups_someone_changed_since(traffic: Any, client_as: Any) -> None:
    client = client_as("operator")
    shown = client.get("/?collection=orders").context["overview"].group_ids
    client.post("/triage/bulk", {"action": "acknowledge", "confirm_count": str(len(shown)),
                                 "query": "collection=orders"})  # fmt: skip
    changed = FailureGroup.objects.get(pk=shown[0])
    group_act(group=changed, actor=None, action="resolve")
    client.post(f"/triage/bulk/{BulkAction.objects.get().pk}/undo")
    changed.refresh_from_db()
    assert changed.status == GroupStatus.RESOLVED
    assert FailureGroup.objects.get(pk=shown[1]).status == GroupStatus.OPEN


def test_sparkline_bins_are_summed_per_reason_in_the_right_place(
    ingest_client: APIClient,
) -> None:
    from triage.selectors import triage_overview

    now = timezone.now()
    hours_ago = [0, 0, 1, 30, 24 * 6, 24 * 29]  # two in the current hour, one a month back
    ingest(
        ingest_client,
        [
            failure_item(occurred_at=(now - timedelta(hours=h)).isoformat(), tool=f"tool{h % 2}")
            for h in hours_ago
        ],
    )
    # The window ends after the records that occurred "now" (it ends before its end moment).
    end = now + timedelta(seconds=1)
    day = triage_overview(start=end - timedelta(hours=24), end=end, filters={})
    (row,) = day.sections[0].rows
    assert len(row.spark) == 25 and sum(row.spark) == 3  # 24 whole hours and the current one
    assert row.spark[-1] == 2 and row.spark[-2] == 1  # one bin per hour, newest last
    month = triage_overview(start=end - timedelta(days=30), end=end, filters={})
    (row,) = month.sections[0].rows
    assert month.spark_daily and len(row.spark) == 31  # UTC days, today's included
    assert sum(row.spark) == len(hours_ago) and row.count == len(hours_ago)
    assert row.spark[1] == 1  # 29 days back is the second day of the line
    assert row.spark[-1] + row.spark[-2] >= 3  # the last hour's three, today or yesterday


def spark_recount(overview: Any, filters: dict[str, str]) -> dict[tuple[str, str], list[int]]:
    """Each reason line's bars counted from the records of the groups the filters show."""
    from triage.models import FailureRecord
    from triage.selectors import _triage_filter

    shown = FailureGroup.objects.filter(_triage_filter(filters)).values("pk")
    lines: dict[tuple[str, str], list[int]] = {}
    after = overview.spark_start + timedelta(hours=overview.spark_hours)
    for stage, reason, occurred in FailureRecord.objects.filter(
        group__in=shown, occurred_at__gte=overview.spark_start, occurred_at__lt=after
    ).values_list("group__stage", "group__reason", "occurred_at"):
        hours = int((occurred - overview.spark_start).total_seconds() // 3600)
        line = lines.setdefault((stage, reason), [0] * overview.spark_bins)
        line[hours * overview.spark_bins // overview.spark_hours] += 1
    return lines


@pytest.mark.parametrize(
    "filters",
    [
        {"status": "active", "source": "production"},  # the page's defaults
        {"status": "all"},
        {"status": "active", "source": "production", "stage": "execute", "reason": "http_5xx"},
        {"status": "all", "stage": "execute", "reason": "http_5xx"},
        {"status": "all", "collection": "orders"},  # read from the groups' own buckets
        {"status": "muted"},
    ],
)
def test_a_sparkline_read_by_reason_leaves_out_the_groups_the_filters_leave_out(
    ingest_client: APIClient, filters: dict[str, str]
) -> None:
    """The reason buckets count every group; the page's line counts only the groups it
    shows: a muted and a resolved group of the same reason, and a group only Quality Lab
    reports, are taken away again (in the hours where the shown groups also failed)."""
    from triage.models import FailureReasonBucket
    from triage.selectors import triage_overview

    now = timezone.now()

    def at(hours: float, **body: Any) -> dict[str, Any]:
        return failure_item(occurred_at=(now - timedelta(hours=hours)).isoformat(), **body)

    ingest(
        ingest_client,
        [
            *(at(h, tool="getCart") for h in (0.1, 0.2, 2, 5, 5, 20)),
            *(at(h, tool="muted", collection="orders") for h in (0.3, 2, 2, 7)),
            *(at(h, tool="resolved") for h in (0.4, 5, 23)),
            *(at(h, stage="retrieve", reason="no_candidates", tool="") for h in (1, 5)),
        ],
    )
    _from_quality_lab(*(at(h, tool="getCart-lab", source="quality_lab") for h in (0.5, 2, 5)))
    muted = FailureGroup.objects.get(tool="muted")
    group_act(group=muted, actor=None, action="mute", muted_until=now + timedelta(days=1))
    group_act(group=FailureGroup.objects.get(tool="resolved"), actor=None, action="resolve")
    assert sum(FailureReasonBucket.objects.values_list("count", flat=True)) == 18
    end = now + timedelta(seconds=1)
    for start in (end - timedelta(hours=1), end - timedelta(hours=24)):
        overview = triage_overview(start=start, end=end, filters=filters)
        shown = {(row.stage, row.reason): row.spark for s in overview.sections for row in s.rows}
        expected = spark_recount(overview, filters)
        assert shown == {key: expected.get(key, [0] * overview.spark_bins) for key in shown}
        assert shown, "every filter set shows a line"
        # The rows' counts too, read by either shape of the window statement (the default
        # view's sums every group first; a narrowing filter drops the others' pieces first).
        current, before = (
            records_per_group(start, end),
            records_per_group(start - (end - start), start),
        )
        assert [(row.window_count, row.previous_count) for row in overview.groups_by_count] == [
            (current[row.group.pk], before.get(row.group.pk, 0)) for row in overview.groups_by_count
        ]


def records_per_group(start: Any, end: Any) -> dict[int, int]:
    """What a window's counts must be: its records counted one by one, per group."""
    from triage.models import FailureRecord

    counted: dict[int, int] = {}
    for group_id in FailureRecord.objects.filter(
        occurred_at__gte=start, occurred_at__lt=end
    ).values_list("group_id", flat=True):
        counted[group_id] = counted.get(group_id, 0) + 1
    return counted


@pytest.mark.parametrize(
    ("start_hours_ago", "end_hours_ago"),
    [(1, 0), (24, 0), (47, 3), (24 * 7, 0), (24 * 30, 0), (24 * 9 + 5, 24 * 2 + 7)],
)
def test_window_counts_from_rollups_equal_the_records_in_the_window(
    ingest_client: APIClient, start_hours_ago: int, end_hours_ago: int
) -> None:
    import random

    from triage.selectors import window_counts

    now = timezone.now()
    rng = random.Random(start_hours_ago * 31 + end_hours_ago)
    ingest(
        ingest_client,
        [
            failure_item(
                occurred_at=(now - timedelta(minutes=rng.uniform(0, 60 * 24 * 32))).isoformat(),
                tool=f"tool{rng.randrange(4)}",
            )
            for _ in range(600)
        ]
        # and some in the hours at both edges of the window
        + [
            failure_item(occurred_at=(now - timedelta(hours=hours, minutes=m)).isoformat())
            for hours in (start_hours_ago, end_hours_ago)
            for m in (-50, -5, 5, 25, 50)
            if hours * 60 + m > 0
        ],
    )
    start = now - timedelta(hours=start_hours_ago, minutes=17)
    end = now - timedelta(hours=end_hours_ago)
    counts = window_counts(start=start, end=end, filters={})
    # Exact to the record: whole hours from the counters, the pieces at the edges from the
    # records, whichever side of each edge is shorter.
    assert counts == records_per_group(start, end) and sum(counts.values()) > 0


@pytest.mark.parametrize(
    ("start_minutes_ago", "end_minutes_ago"),
    # inside one hour; from one hour's start; across one hour boundary; ends in the future
    [(40, 10), (60, 0), (75, 5), (61, -30)],
)
def test_a_window_starts_at_its_start_and_ends_before_its_end_to_the_record(
    ingest_client: APIClient, start_minutes_ago: int, end_minutes_ago: int
) -> None:
    from triage.selectors import window_counts
    from triage.timebins import hour_floor

    # Minutes from a fixed hour's :30, so "inside one hour" is one hour whatever the clock says.
    anchor = hour_floor(timezone.now()) - timedelta(minutes=30)
    start = anchor - timedelta(minutes=start_minutes_ago)
    end = anchor - timedelta(minutes=end_minutes_ago)
    moments = [
        start - timedelta(seconds=1),  # just before: out
        start,  # at the start: in
        start + timedelta(seconds=1),
        end - timedelta(seconds=1),  # just before the end: in
        end,  # at the end: out
        end + timedelta(minutes=3),
        hour_floor(start),
        hour_floor(end) + timedelta(minutes=59),
    ]
    ingest(ingest_client, [failure_item(occurred_at=moment.isoformat()) for moment in moments])
    inside = sum(1 for moment in moments if start <= moment < end)
    assert window_counts(start=start, end=end, filters={}, now=anchor) == {
        FailureGroup.objects.get().pk: inside
    }


def test_a_reason_row_links_to_its_groups_and_the_narrowed_page_lists_them(
    ingest_client: APIClient, client_as: Any
) -> None:
    tools = [f"tool{number:02d}" for number in range(8)]
    ingest(ingest_client, [failure_item(occurred_at=recent(), tool=tool) for tool in tools])
    ingest(ingest_client, [failure_item(stage="synthesize", reason="cycle", occurred_at=recent())])
    client = client_as("viewer")
    page = client.get("/?window=7d").content.decode()
    first = FailureGroup.objects.filter(tool=tools[0]).get()
    link = f"/?window=7d&amp;stage={first.stage}&amp;reason={first.reason}"
    assert f'href="{link}">its 8 groups, by tool and collection' in page
    assert (
        '<span class="code truncate">tool00</span> in' not in page
    )  # listed on the narrowed page only
    narrowed = client.get(link.replace("&amp;", "&")).content.decode()
    results = narrowed.split('id="results"')[1]
    assert all(f'<span class="code truncate">{tool}</span> in' in results for tool in tools)
    assert "cycle" not in results  # the other reason is filtered out
    assert f'name="reason" value="{first.reason}"' in narrowed  # kept when other filters change
    assert 'aria-label="show every reason"' in narrowed


def test_a_link_setting_some_filters_shows_the_default_window_and_status(
    traffic: APIClient, client_as: Any
) -> None:
    page = client_as("viewer").get("/?collection=orders").content.decode()
    assert '<option value="active" selected>' in page
    # The first screen is now: something in the filters failed in the last 60 minutes.
    assert '<option value="1h" selected>' in page
    assert "Showing the last 60 minutes: something failed in them." in page
    assert 'href="/?collection=orders&amp;window=24h">the last 24 hours</a>' in page


def test_a_quiet_hour_opens_on_the_last_24_hours_and_says_why(
    ingest_client: APIClient, client_as: Any
) -> None:
    ingest(ingest_client, [failure_item(occurred_at=recent(180))])  # three hours ago
    client = client_as("viewer")
    page = client.get("/").content.decode()
    assert '<option value="24h" selected>' in page
    assert "Nothing failed in the last 60 minutes, so this shows the last 24 hours." in page
    assert "<strong>1</strong> failure in the last 24 hours" in page
    # A window in the URL is the person's choice: no note, no second guess.
    chosen = client.get("/?window=1h").content.decode()
    assert 'id="window-note"' not in chosen and "<strong>0</strong> failures" in chosen


def test_an_adapter_reason_is_marked_as_the_desks_own(
    ingest_client: APIClient, client_as: Any
) -> None:
    ingest(
        ingest_client,
        [
            failure_item(
                stage="execute",
                reason="base_url_not_configured",
                tool="pulls/list",
                collection="github",
                occurred_at=recent(),
                evidence={"base_url_present": False, "request_sent": False},
            )
        ],
    )
    html = client_as("viewer").get("/").content.decode()
    row = html[html.index(">base_url_not_configured</a>") :][:400]
    assert 'title="Triage Desk&#x27;s own reason' in row or "Triage Desk's own reason" in row
    assert ">adapter</span>" in row and "unmapped" not in row
    group = FailureGroup.objects.get(reason="base_url_not_configured")
    assert group.reason_mapped


# --- production first --------------------------------------------------------------------


@pytest.fixture
def mixed_sources(ingest_client: APIClient) -> APIClient:
    ingest(ingest_client, [failure_item(occurred_at=recent(), tool="getCart") for _ in range(2)])
    _from_quality_lab(
        *(
            failure_item(occurred_at=recent(), tool="getCart", source="quality_lab")
            for _ in range(3)
        ),
        failure_item(
            stage="synthesize",
            reason="unsatisfied_field",
            tool="labOnly",
            occurred_at=recent(),
            source="quality_lab",
            evidence={"field_name": "orderNo"},
        ),
    )
    return ingest_client


def test_default_view_shows_production_and_says_so(mixed_sources: Any, client_as: Any) -> None:
    response = client_as("viewer").get("/")
    body = response.content.decode()
    assert response.status_code == 200
    assert response.context["filters"]["source"] == "production"
    assert "labOnly" not in body
    assert "getCart" in body
    assert "Showing production" in body
    assert 'href="/?source=any"' in body
    # The row with both sources names its mix, largest first.
    assert "quality_lab 3 · runtime 2" in body


def test_including_quality_lab_shows_test_only_groups(mixed_sources: Any, client_as: Any) -> None:
    response = client_as("viewer").get("/?source=any&window=1h")
    body = response.content.decode()
    assert "labOnly" in body
    assert "Showing production" not in body
    include = client_as("viewer").get("/?window=1h").content.decode()
    assert 'href="/?window=1h&amp;source=any"' in include


def test_one_source_row_shows_no_mix(mixed_sources: Any, client_as: Any) -> None:
    body = client_as("viewer").get("/?source=quality_lab").content.decode()
    assert "labOnly" in body
    assert body.count('class="small muted source-mix"') == 1  # only the mixed getCart row


@pytest.mark.django_db(transaction=True)
def test_the_triage_page_reads_beside_itself_the_same_rows_in_as_many_queries(
    traffic: Any, client_as: Any, settings: Any
) -> None:
    """On PostgreSQL, outside a transaction, the page reads its sparkline and facets on a
    second connection while it reads its groups (core.side_reads): the same rows, and
    the same number of statements, as read in turn."""
    # A record in the window before: a trend to read.
    ingest(
        traffic,
        [failure_item(occurred_at=recent(60 * 30), tool="getDelivery", collection="logistics")],
    )
    client = client_as("operator")
    shown_of_a_row = ("reason", "count", "previous_count", "spark", "state_mix", "source_mix")

    def shown(side_reads: bool) -> tuple[Any, int, int]:
        settings.TRIAGE_SIDE_READS = side_reads
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/?window=24h")
        assert response.status_code == 200
        rows = [
            [getattr(row, name) for name in shown_of_a_row]
            for section in response.context["overview"].sections
            for row in section.rows
        ]
        beside = sum("beside the page" in query["sql"] for query in queries.captured_queries)
        return rows, len(queries), beside

    in_turn, statements, none_beside = shown(False)
    beside, statements_beside, read_beside = shown(True)
    assert beside == in_turn and len(in_turn) == 3
    assert any(row[2] for row in in_turn)  # a trend
    assert any(sum(row[3]) for row in in_turn) and all(row[4] for row in in_turn)
    assert statements_beside == statements and none_beside == 0
    assert read_beside == (2 if connection.vendor == "postgresql" else 0)


def _overview(client: Client, url: str, *, facet_reads: int = 1) -> Any:
    """The page's overview, from ``facet_reads`` statements on the groups' facets: the
    sums per reason, and each group's facets only for a row whose sums were over other
    groups than its own."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    reads = [query for query in queries.captured_queries if "failuregroupfacet" in query["sql"]]
    assert len(reads) == facet_reads
    return response.context["overview"]


def test_a_row_mixes_the_states_and_sources_of_its_own_groups_only(
    ingest_client: APIClient, client_as: Any
) -> None:
    """A group seen before and after a past window, but quiet in it, is not one of the row's
    groups: its Quality Lab record is not in the row's mix, though the sums per reason saw
    it (seen across the window): the row then reads its groups' facets one by one."""
    now = timezone.now().replace(second=0, microsecond=0)
    ago = lambda days: (now - timedelta(days=days)).isoformat()  # noqa: E731
    ingest(
        ingest_client,
        [
            failure_item(tool="inWindow", occurred_at=ago(9), execution_state="started_unknown"),
            failure_item(tool="quietInWindow", occurred_at=ago(12)),
        ],
    )
    _from_quality_lab(failure_item(tool="quietInWindow", occurred_at=ago(5), source="quality_lab"))
    since, until = ((now - timedelta(days=d)).strftime("%Y-%m-%dT%H:%M") for d in (10, 8))
    client = client_as("viewer")
    overview = _overview(client, f"/?window=custom&since={since}&until={until}", facet_reads=2)
    (row,) = [row for section in overview.sections for row in section.rows]
    assert [group.group.tool for group in row.groups] == ["inWindow"]
    assert row.source_mix == {"runtime": 1}
    assert row.state_mix == {"started_unknown": 1}

    # The last 30 days hold both groups.
    overview = _overview(client, "/?window=30d")
    (row,) = [row for section in overview.sections for row in section.rows]
    assert {group.group.tool for group in row.groups} == {"inWindow", "quietInWindow"}
    assert row.source_mix == {"runtime": 2, "quality_lab": 1}
    assert sum(row.state_mix.values()) == 3 and row.state_mix["started_unknown"] >= 1


def test_a_rows_mix_leaves_out_the_groups_the_filters_hide(
    ingest_client: APIClient, client_as: Any
) -> None:
    """A group only Quality Lab reports is not the production view's, nor are its records
    in the mix of the reason it shares with a production group."""
    ingest(ingest_client, [failure_item(tool="inProduction", occurred_at=recent())])
    _from_quality_lab(
        *(failure_item(tool="inTheLab", occurred_at=recent(), source="quality_lab") for _ in "ab")
    )

    def mix(query: str) -> dict[str, int]:
        overview = _overview(client_as("viewer"), f"/{query}")
        (row,) = [row for section in overview.sections for row in section.rows]
        return row.source_mix

    assert mix("") == {"runtime": 1}
    assert mix("?source=any") == {"quality_lab": 2, "runtime": 1}


def test_bulk_action_without_source_in_its_query_acts_on_production(
    mixed_sources: Any, client_as: Any
) -> None:
    client = client_as("operator")
    shown = client.get("/").context["overview"].group_ids
    response = client.post(
        "/triage/bulk",
        {"action": "acknowledge", "confirm_count": len(shown), "query": ""},
    )
    assert response.status_code == 302
    acknowledged = FailureGroup.objects.filter(status=GroupStatus.ACKNOWLEDGED)
    assert sorted(acknowledged.values_list("pk", flat=True)) == sorted(shown)
    assert not acknowledged.filter(tool="labOnly").exists()


def test_hostile_source_is_a_form_error(client_as: Any) -> None:
    response = client_as("viewer").get("/?source=staging")
    assert response.status_code == 400
    assert "source" in response.context["form"].errors


# --- sort and flags ---------------------------------------------------------------------


def _reasons_in_order(body: str, reasons: list[str]) -> list[str]:
    return sorted(reasons, key=lambda reason: body.index(f">{reason}</a>"))


@pytest.fixture
def rising(ingest_client: APIClient) -> APIClient:
    """http_5xx: 4 now and 4 a day before; sse_dropped: 12 now, 2 a day before (spiking);
    not_retrieved: 1 now, first seen now (new)."""
    day_before = 60 * 24 + 60
    ingest(
        ingest_client,
        [
            *(failure_item(occurred_at=recent(2), tool="getOrder") for _ in range(4)),
            *(failure_item(occurred_at=recent(day_before), tool="getOrder") for _ in range(4)),
            *(
                failure_item(stage="xgen_transport", reason="sse_dropped", occurred_at=recent(m))
                for m in range(10, 22)
            ),
            *(
                failure_item(
                    stage="xgen_transport",
                    reason="sse_dropped",
                    occurred_at=recent(day_before + 5),
                )
                for _ in range(2)
            ),
            failure_item(stage="retrieve", reason="not_retrieved", occurred_at=recent(1)),
        ],
    )
    return ingest_client


def test_default_sort_is_count_in_one_list(rising: Any, client_as: Any) -> None:
    response = client_as("viewer").get("/")
    body = response.content.decode()
    assert response.context["form"].sort_order() == "count"
    assert _reasons_in_order(body, ["http_5xx", "sse_dropped", "not_retrieved"]) == [
        "sse_dropped",
        "http_5xx",
        "not_retrieved",
    ]
    assert 'id="stage-sorted"' in body
    assert 'class="muted small stage-label">xgen_transport<' in body


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("trend", ["sse_dropped", "not_retrieved", "http_5xx"]),
        ("last_seen", ["not_retrieved", "http_5xx", "sse_dropped"]),
        ("first_seen", ["not_retrieved", "http_5xx", "sse_dropped"]),
        ("stage", ["not_retrieved", "http_5xx", "sse_dropped"]),
    ],
)
def test_each_sort_orders_the_rows(
    rising: Any, client_as: Any, sort: str, expected: list[str]
) -> None:
    response = client_as("viewer").get(f"/?sort={sort}&window=24h")
    assert response.status_code == 200
    assert _reasons_in_order(response.content.decode(), expected) == expected
    # The choice stays in the URL the page links to.
    assert f"sort={sort}" in response.context["query"]


def test_new_and_spiking_rows_are_marked(rising: Any, client_as: Any) -> None:
    overview = client_as("viewer").get("/?window=24h").context["overview"]
    rows = {row.reason: row for section in overview.sections for row in section.rows}
    assert rows["not_retrieved"].new and not rows["not_retrieved"].spiking
    assert rows["sse_dropped"].spiking and not rows["sse_dropped"].new
    assert (rows["sse_dropped"].count, rows["sse_dropped"].previous_count) == (12, 2)
    assert not rows["http_5xx"].new and not rows["http_5xx"].spiking
    body = client_as("viewer").get("/?window=24h").content.decode()
    assert body.count('class="pill flag-new"') == 1
    assert body.count('class="pill flag-spiking"') == 1


def test_refused_sort_is_a_form_error_and_falls_back_to_count(rising: Any, client_as: Any) -> None:
    response = client_as("viewer").get("/?sort=-count%3Bdrop")
    assert response.status_code == 400
    assert "sort" in response.context["form"].errors
    assert response.context["form"].sort_order() == "count"


# --- actions that cannot surprise -------------------------------------------------------


def test_bulk_assign_without_an_assignee_changes_nothing(
    traffic: Any, client_as: Any, user_with_role: Any
) -> None:
    client = client_as("operator")
    FailureGroup.objects.update(assignee=user_with_role("admin"))  # someone owns them already
    shown = client.get("/").context["overview"].group_ids
    response = client.post(
        "/triage/bulk",
        {"action": "assign", "assignee": "", "confirm_count": len(shown), "query": ""},
        follow=True,
    )
    assert "Choose whom to assign." in response.content.decode()
    assert FailureGroup.objects.filter(assignee__isnull=True).count() == 0
    assert not BulkAction.objects.exists()


def test_bulk_assign_to_me_assigns_the_person_acting(traffic: Any, client_as: Any) -> None:
    client = client_as("operator")
    shown = client.get("/").context["overview"].group_ids
    page = client.get("/").content.decode()
    assert f"Assign {len(shown)} to me" in page
    client.post(
        "/triage/bulk",
        {"action": "resolve", "assign_to_me": "1", "confirm_count": len(shown), "query": ""},
    )
    assigned = FailureGroup.objects.filter(assignee__username="operator-user")
    assert sorted(assigned.values_list("pk", flat=True)) == sorted(shown)
    assert not FailureGroup.objects.filter(status=GroupStatus.RESOLVED).exists()
    assert BulkAction.objects.get().action == "assign"


def test_unassign_on_the_group_page_is_its_own_action_naming_whom(
    traffic: Any, client_as: Any
) -> None:
    client = client_as("operator")
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    client.post(f"/triage/groups/{group.pk}/act", {"action": "assign", "assign_to_me": "1"})
    group.refresh_from_db()
    assert group.assignee is not None and group.assignee.username == "operator-user"
    page = client.get(f"/triage/groups/{group.pk}/").content.decode()
    assert 'data-confirm="Unassign operator-user from this group?"' in page
    client.post(f"/triage/groups/{group.pk}/act", {"action": "unassign"})
    group.refresh_from_db()
    assert group.assignee is None
    refused = client.post(f"/triage/groups/{group.pk}/act", {"action": "assign"}, follow=True)
    assert "Choose whom to assign." in refused.content.decode()


def test_single_group_action_can_be_undone(traffic: Any, client_as: Any) -> None:
    client = client_as("operator")
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    client.post(f"/triage/groups/{group.pk}/act", {"action": "resolve"})
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED
    action = BulkAction.objects.get()
    assert action.group_count == 1
    page = client.get(f"/triage/groups/{group.pk}/").content.decode()
    assert f"/triage/groups/{group.pk}/undo/{action.pk}" in page
    # The button shows to the person who acted, not to everyone.
    other = client_as("admin").get(f"/triage/groups/{group.pk}/").content.decode()
    assert "/undo/" not in other
    # The undo of another group's action is not this group's.
    elsewhere = FailureGroup.objects.exclude(pk=group.pk).first()
    assert elsewhere is not None
    assert client.post(f"/triage/groups/{elsewhere.pk}/undo/{action.pk}").status_code == 404
    response = client.post(f"/triage/groups/{group.pk}/undo/{action.pk}")
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN
    assert GroupEvent.objects.filter(group=group, action="undo").count() == 1
    page = client.get(f"/triage/groups/{group.pk}/").content.decode()
    assert "/undo/" not in page


def test_back_to_triage_keeps_the_filters(traffic: Any, client_as: Any) -> None:
    client = client_as("operator")
    triage = client.get("/?collection=orders&sort=stage").content.decode()
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    link = f"/triage/groups/{group.pk}/?back=collection%3Dorders%26sort%3Dstage"
    assert f'href="{link}"' in triage
    page = client.get(link)
    assert page.status_code == 200
    assert 'href="/?collection=orders&amp;sort=stage" id="back-to-triage"' in page.content.decode()
    # Acting keeps it too.
    response = client.post(
        f"/triage/groups/{group.pk}/act",
        {"action": "acknowledge", "back": "collection=orders&sort=stage"},
    )
    assert response["Location"] == link


@pytest.mark.parametrize(
    "back", ["window%3D2h", "sort%3Devil", "nope%3D1", "https%3A%2F%2Fevil.example"]
)
def test_a_back_query_the_triage_page_refuses_is_a_form_error(
    traffic: Any, client_as: Any, back: str
) -> None:
    group = FailureGroup.objects.get(reason="unsatisfied_field")
    response = client_as("viewer").get(f"/triage/groups/{group.pk}/?back={back}")
    assert response.status_code == 400
    assert "back" in response.context["query_form"].errors
    assert 'href="/" id="back-to-triage"' in response.content.decode()


@pytest.mark.parametrize(
    "raw", ["2026-12-01 10:00:00", "2026-12-01T10:00:00+00:00", "2026-12-01 19:00:00+09:00"]
)
def test_row_timestamps_from_any_database_cursor_are_aware(raw: str) -> None:
    from datetime import UTC, datetime

    from triage.selectors import _moment

    expected = datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert _moment(raw) == expected
    assert _moment(datetime.fromisoformat(raw)) == expected


def test_the_source_filter_shows_failures_that_came_as_otlp_spans(
    traffic: Any, client_as: Any
) -> None:
    from tests.triage.intake.otlp_helpers import FAILING_CALLS, export_request, record

    body = export_request(record([FAILING_CALLS["timeout"]])).SerializeToString()
    response = traffic.post("/v1/traces", data=body, content_type="application/x-protobuf")
    assert response.status_code == 200
    client = client_as("viewer")
    otlp = client.get("/?source=otlp").context["overview"]
    assert {(row.reason, row.count) for s in otlp.sections for row in s.rows} == {("timeout", 1)}
    runtime = client.get("/?source=runtime").context["overview"]
    assert "timeout" not in {row.reason for s in runtime.sections for row in s.rows}
    assert 'value="otlp"' in client.get("/").content.decode()


def test_safe_to_retry_is_answered_on_the_list_per_group_and_in_the_window(
    ingest_client: APIClient, client_as: Any
) -> None:
    """A row whose groups share a lane says the lane's answer; a row whose groups differ
    says the share of the window's failures that may be retried, and each group's answer.
    Older records (outside the window) do not weigh in, whatever their lane."""
    read = {"http_status": 503, "http_method": "GET"}
    write = {"http_status": 503, "http_method": "POST"}
    ingest(
        ingest_client,
        [
            *(failure_item(occurred_at=recent(), tool="getOrder", evidence=read) for _ in range(3)),
            failure_item(occurred_at=recent(), tool="createRefund", evidence=write),
            *(
                failure_item(occurred_at=recent(60 * 24 * 3), tool="createRefund", evidence=write)
                for _ in range(4)
            ),
            failure_item(stage="xgen_transport", reason="sse_dropped", occurred_at=recent()),
        ],
    )
    lanes = dict(FailureGroup.objects.values_list("tool", "lane"))
    assert (lanes["getOrder"], lanes["createRefund"]) == ("retry_safe", "reconcile_first")
    page = client_as("viewer").get("/?window=24h").content.decode()
    mixed = page.split('data-reason="http_5xx"')[1].split("</tr>")[0]
    assert (
        '<span class="num" title="75% of the window&#x27;s failures are safe to retry">75%' in mixed
    )
    assert (
        '<li><span class="verdict verdict-retry_safe">yes, with backoff</span> <span class="muted">'
        '· <span title="shop">getOrder</span></span></li>'
    ) in mixed
    assert (
        '<li><span class="verdict verdict-reconcile_first">no: look up the status first</span> '
        '<span class="muted">· <span title="shop">createRefund</span></span></li>'
    ) in mixed
    assert mixed.index("getOrder") < mixed.index("createRefund")  # the larger group first
    single = page.split('data-reason="sse_dropped"')[1].split("</tr>")[0]
    assert 'class="verdict verdict-manual_investigation">no: investigate first<' in single
    # Each lane pill explains itself on hover and focus.
    assert (
        'class="pill lane-reconcile_first" tabindex="0" data-tip="Look up the remote status' in page
    )
    assert "safe to retry?</th>" in page and "retryable, all time" not in page


def test_a_new_group_of_an_old_reason_is_flagged(rising: APIClient, client_as: Any) -> None:
    """http_5xx is old (getOrder failed a day ago too); createRefund breaking now is new."""
    ingest(rising, [failure_item(occurred_at=recent(3), tool="createRefund")])
    client = client_as("viewer")
    row = client.get("/?window=24h").content.decode().split('data-reason="http_5xx"')[1]
    row = row.split("</tr>")[0]
    assert (
        '<span class="pill flag-new" title="first seen in the last 24 hours">1 new group</span>'
        in row
    )


def test_the_rows_show_the_value_they_are_sorted_by(rising: APIClient, client_as: Any) -> None:
    client = client_as("viewer")
    trend = client.get("/?window=24h&sort=trend").content.decode()
    sse = trend.split('data-reason="sse_dropped"')[1].split("</tr>")[0]
    assert (
        'class="sort-value small muted" title="12 records, 2 in the window before">&times;4.3'
        in sse
    )
    last = client.get("/?window=24h&sort=last_seen").content.decode()
    newest = last.split('data-reason="not_retrieved"')[1].split("</tr>")[0]
    assert 'class="sort-value small muted"' in newest and "minute" in newest
    counted = client.get("/?window=24h").content.decode()
    assert "sort-value" not in counted  # the count is its own value


def test_a_row_of_several_groups_opens_their_list_not_the_largest(
    traffic: APIClient, client_as: Any
) -> None:
    page = client_as("viewer").get("/?window=24h").content.decode()
    several = page.split('data-reason="http_5xx"')[1].split("</tr>")[0]
    assert 'data-groups="2"' in page.split('data-reason="http_5xx"')[1][:40]
    assert (
        '<a class="code" href="/?window=24h&amp;stage=execute&amp;reason=http_5xx">http_5xx</a>'
        in several
    )
    single = page.split('data-reason="sse_dropped"')[1].split("</tr>")[0]
    group = FailureGroup.objects.get(reason="sse_dropped")
    assert (
        f'<a class="code" href="/triage/groups/{group.pk}/?back=window%3D24h">sse_dropped</a>'
        in single
    )


def test_the_group_view_has_one_row_per_group_in_the_pages_sort(
    rising: APIClient, client_as: Any, django_assert_max_num_queries: Any
) -> None:
    """The noisiest group and a newly broken one are rows of their own, with the same
    filters and sorts as the reason rows, and as few queries."""
    ingest(rising, [failure_item(occurred_at=recent(3), tool="createRefund")])
    client = client_as("viewer")
    with django_assert_max_num_queries(12):  # as the reason view
        page = client.get("/?window=24h&view=groups").content.decode()
    table = page.split('id="groups-view"')[1].split("</table>")[0]
    rows = table.split('<tr class="group-row"')[1:]
    tools = [row.split('class="code truncate" title="')[1].split('"')[0] for row in rows]
    # sse_dropped's group (12 in the window) first, then getOrder's http_5xx (4).
    assert tools[:2] == ["getOrderDetail", "getOrder"] and "sse_dropped" in rows[0]
    assert len(rows) == FailureGroup.objects.count()  # every group has records in the window
    refund = next(row for row in rows if 'title="createRefund"' in row)
    assert 'class="pill flag-new"' in refund and "yes, with backoff" in refund
    assert '<option value="groups" selected>' in page
    newest = client.get("/?window=24h&view=groups&sort=last_seen").content.decode()
    first = newest.split('<tr class="group-row"')[1]
    assert "not_retrieved" in first and 'class="sort-value small muted"' in first
