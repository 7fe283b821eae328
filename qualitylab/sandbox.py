"""A deterministic HTTP API implementing the demo collection (``demo/shop_openapi.yaml``).

Quality Lab's execute mode needs a downstream API that fails in known, repeatable ways, so
the demo and the tests can show every execute reason against real HTTP on 127.0.0.1:

* ``Authorization: Bearer demo-token`` is the only accepted credential; operations with
  ``security`` in the spec answer 401 without it (``auth_failed`` with a wrong token).
* ``GET /orders/ORD-500`` answers 500 (``http_5xx``); unknown ids answer 404 (``http_4xx``).
* ``GET /deliveries/{deliveryNo}/tracking`` sleeps ``slow_seconds`` (3 s by default), longer
  than the demo's timeout cases allow (``timeout``).
* ``POST /refunds`` stores a refund in memory and ``DELETE /refunds/{refundId}`` removes it,
  so a mutating case and its cleanup can be checked through ``GET /__state``.

Standard library only (``ThreadingHTTPServer``); it never binds anything but 127.0.0.1.

Use :func:`serve` from tests (``server, thread = serve()``; port 0 picks a free port; stop
with ``server.shutdown(); server.server_close()``) or run it for the demo::

    python -m qualitylab.sandbox --port 8090
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HOST = "127.0.0.1"
DEMO_TOKEN = "demo-token"
DEFAULT_SLOW_SECONDS = 3.0
BROKEN_ORDER_NO = "ORD-500"

_ORDERS: dict[str, dict[str, Any]] = {
    "ORD-1001": {
        "orderNo": "ORD-1001",
        "memberNo": "M-100",
        "status": "PAID",
        "totalAmount": 42000,
        "orderedAt": "2026-11-02T10:15:00Z",
    },
    "ORD-1002": {
        "orderNo": "ORD-1002",
        "memberNo": "M-100",
        "status": "SHIPPED",
        "totalAmount": 18500,
        "orderedAt": "2026-11-05T08:40:00Z",
    },
    "ORD-1003": {
        "orderNo": "ORD-1003",
        "memberNo": "M-200",
        "status": "DELIVERED",
        "totalAmount": 99000,
        "orderedAt": "2026-10-21T19:02:00Z",
    },
}
_ORDER_ITEMS: dict[str, list[dict[str, Any]]] = {
    "ORD-1001": [
        {"productNo": "P-1", "productName": "Wool scarf", "quantity": 1, "price": 30000},
        {"productNo": "P-2", "productName": "Linen shirt", "quantity": 1, "price": 12000},
    ],
    "ORD-1002": [{"productNo": "P-3", "productName": "Canvas tote", "quantity": 1, "price": 18500}],
    "ORD-1003": [{"productNo": "P-1", "productName": "Wool scarf", "quantity": 3, "price": 33000}],
}
_MEMBERS: dict[str, dict[str, Any]] = {
    "M-100": {"memberNo": "M-100", "name": "Kim Minji", "joinedAt": "2024-03-01"},
    "M-200": {"memberNo": "M-200", "name": "Lee Jun", "joinedAt": "2025-07-15"},
}
_PROFILES: dict[str, dict[str, Any]] = {
    # Fake contact data on purpose: Quality Lab must never copy response bodies.
    "M-100": {
        "memberNo": "M-100",
        "grade": "GOLD",
        "email": "minji@example.test",
        "phone": "010-0000-1000",
    },
    "M-200": {
        "memberNo": "M-200",
        "grade": "SILVER",
        "email": "jun@example.test",
        "phone": "010-0000-2000",
    },
}
_POINTS: dict[str, dict[str, Any]] = {
    "M-100": {"memberNo": "M-100", "balance": 3200, "expiringSoon": 500},
    "M-200": {"memberNo": "M-200", "balance": 150, "expiringSoon": 0},
}
_COUPONS: dict[str, dict[str, Any]] = {
    "WELCOME10": {"couponCode": "WELCOME10", "discountRate": 10, "validUntil": "2026-12-31"},
    "SPRING20": {"couponCode": "SPRING20", "discountRate": 20, "validUntil": "2027-04-30"},
}
_MEMBER_COUPONS: dict[str, list[str]] = {"M-100": ["WELCOME10", "SPRING20"], "M-200": []}
_DELIVERIES: dict[str, dict[str, Any]] = {
    "DLV-1": {
        "deliveryNo": "DLV-1",
        "orderNo": "ORD-1002",
        "status": "IN_TRANSIT",
        "carrier": "CJ",
    },
    "DLV-2": {"deliveryNo": "DLV-2", "orderNo": "ORD-1003", "status": "DELIVERED", "carrier": "CJ"},
}
_PRODUCTS: dict[str, dict[str, Any]] = {
    "P-1": {"productNo": "P-1", "name": "Wool scarf", "price": 30000, "stock": 12},
    "P-2": {"productNo": "P-2", "name": "Linen shirt", "price": 12000, "stock": 0},
    "P-3": {"productNo": "P-3", "name": "Canvas tote", "price": 18500, "stock": 40},
}
_INVOICES: dict[str, dict[str, Any]] = {
    "INV-1": {
        "invoiceNo": "INV-1",
        "orderNo": "ORD-1001",
        "amount": 42000,
        "issuedAt": "2026-11-02",
    },
    "INV-2": {
        "invoiceNo": "INV-2",
        "orderNo": "ORD-1003",
        "amount": 99000,
        "issuedAt": "2026-10-21",
    },
}
_INITIAL_REFUNDS: dict[str, dict[str, Any]] = {
    "REF-1": {"refundId": "REF-1", "orderNo": "ORD-1003", "reason": "damaged", "status": "DONE"}
}


@dataclass
class SandboxState:
    """The mutable part of the sandbox: refunds created by mutating cases."""

    refunds: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {key: dict(value) for key, value in _INITIAL_REFUNDS.items()}
    )
    next_refund_number: int = 100
    request_count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "refund_ids": sorted(self.refunds),
                "created_refund_count": self.next_refund_number - 100,
                "request_count": self.request_count,
            }


class SandboxServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that carries the sandbox's state and its slow delay."""

    daemon_threads = True  # a slow request must never keep the process alive

    def __init__(self, port: int, *, slow_seconds: float, verbose: bool = False) -> None:
        self.state = SandboxState()
        self.slow_seconds = slow_seconds
        self.verbose = verbose
        super().__init__((HOST, port), SandboxHandler)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out on the slow endpoint has hung up by the time it answers.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass(frozen=True)
