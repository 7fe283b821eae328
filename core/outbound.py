"""Outbound HTTP the desk makes on someone's behalf: only to allowed, public addresses.

Quality Lab's execute cases call the APIs an operator configured, and alert webhooks call
URLs an operator typed: both could be pointed at the worker's own network (cloud metadata
on 169.254.169.254, the database, Redis) or bounced there by a redirect. Every such call
goes through this module, which imports no model and reads no setting: callers pass the
policy in.

Public API
----------
``address_refusal(address) -> str | None``
    Why an IP address may not be called (``loopback``, ``private``, ``link_local``,
    ``multicast``, ``reserved``, ``unspecified``), or ``None`` for a public one. IPv6 forms
    that embed an IPv4 address (mapped ``::ffff:a.b.c.d``, compatible ``::a.b.c.d``, 6to4
    ``2002::/16``, NAT64 ``64:ff9b::/96``) are judged by the IPv4 address they carry.
``url_problem(url) -> str | None``
    Why ``url`` cannot be called by its form alone (scheme, host syntax, port), or ``None``:
    a host name of any number of labels (``sandbox``, ``api.example.com``) passes, since
    where a name points is judged when it is resolved, by ``check_url``.
``PrivateAllowance.parse(entries)``
    What an administrator allows although it is not public: host names (``sandbox.lan``),
    addresses (``127.0.0.1``, ``::1``) and networks (``10.20.0.0/16``), each on every port
    or, as ``host:port`` (``127.0.0.1:8090``, ``[::1]:8090``), on that port only;
    ``ValueError`` names a bad entry.
``host_port(host, port) -> str``
    The ``host:port`` entry (``[v6]:port``) that allows one port of one host.
``check_url(url, *, allowed_hosts, private_allowed=..., resolve=...) -> Target``
    The scheme (http/https), the host against ``allowed_hosts`` (``host`` or
    ``host:port`` entries; ``None`` allows any host), then the host resolved *now*, every
    address checked (a non-public one against the allowance, on the port the call
    connects to). Raises :class:`OutboundRefused` with a ``code`` and ``evidence``.
``fetch(url, *, method, headers, body, allowed_hosts, private_allowed, timeout,
max_body_bytes, credential_headers=(), max_redirects=5) -> Response``
    One call, connected to the address that was checked (no second lookup a DNS answer
    could change in between), redirects followed by hand: each target checked like the
    first URL, credentials (``Authorization``, ``Cookie``, ``Proxy-Authorization`` and the
    ``credential_headers`` given) dropped when the origin changes. ``timeout`` bounds the
    whole call, redirects and body included; a body over ``max_body_bytes`` raises
    :class:`OutboundRefused` (``response_too_large``). Any status is returned as a
    :class:`Response`; transport failures raise the usual ``OSError`` subclasses and
    :class:`ConnectTimeout` / ``TimeoutError``.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[IPAddress]]

ALLOWED_SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Dropped whenever a redirect changes scheme, host or port.
ALWAYS_CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")
_READ_CHUNK = 64 * 1024

# Checked in order; the first network holding the address names the refusal.
_REFUSED_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = tuple(
    (ipaddress.IPv4Network(network), reason)
    for network, reason in (
        ("0.0.0.0/8", "unspecified"),  # "this network"; 0.0.0.0 reaches the host itself
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "private"),  # carrier-grade NAT (shared address space)
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link_local"),  # cloud metadata lives here
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
        ("192.0.2.0/24", "reserved"),  # documentation
        ("192.88.99.0/24", "reserved"),  # 6to4 relay anycast
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "reserved"),  # benchmarking
        ("198.51.100.0/24", "reserved"),  # documentation
        ("203.0.113.0/24", "reserved"),  # documentation
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # includes the broadcast address
    )
)
_REFUSED_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.IPv6Network(network), reason)
    for network, reason in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("64:ff9b:1::/48", "private"),  # local-use NAT64
        ("100::/64", "reserved"),  # discard-only
        ("2001::/23", "reserved"),  # IETF protocol assignments (Teredo, ORCHID, ...)
        ("2001:db8::/32", "reserved"),  # documentation
        ("3fff::/20", "reserved"),  # documentation
        ("fc00::/7", "private"),  # unique local
        ("fe80::/10", "link_local"),
        ("fec0::/10", "private"),  # site-local (deprecated)
        ("ff00::/8", "multicast"),
    )
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_MAPPED_V6 = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE_V6 = ipaddress.IPv6Network("::/96")
_NAT64_V6 = ipaddress.IPv6Network("64:ff9b::/96")


class OutboundRefused(ConnectionError):
    """A call (or a redirect) the policy does not allow, or an answer too big to take.

    ``code`` is stable (``scheme_not_allowed``, ``host_not_allowed``, ``address_not_allowed``,
    ``redirect_refused``, ``too_many_redirects``, ``response_too_large``); ``evidence`` is
    compact and safe to store (hosts and addresses, never paths, queries or headers).
    """

    def __init__(self, code: str, message: str, *, evidence: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.code = code
        self.evidence = {"refused": code, **evidence}


class ConnectTimeout(TimeoutError):
    """No connection within the time left: nothing was sent."""


# --- addresses ---------------------------------------------------------------------------


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address in _MAPPED_V6:
        return address.ipv4_mapped
    if address in _NAT64_V6:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _COMPATIBLE_V6 and int(address) > 1:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_refusal(address: IPAddress) -> str | None:
    """Why ``address`` may not be called, or ``None`` when it is a public address."""
    if isinstance(address, ipaddress.IPv4Address):
        for network, reason in _REFUSED_V4:
            if address in network:
                return reason
        return None
    embedded = _embedded_v4(address)
    if embedded is not None:
        refusal = address_refusal(embedded)
        if refusal is not None:
            return refusal
        # IPv4-compatible addresses are deprecated (RFC 4291): nothing public uses them.
        return "reserved" if address in _COMPATIBLE_V6 else None
    for network6, reason in _REFUSED_V6:
        if address in network6:
            return reason
    if address.scope_id or address not in _GLOBAL_UNICAST_V6:
        return "reserved"  # everything outside 2000::/3 is unassigned or special
    return None


@dataclass(frozen=True)
class PrivateAllowance:
    """Non-public hosts, addresses and networks an administrator allows explicitly, each on
    every port (``None``) or on one."""

    hosts: frozenset[tuple[str, int | None]] = frozenset()
    networks: tuple[tuple[IPNetwork, int | None], ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> PrivateAllowance:
        hosts: set[tuple[str, int | None]] = set()
        networks: list[tuple[IPNetwork, int | None]] = []
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            name, port = _split_port(entry, raw)
            bracketed = name.startswith("[") and name.endswith("]")
            literal = name[1:-1] if bracketed else name
            try:
                networks.append((ipaddress.ip_network(literal, strict=False), port))
                continue
            except ValueError:
                pass
            if bracketed or not _is_host_name(name):
                raise ValueError(_not_an_entry(raw))
            hosts.add((name.rstrip("."), port))
        return cls(hosts=frozenset(hosts), networks=tuple(networks))

    def allows(self, host: str, address: IPAddress, *, port: int) -> bool:
        """Whether ``host``, resolved to ``address``, may be called on ``port``."""
        if (host, None) in self.hosts or (host, port) in self.hosts:
            return True
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address) and (embedded := _embedded_v4(address)):
            candidates.append(embedded)
        return any(
            allowed_port in (None, port)
            and candidate.version == network.version
            and candidate in network
            for candidate in candidates
            for network, allowed_port in self.networks
        )


def _split_port(entry: str, raw: str) -> tuple[str, int | None]:
    """``host`` and its port from ``host:port`` or ``[v6]:port``; no port is every port.

    A bare IPv6 address (more than one colon, no brackets) has no port: ``::1:8090`` is an
    address, so an IPv6 entry with a port needs its brackets.
    """
    if entry.startswith("["):
        close = entry.find("]")
        if close == -1 or close == len(entry) - 1:
            return entry, None
        if entry[close + 1] != ":":
            return entry, None  # refused by the caller as no host, address or network
        name, port_text = entry[: close + 1], entry[close + 2 :]
    elif entry.count(":") == 1:
        name, _, port_text = entry.partition(":")
    else:
        return entry, None
    if not (port_text.isascii() and port_text.isdigit()):
        raise ValueError(_not_an_entry(raw))
    if not 0 < int(port_text) <= 65535:
        raise ValueError(f"{raw!r}: the port must be between 1 and 65535")
    return name, int(port_text)


def _not_an_entry(raw: str) -> str:
    return (
        f"{raw!r} is not a host name, an IP address or a network (CIDR), each with an "
        "optional :port ([v6]:port for IPv6)"
    )


def _is_host_name(value: str) -> bool:
    labels = value.rstrip(".").split(".")
    return 0 < len(value) <= 253 and all(
        0 < len(label) <= 63
        and label.replace("-", "").replace("_", "").isalnum()
        and label.isascii()
        and not label.startswith("-")
        for label in labels
    )


# --- URLs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (the addresses that were checked) and what to send."""

    url: str
    scheme: str
    host: str  # lower case, no brackets, no trailing dot
    port: int
    addresses: tuple[IPAddress, ...]

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def label(self) -> str:
        """``host`` or ``host:port`` when the port is not the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if DEFAULT_PORTS[self.scheme] == self.port else f"{host}:{self.port}"

    @property
    def request_target(self) -> str:
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to now (IP literals resolve to themselves)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def _host_entries(allowed_hosts: Iterable[str]) -> set[tuple[str, int | None]]:
    entries: set[tuple[str, int | None]] = set()
    for raw in allowed_hosts:
        entry = str(raw).strip().lower()
        if not entry:
            continue
        try:  # a bare IPv6 address, without brackets
            entries.add((ipaddress.IPv6Address(entry).compressed, None))
            continue
        except ValueError:
            pass
        parts = urlsplit(f"//{entry}")
        try:
            port = parts.port
        except ValueError:
            continue  # never matches anything
        host = (parts.hostname or "").rstrip(".")
        if host:
            entries.add((_canonical_host(host), port))
    return entries


def _canonical_host(host: str) -> str:
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


def host_port(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 address: an entry on one port."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_allowed(host: str, port: int, allowed_hosts: Iterable[str] | None) -> bool:
    """Whether ``host`` (canonical, lower case) on ``port`` is in ``allowed_hosts``."""
    if allowed_hosts is None:
        return True
    entries = _host_entries(allowed_hosts)
    return (host, None) in entries or (host, port) in entries


def parse_url(url: str) -> tuple[str, str, int]:
    """Scheme, canonical host and effective port; :class:`OutboundRefused` when unusable."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise OutboundRefused(
            "scheme_not_allowed", "not a usable URL", evidence={"scheme": None}
        ) from None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if scheme not in ALLOWED_SCHEMES or not host:
        raise OutboundRefused(
            "scheme_not_allowed",
            f"only http and https URLs with a host may be called, not {scheme or 'this'!r}",
            evidence={"scheme": scheme or None},
        )
    return scheme, _canonical_host(host), port or DEFAULT_PORTS[scheme]


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL with a valid host and port, or ``None``.

    Any syntactically valid host name passes, one label (``http://sandbox:8090``, a compose
    service) as well as several; IDN names are judged in their IDNA form. Where the name
    points is not judged here: ``check_url`` resolves it and checks every address.
    """
    if any(character.isspace() or not character.isprintable() for character in url):
        return "a URL has no spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "its host or port is malformed"
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        return "only http and https URLs may be called"
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return "it has no host"
    if port == 0:
        return "port 0 cannot be called"
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        if isinstance(literal, ipaddress.IPv6Address) and literal.scope_id:
            # A zone id names an interface of the machine that calls: never a remote host.
            return "a scoped IPv6 address (with a zone id) cannot be called"
        return None
    if "[" in parts.netloc:
        return f"[{host}] is not an IPv6 address"
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return f"{host!r} is not a valid host name"
    if not _is_host_name(ascii_host) or ascii_host.startswith("."):
        return f"{host!r} is not a valid host name"
    return None


# The numeric IPv4 forms that C resolvers (inet_aton) and browsers read as an address:
# one to four parts, each decimal, octal (leading 0) or hex (0x): 2130706433, 0x7f.1, 127.1.
_NUMERIC_HOST_PART = r"(?:0x[0-9a-f]*|[0-9]+)"
_NUMERIC_HOST_RE = re.compile(rf"{_NUMERIC_HOST_PART}(?:\.{_NUMERIC_HOST_PART}){{0,3}}\.?")


def _literal_addresses(host: str) -> tuple[IPAddress, ...]:
    """The address an address literal names, in any of its written forms; () for a name."""
    try:
        return (ipaddress.ip_address(host),)
    except ValueError:
        pass
    if _NUMERIC_HOST_RE.fullmatch(host) is None:
        return ()
    try:
        return (ipaddress.IPv4Address(socket.inet_aton(host.rstrip("."))),)
    except OSError:
        return ()  # a number no resolver reads as an address either


def check_url(
    url: str,
    *,
    allowed_hosts: Iterable[str] | None,
    private_allowed: PrivateAllowance | None = None,
    resolve: Resolver | None = None,
) -> Target:
    """``url`` checked against the policy, with the addresses to connect to.

    A resolution failure raises ``socket.gaierror`` as is (nothing was sent); any refused
    address refuses the host, so a name cannot mix a public and an internal address.
    """
    scheme, host, port = parse_url(url)
    label = Target(url, scheme, host, port, ()).label
    if not host_allowed(host, port, allowed_hosts):
        raise OutboundRefused(
            "host_not_allowed",
            f"host {label} is not in the allowed hosts",
            evidence={"host": label},
        )
    # An address literal is judged as written, before any resolver: a literal the resolver
    # cannot read (a scoped fe80::1%25lo) must not pass as "does not resolve".
    addresses = _literal_addresses(host) or tuple((resolve or system_resolver)(host, port))
    if not addresses:
        raise socket.gaierror(socket.EAI_NONAME, f"{host} has no address")
    allowance = private_allowed or PrivateAllowance()
    for address in addresses:
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
            # A zone id names an interface of this machine, whatever the allowance says.
            raise OutboundRefused(
                "address_not_allowed",
                f"host {label} is a scoped IPv6 address (with a zone id)",
                evidence={"host": label, "address": str(address), "address_class": "scoped"},
            )
        refusal = address_refusal(address)
        if refusal is not None and not allowance.allows(host, address, port=port):
            kind = refusal.replace("_", "-")
            article = "an" if kind[0] in "aeiou" else "a"
            raise OutboundRefused(
                "address_not_allowed",
                f"host {label} resolves to {address}, {article} {kind} address",
                evidence={"host": label, "address": str(address), "address_class": refusal},
            )
    return Target(url=url, scheme=scheme, host=host, port=port, addresses=addresses)


# --- fetch -----------------------------------------------------------------------------------


@dataclass
class Response:
    """A complete answer: status, headers, the body (at most the cap), redirects taken."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes = field(repr=False)
    url: str = field(repr=False)
    redirects: list[dict[str, Any]] = field(default_factory=list)


