"""DATABASE_REPLICA_URL and TRIAGE_REPLICA_MAX_LAG_SECONDS, read by config/settings.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOW = (
    "import json; from django.conf import settings; "
    "print(json.dumps({'databases': settings.DATABASES, 'routers': settings.DATABASE_ROUTERS, "
    "'lag': settings.TRIAGE_REPLICA_MAX_LAG_SECONDS}, default=str))"
)


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DATABASE_", "TRIAGE_REPLICA"))
    }
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SHOW],
        cwd=ROOT,
        env={**clean, "DJANGO_DEBUG": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _shown(**env: str) -> dict[str, object]:
    result = _settings(**env)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_a_replica_url_adds_a_replica_database_with_a_short_connect_timeout() -> None:
    shown = _shown(
        DATABASE_URL="postgres://desk@db.internal:5432/triage",
        DATABASE_REPLICA_URL="postgres://desk@replica.internal:5432/triage",
    )
    replica = shown["databases"]["replica"]  # type: ignore[index]
    assert replica["HOST"] == "replica.internal"
    assert replica["ENGINE"] == shown["databases"]["default"]["ENGINE"]  # type: ignore[index]
    assert replica["OPTIONS"]["connect_timeout"] == 2
    # The test runner makes no database on the replica: it reads the primary's.
    assert replica["TEST"]["MIRROR"] == "default"
    assert shown["routers"] == ["core.replica.ReplicaRouter"]
    assert shown["lag"] == 5.0


def test_without_a_replica_url_there_is_only_the_primary() -> None:
    shown = _shown(DATABASE_URL="postgres://desk@db.internal:5432/triage")
    assert list(shown["databases"]) == ["default"]  # type: ignore[call-overload]


def test_the_replica_settings_are_checked_at_start_up() -> None:
    on_sqlite = _settings(DATABASE_REPLICA_URL="postgres://desk@replica.internal/triage")
    assert on_sqlite.returncode != 0
    assert "DATABASE_REPLICA_URL needs a PostgreSQL DATABASE_URL" in on_sqlite.stderr
    not_postgres = _settings(
        DATABASE_URL="postgres://desk@db.internal/triage",
        DATABASE_REPLICA_URL="mysql://desk@replica.internal/triage",
    )
    assert not_postgres.returncode != 0
    assert "DATABASE_REPLICA_URL must be a postgres:// URL" in not_postgres.stderr
    no_lag = _settings(TRIAGE_REPLICA_MAX_LAG_SECONDS="0")
    assert no_lag.returncode != 0
    assert "TRIAGE_REPLICA_MAX_LAG_SECONDS" in no_lag.stderr
