"""The ingest worker's lower CPU priority where Linux's autogroups would void its niceness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config import priority


class FlakyAutogroup:
    """/proc/self/autogroup refusing `busy` writes with EAGAIN (the kernel's rate limit)."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.written: list[str] = []

    def write_text(self, text: str) -> int:
        if self.busy:
            self.busy -= 1
            raise BlockingIOError(11, "Resource temporarily unavailable")
        self.written.append(text)
        return len(text)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {"nice": [], "setsid": 0, "sleeps": 0}

    def setsid() -> None:
        seen["setsid"] += 1

    def sleep(_: float) -> None:
        seen["sleeps"] += 1

    monkeypatch.setattr(priority.os, "nice", lambda n: seen["nice"].append(n))
    monkeypatch.setattr(priority.os, "setsid", setsid)
    monkeypatch.setattr(priority.time, "sleep", sleep)
    switch = tmp_path / "sched_autogroup_enabled"
    monkeypatch.setattr(priority, "AUTOGROUP_SWITCH", switch)
    seen["switch"] = switch
    return seen


def test_without_autogroups_the_niceness_is_the_processs_own(
    calls: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    group = FlakyAutogroup(busy=0)
    monkeypatch.setattr(priority, "AUTOGROUP", group)
    for switch in ("0\n", None):  # turned off, or a kernel without them
        if switch is None:
            calls["switch"].unlink()
        else:
            calls["switch"].write_text(switch)
        priority.give_way(10)
    assert calls["nice"] == [10, 10]
    assert calls["setsid"] == 0 and group.written == []


def test_with_autogroups_the_worker_takes_a_session_of_its_own_and_nices_its_group(
    calls: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls["switch"].write_text("1\n")
    group = FlakyAutogroup(busy=3)  # two workers starting at once meet the rate limit
    monkeypatch.setattr(priority, "AUTOGROUP", group)
    priority.give_way(7)
    assert calls["nice"] == [7] and calls["setsid"] == 1
    assert group.written == ["7"] and calls["sleeps"] == 3


def test_a_group_that_stays_busy_or_refuses_leaves_the_worker_niced_and_running(
    calls: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls["switch"].write_text("1\n")
    busy = FlakyAutogroup(busy=1_000)
    monkeypatch.setattr(priority, "AUTOGROUP", busy)
    priority.give_way(5)  # gives up after its retries, does not raise
    assert busy.written == [] and calls["sleeps"] == 20
    monkeypatch.setattr(priority, "AUTOGROUP", Path("/proc/no-such-dir/autogroup"))
    priority.give_way(5)  # not writable: the worker's own niceness is what it has
    assert calls["nice"] == [5, 5]


def test_a_process_that_leads_its_session_already_keeps_it(
    calls: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls["switch"].write_text("1\n")

    def refuse() -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(priority.os, "setsid", refuse)
    group = FlakyAutogroup(busy=0)
    monkeypatch.setattr(priority, "AUTOGROUP", group)
    priority.give_way(10)
    assert calls["nice"] == [10] and group.written == []  # never renices a shared group
