"""Bodies that would exhaust memory get a 4xx without doing so (issue 6, "faults survived").

Through gunicorn, as deployed, with raw HTTP so the test decides what the headers claim
and when each byte is sent. The worker's peak resident memory is measured around each
request (Linux: `VmHWM`, reset through `/proc/PID/clear_refs`) and must stay far below
what the body would cost if it were read whole or inflated:

- 50 MB with an honest Content-Length: 413 before a single body byte is sent;
- 50 MB chunked, with no Content-Length: refused before a body byte is read;
- 50 MB behind a Content-Length of 1,000: only those 1,000 bytes are read (400);
- a Content-Length larger than what arrives: a 400 when the client stops, no hang;
- a gzip bomb (1 MB that inflates to 1 GiB): 413 after inflating at most the limit.
"""

from __future__ import annotations

import json
import socket
import struct
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.faults.processes import Gunicorn, base_env

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db(transaction=True)]

MB = 1 << 20
LIMIT = 5 * MB  # TRIAGE_INGEST_MAX_BODY_BYTES, the default, set explicitly for the server
BIG = 50 * MB


@cache
def gzip_bomb(inflated_mb: int = 1024) -> bytes:
    """A valid gzip stream of `inflated_mb` MiB of zeros, about a thousandth of that
    size. After a full flush the compressor's output for the same input repeats, so one
    block is compressed and repeated instead of compressing a gigabyte."""
    zeros = bytes(MB)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    last = compressor.flush()[:-8]  # the final empty block, without the trailer
    crc = 0
    for _ in range(inflated_mb):
        crc = zlib.crc32(zeros, crc)
    trailer = struct.pack("<II", crc, (inflated_mb * MB) & 0xFFFFFFFF)
    return head + block * (inflated_mb - 1) + last + trailer


def test_the_gzip_bomb_is_what_it_claims() -> None:
    bomb = gzip_bomb()
    assert len(bomb) < 2 * MB
    inflater = zlib.decompressobj(wbits=47)
    inflated = 0
    for start in range(0, len(bomb), 64 * 1024):
        data = bomb[start : start + 64 * 1024]
        while data:
            inflated += len(inflater.decompress(data, 16 * MB))
            data = inflater.unconsumed_tail
    assert inflater.eof and inflated == 1024 * MB


@pytest.fixture(scope="module")
def server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    env = base_env(TRIAGE_INGEST_MAX_BODY_BYTES=str(LIMIT))
    with Gunicorn.serving(env=env, log_dir=tmp_path_factory.mktemp("gunicorn")) as gunicorn:
        yield gunicorn


class Exchange:
    """One HTTP/1.1 request on a raw socket: headers as written, body bytes when told."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.sent_body = 0

    def head(self, headers: dict[str, str]) -> None:
        lines = ["POST /api/v1/ingest HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def body(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.sent_body += len(data)

    def try_body(self, size: int) -> None:
        """Keep sending `size` more bytes; the server may have closed already."""
        chunk = b"x" * (256 * 1024)
        try:
            for _ in range(size // len(chunk)):
                self.body(chunk)
        except OSError:
            pass

    def response(self) -> tuple[int, dict[str, Any]]:
        raw = b""
        while b"\r\n\r\n" not in raw or len(raw) < self._expected_length(raw):
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                pytest.fail(f"no answer after {self.sock.gettimeout()} s: the server waits for "
                            f"the body ({self.sent_body} bytes of it sent)")  # fmt: skip
            if not data:
                break
            raw += data
        head, _, payload = raw.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        return status, json.loads(payload)

    @staticmethod
    def _expected_length(raw: bytes) -> int:
        head, separator, _ = raw.partition(b"\r\n\r\n")
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                return len(head) + len(separator) + int(value)
        return 1 << 62  # read until the server closes

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def exchange(server: Gunicorn) -> Iterator[Callable[[], Exchange]]:
    opened: list[Exchange] = []

    def open_one() -> Exchange:
        opened.append(Exchange(server.port))
        return opened[-1]

    yield open_one
    for one in opened:
        one.close()


@pytest.fixture
def auth(make_api_key: Callable[..., str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_api_key()}", "Content-Type": "application/json"}


@pytest.fixture
def peak_growth(server: Gunicorn, auth: dict[str, str], exchange: Any) -> Callable[..., int]:
    """Measure how much the worker's peak resident memory rises during `action`."""
    pid = server.worker_pid()
    status_file = Path(f"/proc/{pid}/status")
    # Warm up: a good request loads everything a request needs.
    warm = exchange()
    body = json.dumps({"items": [{"type": "failure", "id": "warm", "body": _failure()}]})
    warm.head({**auth, "Content-Length": str(len(body))})
    warm.body(body.encode())
    assert warm.response()[0] == 200

    def kilobytes(field: str) -> int:
        for line in status_file.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"{field} not in {status_file}")

    def measure(action: Callable[[], None]) -> int:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
        before = kilobytes("VmRSS")
        assert kilobytes("VmHWM") <= before + 64, "the peak was not reset"
        action()
        assert server.worker_pid() == pid, f"the worker was replaced\n{server.log()}"
        return (kilobytes("VmHWM") - before) * 1024

    return measure


