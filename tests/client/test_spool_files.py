"""The spool's files against whoever else can reach them (issue 26, 3a and 3b): a link
planted where the reporter writes or reads, a spool directory others may write to, and
secrets that must not sit in clear text in the segment files while the desk is away."""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from triage_desk_client import Reporter
from triage_desk_client.spool import UnsafeSpoolDirectory, frame

from tests.client.fake_desk import FakeDesk


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.02)


def record(item_id: str) -> bytes:
    return frame(b'{"type":"failure","id":"%s","body":{"stage":"execute"}}' % item_id.encode())


def test_a_link_planted_at_the_ack_file_being_written_is_replaced_never_followed(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    spool = tmp_path / "spool"
    reporter = make_reporter(flush_interval=60)  # nothing is sent before flush()
    reporter.failure({"stage": "execute", "reason": "http_5xx"}, id="one")
    (segment,) = [path for path in spool.glob("*.seg") if path.stat().st_size]
    planted = segment.with_suffix(".ack.tmp")
    planted.symlink_to(victim)

    assert reporter.flush(10)
    assert victim.read_text() == "precious"
    ack = segment.with_suffix(".ack")
    if ack.exists():  # deleted with its segment once every record is answered
        assert stat.S_ISREG(ack.lstat().st_mode)
    assert not planted.is_symlink()
    assert list(desk.stored) == ["one"]


def plant_fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def plant_link(path: Path, outside: Path) -> None:
    path.symlink_to(outside)


def plant_hard_link(path: Path, outside: Path) -> None:
    os.link(outside, path)


@pytest.mark.parametrize("plant", [plant_link, plant_hard_link, plant_fifo])
def test_a_segment_that_is_not_a_regular_file_of_ours_is_never_read(
    make_reporter: Callable[..., Reporter],
    desk: FakeDesk,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    plant: Callable[[Path, Path], None],
) -> None:
    # Elsewhere, a file the reporter's user can read that looks like a segment (a link to
    # /etc/passwd is the attack; this one would be sent if it were read).
    outside = tmp_path / "outside.seg"
    outside.write_bytes(record("read-through-the-link"))
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    # It sorts before the orphan a dead reporter left, which must still be adopted (a FIFO
    # opened to read would stop the adoption there, waiting for a writer).
    planted = spool / "00000000000000000001-1-aaaaaaaa.seg"
    plant(planted, outside)
    (spool / "00000000000000000002-1-bbbbbbbb.seg").write_bytes(record("left-by-a-dead-reporter"))

    with caplog.at_level(logging.ERROR, logger="triage_desk_client"):
        reporter = make_reporter()
        wait_for(lambda: "left-by-a-dead-reporter" in desk.stored)
        assert reporter.flush(5)
    assert list(desk.stored) == ["left-by-a-dead-reporter"]
    assert os.path.lexists(planted)  # left for an operator to look at, and said so
    assert outside.read_bytes() == record("read-through-the-link")
    assert f"{planted} is" in caplog.text and "it is not read" in caplog.text


def test_a_new_spool_directory_is_made_for_this_user_alone(tmp_path: Path) -> None:
    spool = tmp_path / "parent" / "spool"
    with Reporter("http://127.0.0.1:9", "k", spool_dir=str(spool)) as reporter:
        reporter.failure({"stage": "execute"}, id="x")
    assert stat.S_IMODE(spool.stat().st_mode) == 0o700
    (segment,) = spool.glob("*.seg")
    assert stat.S_IMODE(segment.stat().st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_a_spool_directory_others_may_write_to_is_refused(tmp_path: Path, mode: int) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    spool.chmod(mode)
    with pytest.raises(UnsafeSpoolDirectory, match="may be written by others") as raised:
        Reporter("http://127.0.0.1:9", "k", spool_dir=str(spool))
    assert isinstance(raised.value, PermissionError) and raised.value.filename == str(spool)
    assert list(spool.iterdir()) == []


def test_a_spool_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "spool").symlink_to(real)
    with pytest.raises(UnsafeSpoolDirectory, match="symbolic link"):
        Reporter("http://127.0.0.1:9", "k", spool_dir=str(tmp_path / "spool"))
    assert list(real.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_spool_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    os.chown(spool, 4242, -1)
    with pytest.raises(UnsafeSpoolDirectory, match="belongs to another user"):
        Reporter("http://127.0.0.1:9", "k", spool_dir=str(spool))


AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
LIVE_KEY = "sk-live-4eC39HqLyjWDarjtT1zdp7dc"
PASSWORD = "Hunter2Secret"


@pytest.mark.parametrize("durability", ["append", "batched"])
def test_secrets_in_an_item_never_reach_the_spool_files(
    make_reporter: Callable[..., Reporter], desk: FakeDesk, tmp_path: Path, durability: str
) -> None:
    desk.stop()  # the desk is away: the items wait in the spool
    spool = tmp_path / "spool"
    reporter = make_reporter(durability=durability)
    reporter.failure(
        {
            "stage": "execute",
            "reason": "auth_failed",
            "tool": "syncBucket",
            "message": f"boto3 failed with aws_access_key_id={AWS_KEY_ID} "
            f"aws_secret_access_key={AWS_SECRET}",
            "evidence": {
                "headers": f"Authorization: Bearer {LIVE_KEY}",
                "command": f"connect --user=app password={PASSWORD}",
                "attempts": [{"note": f"retried with {LIVE_KEY}"}],
            },
        }
    )
    assert not reporter.close(timeout=0)
    written = b"".join(path.read_bytes() for path in spool.iterdir())
    assert b"syncBucket" in written  # the item is there, without its secrets
    for secret in (AWS_KEY_ID, AWS_SECRET, LIVE_KEY, PASSWORD):
        assert secret.encode() not in written


def test_an_ack_file_that_cannot_be_written_loses_no_answer(
    make_reporter: Callable[..., Reporter],
    desk: FakeDesk,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A full disk, or a link planted again at the temporary name between its removal and
    # the create: the desk has answered, so the answer must count; without the ack file a
    # restart only re-sends what the desk then answers as duplicate.
    reporter = make_reporter(flush_interval=60)
    spool = reporter._spool
    write_ack = spool.write_ack
    failures = [OSError(errno.ENOSPC, "No space left on device")]

    def failing_write_ack(segment: Any, offset: int) -> None:
        if failures:
            raise failures.pop()
        write_ack(segment, offset)

    monkeypatch.setattr(spool, "write_ack", failing_write_ack)
    first = reporter.failure({"stage": "execute", "reason": "http_5xx"}, id="first")
    with caplog.at_level(logging.ERROR, logger="triage_desk_client"):
        assert reporter.flush(5)
    assert "cannot write the ack file" in caplog.text
    stats = reporter.stats()
    assert (stats["sent"], stats["queued"]) == (1, 0)
    second = reporter.failure({"stage": "execute", "reason": "http_5xx"}, id="second")
    assert reporter.flush(5)  # the next answer writes the ack file again
    assert sorted(desk.stored) == sorted([first, second])
    assert reporter.stats()["sent"] == 2
