"""Runner events -> failure records, checked against real PlanRunner runs.

A stub downstream API runs on 127.0.0.1; a product-style adapter calls it through
graph-tool-call's HttpExecutor and raises on non-2xx answers. Every event goes through
``dataclasses.asdict`` and a JSON round trip, as a runtime forwarding events would send it.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import ssl
import struct
import threading
import urllib.error
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from graph_tool_call.core.tool import ToolParameter, ToolSchema
from graph_tool_call.execute.http_executor import HttpExecutor
from graph_tool_call.plan.runner import (
    ArgsCoerced,
    BindingRepaired,
    PlanRepaired,
    PlanRunner,
    RetryPolicy,
    StepRetrying,
)
from graph_tool_call.plan.schema import Plan, PlanStep

from triage.intake.runner_events import FAILURE_EVENT_TYPES, failure_from_runner_event

CLIENT_TIMEOUT_SECONDS = 0.3
ENGINE_VERSION = "0.47.0"
ToolCaller = Callable[[str, dict[str, Any]], Any]


# --- the downstream API -----------------------------------------------------------------


class _StubApi(BaseHTTPRequestHandler):
    release_hung_requests: threading.Event

    def do_GET(self) -> None:
        if self.path == "/orders":
            self._json(HTTPStatus.OK, {"orders": [{"id": "o-1", "status": "paid"}]})
        elif self.path.startswith("/orders/"):
            self._json(HTTPStatus.OK, {"id": self.path.rsplit("/", 1)[-1], "status": "paid"})
        elif self.path.startswith("/status/"):
            status = HTTPStatus(int(self.path.rsplit("/", 1)[-1]))
            self._json(status, {"error": status.phrase})
        elif self.path == "/slow":
            # Longer than the client's timeout; released at teardown.
            self.release_hung_requests.wait(timeout=5)
            self.close_connection = True
        elif self.path == "/reset":
            # Linger 0 then close: the kernel answers with RST instead of FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        elif self.path == "/hangup":
            self.close_connection = True  # close without writing a status line
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": "no such path"})

    def _json(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == HTTPStatus.TOO_MANY_REQUESTS:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the reset / hang-up paths break their own sockets on purpose


@pytest.fixture(scope="module")
def api_base_url() -> Iterator[str]:
    release = threading.Event()
    handler = type("StubApi", (_StubApi,), {"release_hung_requests": release})
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def refused_base_url() -> str:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there any more: connections are refused
    return f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def _no_proxy_for_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


# --- a product-style adapter ----------------------------------------------------------------


class DownstreamHTTPError(Exception):
    """Raised by the adapter for a non-2xx answer; the status rides along on the exception."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


class AuthPreflightError(Exception):
    """Raised by the adapter when it cannot build auth headers; nothing is sent."""


def _tool(name: str, path: str, *params: str, base_url: str = "") -> ToolSchema:
    metadata: dict[str, Any] = {"source": "openapi", "method": "GET", "path": path}
    if base_url:
        metadata["base_url"] = base_url
    parameters = [ToolParameter(name=param, required=True) for param in params]
    return ToolSchema(name=name, parameters=parameters, metadata=metadata)


@pytest.fixture(scope="module")
def call_tool(api_base_url: str, refused_base_url: str) -> ToolCaller:
    tools = {
        tool.name: tool
        for tool in (
            _tool("listOrders", "/orders"),
            _tool("getOrder", "/orders/{orderId}", "orderId"),
            _tool("getStatus", "/status/{code}", "code"),
            _tool("getSlowReport", "/slow"),
            _tool("getResetting", "/reset"),
            _tool("getHangingUp", "/hangup"),
            _tool("getInventory", "/inventory", base_url=refused_base_url),
        )
    }
    # HttpExecutor answers HTTP errors with {"ok": False, "status": ...} instead of raising;
    # the runner only sees a failure when the adapter raises, so this adapter does.
    executor = HttpExecutor(api_base_url, timeout=CLIENT_TIMEOUT_SECONDS)  # type: ignore[arg-type]

    def call(tool_name: str, args: dict[str, Any]) -> Any:
        result = executor.execute(tools[tool_name], args)
        if not result["ok"]:
            raise DownstreamHTTPError(result["status"], str(result.get("error") or ""))
        return result["body"]

    return call


