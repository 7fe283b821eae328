"""Statements read beside the page, on a second connection (core.side_reads)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core import side_reads
from core.side_reads import close_side_connections, read_beside

pytestmark = pytest.mark.django_db(transaction=True)

WHO_READS = "SELECT pg_backend_pid(), %s"


def _on_postgresql() -> bool:
    return connection.vendor == "postgresql"


def test_a_read_outside_a_transaction_runs_beside_the_page_on_postgresql() -> None:
    if not _on_postgresql():
        read = read_beside("SELECT 1, %s", ["embedded"], using="default")
        assert not read.beside  # SQLite reads in the process, in turn
        assert read.rows() == [(1, "embedded")]
        return
    read = read_beside(WHO_READS, ["side"], using="default")
    assert read.beside
    ((side_backend, echoed),) = read.rows()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        ((page_backend,),) = cursor.fetchall()
    assert echoed == "side" and side_backend != page_backend


def test_inside_a_transaction_a_read_runs_in_turn_and_sees_its_writes() -> None:
    from django.contrib.auth import get_user_model

    with transaction.atomic():
        get_user_model().objects.create(username="written-just-now")
        read = read_beside(
            'SELECT count(*) FROM "auth_user" WHERE "username" = %s',
            ["written-just-now"],
            using="default",
        )
        assert not read.beside
        assert read.rows() == [(1,)]


def test_a_read_runs_in_turn_when_side_reads_are_off(settings: Any) -> None:
    settings.TRIAGE_SIDE_READS = False
    read = read_beside("SELECT %s", ["in turn"], using="default")
    assert not read.beside and read.rows() == [("in turn",)]


def test_a_side_reads_error_is_raised_where_the_page_asks_for_its_rows() -> None:
    read = read_beside("SELECT * FROM no_such_table WHERE 1 = %s", [1], using="default")
    with pytest.raises(DatabaseError):
        read.rows()
    # The side thread's connection is still good for the next read.
    assert read_beside("SELECT %s", [2], using="default").rows() == [(2,)]


def test_a_side_read_counts_among_the_pages_queries() -> None:
    with CaptureQueriesContext(connection) as queries:
        read_beside("SELECT %s", ["counted"], using="default").rows()
    assert len(queries) == 1
    assert "SELECT" in queries.captured_queries[0]["sql"]


def test_reads_of_several_requests_at_once_each_get_their_own_rows() -> None:
    answers: dict[int, Any] = {}

    def request(number: int) -> None:
        try:
            reads = [read_beside("SELECT %s, %s", [number, n], using="default") for n in range(3)]
            answers[number] = [read.rows() for read in reads]
        finally:
            connection.close()  # the request thread's own, as a request's end does

    threads = [threading.Thread(target=request, args=(number,)) for number in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert answers == {number: [[(number, n)] for n in range(3)] for number in range(6)}


def test_closing_the_side_connections_leaves_none_open() -> None:
    if not _on_postgresql():
        pytest.skip("side reads are PostgreSQL's")
    backends = {read_beside(WHO_READS, [n], using="default").rows()[0][0] for n in range(8)}
    assert backends  # at least one side connection was open
    close_side_connections()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", [list(backends)])
        assert cursor.fetchall() == []
    # And they reconnect at the next read.
    assert read_beside("SELECT %s", ["again"], using="default").rows() == [("again",)]
    assert side_reads._connected
