"""Releases: declared through the API and the command line, carried by items, shown on the
group page, filtered on the triage page; a group resolved in a release stays resolved by
records of earlier releases and reopens, naming the release, on that release or a later one.
Every record goes through the ingest API, with its time set explicitly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.models import FailureGroup, FailureRecord, GroupEvent, GroupStatus, Release
from triage.services import group_act

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _retention_off(settings: Any) -> None:
    """These items carry dates older than retention keeps (which ingest would refuse)."""
    settings.TRIAGE_RETENTION_DAYS = 0


# Deployments of the "shop" collection, an hour apart, well in the past.
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DEPLOYED = {"1.3": T0, "1.4": T0 + timedelta(hours=1), "1.5": T0 + timedelta(hours=2)}


def declare(client: APIClient, **body: Any) -> Any:
    return client.post("/api/v1/releases", data=json.dumps(body), content_type="application/json")


def ingest(client: APIClient, *items: dict[str, Any]) -> dict[str, Any]:
    response = client.post(
        "/api/v1/ingest", data=json.dumps({"items": list(items)}), content_type="application/json"
    )
    assert response.status_code in (200, 207), response.content
    return response.json()


def at(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat()


@pytest.fixture
def shop_releases(ingest_client: APIClient) -> APIClient:
    for version, deployed_at in DEPLOYED.items():
        response = declare(
            ingest_client, collection="shop", version=version, deployed_at=deployed_at.isoformat()
        )
        assert response.status_code == 201, response.content
    return ingest_client


# --- declaring releases ---------------------------------------------------------------------


def test_a_release_declared_twice_is_one_row_and_the_second_answer_is_200(
    ingest_client: APIClient,
) -> None:
    body = {
        "collection": "shop",
        "version": "1.4.0",
        "deployed_at": "2026-03-02T18:00:00+09:00",
        "url": "https://git.example.com/shop/releases/1.4.0",
    }
    first = declare(ingest_client, **body)
    assert first.status_code == 201
    assert first.json() == {**body, "deployed_at": "2026-03-02T09:00:00+00:00"}
    again = declare(ingest_client, **body)
    assert again.status_code == 200
    assert again.json() == first.json()
    without_url = declare(ingest_client, **{**body, "url": ""})
    assert without_url.status_code == 200
    assert Release.objects.count() == 1


def test_a_known_release_declared_with_another_time_is_a_conflict(
    ingest_client: APIClient,
) -> None:
    declare(ingest_client, collection="shop", version="1.4", deployed_at=at(0))
    response = declare(ingest_client, collection="shop", version="1.4", deployed_at=at(5))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "release_conflict"
    assert Release.objects.get().deployed_at == T0


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"version": "1.4", "deployed_at": "2026-03-02T09:00:00Z"}, "missing_field", "collection"),
        ({"collection": "shop", "deployed_at": "2026-03-02T09:00:00Z"}, "missing_field", "version"),
        ({"collection": "shop", "version": "1.4"}, "missing_field", "deployed_at"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "yesterday"},
         "invalid_field", "deployed_at"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "2026-03-02T09:00:00"},
         "invalid_field", "deployed_at"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "2026-13-02T09:00:00Z"},
         "invalid_field", "deployed_at"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "1969-12-31T00:00:00Z"},
         "timestamp_out_of_range", "deployed_at"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "2999-01-01T00:00:00Z"},
         "timestamp_out_of_range", "deployed_at"),
        ({"collection": "shop", "version": "v" * 65, "deployed_at": "2026-03-02T09:00:00Z"},
         "value_too_long", "version"),
        ({"collection": "shop", "version": "1.4\n", "deployed_at": "2026-03-02T09:00:00Z"},
         "invalid_character", "version"),
        ({"collection": "shop", "version": " 1.4", "deployed_at": "2026-03-02T09:00:00Z"},
         "invalid_field", "version"),
        ({"collection": "shop", "version": 14, "deployed_at": "2026-03-02T09:00:00Z"},
         "invalid_field", "version"),
        ({"collection": "shop\u202e", "version": "1.4", "deployed_at": "2026-03-02T09:00:00Z"},
         "invalid_collection_name", "collection"),
        ({"collection": "s" * 101, "version": "1.4", "deployed_at": "2026-03-02T09:00:00Z"},
         "invalid_collection_name", "collection"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "2026-03-02T09:00:00Z",
          "url": "ftp://files.example.com/1.4"}, "invalid_url", "url"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "2026-03-02T09:00:00Z",
          "url": "javascript:alert(1)"}, "invalid_url", "url"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "2026-03-02T09:00:00Z",
          "url": "https://ci:secret@git.example.com/1.4"}, "invalid_url", "url"),
        ({"collection": "shop", "version": "1.4", "deployed_at": "2026-03-02T09:00:00Z",
          "url": "https://example.com/" + "a" * 500}, "value_too_long", "url"),
    ],
)  # fmt: skip
def test_the_releases_api_refuses_bad_input_with_a_stable_code(
    ingest_client: APIClient, body: dict[str, Any], code: str, field: str
) -> None:
    response = declare(ingest_client, **body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["field"] == field
    assert not Release.objects.exists()


def test_the_releases_api_refuses_a_body_that_is_not_an_object(
    ingest_client: APIClient,
) -> None:
    response = ingest_client.post(
        "/api/v1/releases", data=json.dumps(["1.4"]), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_body"


def test_the_releases_api_wants_an_ingest_key(make_api_key: Any) -> None:
    anonymous = APIClient()
    assert declare(anonymous, collection="shop", version="1", deployed_at=at(0)).status_code == 401
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key('reader', scopes=('read',))}")
    response = declare(reader, collection="shop", version="1", deployed_at=at(0))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "missing_scope"


def test_the_command_adds_and_lists_releases() -> None:
    out = StringIO()
    call_command(
        "releases", "add", "shop", "1.4", "--deployed-at", "2026-03-02T09:00:00Z",
        "--url", "https://git.example.com/1.4", stdout=out,
    )  # fmt: skip
    assert "declared: shop 1.4" in out.getvalue()
    call_command("releases", "add", "shop", "1.4", "--deployed-at", "2026-03-02T09:00:00Z",
                 stdout=out)  # fmt: skip
    assert "already declared" in out.getvalue()
    call_command("releases", "add", "shop", "1.5", stdout=StringIO())  # deployed now
    listing = StringIO()
    call_command("releases", "list", "--collection", "shop", stdout=listing)
    lines = listing.getvalue().splitlines()
    assert [line.split("\t")[1] for line in lines] == ["1.5", "1.4"]
    assert lines[1].endswith("\thttps://git.example.com/1.4")
    with pytest.raises(CommandError, match="invalid_url"):
        call_command("releases", "add", "shop", "1.6", "--url", "ftp://x.example.com/")


# --- items carry their release --------------------------------------------------------------


def test_failure_envelope_and_runner_event_items_store_their_release(
    ingest_client: APIClient,
) -> None:
    ingest(
        ingest_client,
        failure_item("f", release="1.4", occurred_at=at(1)),
        {"type": "envelope", "id": "e", "body": {
            "status": "failed", "code": "HTTP_503", "tool": "getOrderDetail",
            "collection": "shop", "release": "1.4", "occurred_at": at(1),
        }},
        {"type": "runner_event", "id": "r", "body": {
            "type": "step.failed", "plan_id": "p1", "step_id": "s1", "tool": "getOrder",
            "collection": "shop", "release": "1.5", "timestamp": at(2),
            "error": "HTTP 503 Service Unavailable",
        }},
    )  # fmt: skip
    assert sorted(FailureRecord.objects.values_list("client_id", "release")) == [
        ("e", "1.4"), ("f", "1.4"), ("r", "1.5"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("release", "code"), [("v" * 65, "value_too_long"), ("1.4\r\nX", "invalid_character")]
)
def test_an_item_with_a_bad_release_is_rejected_with_a_stable_code(
    ingest_client: APIClient, release: str, code: str
) -> None:
    answer = ingest(ingest_client, failure_item("bad", release=release), failure_item("good"))
    assert [item["status"] for item in answer["items"]] == ["rejected", "accepted"]
    assert answer["items"][0]["error"]["code"] == code
    assert answer["items"][0]["error"]["field"] == "body.release"


# --- resolved in a release ------------------------------------------------------------------


def _resolve(group: FailureGroup, **options: Any) -> None:
    group_act(group=group, actor=None, action="resolve", **options)


def test_a_group_resolved_in_1_4_stays_resolved_by_a_late_1_3_record_and_reopens_on_1_4(
    shop_releases: APIClient, client_as: Any
) -> None:
    ingest(shop_releases, failure_item("a", release="1.3", occurred_at=at(0.5)))
    group = FailureGroup.objects.get()
    _resolve(group, resolved_in_release="1.4")

    # A late record of 1.3 (still running somewhere) and one sent without a release that
    # the desk cannot place... the first leaves it resolved.
    ingest(shop_releases, failure_item("b", release="1.3", occurred_at=at(1.5)))
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED
    assert group.count == 2  # counted all the same
    assert not GroupEvent.objects.filter(action="regressed").exists()

    ingest(
        shop_releases,
        failure_item("c", release="1.3", occurred_at=at(1.6)),
        failure_item("d", release="1.4", occurred_at=at(1.7)),
    )
    group.refresh_from_db()
    assert group.status == GroupStatus.REGRESSED
    assert group.regressed_in_release == "1.4"
    event = GroupEvent.objects.get(action="regressed")
    assert event.data == {"release": "1.4"}
    assert "release 1.4" in event.note

    html = client_as("viewer").get(f"/triage/groups/{group.pk}/").content.decode()
    assert 'by release <span class="code">1.4</span>' in html


def test_resolved_in_the_next_release_then_a_release_is_deployed(
    ingest_client: APIClient,
) -> None:
    declare(ingest_client, collection="shop", version="1.3", deployed_at=at(0))
    ingest(ingest_client, failure_item("a", release="1.3", occurred_at=at(0.5)))
    group = FailureGroup.objects.get()
    _resolve(group, resolved_in_next_release=True)
    # Resolved at T0 + 1.2 h, explicitly (the "next" release is the first deployed after).
    FailureGroup.objects.filter(pk=group.pk).update(status_changed_at=T0 + timedelta(hours=1.2))
    group.refresh_from_db()
    assert group.resolved_in_next_release and not group.resolved_in_release

    # 1.3 was deployed before the resolution: its records leave the group resolved.
    ingest(ingest_client, failure_item("b", release="1.3", occurred_at=at(1)))
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED

    # The next release is deployed after the resolution; its records reopen the group.
    declare(ingest_client, collection="shop", version="1.4", deployed_at=at(2))
    ingest(ingest_client, failure_item("c", release="1.3", occurred_at=at(2.1)))
    group.refresh_from_db()
    assert group.status == GroupStatus.RESOLVED
    ingest(
        ingest_client,
        failure_item("d", release="1.3", occurred_at=at(2.2)),
        failure_item("e", release="1.4", occurred_at=at(2.3)),
    )
    group.refresh_from_db()
    assert (group.status, group.regressed_in_release) == (GroupStatus.REGRESSED, "1.4")
    assert GroupEvent.objects.get(action="regressed").data == {"release": "1.4"}


@pytest.mark.parametrize(("release", "named"), [("", ""), ("9.9-unknown", "9.9-unknown")])
def test_a_record_without_a_known_release_reopens_as_before(
    shop_releases: APIClient, release: str, named: str
) -> None:
    ingest(shop_releases, failure_item("a", release="1.3", occurred_at=at(0.5)))
    group = FailureGroup.objects.get()
    _resolve(group, resolved_in_release="1.4")
    ingest(shop_releases, failure_item("b", release=release, occurred_at=at(3)))
    group.refresh_from_db()
    assert (group.status, group.regressed_in_release) == (GroupStatus.REGRESSED, named)


def test_a_plain_resolve_reopens_on_any_record_and_names_its_release(
    shop_releases: APIClient,
) -> None:
    ingest(shop_releases, failure_item("a", release="1.3", occurred_at=at(0.5)))
    group = FailureGroup.objects.get()
    _resolve(group)
    ingest(shop_releases, failure_item("b", release="1.3", occurred_at=at(0.7)))
    group.refresh_from_db()
    assert (group.status, group.regressed_in_release) == (GroupStatus.REGRESSED, "1.3")


def test_resolving_in_a_release_the_desk_does_not_know_is_refused(
    shop_releases: APIClient, client_as: Any
) -> None:
    ingest(shop_releases, failure_item("a", occurred_at=at(0.5)))
    group = FailureGroup.objects.get()
    client = client_as("operator")
    response = client.post(
        f"/triage/groups/{group.pk}/act", {"action": "resolve", "resolve_in": "release:7.0"}
    )
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.status == GroupStatus.OPEN

    client.post(
        f"/triage/groups/{group.pk}/act", {"action": "resolve", "resolve_in": "release:1.4"}
    )
    group.refresh_from_db()
    assert (group.status, group.resolved_in_release) == (GroupStatus.RESOLVED, "1.4")
    event = GroupEvent.objects.get(action="resolve")
    assert event.data == {"resolved_in_release": "1.4"}
    html = client.get(f"/triage/groups/{group.pk}/").content.decode()
    assert 'in release <span class="code">1.4</span>' in html

    # Reopened and resolved without a release: the release is forgotten.
    group_act(group=group, actor=None, action="reopen")
    group.refresh_from_db()
    assert (group.resolved_in_release, group.resolved_in_next_release) == ("", False)


def test_the_resolve_form_offers_the_collections_releases(
    shop_releases: APIClient, client_as: Any
) -> None:
    ingest(shop_releases, failure_item("a", occurred_at=at(0.5)))
    group = FailureGroup.objects.get()
    html = client_as("operator").get(f"/triage/groups/{group.pk}/").content.decode()
    assert '<option value="next">' in html
    assert html.index('value="release:1.5"') < html.index('value="release:1.3"')


def test_undo_of_a_resolve_in_a_release_puts_back_what_was_there(
    shop_releases: APIClient, client_as: Any
) -> None:
    ingest(shop_releases, failure_item("a", occurred_at=at(0.5)))
    group = FailureGroup.objects.get()
    client = client_as("operator")
    client.post(f"/triage/groups/{group.pk}/act", {"action": "resolve", "resolve_in": "next"})
    group.refresh_from_db()
    assert group.resolved_in_next_release
    action_id = client.session["last_group_action_id"]
    client.post(f"/triage/groups/{group.pk}/undo/{action_id}")
    group.refresh_from_db()
    assert (group.status, group.resolved_in_next_release) == (GroupStatus.OPEN, False)


@pytest.mark.parametrize("records", [2, 60])
def test_ingest_reads_releases_once_a_batch_whatever_its_records(
    shop_releases: APIClient, records: int
) -> None:
    ingest(shop_releases, failure_item("first", release="1.3", occurred_at=at(0.5)))
    group = FailureGroup.objects.get()
    _resolve(group, resolved_in_release="1.4")
    items = [
        failure_item(release="1.3" if n % 2 else "1.5", occurred_at=at(1 + n / 100))
        for n in range(records)
    ]
    with CaptureQueriesContext(connection) as queries:
        ingest(shop_releases, *items)
    release_reads = [q for q in queries if "triage_release" in q["sql"]]
    assert len(release_reads) == 1
    group.refresh_from_db()
    assert group.regressed_in_release == "1.5"


def test_a_batch_for_groups_that_are_not_resolved_reads_no_release(
    shop_releases: APIClient,
) -> None:
    with CaptureQueriesContext(connection) as queries:
        ingest(shop_releases, failure_item(release="1.3", occurred_at=at(0.5)))
    assert not [q for q in queries if "triage_release" in q["sql"]]


# --- the pages ------------------------------------------------------------------------------


def test_the_group_page_shows_first_and_last_seen_per_release(
    shop_releases: APIClient, client_as: Any
) -> None:
    ingest(
        shop_releases,
        failure_item(release="1.3", occurred_at=at(0.2)),
        failure_item(release="1.3", occurred_at=at(0.9)),
        failure_item(release="1.4", occurred_at=at(1.5)),
        failure_item(occurred_at=at(0.1)),
    )
    group = FailureGroup.objects.get()
    response = client_as("viewer").get(f"/triage/groups/{group.pk}/")
    rows = response.context["releases_seen"]
    assert [(row.release, row.records) for row in rows] == [("1.4", 1), ("1.3", 2), ("", 1)]
    assert (rows[1].first_seen, rows[1].last_seen) == (
        T0 + timedelta(hours=0.2),
        T0 + timedelta(hours=0.9),
    )
    html = response.content.decode()
    assert 'id="releases-seen"' in html
    assert "(no release)" in html
    assert html.count("<time datetime=") >= 6  # first and last of each, through |moment


def test_the_release_table_reads_counters_and_index_edges_and_matches_a_recount(
    shop_releases: APIClient, client_as: Any
) -> None:
    """Two queries whatever the group's size, and the same answer as counting the records,
    also after retention removed the oldest of them."""
    from triage.selectors import group_releases
    from triage.upkeep.retention import records_prune

    moments = [0.1, 0.2, 0.3, 0.9, 1.5, 1.7, 2.2]
    releases = ["", "1.3", "", "1.3", "1.4", "1.4", "1.5"]
    ingest(
        shop_releases,
        *(failure_item(release=r, occurred_at=at(h)) if r else failure_item(occurred_at=at(h))
          for r, h in zip(releases, moments, strict=True)),
    )  # fmt: skip

    def recount(group: FailureGroup) -> list[tuple[str, int, datetime, datetime]]:
        rows: dict[str, tuple[int, datetime, datetime]] = {}
        for release, occurred in group.records.values_list("release", "occurred_at"):
            count, first, last = rows.get(release, (0, occurred, occurred))
            rows[release] = (count + 1, min(first, occurred), max(last, occurred))
        return sorted(
            ((r, *v) for r, v in rows.items()), key=lambda row: (-row[3].timestamp(), row[0])
        )

    def shown(group: FailureGroup) -> list[tuple[str, int, datetime, datetime]]:
        with CaptureQueriesContext(connection) as queries:
            rows = group_releases(group=group)
        assert len(queries) == 2
        return [(row.release, row.records, row.first_seen, row.last_seen) for row in rows]

    group = FailureGroup.objects.get()
    assert shown(group) == recount(group)
    run = records_prune(days=1, batch_size=2, channel="cli", now=T0 + timedelta(days=1, hours=0.25))
    assert run.records_deleted == 2
    group.refresh_from_db()
    assert shown(group) == recount(group)


def test_the_group_page_has_no_release_table_when_no_record_carries_one(
    ingest_client: APIClient, client_as: Any
) -> None:
    ingest(ingest_client, failure_item(occurred_at=at(0.1)))
    group = FailureGroup.objects.get()
    response = client_as("viewer").get(f"/triage/groups/{group.pk}/")
    assert response.context["releases_seen"] == []
    assert 'id="releases-seen"' not in response.content.decode()
    from triage.selectors import group_releases

    with CaptureQueriesContext(connection) as queries:
        assert group_releases(group=group) == []
    assert len(queries) == 1  # no release facet: no record is looked up


def test_the_triage_page_filters_by_release_and_keeps_it_in_the_url(
    ingest_client: APIClient, client_as: Any, django_assert_max_num_queries: Any
) -> None:
    recent = (timezone.now() - timedelta(minutes=5)).isoformat()
    ingest(
        ingest_client,
        failure_item(tool="getOrder", release="1.3", occurred_at=recent),
        failure_item(tool="getDelivery", release="1.4", occurred_at=recent),
        failure_item(tool="getInvoice", occurred_at=recent),
    )
    client = client_as("viewer")
    with django_assert_max_num_queries(12):  # as without the filter
        response = client.get("/?release=1.4&view=groups")
    tools = [row.group.tool for row in response.context["overview"].groups]
    assert tools == ["getDelivery"]
    assert ("release", "1.4") in response.context["form"].query_items()
    assert 'name="release" value="1.4"' in response.content.decode()
    everything = client.get("/?view=groups")
    assert len(everything.context["overview"].groups) == 3
