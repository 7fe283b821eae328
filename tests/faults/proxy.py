"""A TCP forwarder on 127.0.0.1 that a test can take down and bring back.

The machine's PostgreSQL and Redis are shared, so a fault test never stops them: it points
the code under test at a `TcpProxy` in front of the real service and stops the proxy
instead. `stop()` closes every live connection and the listening socket (new connections
are refused, as with a stopped server); `start()` listens again on the same port.
`cut_after(*patterns)` takes the service down at a precise moment: once a client has
sent the patterns (an SQL statement, say), the proxy forwards that read and then stops,
optionally after the server's answer arrived and was dropped (the server did the work, the
client never hears of it), or drops that read instead of forwarding it.

Threads, not asyncio: two per connection (one per direction, blocking reads) and one for
accepting. Closing a socket wakes the thread reading it, so `stop()` and `close()` return
only when every thread of the closed connections has finished.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType

_CHUNK = 64 * 1024
# Ports handed out for outgoing connections (Linux's default ephemeral range) are avoided:
# while the proxy is stopped its port is free, and an outgoing connection must not take it.
_PORT_RANGE = (20_000, 32_000)


@dataclass
class _Cut:
    patterns: tuple[bytes, ...]
    wait_for_reply: bool
    keep_listening: bool
    forward: bool
    seen: int = 0  # how many of the patterns were seen, in order
    fired: threading.Event = field(default_factory=threading.Event)


class _Pair:
    """One client connection and its upstream connection."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.threads: list[threading.Thread] = []
        # Set when the proxy cuts this connection: the server's answers are dropped.
        self.swallow_replies = False
        self.reply_swallowed = threading.Event()
        self.tail = b""
        # True from the moment the server's bytes are taken off the socket until they were
        # handed to the client (with the peek before it, no moment shows neither).
        self.forwarding = False

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `upstream_host`:`upstream_port` until stopped."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.connections_accepted = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._pairs: set[_Pair] = set()
        # Every connection thread started, also of connections one side already closed (no
        # longer in _pairs): stop() waits for them all.
        self._threads: list[threading.Thread] = []
        self._cut: _Cut | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._listener is not None

    def start(self) -> TcpProxy:
        """Listen (again, on the same port once one was chosen) and forward."""
        with self._lock:
            if self._listener is not None:
                return self
            self._listener = self._listen()
            self._accept_thread = threading.Thread(
                target=self._accept_loop,
                args=(self._listener,),
                name=f"proxy-{self.port}-accept",
                daemon=True,
            )
            self._accept_thread.start()
        return self

    def stop(self) -> None:
        """The service goes down: every live connection is closed, new ones are refused."""
        with self._lock:
            listener, self._listener = self._listener, None
            accept_thread, self._accept_thread = self._accept_thread, None
            pairs, self._pairs = self._pairs, set()
            started, self._threads = self._threads, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
            listener.close()
        for pair in pairs:
            pair.close()
        current = threading.current_thread()
        threads = [*started, *(thread for pair in pairs for thread in pair.threads)]
        if accept_thread is not None:
            threads.append(accept_thread)
        for thread in threads:
            if thread is not current:
                thread.join(timeout=10)
                if thread.is_alive():
                    raise RuntimeError(f"proxy thread {thread.name} did not stop")

    def close(self) -> None:
        self._cut = None
        self.stop()

    # --- faults ----------------------------------------------------------------------------

    def drop_connections(self) -> None:
        """Close every live connection but keep accepting new ones (a blip: the server
        restarted at once, or killed its sessions)."""
        with self._lock:
            pairs, self._pairs = self._pairs, set()
        for pair in pairs:
            pair.close()

    def cut_after(
        self,
        *patterns: bytes,
        wait_for_reply: bool = False,
        keep_listening: bool = False,
        forward: bool = True,
    ) -> threading.Event:
        """Stop the proxy once clients have sent `patterns` in this order, after forwarding
        the last one (`cut_after(b"COPY", b"COMMIT")`: the first COMMIT after a COPY).

        With `wait_for_reply` the proxy first waits for the server's answer to that
        message and drops it, so the server has done the work and the client cannot know.
        With `forward=False` the read holding the last pattern never reaches the server.
        With `keep_listening` only the live connections are cut; new ones get through.
        Returns an event that is set when the cut happened.
        """
        if not patterns or not all(patterns):
            raise ValueError("cut_after needs non-empty patterns")
        cut = _Cut(
            patterns=patterns,
            wait_for_reply=wait_for_reply and forward,
            keep_listening=keep_listening,
            forward=forward,
        )
        self._cut = cut
        return cut.fired

    # --- internals -------------------------------------------------------------------------

    def _listen(self) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self.port:
            listener.bind(("127.0.0.1", self.port))
        else:
            for _ in range(200):
                port = random.randint(*_PORT_RANGE)
                try:
                    listener.bind(("127.0.0.1", port))
                except OSError:
                    continue
                self.port = port
                break
            else:
                listener.close()
                raise RuntimeError("no free port for the proxy")
        listener.listen(64)
        return listener

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, upstream)
            with self._lock:
                if self._listener is not listener:  # stopped meanwhile
                    pair.close()
                    return
                self._pairs.add(pair)
                self.connections_accepted += 1
                pair.threads = [
                    threading.Thread(
                        target=self._client_to_upstream, args=(pair,), daemon=True,
                        name=f"proxy-{self.port}-up",
                    ),
                    threading.Thread(
                        target=self._upstream_to_client, args=(pair,), daemon=True,
                        name=f"proxy-{self.port}-down",
                    ),
                ]  # fmt: skip
                self._threads = [t for t in self._threads if t.is_alive()] + pair.threads
                for thread in pair.threads:
                    thread.start()

    def _client_to_upstream(self, pair: _Pair) -> None:
        try:
            while data := pair.client.recv(_CHUNK):
                cut = self._cut
                if cut is not None and self._matches(pair, cut, data):
                    self._cut = None
                    pair.swallow_replies = True
                    if cut.forward:
                        pair.upstream.sendall(data)
                    if cut.wait_for_reply:
                        pair.reply_swallowed.wait(timeout=10)
                    self._let_sent_replies_arrive(besides=pair)
                    if cut.keep_listening:
                        self.drop_connections()
                    else:
                        self.stop()
                    cut.fired.set()
                    return
                pair.upstream.sendall(data)
        except OSError:
            pass
        self._drop(pair)

    def _upstream_to_client(self, pair: _Pair) -> None:
        try:
            # Peek first, so the bytes stay readable on the socket until `forwarding` says
            # they are on their way (see _let_sent_replies_arrive).
            while peeked := pair.upstream.recv(_CHUNK, socket.MSG_PEEK):
                pair.forwarding = True
                data = pair.upstream.recv(len(peeked))
                if pair.swallow_replies:
                    pair.reply_swallowed.set()
                else:
                    pair.client.sendall(data)
                pair.forwarding = False
        except OSError:
            pass
        self._drop(pair)

    def _let_sent_replies_arrive(self, *, besides: _Pair, timeout: float = 5.0) -> None:
        """A server that goes down does not take back what it had already written: before
        the cut, what the other connections' server had sent reaches their clients (on a
        busy machine the forwarding thread may not have run yet; the client would then see
        a reply lost that the real network would have delivered)."""
        with self._lock:
            others = [other for other in self._pairs if other is not besides]
        deadline = time.monotonic() + timeout
        while others and time.monotonic() < deadline:
            try:
                readable, _, _ = select.select([other.upstream for other in others], [], [], 0)
            except (OSError, ValueError):
                return  # a connection closed meanwhile: nothing more to wait for
            if not readable and not any(other.forwarding for other in others):
                return
            time.sleep(0.002)

    @staticmethod
    def _matches(pair: _Pair, cut: _Cut, data: bytes) -> bool:
        """Whether this read completes the cut's patterns (also across two reads)."""
        window = pair.tail + data
        longest = max(len(pattern) for pattern in cut.patterns)
        pair.tail = window[-(longest - 1) :] if longest > 1 else b""
        position = 0
        while cut.seen < len(cut.patterns):
            found = window.find(cut.patterns[cut.seen], position)
            if found < 0:
                return False
            position = found + len(cut.patterns[cut.seen])
            cut.seen += 1
        return True

    def _drop(self, pair: _Pair) -> None:
        """One side closed: close the other too, as a real connection would."""
        with self._lock:
            self._pairs.discard(pair)
        pair.close()
