"""The real streaming replica the tests of core/replica.py read from (tests/replica/cluster.py):
made once per session, when a test asks for it, and dropped at its end."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NoReturn

import pytest
from django.db import connections
from django.utils.connection import ConnectionDoesNotExist

from core.replica import REPLICA, forget_replica_health
from tests.conftest import REQUIRE_SERVICES
from tests.replica.cluster import StreamingReplica, missing_requirement


def _cannot(reason: str) -> NoReturn:
    if REQUIRE_SERVICES:
        pytest.fail(f"REQUIRE_SERVICES=1 but the replica tests {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def streaming_replica(django_db_setup: Any) -> Iterator[StreamingReplica]:
    """A second PostgreSQL cluster streaming from the test database's, on a free port."""
    missing = missing_requirement()
    if missing:
        _cannot(missing)
    try:
        replica = StreamingReplica.create()
    except (RuntimeError, TimeoutError, OSError) as exc:
        _cannot(f"could not make a streaming replica: {exc}")
    yield replica
    replica.drop()


@pytest.fixture(scope="module")
def replica_alias(streaming_replica: StreamingReplica) -> Iterator[str]:
    """The replica as the `replica` database alias, on the test database, as
    DATABASE_REPLICA_URL would make it, for one module's tests. Module-scoped so that it
    exists before pytest-django sets each test up: a test may connect only to the aliases
    its django_db mark names, and a mark can name only an alias that exists then."""
    primary = connections["default"].settings_dict
    connections.settings[REPLICA] = {
        **primary,
        "HOST": "127.0.0.1",
        "PORT": str(streaming_replica.port),
        "OPTIONS": {**primary["OPTIONS"], "connect_timeout": 2},
        # Never flushed nor set up by the test case: the primary's changes reach it.
        "TEST": {**primary["TEST"], "MIRROR": "default"},
    }
    yield REPLICA
    try:
        connections[REPLICA].close()
        del connections[REPLICA]
    except (AttributeError, ConnectionDoesNotExist):
        pass
    del connections.settings[REPLICA]


@pytest.fixture
def replica(
    streaming_replica: StreamingReplica, replica_alias: str, transactional_db: Any, settings: Any
) -> Iterator[StreamingReplica]:
    """The replica, read by this test's pages. Its tests commit (django_db(transaction=True)
    naming both aliases): only committed rows reach a replica. The lag threshold is an hour,
    so a paused replay keeps the replica readable unless a test lowers it."""
    settings.TRIAGE_REPLICA_MAX_LAG_SECONDS = 3600
    forget_replica_health()
    streaming_replica.wait_caught_up()
    yield streaming_replica
    forget_replica_health()
    connections[REPLICA].close()
    if streaming_replica.answers():
        streaming_replica.resume_replay()
    else:
        streaming_replica.start()
