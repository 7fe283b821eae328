"""Every page's and read API's query parameters, walked with hostile values by every role.

No value in an address may cost a 500 or unbounded work: each request must answer with
something other than a 5xx, within a generous ceiling of the test process's own CPU time
(2 s: CPU time, not wall-clock, so a busy machine does not make it fail; the bounded
sparkline and query counts are the real measure), and a refused value is a 400 whose page
shows the error.

The objects behind the URLs are the URL matrix's world (a built Quality Lab collection with
runs and results, a failure group, a receipt, learning suggestions), with its sessions.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from tests.security import test_url_matrix as matrix
from tests.security.test_url_matrix import (
    ADMIN,
    ANONYMOUS,
    KEY_READ,
    NO_ROLE,
    OPERATOR,
    REVIEWER,
    SUPERUSER,
    VIEWER,
    World,
    client_for,
)
from triage.selectors import SPARK_MAX_BINS

# The URL matrix's objects and its mocks of the queue, as fixtures of this module too.
world = matrix.world
no_queue_and_fast_sign_in = matrix.no_queue_and_fast_sign_in

CEILING_SECONDS = 2.0
ROLES = (ANONYMOUS, NO_ROLE, VIEWER, OPERATOR, REVIEWER, ADMIN, SUPERUSER)

HOSTILE = (
    "9" * 40,
    str(2**63),
    "-1",
    "0",
    "zzz",
    "1' OR 1=1 --",
    "0001-01-01T00:00",
    "9999-12-31T23:59",
    "0001-01-01",
    "9999-12-31T23:59:59.999999+14:00",
    "x" * 5000,
    "a\x00b",
    "\x00",
    "%00",
    "[]",
    "true",
    "²",
    "   ",
    "체크아웃",
    "team a",
)

# The query parameters each page reads (from its form or serializer), by page.
PAGES: dict[str, tuple[Callable[[World], str], tuple[str, ...]]] = {
    "triage": (lambda w: "/", ("window", "since", "until", "collection", "source", "tool",
                               "lane", "status", "execution_state", "q", "stage", "reason",
                               "sort", "refresh")),
    "group": (lambda w: f"/triage/groups/{w.group}/", ("before", "back")),
    "receipts": (lambda w: "/receipts/", ("before",)),
    "ingestion": (lambda w: "/ingestion/", ("before", "batch")),
    "policies": (lambda w: "/policies/", ("q",)),
    "alerts": (lambda w: "/alerts/", ("rule",)),
    "qualitylab": (lambda w: "/qualitylab/", ("page",)),
    "collection": (lambda w: "/qualitylab/shop/", ("first_build",)),
    "case-from-group": (lambda w: "/qualitylab/cases/new", ("group",)),
    "run": (lambda w: f"/qualitylab/runs/{w.finished_run}/", ("page", "compare")),
    "result": (lambda w: f"/qualitylab/results/{w.result}/", ("page",)),
    "learning": (lambda w: "/learning/", ("collection", "type", "status", "family", "page")),
    "suggestion": (lambda w: f"/learning/suggestions/{w.suggestion}/", ("page",)),
    "api-failures": (lambda w: "/api/v1/failures", ("collection", "stage", "reason", "tool",
                                                    "lane", "execution_state", "source",
                                                    "status", "since", "until", "cursor",
                                                    "page_size")),
    "api-groups": (lambda w: "/api/v1/groups", ("collection", "stage", "reason", "tool", "lane",
                                                "status", "since", "until", "cursor",
                                                "page_size")),
    "api-suggestions": (lambda w: "/api/v1/learning/suggestions", ("collection", "status")),
}  # fmt: skip

# Path segments a person can type as well: ids beyond a 64-bit column, names with anything.
HOSTILE_PATHS = (
    "/triage/groups/99999999999999999999999/",
    "/qualitylab/runs/99999999999999999999999/",
    "/alerts/rules/99999999999999999999999/edit",
    "/alerts/channels/99999999999999999999999/edit",
    "/qualitylab/results/99999999999999999999999/",
    "/learning/suggestions/99999999999999999999999/",
    "/qualitylab/%00/",
    "/qualitylab/%2500/",
    "/qualitylab/" + "x" * 3000 + "/",
    "/qualitylab/%2E%2E/",
    "/qualitylab/team%20a/settings",
    "/qualitylab/%EC%B2%B4%ED%81%AC/cases/export.json",
    "/qualitylab/shop/cases/%00/edit",
    "/qualitylab/shop/suites/%00/edit",
    "/qualitylab/shop/cases/" + "x" * 3000 + "/edit",
)

# Cursors of the read API are base64 of a query string the client is meant to echo back.
HOSTILE_CURSORS = tuple(
    base64.b64encode(raw.encode()).decode()
    for raw in ("p=zzz", "p=0001-01-01 00:00:00+14:00", "o=99999999999&p=1", "r=1&p=\x00",
                "p=9999-12-31T23:59:59.999999-14:00")
)  # fmt: skip


def _timed_get(client: Client, url: str, params: Any, headers: dict[str, str]) -> Any:
    # The process's CPU time: the work a request makes the desk do, whatever else the machine
    # is doing meanwhile (wall-clock time on a shared CI machine measures the neighbours).
    started = time.process_time()
    response = client.get(url, params, headers=headers)
    response.elapsed_seconds = time.process_time() - started  # type: ignore[attr-defined]
    return response


def _check(response: Any, what: str, problems: list[str], *, signed_in: bool = True) -> None:
    """``signed_in=False``: the sign-in redirect comes first, and for an address over 16 KB
    Django itself refuses to build it (a bare 400; servers refuse such lines before that)."""
    if response.status_code >= 500:
        problems.append(f"{what}: {response.status_code}")
    elif response.elapsed_seconds > CEILING_SECONDS:
        problems.append(f"{what}: {response.elapsed_seconds:.2f} s")
    elif (
        # A refused value is shown on the page, not a bare "Bad Request".
        signed_in
        and response.status_code == 400
        and response["Content-Type"].startswith("text/html")
        and b"cannot show what the address asks for" not in response.content
    ):
        problems.append(f"{what}: a 400 without the form error on the page")


def _short(value: str) -> str:
    return repr(value if len(value) < 30 else value[:12] + f"...({len(value)})")


@pytest.mark.django_db
@pytest.mark.parametrize("page", list(PAGES))
@pytest.mark.parametrize("principal", [*ROLES, KEY_READ])
def test_every_parameter_at_once_with_each_hostile_value(
    world: World, page: str, principal: str
) -> None:
    url_of, names = PAGES[page]
    if principal == KEY_READ and not page.startswith("api-"):
        pytest.skip("pages take no API key")
    client, headers = client_for(world, principal)
    problems: list[str] = []
    for value in HOSTILE:
        for partial in (False, True):
            extra = {"HX-Request": "true"} if partial else {}
            params = dict.fromkeys(names, value)
            response = _timed_get(client, url_of(world), params, {**headers, **extra})
            what = f"{page} all={_short(value)} htmx={partial}"
            _check(response, what, problems, signed_in=principal != ANONYMOUS)
    assert not problems, problems


@pytest.mark.django_db
@pytest.mark.parametrize("page", list(PAGES))
def test_each_parameter_alone_with_each_hostile_value(world: World, page: str) -> None:
    url_of, names = PAGES[page]
    principal = KEY_READ if page.startswith("api-") else SUPERUSER
    client, headers = client_for(world, principal)
    problems: list[str] = []
    for name in names:
        values = (*HOSTILE, *HOSTILE_CURSORS) if name == "cursor" else HOSTILE
        for value in values:
            response = _timed_get(client, url_of(world), {name: value}, headers)
            _check(response, f"{page} {name}={_short(value)}", problems)
        # The same parameter twice, then a window with a hostile edge.
        response = _timed_get(client, url_of(world), {name: ["24h", "\x00"]}, headers)
        _check(response, f"{page} {name} repeated", problems)
    assert not problems, problems


WINDOW_ATTACKS = (
    {"status": "all", "window": "custom", "since": "0001-01-01T00:00",
     "until": "9999-12-31T23:00"},
    {"window": "custom", "since": "0001-01-01T00:00", "until": "0001-01-01T01:00"},
    {"window": "custom", "since": "9999-12-31T22:00"},
    {"window": "custom", "since": "9999-12-31T22:00", "until": "9999-12-31T23:59"},
    {"window": "custom", "since": "1970-01-01T00:00"},
    {"window": "custom", "since": "2026-01-01T00:00", "until": "2025-01-01T00:00"},
)  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("attack", WINDOW_ATTACKS)
@pytest.mark.parametrize("principal", ROLES)
def test_a_window_outside_the_bounds_is_a_form_error(
    world: World, principal: str, attack: dict[str, str]
) -> None:
    client, headers = client_for(world, principal)
    response = _timed_get(client, "/", attack, headers)
    problems: list[str] = []
    _check(response, f"triage {attack}", problems)
    assert not problems, problems
    if principal in (VIEWER, OPERATOR, REVIEWER, ADMIN, SUPERUSER):
        assert response.status_code == 400
        assert response.context["overview"].spark_bins <= SPARK_MAX_BINS


@pytest.mark.django_db
def test_the_longest_window_costs_what_a_month_costs(
    world: World, django_assert_max_num_queries: Any
) -> None:
    """The longest window allowed has as many sparkline bars as a month and needs no
    more queries than a month."""
    client, headers = client_for(world, VIEWER)
    with django_assert_max_num_queries(50) as month:
        assert (
            client.get("/", {"window": "30d", "status": "all"}, headers=headers).status_code == 200
        )
    now = timezone.now()
    since = now - timedelta(days=settings.TRIAGE_MAX_WINDOW_DAYS) + timedelta(hours=1)
    params = {"window": "custom", "since": since.strftime("%Y-%m-%dT%H:%M"), "status": "all"}
    with django_assert_max_num_queries(len(month.captured_queries)):
        response = _timed_get(client, "/", params, headers)
    assert response.status_code == 200, response.content[:500]
    overview = response.context["overview"]
    assert overview.spark_bins == SPARK_MAX_BINS
    assert all(len(row.spark) == SPARK_MAX_BINS for s in overview.sections for row in s.rows)
    assert overview.total >= 1  # the world's failure is in it
    assert response.elapsed_seconds < CEILING_SECONDS
    too_long = {**params, "since": (since - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")}
    response = client.get("/", too_long, headers=headers)
    assert response.status_code == 400
    assert f"at most {settings.TRIAGE_MAX_WINDOW_DAYS} days" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("path", HOSTILE_PATHS)
@pytest.mark.parametrize("principal", [VIEWER, SUPERUSER])
def test_hostile_path_segments(world: World, path: str, principal: str) -> None:
    client, headers = client_for(world, principal)
    response = _timed_get(client, path, {}, headers)
    problems: list[str] = []
    _check(response, path[:60], problems)
    assert not problems, problems
    assert response.status_code in (200, 400, 403, 404)


@pytest.mark.django_db
def test_a_nul_in_a_posted_choice_is_a_form_error(world: World) -> None:
    """Forms that pick a row by its text (a collection, a suite, cases) refuse NUL before
    PostgreSQL would refuse the query."""
    client, headers = client_for(world, SUPERUSER)
    started = client.post("/qualitylab/shop/runs/start", {"suite": "\x00", "repeat": "1"},
                          headers=headers)  # fmt: skip
    assert started.status_code == 302  # back to the collection, with the error as a message
    suite = client.post("/qualitylab/shop/suites/new", {"name": "nul", "cases": ["\x00"]},
                        headers=headers)  # fmt: skip
    assert suite.status_code == 400
    case = client.post(
        f"/qualitylab/cases/new?group={world.group}",
        {"collection": "\x00", "case_id": "x", "mode": "search", "query": "orders",
         "expected_top_k": "5", "mutation_safety": "read_only", "group": world.group},
        headers=headers,
    )  # fmt: skip
    assert case.status_code == 400