def _failure() -> dict[str, Any]:
    return {"stage": "execute", "reason": "http_5xx", "tool": "getOrderDetail"}


def test_50_mb_with_an_honest_length_is_413_before_the_body_is_sent(
    exchange: Callable[[], Exchange], auth: dict[str, str], peak_growth: Callable[..., int]
) -> None:
    outcome: dict[str, Any] = {}

    def send() -> None:
        request = exchange()
        request.head({**auth, "Content-Length": str(BIG)})
        outcome["response"] = request.response()  # nothing of the body sent yet
        request.try_body(BIG)

    grown = peak_growth(send)
    status, body = outcome["response"]
    assert status == 413 and body["error"]["code"] == "body_too_large"
    assert grown < 4 * MB, f"the worker grew by {grown / MB:.1f} MB"


def test_50_mb_chunked_without_a_length_is_refused_unread(
    exchange: Callable[[], Exchange], auth: dict[str, str], peak_growth: Callable[..., int]
) -> None:
    outcome: dict[str, Any] = {}

    def send() -> None:
        request = exchange()
        request.head({**auth, "Transfer-Encoding": "chunked"})
        chunk = b"x" * (256 * 1024)
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        request.body(framed)  # the first chunk, then wait for the answer
        outcome["response"] = request.response()
        request.try_body(BIG)

    grown = peak_growth(send)
    status, body = outcome["response"]
    # Without a Content-Length the body is not read at all, and the client is told why.
    assert status == 411 and body["error"]["code"] == "length_required"
    assert grown < 4 * MB, f"the worker grew by {grown / MB:.1f} MB"


def test_50_mb_behind_a_short_length_is_read_only_as_far_as_declared(
    exchange: Callable[[], Exchange], auth: dict[str, str], peak_growth: Callable[..., int]
) -> None:
    outcome: dict[str, Any] = {}

    def send() -> None:
        request = exchange()
        request.head({**auth, "Content-Length": "1000"})
        request.body(b'{"items": [' + b" " * 989)  # the declared 1,000 bytes
        outcome["response"] = request.response()
        request.try_body(BIG)

    grown = peak_growth(send)
    status, body = outcome["response"]
    assert status == 400 and body["error"]["code"] == "invalid_json"
    assert grown < 4 * MB, f"the worker grew by {grown / MB:.1f} MB"


def test_a_length_longer_than_the_body_is_answered_when_the_client_stops(
    exchange: Callable[[], Exchange], auth: dict[str, str]
) -> None:
    request = exchange()
    request.head({**auth, "Content-Length": str(4 * MB)})
    request.body(b'{"items": [')
    request.sock.shutdown(socket.SHUT_WR)
    status, body = request.response()
    assert status == 400 and body["error"]["code"] == "invalid_json"


def test_a_gzip_bomb_is_413_after_inflating_at_most_the_limit(
    exchange: Callable[[], Exchange], auth: dict[str, str], peak_growth: Callable[..., int]
) -> None:
    bomb = gzip_bomb()
    outcome: dict[str, Any] = {}

    def send() -> None:
        request = exchange()
        request.head({**auth, "Content-Length": str(len(bomb)), "Content-Encoding": "gzip"})
        request.body(bomb)
        outcome["response"] = request.response()

    grown = peak_growth(send)
    status, body = outcome["response"]
    assert status == 413 and body["error"]["code"] == "body_too_large"
    assert "decompressed" in body["error"]["message"]
    # The compressed megabyte, the limit's worth of inflated bytes and the allocator's
    # slack (about 8 MB measured): a hundredth of the 1 GiB the bomb claims.
    assert grown < 2 * LIMIT, f"the worker grew by {grown / MB:.1f} MB"