class _Response:
    status: int
    body: Any


def _ok(body: Any, status: int = HTTPStatus.OK) -> _Response:
    return _Response(int(status), body)


def _error(status: int, code: str, message: str) -> _Response:
    return _Response(int(status), {"code": code, "message": message})


def _not_found(what: str) -> _Response:
    return _error(HTTPStatus.NOT_FOUND, "not_found", f"no such {what}")


_Route = Callable[["SandboxHandler", dict[str, str], dict[str, str], Any], _Response]


class SandboxHandler(BaseHTTPRequestHandler):
    server: SandboxServer
    protocol_version = "HTTP/1.1"

    # -- plumbing ---------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _dispatch(self, method: str) -> None:
        with self.server.state.lock:
            self.server.state.request_count += 1
        parts = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(parts.query).items() if values}
        body: Any = None
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                self._send(_error(HTTPStatus.BAD_REQUEST, "bad_json", "body is not JSON"))
                return
        for route_method, pattern, needs_auth, route in _ROUTES:
            if route_method != method:
                continue
            match = pattern.fullmatch(parts.path)
            if match is None:
                continue
            if needs_auth and not self._authorized():
                self._send(_error(HTTPStatus.UNAUTHORIZED, "unauthorized", "login required"))
                return
            self._send(route(self, match.groupdict(), query, body))
            return
        self._send(_error(HTTPStatus.NOT_FOUND, "no_route", f"no route for {method}"))

    def _authorized(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {DEMO_TOKEN}"

    def _send(self, response: _Response) -> None:
        payload = json.dumps(response.body, ensure_ascii=False).encode("utf-8")
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    # -- routes -----------------------------------------------------------------------

    def list_orders(self, _: dict[str, str], query: dict[str, str], __: Any) -> _Response:
        orders = [
            order
            for order in _ORDERS.values()
            if query.get("memberNo", order["memberNo"]) == order["memberNo"]
            and query.get("status", order["status"]) == order["status"]
        ]
        return _ok({"orders": orders, "total": len(orders)})

    def count_orders(self, _: dict[str, str], query: dict[str, str], __: Any) -> _Response:
        status = query.get("status")
        count = sum(1 for order in _ORDERS.values() if status in (None, order["status"]))
        return _ok({"count": count})

    def get_order(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        order_no = path["orderNo"]
        if order_no == BROKEN_ORDER_NO:
            return _error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error", "order store failed")
        order = _ORDERS.get(order_no)
        if order is None:
            return _not_found("order")
        return _ok({**order, "itemCount": len(_ORDER_ITEMS.get(order_no, []))})

    def list_order_items(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        order_no = path["orderNo"]
        if order_no not in _ORDERS:
            return _not_found("order")
        return _ok({"orderNo": order_no, "items": _ORDER_ITEMS.get(order_no, [])})

    def search_members(self, _: dict[str, str], query: dict[str, str], __: Any) -> _Response:
        name = (query.get("name") or "").lower()
        if not name:
            return _error(HTTPStatus.BAD_REQUEST, "missing_name", "name is required")
        members = [member for member in _MEMBERS.values() if name in member["name"].lower()]
        return _ok({"members": members})

    def get_member(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        member = _MEMBERS.get(path["memberNo"])
        return _ok(member) if member else _not_found("member")

    def get_member_profile(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        profile = _PROFILES.get(path["memberNo"])
        return _ok(profile) if profile else _not_found("member")

    def get_member_points(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        points = _POINTS.get(path["memberNo"])
        return _ok(points) if points else _not_found("member")

    def list_member_coupons(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        codes = _MEMBER_COUPONS.get(path["memberNo"])
        if codes is None:
            return _not_found("member")
        return _ok({"coupons": [_COUPONS[code] for code in codes]})

    def get_coupon(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        coupon = _COUPONS.get(path["couponCode"])
        return _ok(coupon) if coupon else _not_found("coupon")

    def list_deliveries(self, _: dict[str, str], query: dict[str, str], __: Any) -> _Response:
        order_no = query.get("orderNo")
        if not order_no:
            return _error(HTTPStatus.BAD_REQUEST, "missing_order_no", "orderNo is required")
        return _ok({"deliveries": [d for d in _DELIVERIES.values() if d["orderNo"] == order_no]})

    def get_delivery(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        delivery = _DELIVERIES.get(path["deliveryNo"])
        return _ok(delivery) if delivery else _not_found("delivery")

    def track_delivery(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        # The "carrier" is slow on purpose: longer than any demo timeout case allows.
        time.sleep(self.server.slow_seconds)
        delivery = _DELIVERIES.get(path["deliveryNo"])
        if delivery is None:
            return _not_found("delivery")
        events = [{"at": "2026-11-06T09:00:00Z", "location": "Seoul hub"}]
        return _ok({"deliveryNo": delivery["deliveryNo"], "carrier": "CJ", "events": events})

    def list_refunds(self, _: dict[str, str], query: dict[str, str], __: Any) -> _Response:
        order_no = query.get("orderNo")
        if not order_no:
            return _error(HTTPStatus.BAD_REQUEST, "missing_order_no", "orderNo is required")
        with self.server.state.lock:
            refunds = [dict(r) for r in self.server.state.refunds.values()]
        return _ok({"refunds": [r for r in refunds if r["orderNo"] == order_no]})

    def create_refund(self, _: dict[str, str], __: dict[str, str], body: Any) -> _Response:
        if not isinstance(body, dict) or not body.get("orderNo") or not body.get("reason"):
            return _error(HTTPStatus.BAD_REQUEST, "invalid_refund", "orderNo and reason needed")
        if body["orderNo"] not in _ORDERS:
            return _not_found("order")
        state = self.server.state
        with state.lock:
            refund_id = f"REF-{state.next_refund_number}"
            state.next_refund_number += 1
            refund = {
                "refundId": refund_id,
                "orderNo": str(body["orderNo"]),
                "reason": str(body["reason"])[:200],
                "status": "REQUESTED",
            }
            state.refunds[refund_id] = refund
        return _ok(dict(refund), HTTPStatus.CREATED)

    def get_refund(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        with self.server.state.lock:
            refund = self.server.state.refunds.get(path["refundId"])
        return _ok(dict(refund)) if refund else _not_found("refund")

    def cancel_refund(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        with self.server.state.lock:
            refund = self.server.state.refunds.pop(path["refundId"], None)
        if refund is None:
            return _not_found("refund")
        return _ok({"refundId": refund["refundId"], "cancelled": True})

    def search_products(self, _: dict[str, str], query: dict[str, str], __: Any) -> _Response:
        keyword = (query.get("keyword") or "").lower()
        if not keyword:
            return _error(HTTPStatus.BAD_REQUEST, "missing_keyword", "keyword is required")
        products = [p for p in _PRODUCTS.values() if keyword in p["name"].lower()]
        return _ok({"products": products})

    def get_product(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        product = _PRODUCTS.get(path["productNo"])
        return _ok(product) if product else _not_found("product")

    def list_invoices(self, _: dict[str, str], query: dict[str, str], __: Any) -> _Response:
        order_no = query.get("orderNo")
        if not order_no:
            return _error(HTTPStatus.BAD_REQUEST, "missing_order_no", "orderNo is required")
        return _ok({"invoices": [i for i in _INVOICES.values() if i["orderNo"] == order_no]})

    def get_invoice(self, path: dict[str, str], _: dict[str, str], __: Any) -> _Response:
        invoice = _INVOICES.get(path["invoiceNo"])
        return _ok(invoice) if invoice else _not_found("invoice")

    def state(self, _: dict[str, str], __: dict[str, str], ___: Any) -> _Response:
        return _ok(self.server.state.snapshot())


def _route(pattern: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern))


# (method, path pattern, needs auth, handler); first match wins, so fixed paths come first.
_ROUTES: tuple[tuple[str, re.Pattern[str], bool, _Route], ...] = (
    ("GET", _route("/__state"), False, SandboxHandler.state),
    ("GET", _route("/orders"), False, SandboxHandler.list_orders),
    ("GET", _route("/orders/count"), False, SandboxHandler.count_orders),
    ("GET", _route("/orders/{orderNo}"), False, SandboxHandler.get_order),
    ("GET", _route("/orders/{orderNo}/items"), False, SandboxHandler.list_order_items),
    ("GET", _route("/members"), False, SandboxHandler.search_members),
    ("GET", _route("/members/{memberNo}"), False, SandboxHandler.get_member),
    ("GET", _route("/members/{memberNo}/profile"), True, SandboxHandler.get_member_profile),
    ("GET", _route("/members/{memberNo}/points"), True, SandboxHandler.get_member_points),
    ("GET", _route("/members/{memberNo}/coupons"), True, SandboxHandler.list_member_coupons),
    ("GET", _route("/coupons/{couponCode}"), True, SandboxHandler.get_coupon),
    ("GET", _route("/deliveries"), False, SandboxHandler.list_deliveries),
    ("GET", _route("/deliveries/{deliveryNo}"), False, SandboxHandler.get_delivery),
    ("GET", _route("/deliveries/{deliveryNo}/tracking"), False, SandboxHandler.track_delivery),
    ("GET", _route("/refunds"), False, SandboxHandler.list_refunds),
    ("POST", _route("/refunds"), True, SandboxHandler.create_refund),
    ("GET", _route("/refunds/{refundId}"), False, SandboxHandler.get_refund),
    ("DELETE", _route("/refunds/{refundId}"), True, SandboxHandler.cancel_refund),
    ("GET", _route("/products"), False, SandboxHandler.search_products),
    ("GET", _route("/products/{productNo}"), False, SandboxHandler.get_product),
    ("GET", _route("/invoices"), False, SandboxHandler.list_invoices),
    ("GET", _route("/invoices/{invoiceNo}"), False, SandboxHandler.get_invoice),
)


def serve(
    port: int = 0, *, slow_seconds: float = DEFAULT_SLOW_SECONDS
) -> tuple[SandboxServer, threading.Thread]:
    """Start the sandbox on 127.0.0.1 in a daemon thread; port 0 picks a free port."""
    server = SandboxServer(port, slow_seconds=slow_seconds)
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="qualitylab-sandbox",
        daemon=True,
    )
    thread.start()
    return server, thread


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the Quality Lab demo API on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--slow-seconds", type=float, default=DEFAULT_SLOW_SECONDS)
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    server = SandboxServer(args.port, slow_seconds=args.slow_seconds, verbose=args.verbose)
    print(f"Quality Lab sandbox on {server.base_url} (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