def _raising(exc: BaseException) -> ToolCaller:
    def call(tool_name: str, args: dict[str, Any]) -> Any:
        raise exc

    return call


# --- running plans like a runtime ------------------------------------------------------------


def _plan(*steps: PlanStep, output_binding: str | None = None) -> Plan:
    return Plan(
        id="plan_test", goal="show the order", steps=list(steps), output_binding=output_binding
    )


def _forwarded_events(
    plan: Plan,
    call_tool: ToolCaller,
    *,
    trace_metadata: dict[str, Any] | None = None,
    **runner_options: Any,
) -> list[dict[str, Any]]:
    runner = PlanRunner(call_tool, **runner_options)
    return [
        json.loads(json.dumps(dataclasses.asdict(event), default=str))
        for event in runner.run_stream(plan, trace_metadata=trace_metadata)
    ]


def _records(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [record for event in events if (record := failure_from_runner_event(event))]


def _only_record(events: list[dict[str, Any]]) -> dict[str, Any]:
    records = _records(events)
    assert len(records) == 1, records
    return records[0]


LIST_ORDERS = PlanStep(id="s1", tool="listOrders")
LIST_ORDERS_AS_S2 = PlanStep(id="s2", tool="listOrders")


# --- the mapping, from real HTTP failures ------------------------------------------------------


@pytest.mark.parametrize(
    ("failing_step", "stage", "reason", "execution_state", "http_status", "exception_type"),
    [
        pytest.param(
            PlanStep(id="s2", tool="getStatus", args={"code": "400"}),
            "execute", "http_4xx", "completed", 400, "DownstreamHTTPError",
            id="400",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getStatus", args={"code": "401"}),
            "execute", "auth_failed", "completed", 401, "DownstreamHTTPError",
            id="401",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getStatus", args={"code": "403"}),
            "execute", "auth_failed", "completed", 403, "DownstreamHTTPError",
            id="403",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getStatus", args={"code": "404"}),
            "execute", "http_4xx", "completed", 404, "DownstreamHTTPError",
            id="404",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getStatus", args={"code": "429"}),
            "execute", "http_4xx", "completed", 429, "DownstreamHTTPError",
            id="429",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getStatus", args={"code": "500"}),
            "execute", "http_5xx", None, 500, "DownstreamHTTPError",
            id="500-state-left-to-the-side-effect-grade",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getSlowReport"),
            "execute", "timeout", "started_unknown", None, "TimeoutError",
            id="read-timeout",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getInventory"),
            "execute", "network_error", "not_started", None, "URLError",
            id="connection-refused",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getResetting"),
            "execute", "network_error", "started_unknown", None, "ConnectionResetError",
            id="connection-reset",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getHangingUp"),
            "execute", "network_error", "started_unknown", None, "RemoteDisconnected",
            id="remote-disconnected",
        ),
        pytest.param(
            PlanStep(id="s2", tool="getOrder"),
            "bind_request", "missing_required_argument", "not_started", None,
            "OpenAPIRequestValidationError",
            id="required-path-argument-missing",
        ),
    ],
)  # fmt: skip
def test_failing_step_maps_to_one_record(
    call_tool: ToolCaller,
    failing_step: PlanStep,
    stage: str,
    reason: str,
    execution_state: str | None,
    http_status: int | None,
    exception_type: str,
) -> None:
    events = _forwarded_events(_plan(LIST_ORDERS, failing_step), call_tool)

    assert [event["type"] for event in events][-2:] == ["step.failed", "plan.aborted"]
    record = _only_record(events)
    assert (record["stage"], record["reason"], record["execution_state"]) == (
        stage,
        reason,
        execution_state,
    )
    assert record["plan_id"] == "plan_test"
    assert record["step_id"] == "s2"
    assert record["tool"] == failing_step.tool
    assert record["graph_tool_call_version"] == ENGINE_VERSION
    assert record["message"]
    evidence = record["evidence"]
    assert evidence["event_type"] == "step.failed"
    assert evidence["error_kind"] == "tool"
    assert evidence["exception_type"] == exception_type
    assert evidence.get("http_status") == http_status
    assert evidence.get("rate_limited", False) is (http_status == 429)
    if reason in ("timeout", "network_error"):
        assert evidence["request_sent"] is (execution_state == "started_unknown")


def test_http_status_read_from_the_message_is_marked_as_such(call_tool: ToolCaller) -> None:
    events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getStatus", args={"code": "404"})), call_tool
    )

    record = _only_record(events)
    # The engine keeps str(exc) and the type name only; exc.status never arrives.
    assert record["message"] == "HTTP 404: Not Found"
    assert record["evidence"]["http_status_source"] == "message"


