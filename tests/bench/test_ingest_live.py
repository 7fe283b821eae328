"""bench/ingest.py for real, at a small size: the app and bench/naive_app.py both pass their
checks and the fast/naive ratio is printed from them; a fast path that answers every batch
"all accepted" and stores nothing is caught by the database check, no ratio is printed from
it, and the run exits 2 (whatever --strict says)."""

from __future__ import annotations

import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.services("postgres")


def bench_database_url() -> str:
    """A database of its own on the tests' PostgreSQL server."""
    database = settings.DATABASES["default"]
    user = urllib.parse.quote(database.get("USER") or "postgres")
    password = database.get("PASSWORD") or ""
    credentials = f"{user}:{urllib.parse.quote(password)}" if password else user
    host = f"{database.get('HOST') or '127.0.0.1'}:{database.get('PORT') or 5432}"
    return f"postgres://{credentials}@{host}/{database['NAME']}_bench_check"


@pytest.fixture(scope="module", autouse=True)
def _drop_the_bench_database() -> Iterator[None]:
    yield
    from bench.triage_scale import drop_database

    drop_database(bench_database_url())


def ingest_bench(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "bench/ingest.py", "--database-url", bench_database_url(),
            "--records", "400", "--naive-records", "100", "--batch", "100", "--skip-otlp",
            *arguments,
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_the_fast_and_naive_paths_pass_their_checks_and_give_the_ratio() -> None:
    done = ingest_bench()
    out = done.stdout
    assert done.returncode == 0, out + done.stderr  # targets missed at this size: not strict
    assert "BROKEN" not in out
    assert "  ratio (fast / naive) = " in out  # PASS or MISS, from two checked paths
    rows = [line for line in out.splitlines() if line.startswith(("fast ", "naive "))]
    assert len(rows) == 2 and all(row.endswith("  ok") for row in rows), rows


def test_a_path_that_stores_nothing_gives_no_ratio_and_fails_the_run() -> None:
    done = ingest_bench("--app", "tests.bench.lying_ingest_app:application")
    out = done.stdout
    assert done.returncode == 2, out + done.stderr
    assert "BROKEN  fast: sync 2w: database holds {'records': 0" in out
    assert "MISS  ratio (fast / naive): not judged, the fast path failed its check" in out
    assert "ratio (fast / naive) =" not in out
    fast_row = next(line for line in out.splitlines() if line.startswith("fast "))
    assert "MISMATCH, BROKEN" in fast_row
