"""Pages against a REAL streaming replica (tests/replica/cluster.py): a second PostgreSQL
cluster on loopback, fed by the primary's WAL. Pausing its replay leaves it behind by exactly
what the primary wrote since, which shows which database a page read."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from celery import shared_task
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections, router
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory
from django.utils import timezone
from rest_framework.test import APIClient

from core.replica import (
    REPLICA,
    ReplicaReadsMiddleware,
    current_page_reads,
    forget_replica_health,
    replica_health,
)
from tests.factories import failure_item
from tests.replica.cluster import StreamingReplica, connect_primary
from triage.models import FailureGroup, GroupStatus

pytestmark = [
    pytest.mark.services("postgres"),
    pytest.mark.django_db(transaction=True, databases=["default", REPLICA]),
]


def ingest(client: APIClient, *tools: str) -> None:
    response = client.post(
        "/api/v1/ingest",
        data=json.dumps({"items": [failure_item(tool=tool) for tool in tools]}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content


def group_id(tool: str) -> int:
    return FailureGroup.objects.get(tool=tool).pk


def group_status(client: Client, pk: int) -> str:
    response = client.get(f"/triage/groups/{pk}/")
    assert response.status_code == 200
    return str(response.context["group"].status)


def test_the_probe_reads_the_replicas_lag(replica: StreamingReplica) -> None:
    health = replica_health()
    assert health.answered
    # Not necessarily 0: the primary is shared, and WAL without a commit (a long
    # transaction, a vacuum) makes the newest replayed commit's age the lag.
    assert health.lag_seconds is not None and health.lag_seconds >= 0
    assert replica_health() is health  # kept for a few seconds: no query per page


def test_a_page_reads_the_replica(
    replica: StreamingReplica, ingest_client: APIClient, client_as: Any
) -> None:
    ingest(ingest_client, "getDelivery")
    pk = group_id("getDelivery")
    viewer = client_as("viewer")
    replica.wait_caught_up()
    with replica.replay_paused():
        FailureGroup.objects.filter(pk=pk).update(status=GroupStatus.ACKNOWLEDGED)
        # The primary has it (this read is no page's); the page shows the replica's row.
        assert FailureGroup.objects.get(pk=pk).status == GroupStatus.ACKNOWLEDGED
        assert group_status(viewer, pk) == GroupStatus.OPEN
    replica.wait_caught_up()
    assert group_status(viewer, pk) == GroupStatus.ACKNOWLEDGED


def test_the_triage_page_reads_its_groups_from_the_replica(
    replica: StreamingReplica, ingest_client: APIClient, client_as: Any
) -> None:
    ingest(ingest_client, "getDelivery")
    viewer = client_as("viewer")
    replica.wait_caught_up()
    with replica.replay_paused():
        ingest(ingest_client, "onlyOnThePrimary")
        html = viewer.get("/").content.decode()
    assert "getDelivery" in html
    assert "onlyOnThePrimary" not in html


def test_the_triage_page_says_how_far_behind_the_replica_it_read_is(
    replica: StreamingReplica, ingest_client: APIClient, client_as: Any
) -> None:
    ingest(ingest_client, "getDelivery")
    viewer = client_as("viewer")
    replica.wait_caught_up()
    with replica.replay_paused():
        ingest(ingest_client, "getInvoice")
        # Behind by at least 2 s: the newest transaction it replayed is that old.
        time.sleep(2.1)
        response = viewer.get("/")
        assert response.status_code == 200
        assert current_page_reads() is None  # the request's choice ended with it
        note = re.search(r'id="replica-note"[^>]*>([^<]*)<', response.content.decode())
    assert note is not None
    assert re.fullmatch(r"replica \d+ s behind", note.group(1)), note.group(1)


def test_after_a_post_the_persons_next_pages_read_the_primary(
    replica: StreamingReplica, ingest_client: APIClient, client_as: Any
) -> None:
    ingest(ingest_client, "getDelivery")
    pk = group_id("getDelivery")
    operator, viewer = client_as("operator"), client_as("viewer")
    replica.wait_caught_up()
    with replica.replay_paused():
        response = operator.post(f"/triage/groups/{pk}/act", {"action": "acknowledge"})
        assert response.status_code == 302
        assert group_status(operator, pk) == GroupStatus.ACKNOWLEDGED  # theirs: the primary
        assert group_status(viewer, pk) == GroupStatus.OPEN  # anyone else's: the replica


def test_a_stopped_replica_falls_back_to_the_primary_and_the_page_says_so(
    replica: StreamingReplica, ingest_client: APIClient, client_as: Any
) -> None:
    viewer = client_as("viewer")
    replica.stop()
    ingest(ingest_client, "whileTheReplicaIsDown")
    started = time.monotonic()
    response = viewer.get("/")
    assert response.status_code == 200
    assert time.monotonic() - started < 5
    html = response.content.decode()
    assert "whileTheReplicaIsDown" in html
    assert "replica unavailable: read from the primary" in html
    assert group_status(viewer, group_id("whileTheReplicaIsDown")) == GroupStatus.OPEN


def test_a_replica_that_stops_after_its_probe_fails_one_page_over_to_the_primary(
    replica: StreamingReplica, ingest_client: APIClient, client_as: Any
) -> None:
    """The probe said it answers (and is kept a few seconds); it stops; the page's first
    read fails on it, and the page is run again on the primary."""
    ingest(ingest_client, "getDelivery")
    pk = group_id("getDelivery")
    viewer = client_as("viewer")
    replica.wait_caught_up()
    assert group_status(viewer, pk) == GroupStatus.OPEN  # probed: it answers
    replica.stop()
    FailureGroup.objects.filter(pk=pk).update(status=GroupStatus.ACKNOWLEDGED)
    response = viewer.get(f"/triage/groups/{pk}/")
    assert response.status_code == 200
    assert response.context["group"].status == GroupStatus.ACKNOWLEDGED
    assert not replica_health().answered  # the next pages ask the probe again


def test_a_replica_beyond_the_threshold_is_not_read_and_the_page_shows_its_lag(
    replica: StreamingReplica, ingest_client: APIClient, client_as: Any, settings: Any
) -> None:
    settings.TRIAGE_REPLICA_MAX_LAG_SECONDS = 1
    ingest(ingest_client, "getDelivery")
    viewer = client_as("viewer")
    replica.wait_caught_up()
    with replica.replay_paused():
        ingest(ingest_client, "whileTheReplicaLags")
        deadline = time.monotonic() + 10
        while replica.lag_seconds() < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        forget_replica_health()
        response = viewer.get("/")
        html = response.content.decode()
        assert response.status_code == 200
        assert "whileTheReplicaLags" in html
        assert re.search(r"replica \d+ s behind: read from the primary", html), html[:3000]
        assert group_status(viewer, group_id("whileTheReplicaLags")) == GroupStatus.OPEN


def test_writes_on_a_page_go_to_the_primary(
    replica: StreamingReplica, ingest_client: APIClient
) -> None:
    """Even on a page that reads the replica: the replica would refuse them (read-only)."""
    ingest(ingest_client, "getDelivery")
    replica.wait_caught_up()
    now = timezone.now()

    def page(request: HttpRequest) -> HttpResponse:
        assert router.db_for_read(FailureGroup) == REPLICA
        FailureGroup.objects.filter(tool="getDelivery").update(status=GroupStatus.MUTED)
        created = FailureGroup.objects.create(
            stage="execute", reason="timeout", tool="createdOnAPage", lane="retry_safe",
            first_seen=now, last_seen=now,
        )  # fmt: skip
        return HttpResponse(created._state.db)

    request = RequestFactory().get("/")
    request.user = get_user_model().objects.create(username="kim")

    def handler(request: HttpRequest) -> HttpResponse:
        middleware.process_view(request, page, (), {})
        return page(request)

    middleware = ReplicaReadsMiddleware(handler)
    assert middleware(request).content.decode() == DEFAULT_DB_ALIAS
    database = connections[DEFAULT_DB_ALIAS].settings_dict["NAME"]
    with connect_primary(database) as primary:
        rows = primary.execute(
            "SELECT tool, status FROM triage_failuregroup ORDER BY tool"
        ).fetchall()
    assert rows == [("createdOnAPage", "open"), ("getDelivery", "muted")]


def test_the_api_reads_the_primary(
    replica: StreamingReplica, ingest_client: APIClient, client_as: Any
) -> None:
    ingest(ingest_client, "getDelivery")
    viewer = client_as("viewer")
    replica.wait_caught_up()
    with replica.replay_paused():
        ingest(ingest_client, "sentMeanwhile")
        listed = viewer.get("/api/v1/groups?window=24h")
        assert listed.status_code == 200, listed.content
        assert "sentMeanwhile" in listed.content.decode()


@shared_task(name="tests.replica.tools_of_groups")
def tools_of_groups() -> list[str]:
    return sorted(FailureGroup.objects.values_list("tool", flat=True))


def test_celery_tasks_read_the_primary(replica: StreamingReplica, ingest_client: APIClient) -> None:
    ingest(ingest_client, "getDelivery")
    replica.wait_caught_up()
    with replica.replay_paused():
        ingest(ingest_client, "sentMeanwhile")
        assert tools_of_groups.apply().get() == ["getDelivery", "sentMeanwhile"]
