"""A small stand-in for the desk's ingest endpoint, for the answers a real desk cannot be
made to give on cue (429, 413 for a batch size, a key revoked mid-run).

It keeps the desk's contract: an item id seen before with the same body is a
`duplicate`, with another body a `conflict`; 200 when every item is stored or duplicate,
207 otherwise. `script` answers the next requests with given statuses instead.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeDesk:
    def __init__(self, *, keys: tuple[str, ...] = ("good-key",)) -> None:
        self.keys = set(keys)
        self.stored: dict[str, bytes] = {}
        self.received: Counter[str] = Counter()  # item id -> times sent
        self.requests: list[tuple[int, int]] = []  # (status answered, items in the batch)
        # The next answers, instead of the desk's: (status, headers) answered with the desk's
        # error body, or (status, headers, body) answered with that body.
        self.script: list[tuple[Any, ...]] = []
        self.too_deep: set[str] = set()  # item ids that make their whole batch a 400
        self.max_items = 1000
        self.reject: dict[str, str] = {}  # item id -> error code
        self.lock = threading.Lock()
        self.port = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeDesk:
        desk = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, body = desk.answer(self.headers.get("Authorization", ""), data)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Down: the port refuses connections until start()."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def answer(self, authorization: str, data: bytes) -> tuple[int, dict[str, str], bytes]:
        items = json.loads(data)["items"]
        with self.lock:
            if authorization.removeprefix("Bearer ") not in self.keys:
                return self._refuse(401, "invalid_api_key", len(items))
            if self.script:
                status, headers, *scripted = self.script.pop(0)
                self.requests.append((status, len(items)))
                if scripted:
                    return status, headers, scripted[0]
                return (
                    status,
                    headers,
                    json.dumps({"error": {"code": f"scripted_{status}"}}).encode(),
                )
            if any(item["id"] in self.too_deep for item in items):
                return self._refuse(400, "json_too_deep", len(items))
            if len(items) > self.max_items:
                return self._refuse(413, "too_many_items", len(items))
            answers = []
            for index, item in enumerate(items):
                item_id = item["id"]
                self.received[item_id] += 1
                body = json.dumps(item["body"], sort_keys=True).encode()
                answer: dict[str, Any] = {"index": index, "id": item_id}
                if item_id in self.reject:
                    answer["status"] = "rejected"
                    answer["error"] = {"code": self.reject[item_id], "field": "body", "message": ""}
                elif item_id not in self.stored:
                    self.stored[item_id] = body
                    answer["status"] = "accepted"
                elif self.stored[item_id] == body:
                    answer["status"] = "duplicate"
                else:
                    answer["status"] = "conflict"
                    answer["error"] = {"code": "conflict", "field": "id", "message": ""}
                answers.append(answer)
            refused = sum(1 for answer in answers if answer["status"] in ("rejected", "conflict"))
            status = 207 if refused else 200
            self.requests.append((status, len(items)))
            return status, {}, json.dumps({"items": answers}).encode()

    def _refuse(self, status: int, code: str, items: int) -> tuple[int, dict[str, str], bytes]:
        self.requests.append((status, items))
        return status, {}, json.dumps({"error": {"code": code, "message": ""}}).encode()
