from __future__ import annotations

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
