"""The fault tests' TCP proxy does what they rely on (against a local echo server)."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from tests.faults.proxy import TcpProxy


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
        self.received: list[bytes] = []


class _Echo(socketserver.BaseRequestHandler):
    server: _EchoServer

    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.server.received.append(data)
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[_EchoServer]:
    server = _EchoServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _connect(proxy: TcpProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=5)


def _round_trip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    received = b""
    while len(received) < len(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def test_it_forwards_stops_refusing_and_starts_again_on_the_same_port(
    echo: _EchoServer,
) -> None:
    with TcpProxy(echo.server_address[1]) as proxy:
        live = _connect(proxy)
        assert _round_trip(live, b"ping") == b"ping"
        port = proxy.port

        proxy.stop()
        assert live.recv(10) == b"", "a live connection survived the stop"
        with pytest.raises(ConnectionRefusedError):
            _connect(proxy)

        proxy.start()
        assert proxy.port == port
        again = _connect(proxy)
        assert _round_trip(again, b"pong") == b"pong"
        live.close()
        again.close()
    assert proxy.running is False
    left = [t.name for t in threading.enumerate() if t.name.startswith(f"proxy-{port}-")]
    assert left == [], "the proxy left threads running"


def test_a_cut_forwards_the_pattern_then_stops(echo: _EchoServer) -> None:
    with TcpProxy(echo.server_address[1]) as proxy:
        fired = proxy.cut_after(b"BEGIN", b"COMMIT", wait_for_reply=True)
        sock = _connect(proxy)
        assert _round_trip(sock, b"COMMIT first") == b"COMMIT first"  # not after BEGIN yet
        assert _round_trip(sock, b"BEGIN; INSERT") == b"BEGIN; INSERT"
        sock.sendall(b"COMMIT")
        assert sock.recv(10) == b"", "the answer to the cut message reached the client"
        assert fired.wait(timeout=5)
        assert b"".join(echo.received).endswith(b"COMMIT")  # the server got it
        assert not proxy.running
        sock.close()


def test_dropping_connections_keeps_accepting(echo: _EchoServer) -> None:
    with TcpProxy(echo.server_address[1]) as proxy:
        first = _connect(proxy)
        assert _round_trip(first, b"a") == b"a"
        proxy.drop_connections()
        assert first.recv(10) == b""
        second = _connect(proxy)
        assert _round_trip(second, b"b") == b"b"
        assert proxy.connections_accepted == 2
        first.close()
        second.close()
