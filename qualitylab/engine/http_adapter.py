"""The HTTP side of execute cases: ``call_tool`` for ``PlanRunner`` (:class:`HttpAdapter`),
which builds each request with graph-tool-call's ``HttpExecutor`` and sends it through
``core.outbound.fetch``, and the allowed-hosts check (:func:`host_allowed`)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import urlsplit

from graph_tool_call.core.tool import ToolSchema
from graph_tool_call.execute import http_executor as _gtc_http
from graph_tool_call.execute.http_executor import HttpExecutor

from core import outbound
from core.json_limits import DEFAULT_MAX_DEPTH, JSONTooDeep, loads_bounded
from qualitylab.engine.cases import ExecutionContext
from qualitylab.engine.collection import LoadedCollection


class ToolHttpError(Exception):
    """A non-2xx answer; PlanRunner only sees exceptions, HttpExecutor returns ok=False."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status


class HostNotAllowedError(ConnectionError):
    """The request would leave the collection's allowed hosts (checked per request too)."""


@dataclass
class _Response:
    status: int
    body: Any = field(repr=False)


class HttpAdapter:
    """``call_tool`` for PlanRunner: HttpExecutor against the collection's base URL."""

    def __init__(
        self,
        collection: LoadedCollection,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float,
        execution: ExecutionContext,
    ) -> None:
        self.collection = collection
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        self.allowed_hosts = execution.allowed_hosts
        self.private_allowed = outbound.PrivateAllowance.parse(execution.private_allowed)
        self.max_response_bytes = execution.max_response_bytes
        # Dropped (with Authorization and Cookie) when a redirect leaves the origin.
        self.credential_headers: tuple[str, ...] = ()
        self.calls: list[dict[str, Any]] = []
        self.last_response: dict[str, _Response] = {}
        self._schemas: dict[str, ToolSchema] = {}

    def __call__(self, tool_name: str, args: dict[str, Any]) -> Any:
        schema = self.schema(tool_name)
        # urllib takes float seconds; HttpExecutor annotates the parameter as int.
        executor = HttpExecutor(
            self.base_url, headers=self.headers, timeout=cast(int, self.timeout)
        )
        request = executor.build_request(schema, args)
        allowed, host = host_allowed(request.full_url, self.allowed_hosts)
        if not allowed:
            raise HostNotAllowedError(f"host {host} is not in the allowed hosts")
        call: dict[str, Any] = {
            "tool": tool_name,
            "method": str(schema.metadata.get("method") or "").upper(),
            "http_status": None,
        }
        self.calls.append(call)
        started = time.perf_counter()
        try:
            response = outbound.fetch(
                request.full_url,
                method=request.get_method(),
                headers=dict(request.header_items()),
                body=cast(bytes | None, request.data),
                allowed_hosts=self.allowed_hosts,
                private_allowed=self.private_allowed,
                timeout=self.timeout,
                max_body_bytes=self.max_response_bytes,
                credential_headers=self.credential_headers,
            )
        except Exception as exc:
            call["error_class"] = type(exc).__name__
            if isinstance(exc, outbound.OutboundRefused):
                call["refused"] = dict(exc.evidence)
            raise
        finally:
            call["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 3)
        if response.redirects:
            call["redirects"] = response.redirects
        result = _executor_result(schema, response)
        status = int(result.get("status") or 0)
        call["http_status"] = status
        body = result.get("body")
        self.last_response[tool_name] = _Response(status, body)
        if not result.get("ok"):
            raise ToolHttpError(status, str(result.get("error") or _status_phrase(status)))
        return _step_output(result)

    def schema(self, tool_name: str) -> ToolSchema:
        # A spec's servers[] becomes each tool's metadata.base_url, which HttpExecutor
        # prefers over its own base URL: pin every call to the collection's base URL.
        if tool_name not in self._schemas:
            original = self.collection.tool_schemas[tool_name]
            metadata = dict(original.metadata)
            metadata["base_url"] = self.base_url
            self._schemas[tool_name] = dataclasses.replace(original, metadata=metadata)
        return self._schemas[tool_name]

    def last_call_for(self, tool_name: str) -> dict[str, Any] | None:
        for call in reversed(self.calls):
            if call.get("tool") == tool_name:
                return call
        return None

    def annotate_error(self, tool_name: str, error: dict[str, Any]) -> None:
        """Attach the HTTP status to a runner error (the runner keeps only the message)."""
        call = self.last_call_for(tool_name)
        if call is not None and isinstance(call.get("http_status"), int):
            error["http_status"] = call["http_status"]


def _executor_result(schema: ToolSchema, response: outbound.Response) -> dict[str, Any]:
    """What ``HttpExecutor.execute`` returns, for an answer the guarded transport fetched.

    graph-tool-call 0.47's executor sends through ``urllib.request.urlopen`` (redirects
    followed with every header, any scheme, the host resolved again at connect); the
    engine builds the request with it and sends it through ``core.outbound`` instead.
    This mirrors the executor's result shape with its own helpers (pinned version).
    """
    api_metadata = schema.metadata.get("openapi")
    api_metadata = api_metadata if isinstance(api_metadata, dict) else {}
    raw = response.body.decode("utf-8", errors="replace")
    try:
        # The API under test is not trusted either: an answer nested 100,000 deep (or with
        # a 5,000-digit number) would raise RecursionError (ValueError) in json.loads.
        # Such an answer is kept as text, like one that is not JSON.
        body: Any = loads_bounded(raw, max_depth=DEFAULT_MAX_DEPTH)
    except (JSONTooDeep, json.JSONDecodeError):
        body = raw
    content_type = _gtc_http._response_content_type(response.headers)
    metadata = _gtc_http._match_response_metadata(
        api_metadata, status=response.status, content_type=content_type
    )
    ok = 200 <= response.status < 300
    result: dict[str, Any] = {
        "status": response.status,
        "ok": ok,
        "headers": response.headers,
        "content_type": content_type,
        "body": body,
        "response_metadata": metadata,
    }
    if not ok:
        result["error"] = response.reason
        result["error_response"] = metadata if not metadata.get("success") else {}
    body_view = _gtc_http._response_body_view(body, api_metadata, metadata)
    if body_view:
        result["body_view"] = body_view
    return result


def _step_output(result: Mapping[str, Any]) -> Any:
    # graph-tool-call 0.47 binds producer outputs two ways: envelope collections through
    # ``${sN.body_view.value[0].x}`` (HttpExecutor's result shape) and everything else
    # through the response root (``${sN.x}``). Expose both on one dict.
    body = result.get("body")
    output: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
    output.setdefault("body", body)
    if "body_view" in result:
        output.setdefault("body_view", result["body_view"])
    return output


def _status_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown status"


def host_allowed(
    url: str, allowed_hosts: Sequence[str] | frozenset[str]
) -> tuple[bool, str | None]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return False, host or None
    try:
        port = parts.port
    except ValueError:
        return False, host
    label = f"{host}:{port}" if port else host
    entries = {str(entry).strip().lower() for entry in allowed_hosts}
    return (host in entries or label in entries), label