def test_structured_http_status_wins_over_the_message(call_tool: ToolCaller) -> None:
    events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getStatus", args={"code": "404"})), call_tool
    )
    failed = next(event for event in events if event["type"] == "step.failed")
    failed["trace_metadata"]["http_status"] = 410  # a runtime that knows the real status

    record = failure_from_runner_event(failed)

    assert record is not None
    assert record["evidence"]["http_status"] == 410
    assert "http_status_source" not in record["evidence"]


def test_binding_to_a_missing_path_of_a_previous_step(call_tool: ToolCaller) -> None:
    plan = _plan(
        LIST_ORDERS, PlanStep(id="s2", tool="getOrder", args={"orderId": "${s1.missing.path}"})
    )
    events = _forwarded_events(plan, call_tool)

    assert [event["type"] for event in events] == [
        "plan.started",
        "step.started",
        "step.completed",
        "step.failed",
        "plan.aborted",
    ]
    record = _only_record(events)
    assert (record["stage"], record["reason"], record["execution_state"]) == (
        "bind_request",
        "binding_failed",
        "not_started",
    )
    assert (record["step_id"], record["tool"]) == ("s2", "getOrder")
    assert record["evidence"]["error_kind"] == "binding"
    assert "exception_type" not in record["evidence"]  # the engine sends none for bindings


def test_unresolvable_output_binding_is_recorded_from_plan_aborted(call_tool: ToolCaller) -> None:
    events = _forwarded_events(_plan(LIST_ORDERS, output_binding="${s1.summary.total}"), call_tool)

    assert "step.failed" not in [event["type"] for event in events]
    record = _only_record(events)
    assert (record["stage"], record["reason"]) == ("bind_request", "binding_failed")
    assert record["step_id"] is None
    assert record["evidence"]["error_kind"] == "output_binding"
    assert record["evidence"]["failed_step"] == "<output_binding>"


def test_completed_run_produces_no_failure_records(call_tool: ToolCaller) -> None:
    plan = _plan(
        LIST_ORDERS,
        PlanStep(id="s2", tool="getOrder", args={"orderId": "${s1.orders[0].id}"}),
        output_binding="${s2.status}",
    )
    events = _forwarded_events(
        plan, call_tool, trace_metadata={"auth_readiness": {"failure_reason": None}}
    )

    assert events[-1]["type"] == "plan.completed"
    assert events[-1]["output"] == "paid"
    assert _records(events) == []


def test_forwarding_every_event_of_a_failing_run_counts_the_failure_once(
    call_tool: ToolCaller,
) -> None:
    plan = _plan(
        LIST_ORDERS,
        PlanStep(id="s2", tool="getStatus", args={"code": "503"}),
        PlanStep(id="s3", tool="getOrder", args={"orderId": "${s1.orders[0].id}"}),
    )
    events = _forwarded_events(plan, call_tool)
    aborted = events[-1]

    assert aborted["type"] == "plan.aborted"
    assert aborted["error"] == events[-2]["error"]  # the same failure, reported twice
    assert failure_from_runner_event(aborted) is None
    assert _only_record(events)["reason"] == "http_5xx"


