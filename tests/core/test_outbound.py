"""The guarded outbound transport against real HTTP servers on 127.0.0.1 (port 0)."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from core import outbound
from core.outbound import OutboundRefused, PrivateAllowance

LOOPBACK = PrivateAllowance.parse(["127.0.0.1"])


class _Server:
    """A tiny HTTP server whose answers the test decides; it records what it received."""

    def __init__(
        self, respond: Callable[[BaseHTTPRequestHandler], None], host: str = "127.0.0.1"
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append({"path": self.path, "headers": dict(self.headers)})
                respond(self)

            do_POST = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        self.httpd = Server((host, 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://{outbound.host_port(host, self.port)}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., _Server]]:
    servers: list[_Server] = []

    def start(
        respond: Callable[[BaseHTTPRequestHandler], None], host: str = "127.0.0.1"
    ) -> _Server:
        servers.append(_Server(respond, host))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _answer(status: int, body: bytes = b"{}", **headers: str) -> Callable[[Any], None]:
    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name.replace("_", "-"), value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


def _fetch(url: str, **overrides: Any) -> outbound.Response:
    options: dict[str, Any] = {
        "headers": {"Authorization": "Bearer secret-token", "X-Api-Key": "k-123"},
        "allowed_hosts": ["127.0.0.1"],
        "private_allowed": LOOPBACK,
        "timeout": 5.0,
        "max_body_bytes": 1_000_000,
        "credential_headers": ["X-Api-Key"],
    }
    options.update(overrides)
    return outbound.fetch(url, **options)


# --- address classification ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "refusal"),
    [
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("172.32.0.1", None),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("169.254.169.254", "link_local"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "reserved"),
        ("198.18.0.1", "reserved"),
        ("2606:4700:4700::1111", None),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link_local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fec0::1", "private"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "reserved"),
        ("2001::1", "reserved"),  # Teredo
        ("100::1", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link_local"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:8.8.8.8", None),
        ("::127.0.0.1", "loopback"),  # IPv4-compatible
        ("::8.8.8.8", "reserved"),
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", "link_local"),  # 6to4 of 169.254.169.254
        ("2002:808:808::1", None),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link_local"),
        ("64:ff9b::808:808", None),
        ("64:ff9b:1::1", "private"),  # local-use NAT64
        ("4000::1", "reserved"),  # outside global unicast
    ],
)
def test_address_classification(address: str, refusal: str | None) -> None:
    assert outbound.address_refusal(ipaddress.ip_address(address)) == refusal


def test_a_private_allowance_takes_hosts_addresses_and_networks() -> None:
    allowance = PrivateAllowance.parse(["sandbox.lan", "10.20.0.0/16", "[::1]", "127.0.0.1"])
    ip = ipaddress.ip_address
    assert allowance.allows("sandbox.lan", ip("10.9.9.9"), port=80)
    assert allowance.allows("x", ip("10.20.3.4"), port=443)
    assert allowance.allows("x", ip("::1"), port=5432)  # a bare entry: every port
    assert allowance.allows("x", ip("::ffff:127.0.0.1"), port=6379)
    assert not allowance.allows("x", ip("10.21.0.1"), port=80)
    with pytest.raises(ValueError, match="not a host name"):
        PrivateAllowance.parse(["http://10.0.0.1/"])


def test_a_host_port_entry_allows_that_port_only() -> None:
    allowance = PrivateAllowance.parse(
        ["127.0.0.1:8090", "[::1]:8090", "sandbox:8090", "10.20.0.0/16:443", "sandbox.lan"]
    )
    ip = ipaddress.ip_address
    assert allowance.allows("127.0.0.1", ip("127.0.0.1"), port=8090)
    assert allowance.allows("localhost", ip("::ffff:127.0.0.1"), port=8090)
    assert allowance.allows("x", ip("::1"), port=8090)
    assert allowance.allows("sandbox", ip("172.18.0.5"), port=8090)
    assert allowance.allows("x", ip("10.20.3.4"), port=443)
    assert allowance.allows("sandbox.lan", ip("10.9.9.9"), port=5432)  # bare: every port
    for port in (5432, 6379, 8091, 80):
        assert not allowance.allows("127.0.0.1", ip("127.0.0.1"), port=port)
        assert not allowance.allows("x", ip("::1"), port=port)
        assert not allowance.allows("sandbox", ip("172.18.0.5"), port=port)
    assert not allowance.allows("x", ip("10.20.3.4"), port=80)
    # "::1:8090" is an IPv6 address (an IPv6 entry with a port needs brackets).
    assert PrivateAllowance.parse(["::1:8090"]).allows("x", ip("::1:8090"), port=80)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("127.0.0.1:", "not a host name"),
        ("127.0.0.1:http", "not a host name"),
        ("[::1]:", "not a host name"),
        ("[::1]8090", "not a host name"),
        ("[sandbox]:8090", "not a host name"),
        ("sandbox:80:80", "not a host name"),
        ("http://10.0.0.1:8090/", "not a host name"),
        ("127.0.0.1:0", "port must be between 1 and 65535"),
        ("[::1]:65536", "port must be between 1 and 65535"),
    ],
)
def test_a_bad_entry_is_refused_by_name(entry: str, said: str) -> None:
    with pytest.raises(ValueError, match=said) as refused:
        PrivateAllowance.parse(["127.0.0.1:8090", entry])
    assert repr(entry) in str(refused.value)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://sandbox:8090", None),  # one label: a compose service
        ("http://my_service/", None),
        ("https://api.example.com./v1?x=1", None),
        ("http://[::1]:8090/", None),
        ("http://127.0.0.1:8090", None),
        ("http://체크아웃.example/", None),
        ("ftp://sandbox/", "only http and https"),
        ("http:///path", "no host"),
        ("http://sandbox:0/", "port 0"),
        ("http://sandbox:99999/", "malformed"),
        ("http://[sandbox]/", "malformed"),
        ("http://-sandbox/", "not a valid host name"),
        ("http://a..b/", "not a valid host name"),
        ("http://a b/", "no spaces"),
        ("http://sandbox/\n", "no spaces"),
    ],
)
def test_url_problem_judges_the_form_not_the_number_of_labels(
    url: str, problem: str | None
) -> None:
    said = outbound.url_problem(url)
    assert said is None if problem is None else problem in (said or ""), said


def test_a_single_label_name_is_judged_by_the_address_it_resolves_to() -> None:
    def compose_dns(host: str, port: int) -> list[Any]:
        assert host == "sandbox"
        return [ipaddress.ip_address("172.18.0.5")]

    with pytest.raises(OutboundRefused) as refused:
        outbound.check_url("http://sandbox:8090/", allowed_hosts=None, resolve=compose_dns)
    assert refused.value.evidence["address_class"] == "private"
    for entry in ("sandbox:8090", "172.18.0.0/16:8090", "sandbox"):
        target = outbound.check_url(
            "http://sandbox:8090/",
            allowed_hosts=None,
            private_allowed=PrivateAllowance.parse([entry]),
            resolve=compose_dns,
        )
        assert (target.host, target.port) == ("sandbox", 8090)
    with pytest.raises(OutboundRefused, match=r"172\.18\.0\.5, a private address"):
        outbound.check_url(
            "http://sandbox:5432/",
            allowed_hosts=None,
            private_allowed=PrivateAllowance.parse(["sandbox:8090"]),
            resolve=compose_dns,
        )


# --- check_url ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("ftp://127.0.0.1/file", "scheme_not_allowed"),
        ("file:///etc/passwd", "scheme_not_allowed"),
        ("http://169.254.169.254/latest/meta-data", "address_not_allowed"),
        ("http://[::1]:5432/", "address_not_allowed"),
        ("http://localhost:6379/", "address_not_allowed"),
        ("http://2130706433/", "address_not_allowed"),  # 127.0.0.1 as one number
        ("http://[::ffff:169.254.169.254]/", "address_not_allowed"),
        ("http://0.0.0.0:8000/", "address_not_allowed"),
    ],
)
def test_internal_and_non_http_urls_are_refused(url: str, code: str) -> None:
    with pytest.raises(OutboundRefused) as refused:
        outbound.check_url(url, allowed_hosts=None)
    assert refused.value.code == code


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://0.0.0.0:8000/", "resolves to 0.0.0.0, an unspecified address"),
        ("http://[::1]:5432/", "resolves to ::1, a loopback address"),
        ("http://169.254.169.254/", "resolves to 169.254.169.254, a link-local address"),
    ],
)
def test_a_refusal_names_the_address_and_its_kind(url: str, said: str) -> None:
    with pytest.raises(OutboundRefused, match=said):
        outbound.check_url(url, allowed_hosts=None)


def test_a_host_name_resolving_to_a_private_address_is_refused() -> None:
    def resolve(host: str, port: int) -> list[Any]:
        assert host == "api.example.com"
        return [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("10.0.0.7")]

    with pytest.raises(OutboundRefused) as refused:
        outbound.check_url(
            "https://api.example.com/v1", allowed_hosts=["api.example.com"], resolve=resolve
        )
    assert refused.value.evidence == {
        "refused": "address_not_allowed",
        "host": "api.example.com",
        "address": "10.0.0.7",
        "address_class": "private",
    }


def test_allowed_hosts_match_host_or_host_and_port() -> None:
    def public(host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address("93.184.216.34")]

    target = outbound.check_url(
        "https://API.example.com./x?y=1", allowed_hosts=["api.example.com"], resolve=public
    )
    assert (target.host, target.port, target.request_target) == ("api.example.com", 443, "/x?y=1")
    outbound.check_url("http://a.test:8080/", allowed_hosts=["a.test:8080"], resolve=public)
    with pytest.raises(OutboundRefused, match="not in the allowed hosts"):
        outbound.check_url("http://a.test:8081/", allowed_hosts=["a.test:8080"], resolve=public)


# --- fetch against real servers -------------------------------------------------------------


def test_a_plain_call_returns_status_headers_and_body(serve: Any) -> None:
    server = serve(_answer(200, b'{"ok": true}', Content_Type="application/json"))
    response = _fetch(f"{server.url}/items?q=1")
    assert (response.status, response.body) == (200, b'{"ok": true}')
    assert server.requests[0]["path"] == "/items?q=1"
    assert server.requests[0]["headers"]["Authorization"] == "Bearer secret-token"


def test_loopback_is_refused_before_connecting_unless_allowed(serve: Any) -> None:
    server = serve(_answer(200))
    with pytest.raises(OutboundRefused) as refused:
        _fetch(server.url, private_allowed=None)
    assert refused.value.code == "address_not_allowed"
    assert server.requests == []


def test_a_redirect_to_another_port_is_refused_with_evidence(serve: Any) -> None:
    elsewhere = serve(_answer(200))
    server = serve(_answer(302, Location=f"{elsewhere.url}/steal"))
    with pytest.raises(OutboundRefused) as refused:
        _fetch(f"{server.url}/start", allowed_hosts=[f"127.0.0.1:{server.port}"])
    evidence = refused.value.evidence
    assert refused.value.code == "redirect_refused"
    assert evidence["redirect_refused_because"] == "host_not_allowed"
    assert evidence["request_sent"] is True
    assert evidence["redirects"] == [{"status": 302, "from": server.url}]
    assert elsewhere.requests == []


def test_a_redirect_to_ftp_is_refused(serve: Any) -> None:
    server = serve(_answer(301, Location="ftp://127.0.0.1/etc/passwd"))
    with pytest.raises(OutboundRefused) as refused:
        _fetch(server.url)
    assert refused.value.evidence["redirect_refused_because"] == "scheme_not_allowed"
    assert refused.value.evidence["redirect_scheme"] == "ftp"


def test_a_redirect_to_the_metadata_address_is_refused_before_connecting(serve: Any) -> None:
    server = serve(_answer(307, Location="http://169.254.169.254/latest/meta-data/"))
    connects: list[Any] = []
    real = socket.create_connection

    def spy(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        connects.append(address[0])
        return real(address, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "create_connection", spy)
        with pytest.raises(OutboundRefused) as refused:
            _fetch(server.url, allowed_hosts=["127.0.0.1", "169.254.169.254"])
    assert refused.value.evidence["redirect_refused_because"] == "address_not_allowed"
    assert refused.value.evidence["address_class"] == "link_local"
    assert connects == ["127.0.0.1"]


def test_an_allowed_redirect_is_followed_without_credentials_across_hosts(serve: Any) -> None:
    target = serve(_answer(200, b'{"there": 1}'))
    routes = {
        "/start": _answer(303, Location="/next"),
        "/next": _answer(302, Location=f"{target.url}/final"),
    }
    server = serve(lambda handler: routes[handler.path](handler))
    response = _fetch(f"{server.url}/start", method="POST", body=b'{"a": 1}')
    assert (response.status, response.body) == (200, b'{"there": 1}')
    first, second = server.requests
    assert first["headers"]["Authorization"] == "Bearer secret-token"
    # Same origin: the credential stays; another port: it is dropped, custom header too.
    assert second["path"] == "/next" and second["headers"]["Authorization"] == "Bearer secret-token"
    assert target.requests[0]["path"] == "/final"
    carried = target.requests[0]["headers"]
    assert "Authorization" not in carried and "X-Api-Key" not in carried
    assert response.redirects[0]["to"] == server.url
    assert response.redirects[1]["credentials_dropped"] == ["Authorization", "X-Api-Key"]


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_a_host_port_allowance_reaches_that_port_and_no_other_loopback_port(
    serve: Any, host: str
) -> None:
    api = serve(_answer(200, b'{"api": 1}'), host)
    database = serve(_answer(200, b'{"database": 1}'), host)
    entry = outbound.host_port(host, api.port)
    options = {
        "allowed_hosts": [host],  # every port: only the address allowance tells them apart
        "private_allowed": PrivateAllowance.parse([entry]),
    }
    assert _fetch(f"{api.url}/items", **options).body == b'{"api": 1}'
    with pytest.raises(OutboundRefused) as refused:
        _fetch(f"{database.url}/", **options)
    assert refused.value.code == "address_not_allowed"
    assert refused.value.evidence["host"] == outbound.host_port(host, database.port)
    assert database.requests == []


def test_a_redirect_to_another_loopback_port_is_refused_by_the_port_allowance(
    serve: Any,
) -> None:
    database = serve(_answer(200, b'{"database": 1}'))
    other_api = serve(_answer(200, b'{"other": 1}'))
    routes = {
        "/to-database": _answer(302, Location=f"{database.url}/dump"),
        "/to-other-api": _answer(307, Location=f"{other_api.url}/fine"),
    }
    api = serve(lambda handler: routes[handler.path](handler))
    options = {
        "allowed_hosts": ["127.0.0.1"],
        "private_allowed": PrivateAllowance.parse(
            [f"127.0.0.1:{api.port}", f"127.0.0.1:{other_api.port}"]
        ),
    }
    with pytest.raises(OutboundRefused) as refused:
        _fetch(f"{api.url}/to-database", **options)
    evidence = refused.value.evidence
    assert (refused.value.code, evidence["redirect_refused_because"]) == (
        "redirect_refused",
        "address_not_allowed",
    )
    assert evidence["host"] == f"127.0.0.1:{database.port}"
    assert database.requests == []
    # A hop to a port that is allowed too is followed.
    assert _fetch(f"{api.url}/to-other-api", **options).body == b'{"other": 1}'


def test_too_many_redirects_are_refused(serve: Any) -> None:
    server = serve(_answer(302, Location="/again"))
    with pytest.raises(OutboundRefused) as refused:
        _fetch(server.url, max_redirects=3)
    assert refused.value.code == "too_many_redirects"
    assert len(server.requests) == 4


def test_a_body_over_the_cap_is_refused(serve: Any) -> None:
    server = serve(_answer(200, b"x" * 5000))
    with pytest.raises(OutboundRefused) as refused:
        _fetch(server.url, max_body_bytes=4096)
    assert refused.value.code == "response_too_large"

    def no_length(handler: BaseHTTPRequestHandler) -> None:
        handler.protocol_version = "HTTP/1.0"
        handler.send_response(200)
        handler.end_headers()
        handler.wfile.write(b"y" * 10_000)

    unsized = serve(no_length)
    with pytest.raises(OutboundRefused, match="larger than 4096 bytes"):
        _fetch(unsized.url, max_body_bytes=4096)


def test_the_timeout_bounds_the_whole_call_even_when_the_server_drips(serve: Any) -> None:
    def drip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100")
        handler.end_headers()
        for _ in range(100):
            try:
                handler.wfile.write(b"x")
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(0.1)

    server = serve(drip)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="timed out"):
        _fetch(server.url, timeout=0.6)
    assert time.monotonic() - started < 3


def test_https_connects_to_the_checked_address_and_verifies_the_host_name(
    serve: Any, tmp_path: Any
) -> None:
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=api.example.test", "-addext", "subjectAltName=DNS:api.example.test",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server = serve(_answer(200, b'{"tls": true}'))
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    server.httpd.socket = server_context.wrap_socket(server.httpd.socket, server_side=True)
    client_context = ssl.create_default_context(cafile=str(cert))

    def to_loopback(host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address("127.0.0.1")]

    options = {
        "allowed_hosts": ["api.example.test"],
        "private_allowed": PrivateAllowance.parse(["api.example.test"]),
        "resolve": to_loopback,
        "tls_context": client_context,
    }
    url = f"https://api.example.test:{server.port}/secure"
    response = _fetch(url, **options)
    assert (response.status, response.body) == (200, b'{"tls": true}')
    assert server.requests[0]["headers"]["Host"] == f"api.example.test:{server.port}"
    with pytest.raises(ssl.SSLCertVerificationError):
        _fetch(
            f"https://other.example.test:{server.port}/",
            **{**options, "allowed_hosts": ["other.example.test"],
               "private_allowed": PrivateAllowance.parse(["other.example.test"])},
        )  # fmt: skip


@pytest.mark.parametrize(
    "url",
    [
        "http://[fe80::1%25lo]/",
        "http://[fe80::1%eth0]:8080/x",
        "http://[FE80::1%25lo]/",
        "http://[2001:db8::1%25eth0]/",
        "http://[fe80::1%2525lo]/",
        "http://[::ffff:a9fe:a9fe%25lo]/",
    ],
)
def test_a_scoped_ipv6_address_is_refused_by_its_form(url: str) -> None:
    assert outbound.url_problem(url) == "a scoped IPv6 address (with a zone id) cannot be called"


@pytest.mark.parametrize(
    "url",
    ["http://%5Bfe80::1%5D/", "http://fe80%3A%3A1/", "http://[fe80::1%]/", "http://[fe80::1%25]/"],
)
def test_percent_encoded_address_literals_are_no_host_at_all(url: str) -> None:
    assert outbound.url_problem(url) is not None


@pytest.mark.parametrize(
    ("url", "address_class"),
    [
        ("http://[fe80::1%25lo]/", "scoped"),
        ("http://[FE80::1%eth0]/", "scoped"),
        ("http://[fe80::1]/", "link_local"),
        ("http://[FE80::A9FE:A9FE]/", "link_local"),
        ("http://[::ffff:169.254.169.254]/", "link_local"),
        ("http://[::ffff:a9fe:a9fe]/", "link_local"),
        ("http://169.254.169.254/", "link_local"),
        ("http://2852039166/", "link_local"),  # 169.254.169.254 as one number
        ("http://0xa9fea9fe/", "link_local"),
        ("http://0xa9.0xfe.0xa9.0xfe/", "link_local"),
        ("http://0251.0376.0251.0376/", "link_local"),  # octal
        ("http://169.254.43518/", "link_local"),
        ("http://127.1/", "loopback"),
    ],
)
def test_an_address_literal_is_judged_as_written_never_left_to_the_resolver(
    url: str, address_class: str
) -> None:
    def resolver_that_cannot_read_it(host: str, port: int) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "no such name")

    with pytest.raises(OutboundRefused) as refused:
        outbound.check_url(url, allowed_hosts=None, resolve=resolver_that_cannot_read_it)
    assert refused.value.code == "address_not_allowed"
    assert refused.value.evidence["address_class"] == address_class


def test_no_allowance_lets_a_scoped_address_through() -> None:
    allowance = PrivateAllowance.parse(["fe80::/10", "[fe80::1]"])
    outbound.check_url("http://[fe80::1]/", allowed_hosts=None, private_allowed=allowance)
    with pytest.raises(OutboundRefused) as refused:
        outbound.check_url("http://[fe80::1%25lo]/", allowed_hosts=None, private_allowed=allowance)
    assert refused.value.evidence["address_class"] == "scoped"


@pytest.mark.parametrize("host", ["1.2.3", "7.0.0.0.1", "99999999999", "0x", "a1", "1.2.3.4x"])
def test_only_the_numeric_forms_a_resolver_reads_as_an_address_skip_the_resolver(host: str) -> None:
    asked: list[str] = []

    def resolve(name: str, port: int) -> list[Any]:
        asked.append(name)
        return [ipaddress.ip_address("93.184.216.34")]

    outbound.check_url(f"http://{host}/", allowed_hosts=None, resolve=resolve)
    assert asked == ([] if host == "1.2.3" else [host])
