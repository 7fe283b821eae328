"""Execute cases through the guarded transport: internal addresses, redirects, the timeout
ceiling and the response cap, against real servers on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from core import outbound
from qualitylab import engine
from qualitylab.engine import CaseSpec

POINTS = {
    "id": "points",
    "mode": "execute",
    "query": "회원 포인트 잔액 알려줘",
    "expected_target": "getMemberPoints",
    "provided_entities": {"memberNo": "M-100"},
}
TOKEN = "Bearer demo-token-not-for-other-hosts"
Respond = Callable[[BaseHTTPRequestHandler], None]


class _Server:
    def __init__(self, respond: Respond) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append({"path": self.path, "headers": dict(self.headers)})
                respond(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def serve() -> Iterator[Callable[[Respond], _Server]]:
    servers: list[_Server] = []

    def start(respond: Respond) -> _Server:
        servers.append(_Server(respond))
        return servers[-1]

    yield start
    for server in servers:
        server.httpd.shutdown()
        server.httpd.server_close()


def _answer(status: int, body: Any = None, location: str | None = None) -> Respond:
    data = json.dumps(body if body is not None else {}).encode()

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        if location:
            handler.send_header("Location", location)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return respond


POINTS_BODY = {"memberNo": "M-100", "balance": 1200, "expiringSoon": 0}


def _run(
    collection: engine.LoadedCollection,
    base_url: str,
    case: dict[str, Any] | None = None,
    **kw: Any,
) -> engine.CaseOutcome:
    options: dict[str, Any] = {
        "base_url": base_url,
        "allowed_hosts": ("127.0.0.1",),
        "auth_headers": {"Authorization": TOKEN},
        "auth_profile": engine.AuthProfile(("Authorization",)),
        "timeout_sec": 5.0,
        "private_allowed": ("127.0.0.1",),
    }
    options.update(kw)
    spec = CaseSpec.from_json({**POINTS, **(case or {})})
    return engine.run_case(collection, spec, execution=engine.ExecutionContext(**options))


@pytest.mark.parametrize(
    ("base_url", "allowed", "address_class"),
    [
        ("http://169.254.169.254/latest", ("169.254.169.254",), "link_local"),
        ("http://[::1]:5432", ("::1",), "loopback"),
        ("http://localhost:6379", ("localhost",), "loopback"),
    ],
)
def test_internal_base_urls_are_never_called(
    demo_collection: engine.LoadedCollection,
    base_url: str,
    allowed: tuple[str, ...],
    address_class: str,
) -> None:
    outcome = _run(demo_collection, base_url, allowed_hosts=allowed, private_allowed=())
    assert outcome.failure is not None and not outcome.passed
    assert (outcome.failure["stage"], outcome.failure["reason"]) == ("execute", "network_error")
    evidence = outcome.failure["evidence"]
    assert evidence["blocked_by"] == "address" and evidence["request_sent"] is False
    assert evidence["address_class"] == address_class
    assert outcome.failure["execution_state"] == "not_started"
    assert outcome.execute is not None and outcome.execute["calls"] == []


def test_a_redirect_to_a_host_outside_the_allowed_ones_fails_with_evidence(
    demo_collection: engine.LoadedCollection, serve: Callable[[Respond], _Server]
) -> None:
    elsewhere = serve(_answer(200, POINTS_BODY))
    api = serve(_answer(302, location=f"{elsewhere.url}/members/M-100/points"))
    outcome = _run(demo_collection, api.url, allowed_hosts=(f"127.0.0.1:{api.port}",))
    assert outcome.failure is not None and not outcome.passed
    assert outcome.failure["reason"] == "network_error"
    evidence = outcome.failure["evidence"]
    assert evidence["blocked_by"] == "redirect"
    assert evidence["redirect_refused_because"] == "host_not_allowed"
    assert evidence["request_sent"] is True
    assert evidence["redirects"] == [{"status": 302, "from": api.url}]
    assert elsewhere.requests == []
    assert TOKEN not in json.dumps(outcome.to_dict())


@pytest.mark.parametrize(
    ("location", "because"),
    [
        ("ftp://127.0.0.1/points", "scheme_not_allowed"),
        ("http://169.254.169.254/latest/meta-data/", "address_not_allowed"),
    ],
)
def test_redirects_to_other_schemes_or_internal_addresses_fail(
    demo_collection: engine.LoadedCollection,
    serve: Callable[[Respond], _Server],
    location: str,
    because: str,
) -> None:
    api = serve(_answer(301, location=location))
    outcome = _run(demo_collection, api.url, allowed_hosts=("127.0.0.1", "169.254.169.254"))
    assert outcome.failure is not None
    assert outcome.failure["evidence"]["redirect_refused_because"] == because
    assert outcome.failure["execution_state"] == "completed"


def test_an_allowed_redirect_is_followed_without_the_credential(
    demo_collection: engine.LoadedCollection, serve: Callable[[Respond], _Server]
) -> None:
    moved = serve(_answer(200, POINTS_BODY))
    api = serve(_answer(308, location=f"{moved.url}/v2/members/M-100/points"))
    outcome = _run(demo_collection, api.url)
    assert outcome.failure is None, outcome.failure
    assert api.requests[0]["headers"]["Authorization"] == TOKEN
    assert "Authorization" not in moved.requests[0]["headers"]
    assert outcome.execute is not None
    assert outcome.execute["calls"][0]["redirects"][0]["credentials_dropped"] == ["Authorization"]


def test_an_allowance_on_one_loopback_port_refuses_the_others_also_via_a_redirect(
    demo_collection: engine.LoadedCollection, serve: Callable[[Respond], _Server]
) -> None:
    database = serve(_answer(200, POINTS_BODY))  # stands for PostgreSQL or Redis
    api = serve(_answer(200, POINTS_BODY))
    redirecting = serve(_answer(302, location=f"{database.url}/members/M-100/points"))
    only_api: dict[str, Any] = {
        "private_allowed": (f"127.0.0.1:{api.port}", f"127.0.0.1:{redirecting.port}")
    }
    reached = _run(demo_collection, api.url, **only_api)
    assert reached.failure is None and reached.passed, reached.failure
    refused = _run(demo_collection, database.url, **only_api)
    assert refused.failure is not None and not refused.passed
    evidence = refused.failure["evidence"]
    assert (evidence["blocked_by"], evidence["address_class"]) == ("address", "loopback")
    assert evidence["request_sent"] is False
    bounced = _run(demo_collection, redirecting.url, **only_api)
    assert bounced.failure is not None and not bounced.passed
    evidence = bounced.failure["evidence"]
    assert (evidence["blocked_by"], evidence["redirect_refused_because"]) == (
        "redirect",
        "address_not_allowed",
    )
    assert evidence["redirects"] == [{"status": 302, "from": redirecting.url}]
    assert database.requests == [] and len(redirecting.requests) == 1


def test_a_single_label_host_is_judged_by_the_address_it_resolves_to(
    demo_collection: engine.LoadedCollection,
    serve: Callable[[Respond], _Server],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``http://sandbox:PORT``, a compose service name: private, so refused unless allowed;
    allowed on its port, the case runs (the name resolves to the test server's loopback)."""
    api = serve(_answer(200, POINTS_BODY))
    system_resolver = outbound.system_resolver

    def compose_dns(host: str, port: int) -> list[Any]:
        if host == "sandbox":
            return [ipaddress.ip_address("127.0.0.1")]
        return system_resolver(host, port)

    monkeypatch.setattr(outbound, "system_resolver", compose_dns)
    base_url = f"http://sandbox:{api.port}"
    hosts: dict[str, Any] = {"allowed_hosts": (f"sandbox:{api.port}",)}
    refused = _run(demo_collection, base_url, **hosts, private_allowed=())
    assert refused.failure is not None and refused.failure["evidence"]["blocked_by"] == "address"
    other_port = _run(demo_collection, base_url, **hosts, private_allowed=("sandbox:1",))
    assert other_port.failure is not None
    assert other_port.failure["evidence"]["blocked_by"] == "address"
    assert api.requests == []
    allowed = _run(demo_collection, base_url, **hosts, private_allowed=(f"sandbox:{api.port}",))
    assert allowed.failure is None and allowed.passed, allowed.failure
    assert api.requests[0]["headers"]["Host"] == f"sandbox:{api.port}"