def test_retried_attempts_are_not_failures_until_the_last_one(call_tool: ToolCaller) -> None:
    events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getStatus", args={"code": "503"})),
        call_tool,
        on_error="retry",
        retry_policy=RetryPolicy(max_attempts=3, backoff_base_ms=0, retry_all=True),
    )

    assert [event["type"] for event in events].count("step.retrying") == 2
    record = _only_record(events)
    assert (record["reason"], record["evidence"]["event_type"]) == ("http_5xx", "step.failed")


def test_recover_mode_skip_is_a_tolerated_failure(call_tool: ToolCaller) -> None:
    plan = _plan(PlanStep(id="s1", tool="getStatus", args={"code": "502"}), LIST_ORDERS_AS_S2)
    events = _forwarded_events(plan, call_tool, on_error="recover")

    assert [event["type"] for event in events][-1] == "plan.completed"
    record = _only_record(events)
    assert (record["stage"], record["reason"], record["step_id"]) == ("execute", "http_5xx", "s1")
    assert record["evidence"]["tolerated"] is True
    assert record["evidence"]["event_type"] == "step.skipped"


def test_recover_mode_skipped_terminal_step_counts_once(call_tool: ToolCaller) -> None:
    plan = _plan(LIST_ORDERS, PlanStep(id="s2", tool="getStatus", args={"code": "502"}))
    events = _forwarded_events(plan, call_tool, on_error="recover")

    # The skip leaves no final answer, so the run still aborts on the output lookup.
    assert [event["type"] for event in events][-2:] == ["step.skipped", "plan.aborted"]
    assert events[-1]["error"]["kind"] == "output_binding"
    record = _only_record(events)
    assert (record["reason"], record["evidence"]["event_type"]) == ("http_5xx", "step.skipped")


def test_explicit_failure_reason_wins(call_tool: ToolCaller) -> None:
    events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getStatus", args={"code": "400"})),
        call_tool,
        trace_metadata={"failure_reason": "enum_required"},
    )

    # trace_metadata is run-level: plan.started carries it too, and is still no failure.
    assert events[0]["trace_metadata"]["failure_reason"] == "enum_required"
    record = _only_record(events)
    assert (record["stage"], record["reason"]) == ("synthesize", "enum_required")
    assert record["evidence"]["http_status"] == 400
    assert record["execution_state"] == "completed"  # the 400 proves the call happened


def test_unknown_explicit_reason_is_kept_with_a_fitting_stage(call_tool: ToolCaller) -> None:
    http_events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getStatus", args={"code": "429"})),
        call_tool,
        trace_metadata={"failure_reason": "vendor_quota_exhausted"},
    )
    binding_events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getOrder", args={"orderId": "${input.order_id}"})),
        call_tool,
        trace_metadata={"failure_reason": "vendor_quota_exhausted"},
    )
    adapter_stage_event = {
        "type": "step.failed",
        "stage": "cleanup",
        "trace_metadata": {"failure_reason": "vendor_cleanup_lock"},
    }

    http_record = _only_record(http_events)
    assert (http_record["stage"], http_record["reason"]) == ("execute", "vendor_quota_exhausted")
    assert http_record["evidence"]["rate_limited"] is True
    assert _only_record(binding_events)["stage"] == "bind_request"
    adapter_record = failure_from_runner_event(adapter_stage_event)
    assert adapter_record is not None
    assert (adapter_record["stage"], adapter_record["reason"]) == ("cleanup", "vendor_cleanup_lock")


def test_a_reason_that_is_not_a_code_is_ignored_and_flagged(call_tool: ToolCaller) -> None:
    events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getStatus", args={"code": "404"})),
        call_tool,
        trace_metadata={"failure_reason": "Order not found!"},
    )

    record = _only_record(events)
    assert record["reason"] == "http_4xx"
    assert record["evidence"]["failure_reason_ignored"] is True


