from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import verdict


@pytest.fixture(autouse=True)
def _results_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A benchmark run by a test writes its result file in the test's directory, never over
    bench/results (what the documentation's table is made from)."""
    directory = tmp_path / "bench-results"
    monkeypatch.setattr(verdict, "RESULTS_DIR", directory)
    yield directory


@pytest.fixture(autouse=True)
def _environment_kept() -> Iterator[None]:
    """A benchmark's main() sets up its own environment (its Celery queue, its database) in
    os.environ; a test that runs one in this process leaves the next tests' as it was."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