class _Deadline:
    """The time left for a whole call; a timer cuts a connection that drips past it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.expired = False

    def remaining(self) -> float:
        left = self.ends - time.monotonic()
        if left <= 0:
            self.expired = True
            raise TimeoutError(f"read timed out: the call took more than {self.seconds:g} s")
        return left

    def guard(self, sock: socket.socket) -> threading.Timer:
        def cut() -> None:
            self.expired = True
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(max(0.0, self.ends - time.monotonic()), cut)
        timer.daemon = True
        timer.start()
        return timer


class _PinnedConnection(http.client.HTTPConnection):
    """HTTP to one checked address; the Host header still names the host."""

    def __init__(self, target: Target, address: IPAddress, deadline: _Deadline) -> None:
        super().__init__(target.host, target.port, timeout=deadline.remaining())
        self.address = address
        self.deadline = deadline

    def connect(self) -> None:
        try:
            self.sock = socket.create_connection(
                (str(self.address), self.port), timeout=self.deadline.remaining()
            )
        except TimeoutError:
            raise ConnectTimeout(
                f"connect timeout: no connection to {self.address} within "
                f"{self.deadline.seconds:g} s"
            ) from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedTLSConnection(_PinnedConnection):
    """HTTPS to one checked address; SNI and the certificate check use the host name."""

    def __init__(
        self, target: Target, address: IPAddress, deadline: _Deadline, context: ssl.SSLContext
    ) -> None:
        super().__init__(target, address, deadline)
        self.tls_context = context

    def connect(self) -> None:
        super().connect()
        self.sock = self.tls_context.wrap_socket(self.sock, server_hostname=self.host)


def _open(
    target: Target,
    deadline: _Deadline,
    tls_context: ssl.SSLContext | None,
) -> _PinnedConnection:
    last_error: OSError | None = None
    for address in target.addresses:
        connection: _PinnedConnection
        if target.scheme == "https":
            context = tls_context or ssl.create_default_context()
            connection = _PinnedTLSConnection(target, address, deadline, context)
        else:
            connection = _PinnedConnection(target, address, deadline)
        try:
            connection.connect()
            return connection
        except ConnectTimeout:
            connection.close()
            raise
        except OSError as exc:
            connection.close()
            last_error = exc
    assert last_error is not None
    raise last_error


def _send(
    target: Target,
    *,
    method: str,
    headers: Mapping[str, str],
    body: bytes | None,
    deadline: _Deadline,
    max_body_bytes: int,
    tls_context: ssl.SSLContext | None,
) -> tuple[http.client.HTTPResponse, bytes]:
    connection = _open(target, deadline, tls_context)
    # http.client hands the socket to the response (connection.sock becomes None) when
    # the server closes after answering: keep our own reference for the timeouts.
    sock = connection.sock
    assert sock is not None
    timer = deadline.guard(sock)
    try:
        connection.request(method, target.request_target, body=body, headers=dict(headers))
        sock.settimeout(deadline.remaining())
        response = connection.getresponse()
        declared = response.getheader("Content-Length")
        if declared and declared.strip().isdigit() and int(declared) > max_body_bytes:
            raise _too_large(target, max_body_bytes)
        chunks: list[bytes] = []
        size = 0
        while not response.isclosed():  # it closes itself once the whole body is read
            sock.settimeout(deadline.remaining())
            chunk = response.read(min(_READ_CHUNK, max_body_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_body_bytes:
                raise _too_large(target, max_body_bytes)
        return response, b"".join(chunks)
    except (OSError, http.client.HTTPException) as exc:
        if deadline.expired and not isinstance(exc, (OutboundRefused, ConnectTimeout)):
            raise TimeoutError(
                f"read timed out: the call took more than {deadline.seconds:g} s"
            ) from None
        raise
    finally:
        timer.cancel()
        connection.close()
        sock.close()


def _too_large(target: Target, max_body_bytes: int) -> OutboundRefused:
    return OutboundRefused(
        "response_too_large",
        f"the answer of {target.label} is larger than {max_body_bytes} bytes",
        evidence={"host": target.label, "max_response_bytes": max_body_bytes},
    )


def fetch(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    allowed_hosts: Collection[str] | None,
    private_allowed: PrivateAllowance | None = None,
    timeout: float,
    max_body_bytes: int,
    credential_headers: Iterable[str] = (),
    max_redirects: int = 5,
    resolve: Resolver | None = None,
    tls_context: ssl.SSLContext | None = None,
) -> Response:
    """One guarded call; see the module docstring."""
    deadline = _Deadline(timeout)
    secret_names = {name.lower() for name in (*ALWAYS_CREDENTIAL_HEADERS, *credential_headers)}
    current_headers = {str(k): str(v) for k, v in (headers or {}).items()}
    current_method = method.upper()
    current_body = body
    redirects: list[dict[str, Any]] = []
    target = check_url(
        url, allowed_hosts=allowed_hosts, private_allowed=private_allowed, resolve=resolve
    )
    while True:
        response, data = _send(
            target,
            method=current_method,
            headers=current_headers,
            body=current_body,
            deadline=deadline,
            max_body_bytes=max_body_bytes,
            tls_context=tls_context,
        )
        location = response.getheader("Location")
        follow = (
            response.status in REDIRECT_STATUSES
            and location
            and (
                current_method in ("GET", "HEAD")
                or (current_method == "POST" and response.status in (301, 302, 303))
            )
        )
        if not follow:
            return Response(
                status=response.status,
                reason=response.reason,
                headers={key: value for key, value in response.getheaders()},
                body=data,
                url=target.url,
                redirects=redirects,
            )
        assert location is not None
        next_url = urljoin(target.url, location.strip())
        hop = {"status": response.status, "from": target.origin}
        if len(redirects) >= max_redirects:
            raise OutboundRefused(
                "too_many_redirects",
                f"more than {max_redirects} redirects",
                evidence={"redirects": [*redirects, hop], "request_sent": True},
            )
        try:
            next_target = check_url(
                next_url,
                allowed_hosts=allowed_hosts,
                private_allowed=private_allowed,
                resolve=resolve,
            )
        except OutboundRefused as exc:
            scheme = urlsplit(next_url).scheme.lower()
            raise OutboundRefused(
                "redirect_refused",
                f"redirect from {target.label} not followed: {exc}",
                evidence={
                    **exc.evidence,
                    "refused": "redirect_refused",
                    "redirect_refused_because": exc.code,
                    "redirect_scheme": scheme or None,
                    "redirects": [*redirects, hop],
                    "request_sent": True,
                },
            ) from None
        hop["to"] = next_target.origin
        if next_target.origin != target.origin:
            dropped = sorted(name for name in current_headers if name.lower() in secret_names)
            current_headers = {
                name: value
                for name, value in current_headers.items()
                if name.lower() not in secret_names
            }
            hop["credentials_dropped"] = dropped
        if response.status == 303 or current_method == "POST":
            if current_method != "HEAD":
                current_method = "GET"
            current_body = None
            current_headers = {
                name: value
                for name, value in current_headers.items()
                if name.lower() not in ("content-type", "content-length")
            }
        redirects.append(hop)
        target = next_target