def test_auth_preflight_failure_reason_wins(call_tool: ToolCaller) -> None:
    readiness = {
        "required": True,
        "auth_profile_id_present": True,
        "session_station_header_names": [],
        "failure_reason": "auth_context_required",
    }
    events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getOrder", args={"orderId": "o-1"})),
        _raising(AuthPreflightError("no user session to resolve auth headers from")),
        trace_metadata={"auth_readiness": readiness},
    )

    record = _only_record(events)
    assert (record["stage"], record["reason"], record["execution_state"]) == (
        "auth_preflight",
        "auth_context_required",
        "not_started",
    )
    assert record["evidence"]["auth_readiness"] == readiness


def test_seed_runner_event_example() -> None:
    seed_event = {
        "type": "step.failed",
        "stage": "execute",
        "plan_id": "plan_01HZ...",
        "step_id": "step_2",
        "tool": "getOrderDetail",
        "graph_tool_call_version": "0.32.1",
        "trace_metadata": {
            "failure_reason": "http_4xx",
            "http_status": 400,
            "auth_readiness": {
                "required": True,
                "auth_profile_id_present": True,
                "session_station_header_names": ["Authorization"],
                "failure_reason": None,
            },
        },
    }

    record = failure_from_runner_event(seed_event)

    assert record is not None
    assert {key: record[key] for key in record if key not in ("message", "evidence")} == {
        "stage": "execute",
        "reason": "http_4xx",
        "tool": "getOrderDetail",
        "plan_id": "plan_01HZ...",
        "step_id": "step_2",
        "execution_state": "completed",
        "graph_tool_call_version": "0.32.1",
    }
    assert record["message"]
    assert record["evidence"]["http_status"] == 400
    assert record["evidence"]["event_stage"] == "execute"
    assert record["evidence"]["auth_readiness"] == seed_event["trace_metadata"]["auth_readiness"]  # type: ignore[index]


def test_unknown_extra_fields_do_not_change_the_record(call_tool: ToolCaller) -> None:
    events = _forwarded_events(
        _plan(PlanStep(id="s1", tool="getStatus", args={"code": "404"})), call_tool
    )
    failed = next(event for event in events if event["type"] == "step.failed")
    decorated = json.loads(json.dumps(failed))
    decorated["sequence"] = 7
    decorated["x_runtime"] = {"region": "eu", "tags": ["a", "b"]}
    decorated["error"]["retry_after"] = "1"
    decorated["trace_metadata"]["session_id_hash"] = "sha256:abc"

    assert failure_from_runner_event(decorated) == failure_from_runner_event(failed)


# --- what older or other adapters raise -----------------------------------------------------------


class ConnectTimeout(Exception):
    """Stands in for requests'/httpx's ConnectTimeout: the engine keeps only the type name."""


class ReadTimeout(Exception):
    """Stands in for requests'/httpx's ReadTimeout."""


class ArgumentCoercionError(ValueError):
    """A runtime argument builder that could not cast a value."""


