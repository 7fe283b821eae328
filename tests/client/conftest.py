"""The client tests' fake desk and reporters made against it, closed after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from triage_desk_client import Reporter

from tests.client.fake_desk import FakeDesk


@pytest.fixture
def desk() -> Iterator[FakeDesk]:
    fake = FakeDesk().start()
    yield fake
    fake.stop()


@pytest.fixture
def make_reporter(tmp_path: Path, desk: FakeDesk) -> Iterator[Callable[..., Reporter]]:
    made: list[Reporter] = []

    def make(key: str = "good-key", spool: Path | None = None, **options: Any) -> Reporter:
        settings: dict[str, Any] = {"flush_interval": 0.05, "max_backoff": 0.2}
        settings.update(options)
        reporter = Reporter(desk.url, key, spool_dir=str(spool or tmp_path / "spool"), **settings)
        made.append(reporter)
        return reporter

    yield make
    for reporter in made:
        reporter.close(timeout=0)
