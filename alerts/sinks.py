"""A local webhook receiver and SMTP sink: where the demo's (and the tests' and the
benchmark's) rules deliver, so deliveries can be seen without any outside service.

`WebhookReceiver` listens on 127.0.0.1, verifies `X-Triage-Signature` when it knows the
channel's secret, remembers every request it got and answers 200 (or what it is told).
`SmtpSink` is aiosmtpd's SMTP server on 127.0.0.1, keeping every message it accepts.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from alerts.channels import DELIVERY_HEADER, SIGNATURE_HEADER, signature


@dataclass
class ReceivedRequest:
    """One request the receiver got: its path, headers, raw body and when."""

    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float
    signature_ok: bool | None  # None: no secret known for it

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def delivery(self) -> str:
        return self.headers.get(DELIVERY_HEADER.lower(), "")


@dataclass
class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that records what the desk posts to it."""

    port: int = 0
    secrets: dict[str, str] = field(default_factory=dict)  # path -> signing secret
    status: int = 200
    requests: list[ReceivedRequest] = field(default_factory=list)
    on_request: Callable[[ReceivedRequest], None] | None = None

    def __post_init__(self) -> None:
        receiver = self
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 1024 * 1024))
                receiver._record(self.path, dict(self.headers.items()), body)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, path: str, headers: dict[str, str], body: bytes) -> None:
        lowered = {name.lower(): value for name, value in headers.items()}
        secret = self.secrets.get(path)
        verified = None
        if secret is not None:
            verified = hmac.compare_digest(
                lowered.get(SIGNATURE_HEADER.lower(), ""), signature(secret, body)
            )
        request = ReceivedRequest(path, lowered, body, time.time(), verified)
        with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()
        if self.on_request is not None:
            self.on_request(request)

    def wait_for(self, count: int, *, timeout: float = 10.0) -> list[ReceivedRequest]:
        """Wait until `count` requests arrived (or the timeout passed); all of them."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self.requests) < count and time.monotonic() < deadline:
                self._arrived.wait(deadline - time.monotonic())
            return list(self.requests)


class _Keep:
    """aiosmtpd's handler: keep each message."""

    def __init__(self, sink: SmtpSink) -> None:
        self.sink = sink

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.sink._keep(envelope.rcpt_tos, envelope.content)
        return "250 Message accepted for delivery"


class SmtpSink:
    """aiosmtpd on 127.0.0.1: an SMTP server that keeps what it is sent."""

    def __init__(
        self, port: int = 0, on_message: Callable[[list[str], Message], None] | None = None
    ) -> None:
        self.messages: list[tuple[list[str], Message]] = []
        self.on_message = on_message
        self._lock = threading.Condition()
        if not port:
            import socket

            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = int(probe.getsockname()[1])
        self.port = port
        self._controller = Controller(_Keep(self), hostname="127.0.0.1", port=port)

    def start(self) -> SmtpSink:
        # aiosmtpd tells every SMTP command at INFO; the sink's own callback says enough.
        logging.getLogger("mail.log").setLevel(logging.WARNING)
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    def __enter__(self) -> SmtpSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _keep(self, recipients: list[str], content: bytes) -> None:
        message = message_from_bytes(content)
        with self._lock:
            self.messages.append((list(recipients), message))
            self._lock.notify_all()
        if self.on_message is not None:
            self.on_message(list(recipients), message)

    def wait_for(self, count: int, *, timeout: float = 10.0) -> list[tuple[list[str], Message]]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.messages) < count and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())
            return list(self.messages)