@pytest.mark.parametrize(
    ("exception", "stage", "reason", "execution_state", "http_status"),
    [
        pytest.param(RuntimeError("HTTP 503"), "execute", "http_5xx", None, 503, id="HTTP 503"),
        pytest.param(
            RuntimeError("upstream answered status 503"), "execute", "http_5xx", None, 503,
            id="status 503",
        ),
        pytest.param(
            urllib.error.HTTPError("http://api.test/x", 403, "Forbidden", None, None),  # type: ignore[arg-type]
            "execute", "auth_failed", "completed", 403,
            id="urllib HTTPError",
        ),
        pytest.param(
            RuntimeError("429 Client Error: Too Many Requests for url: http://api.test/x"),
            "execute", "http_4xx", "completed", 429,
            id="requests raise_for_status",
        ),
        pytest.param(
            ConnectTimeout("connect timed out"), "execute", "timeout", "not_started", None,
            id="ConnectTimeout",
        ),
        pytest.param(
            ReadTimeout("read timed out"), "execute", "timeout", "started_unknown", None,
            id="ReadTimeout",
        ),
        pytest.param(
            urllib.error.URLError(TimeoutError("timed out")),
            "execute", "timeout", "not_started", None,
            id="urllib connect timeout",
        ),
        pytest.param(
            urllib.error.URLError(socket.gaierror(-2, "Name or service not known")),
            "execute", "network_error", "not_started", None,
            id="urllib DNS failure",
        ),
        pytest.param(
            socket.gaierror(-3, "Temporary failure in name resolution"),
            "execute", "network_error", "not_started", None,
            id="gaierror",
        ),
        pytest.param(
            ssl.SSLCertVerificationError(1, "certificate verify failed"),
            "execute", "network_error", "not_started", None,
            id="TLS certificate",
        ),
        pytest.param(
            ConnectionError("Max retries exceeded (Caused by NewConnectionError(...))"),
            "execute", "network_error", "not_started", None,
            id="requests ConnectionError",
        ),
        pytest.param(
            ConnectionError("something broke"), "execute", "network_error", None, None,
            id="bare ConnectionError",
        ),
        pytest.param(
            ArgumentCoercionError("cannot cast 'ten' to integer"),
            "bind_request", "argument_coercion_failed", "not_started", None,
            id="argument coercion",
        ),
        pytest.param(
            KeyError("body"), "service", "uncaught_server_error", None, None,
            id="adapter bug",
        ),
    ],
)  # fmt: skip
def test_adapter_exceptions_map_by_type(
    exception: BaseException,
    stage: str,
    reason: str,
    execution_state: str | None,
    http_status: int | None,
) -> None:
    events = _forwarded_events(_plan(PlanStep(id="s1", tool="anyTool")), _raising(exception))

    record = _only_record(events)
    assert (record["stage"], record["reason"], record["execution_state"]) == (
        stage,
        reason,
        execution_state,
    )
    assert record["evidence"]["exception_type"] == type(exception).__name__
    assert record["evidence"].get("http_status") == http_status


def test_execution_state_sent_by_the_runtime_wins() -> None:
    event = {
        "type": "step.failed",
        "error": {"kind": "tool", "message": "boom", "exception_type": "ReadTimeout"},
        "execution_state": "not_started",
    }

    record = failure_from_runner_event(event)

    assert record is not None
    assert (record["reason"], record["execution_state"]) == ("timeout", "not_started")


@pytest.mark.parametrize(
    "event",
    [
        dataclasses.asdict(
            StepRetrying(step_id="s1", error={"kind": "tool", "message": "HTTP 503"})
        ),
        dataclasses.asdict(PlanRepaired(failed_step="s1")),
        dataclasses.asdict(BindingRepaired(step_id="s2", field_name="orderId")),
        dataclasses.asdict(ArgsCoerced(step_id="s1", unresolved=["size"])),
        {"type": "step.paused", "error": {"kind": "tool", "message": "HTTP 500"}},
        {"stage": "execute"},
    ],
    ids=lambda event: str(event.get("type", "no-type")),
)
def test_events_that_are_not_failures(event: dict[str, Any]) -> None:
    assert failure_from_runner_event(event) is None


@pytest.mark.parametrize("garbage", [None, [], "step.failed", 3])
def test_input_that_is_not_an_event_is_no_failure(garbage: Any) -> None:
    assert failure_from_runner_event(garbage) is None


def test_old_adapter_sending_the_error_as_a_string() -> None:
    record = failure_from_runner_event({"type": "step.failed", "error": "HTTP 502: Bad Gateway"})

    assert record is not None
    assert (record["stage"], record["reason"]) == ("execute", "http_5xx")


def test_failure_event_types() -> None:
    assert frozenset({"step.failed", "step.skipped", "plan.aborted"}) == FAILURE_EVENT_TYPES