def test_the_execute_timeout_is_a_ceiling_a_case_cannot_raise(
    demo_collection: engine.LoadedCollection, serve: Callable[[Respond], _Server]
) -> None:
    def slow(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(2)
        _answer(200, POINTS_BODY)(handler)

    api = serve(slow)
    started = time.monotonic()
    outcome = _run(demo_collection, api.url, {"timeout_sec": 60}, timeout_sec=0.5)
    assert time.monotonic() - started < 1.8
    assert outcome.failure is not None and outcome.failure["reason"] == "timeout"
    assert outcome.failure["evidence"]["timeout_ms"] == 500
    assert outcome.execute is not None and outcome.execute["timeout_sec"] == 0.5
    lowered = _run(demo_collection, api.url, {"timeout_sec": 0.3}, timeout_sec=5)
    assert lowered.execute is not None and lowered.execute["timeout_sec"] == 0.3


def test_an_answer_over_the_cap_fails_the_case(
    demo_collection: engine.LoadedCollection, serve: Callable[[Respond], _Server]
) -> None:
    api = serve(_answer(200, {**POINTS_BODY, "padding": "x" * 5000}))
    outcome = _run(demo_collection, api.url, max_response_bytes=2048)
    assert outcome.failure is not None and outcome.failure["reason"] == "network_error"
    evidence = outcome.failure["evidence"]
    assert evidence["blocked_by"] == "response_size" and evidence["max_response_bytes"] == 2048
    assert _run(demo_collection, api.url).failure is None


@pytest.mark.parametrize(
    "data",
    [b"[" * 100_000 + b"]" * 100_000, b'{"memberNo": "M-100", "balance": ' + b"9" * 5000 + b"}"],
    ids=["nested 100,000 deep", "a 5,000-digit number"],
)
def test_an_answer_python_cannot_parse_is_read_as_text_not_a_server_bug(
    demo_collection: engine.LoadedCollection, serve: Callable[[Respond], _Server], data: bytes
) -> None:
    """The API under test is untrusted input too: json.loads raises RecursionError (or
    ValueError) on these, which used to fail the case as service/uncaught_server_error."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    api = serve(respond)
    status_only = _run(
        demo_collection, api.url, {"assertions": [{"type": "http_status", "equals": 200}]}
    )
    assert status_only.passed, status_only.failure
    with_path = _run(
        demo_collection,
        api.url,
        {"assertions": [{"type": "json_path_exists", "path": "$.balance"}]},
    )
    assert not with_path.passed and with_path.failure is None  # the assertion fails, no error
