"""The router's and the middleware's decisions, without a server: the replica alias is
declared but never connected to, and its probe answers what each test says."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.models import Session
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, router, transaction
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.test import RequestFactory
from django.urls import ResolverMatch
from django.utils import translation
from rest_framework.views import APIView

import core.replica
from core.replica import (
    AFTER_WRITE,
    AFTER_WRITE_COOKIE,
    FAILED_PROBE_KEPT_SECONDS,
    LAGGING,
    PROBE_KEPT_SECONDS,
    REPLICA,
    UNAVAILABLE,
    PageReads,
    ReplicaHealth,
    ReplicaReadsMiddleware,
    ReplicaRouter,
    after_write_seconds,
    current_page_reads,
    forget_replica_health,
    page_reads,
    replica_health,
)
from triage.models import FailureGroup

SIGNED_IN = get_user_model()(username="kim", is_active=True)


class Probe:
    """Stands in for core.replica.replica_probe: answers with `lag` (None: no answer)."""

    def __init__(self) -> None:
        self.lag: float | None = 0.0
        self.calls = 0
        self.age = 0.0  # how long ago the answer was probed

    def __call__(self) -> ReplicaHealth:
        self.calls += 1
        return ReplicaHealth(
            answered=self.lag is not None,
            lag_seconds=self.lag,
            probed_at=time.monotonic() - self.age,
        )


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[Probe]:
    """A replica alias declared (never connected), its probe answering as told, and a lag
    threshold of 5 s."""
    settings.TRIAGE_REPLICA_MAX_LAG_SECONDS = 5
    connections.settings[REPLICA] = dict(connections["default"].settings_dict)
    fake = Probe()
    monkeypatch.setattr(core.replica, "replica_probe", fake)
    forget_replica_health()
    yield fake
    forget_replica_health()
    del connections.settings[REPLICA]


def page_request(
    method: str = "GET", *, user: Any = SIGNED_IN, cookies: dict[str, str] | None = None
) -> HttpRequest:
    request = RequestFactory().generic(method, "/")
    request.user = user
    request.COOKIES.update(cookies or {})
    return request


def read_alias(request: HttpRequest) -> HttpResponse:
    """A page that says where its reads of a desk table go."""
    return HttpResponse(router.db_for_read(FailureGroup))


def serve(
    request: HttpRequest, view: Callable[..., HttpResponse] = read_alias
) -> tuple[HttpResponse, PageReads | None]:
    """The request through the middleware as Django's handler runs it: process_view, the
    view, process_exception when it raises."""
    seen: dict[str, PageReads | None] = {}

    def handler(request: HttpRequest) -> HttpResponse:
        middleware.process_view(request, view, (), {})
        seen["reads"] = current_page_reads()
        request.resolver_match = ResolverMatch(view, (), {})
        try:
            return view(request)
        except Exception as exc:
            answer = middleware.process_exception(request, exc)
            if answer is None:
                raise
            return answer

    middleware = ReplicaReadsMiddleware(handler)
    return middleware(request), seen.get("reads")


def test_without_a_replica_nothing_is_routed_or_marked() -> None:
    assert REPLICA not in connections.settings
    replica_router = ReplicaRouter()
    assert replica_router.db_for_read(FailureGroup) is None
    assert replica_router.db_for_write(FailureGroup) is None
    response, reads = serve(page_request())
    assert reads is None
    assert response.content.decode() == DEFAULT_DB_ALIAS
    assert AFTER_WRITE_COOKIE not in serve(page_request("POST"))[0].cookies
    assert page_reads(page_request()) == {"page_reads": None}


def test_outside_a_request_every_read_goes_to_the_primary(probe: Probe) -> None:
    """Celery tasks and management commands have no page: they read the primary."""
    assert current_page_reads() is None
    assert router.db_for_read(FailureGroup) == DEFAULT_DB_ALIAS
    assert probe.calls == 0


def test_a_signed_in_persons_page_reads_a_replica_that_is_close_behind(probe: Probe) -> None:
    probe.lag = 3.2
    response, reads = serve(page_request())
    assert response.content.decode() == REPLICA
    assert reads is not None
    assert (reads.note, reads.behind_seconds, reads.fallback) == ("behind", 3, "")


def test_a_replica_less_than_a_second_behind_is_not_mentioned(probe: Probe) -> None:
    probe.lag = 0.4
    response, reads = serve(page_request())
    assert response.content.decode() == REPLICA
    assert reads is not None and reads.note == ""


def test_a_replica_beyond_the_threshold_is_not_read_and_the_page_says_how_far(
    probe: Probe,
) -> None:
    probe.lag = 12.0
    response, reads = serve(page_request())
    assert response.content.decode() == DEFAULT_DB_ALIAS
    assert reads is not None
    assert (reads.note, reads.behind_seconds) == (LAGGING, 12)


def test_a_replica_that_does_not_answer_is_not_read_and_the_page_says_so(probe: Probe) -> None:
    probe.lag = None
    response, reads = serve(page_request())
    assert response.content.decode() == DEFAULT_DB_ALIAS
    assert reads is not None and reads.note == UNAVAILABLE


def test_the_head_of_a_page_reads_the_replica_too(probe: Probe) -> None:
    assert serve(page_request("HEAD"))[0].content.decode() == REPLICA


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_write_request_reads_the_primary(probe: Probe, method: str) -> None:
    response, _ = serve(page_request(method))
    assert response.content.decode() == DEFAULT_DB_ALIAS
    assert probe.calls == 0


def test_an_anonymous_request_reads_the_primary(probe: Probe) -> None:
    response, _ = serve(page_request(user=AnonymousUser()))
    assert response.content.decode() == DEFAULT_DB_ALIAS
    assert AFTER_WRITE_COOKIE not in serve(page_request("POST", user=AnonymousUser()))[0].cookies


def test_the_api_reads_the_primary(probe: Probe) -> None:
    class Reads(APIView):
        def get(self, request: Any) -> HttpResponse:
            return HttpResponse(router.db_for_read(FailureGroup))

    response, _ = serve(page_request(), Reads.as_view())
    assert response.content.decode() == DEFAULT_DB_ALIAS


def test_the_admin_reads_the_primary(probe: Probe) -> None:
    def admin_page(request: HttpRequest) -> HttpResponse:
        return read_alias(request)

    request = page_request()
    middleware = ReplicaReadsMiddleware(read_alias)
    request.resolver_match = ResolverMatch(admin_page, (), {}, app_names=["admin"])

    def handler(request: HttpRequest) -> HttpResponse:
        middleware.process_view(request, admin_page, (), {})
        return admin_page(request)

    middleware.get_response = handler
    assert middleware(request).content.decode() == DEFAULT_DB_ALIAS


def test_who_may_see_what_is_read_from_the_primary_on_pages_too(probe: Probe) -> None:
    def sessions_and_users(request: HttpRequest) -> HttpResponse:
        return HttpResponse(
            f"{router.db_for_read(Session)} {router.db_for_read(get_user_model())} "
            f"{router.db_for_read(FailureGroup)}"
        )

    response, _ = serve(page_request(), sessions_and_users)
    assert response.content.decode() == f"{DEFAULT_DB_ALIAS} {DEFAULT_DB_ALIAS} {REPLICA}"


def test_writes_go_to_the_primary_on_pages_too(probe: Probe) -> None:
    def writes(request: HttpRequest) -> HttpResponse:
        return HttpResponse(router.db_for_write(FailureGroup))

    assert serve(page_request(), writes)[0].content.decode() == DEFAULT_DB_ALIAS


@pytest.mark.django_db
def test_reads_inside_a_transaction_of_the_primary_go_to_the_primary(probe: Probe) -> None:
    def in_a_transaction(request: HttpRequest) -> HttpResponse:
        with transaction.atomic():
            return read_alias(request)

    assert serve(page_request(), in_a_transaction)[0].content.decode() == DEFAULT_DB_ALIAS


def test_a_post_sends_the_persons_next_pages_to_the_primary(probe: Probe) -> None:
    response, _ = serve(page_request("POST"))
    cookie = response.cookies[AFTER_WRITE_COOKIE]
    assert cookie["max-age"] == 9  # the 5 s threshold, a 3 s probe, a second for the clock
    assert after_write_seconds() == 5 + PROBE_KEPT_SECONDS + 1
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    after, reads = serve(page_request(cookies={AFTER_WRITE_COOKIE: cookie.value}))
    assert after.content.decode() == DEFAULT_DB_ALIAS
    assert reads is not None and (reads.fallback, reads.note) == (AFTER_WRITE, "")
    assert probe.calls == 0


def test_a_forged_or_stale_write_mark_is_ignored(probe: Probe, monkeypatch: Any) -> None:
    forged = serve(page_request(cookies={AFTER_WRITE_COOKIE: "1"}))[0]
    assert forged.content.decode() == REPLICA
    cookie = serve(page_request("POST"))[0].cookies[AFTER_WRITE_COOKIE].value
    later = time.time() + after_write_seconds() + 2
    monkeypatch.setattr("django.core.signing.time.time", lambda: later)
    assert serve(page_request(cookies={AFTER_WRITE_COOKIE: cookie}))[0].content == b"replica"


def test_a_page_keeps_the_database_it_first_read(probe: Probe) -> None:
    """One page reads one database, even when the replica falls behind meanwhile."""

    def reads_twice(request: HttpRequest) -> HttpResponse:
        first = router.db_for_read(FailureGroup)
        probe.lag = 60.0
        forget_replica_health()
        return HttpResponse(f"{first} {router.db_for_read(FailureGroup)}")

    assert serve(page_request(), reads_twice)[0].content.decode() == f"{REPLICA} {REPLICA}"
    assert probe.calls == 1


def test_a_page_that_fails_on_the_replica_is_run_again_on_the_primary(probe: Probe) -> None:
    tries: list[str] = []

    def fails_on_the_replica(request: HttpRequest) -> HttpResponse:
        tries.append(router.db_for_read(FailureGroup))
        if tries[-1] == REPLICA:
            raise OperationalError("server closed the connection unexpectedly")
        return HttpResponse(tries[-1])

    response, reads = serve(page_request(), fails_on_the_replica)
    assert tries == [REPLICA, DEFAULT_DB_ALIAS]
    assert response.content.decode() == DEFAULT_DB_ALIAS
    assert reads is not None and reads.note == UNAVAILABLE
    serve(page_request())
    assert probe.calls == 2  # the failed page forgot the probe's answer


def test_other_errors_of_a_page_are_not_retried(probe: Probe) -> None:
    def broken(request: HttpRequest) -> HttpResponse:
        router.db_for_read(FailureGroup)
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        serve(page_request(), broken)


def test_the_probe_is_asked_again_only_when_its_answer_is_old(probe: Probe) -> None:
    replica_health()
    replica_health()
    assert probe.calls == 1
    forget_replica_health()
    probe.age = PROBE_KEPT_SECONDS + 0.1  # the answer is already too old to keep
    replica_health()
    replica_health()
    assert probe.calls == 3


def test_a_replica_that_did_not_answer_is_asked_again_later_than_one_that_did(
    probe: Probe,
) -> None:
    probe.lag = None
    probe.age = PROBE_KEPT_SECONDS + 0.1
    replica_health()
    replica_health()
    assert probe.calls == 1
    forget_replica_health()
    probe.age = FAILED_PROBE_KEPT_SECONDS + 0.1
    replica_health()
    replica_health()
    assert probe.calls == 3


def test_objects_of_both_databases_relate_and_the_replica_is_never_migrated(
    probe: Probe,
) -> None:
    replica_router = ReplicaRouter()
    from_replica, from_primary = FailureGroup(), FailureGroup()
    from_replica._state.db, from_primary._state.db = REPLICA, DEFAULT_DB_ALIAS
    assert replica_router.allow_relation(from_replica, from_primary) is True
    assert replica_router.allow_migrate(REPLICA, "triage") is False
    assert replica_router.allow_migrate(DEFAULT_DB_ALIAS, "triage") is None


@pytest.mark.parametrize(
    ("lag", "english", "korean"),
    [
        (0.2, "", ""),
        (3.0, "replica 3 s behind", "복제본 3초 지연"),
        (
            12.0,
            "replica 12 s behind: read from the primary",
            "복제본 12초 지연: 주 데이터베이스에서 읽음",
        ),
        (
            None,
            "replica unavailable: read from the primary",
            "복제본 응답 없음: 주 데이터베이스에서 읽음",
        ),
    ],
)
def test_the_note_beside_as_of_says_where_the_page_read_from(
    probe: Probe, lag: float | None, english: str, korean: str
) -> None:
    probe.lag = lag
    reads = PageReads(eligible=True)
    for language, expected in (("en", english), ("ko", korean)):
        with translation.override(language):
            html = render_to_string("core/_replica_note.html", {"page_reads": reads})
        assert expected in html
        assert ('id="replica-note"' in html) == bool(expected)


def test_no_note_outside_a_page_or_for_an_ineligible_one() -> None:
    assert render_to_string("core/_replica_note.html", {"page_reads": None}).strip() == ""
    ineligible = PageReads()
    assert render_to_string("core/_replica_note.html", {"page_reads": ineligible}).strip() == ""
