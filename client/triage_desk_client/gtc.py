"""graph-tool-call helpers: report a plan run's events and synthesis or selection
failures, and bring a collection's promoted learning suggestions back into ranking.

graph-tool-call is imported here only inside the functions that need it, so the reporter
works without it (``pip install triage-desk-client[gtc]`` installs it).
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from triage_desk_client.reporter import Reporter

logger = logging.getLogger("triage_desk_client")

SUGGESTIONS_PATH = "/api/v1/learning/suggestions"


def report_stream(reporter: Reporter, events: Iterable[Any]) -> Iterator[Any]:
    """Yield every event of ``PlanRunner.run_stream(...)`` unchanged, each one reported
    first (its default id holds its position in the run)::

        for event in report_stream(reporter, runner.run_stream(plan)):
            ...
    """
    for sequence, event in enumerate(events):
        reporter.runner_event(event, sequence=sequence)
        yield event


def report_synthesis_error(
    reporter: Reporter, exc: Any, *, collection: str, plan_id: str | None = None
) -> str:
    """A ``PlanSynthesisError`` as a failure record, from ``exc.to_dict()`` (stage, reason
    and details as the library gives them; the message is never parsed). The item's id."""
    diagnostic = dict(exc.to_dict())
    stage = str(diagnostic.pop("stage", None) or "synthesize")
    reason = str(diagnostic.pop("reason", None) or "synthesis_error")
    message = str(diagnostic.pop("message", None) or reason)
    tool = diagnostic.get("tool") or diagnostic.get("target_tool") or diagnostic.get("target")
    return reporter.failure(
        _failure_body(
            stage=stage,
            reason=reason,
            message=message,
            collection=collection,
            plan_id=plan_id,
            tool=tool,
            evidence=diagnostic,
        )
    )


def report_selection_failure(
    reporter: Reporter,
    selection: Mapping[str, Any],
    *,
    collection: str,
    plan_id: str | None = None,
) -> str:
    """A target selection that needs attention (``select_target_candidate``'s answer:
    ambiguous, an overridden LLM target, no candidates) as a ``select_target`` failure.
    The reason is the selector's first reason code. The item's id."""
    codes = [str(code) for code in selection.get("reason_codes") or [] if code]
    if codes:
        reason = codes[0]
    elif selection.get("ambiguous"):
        reason = "ambiguous_target"
    else:
        reason = "selector_mismatch"
    selected = str(selection.get("selected_target") or "")
    evidence = {
        key: selection.get(key)
        for key in (
            "selected_target",
            "confidence",
            "overrode_llm",
            "ambiguous",
            "ambiguity_set",
            "decision",
            "recommended_action",
            "margin",
            "llm_margin",
        )
        if key in selection
    }
    evidence["reason_codes"] = codes
    return reporter.failure(
        _failure_body(
            stage="select_target",
            reason=reason,
            message=f"target selection: {reason}",
            collection=collection,
            plan_id=plan_id,
            tool=selected or None,
            evidence=evidence,
        )
    )


def _failure_body(
    *,
    stage: str,
    reason: str,
    message: str,
    collection: str,
    plan_id: str | None,
    tool: Any,
    evidence: dict[str, Any],
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "stage": stage,
        "reason": reason,
        "message": message,
        "collection": collection,
        "source": "runtime",
        "execution_state": "not_started",  # synthesis and selection call no API
        "evidence": evidence,
    }
    if plan_id:
        body["plan_id"] = plan_id
    if tool:
        body["tool"] = str(tool)
    version = _library_version()
    if version:
        body["graph_tool_call_version"] = version
    return body


def _library_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python 3.9 has it
        return ""
    try:
        return version("graph-tool-call")
    except PackageNotFoundError:
        return ""


class SuggestionCache:
    """A collection's promoted suggestions from the desk, refreshed every `refresh` seconds.

    ``GET /api/v1/learning/suggestions?collection=C&status=promoted`` with a read key; the
    desk answers ``304 Not Modified`` to the ``If-None-Match`` of the last answer, so
    polling costs almost nothing. When the desk is away the last good answer stays (and
    the next attempt waits another `refresh` seconds). ``apply()`` never raises because of
    the desk.
    """

    def __init__(
        self,
        base_url: str,
        read_key: str,
        collection: str,
        *,
        refresh: float = 60.0,
        timeout: float = 2.0,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}")
        self._connection_class: type[http.client.HTTPConnection] = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        self._host = parts.hostname
        self._port = parts.port
        query = urllib.parse.urlencode({"collection": collection, "status": "promoted"})
        self._target = f"{parts.path.rstrip('/')}{SUGGESTIONS_PATH}?{query}"
        self._read_key = read_key
        self.collection = collection
        self.refresh_interval = refresh
        self._timeout = timeout
        self._lock = threading.Lock()
        self._suggestions: list[dict[str, Any]] = []
        self._etag: str | None = None
        self._next_refresh = 0.0
        self.last_status: int | None = None  # 200, 304, another status, or None (no answer)
        self.last_error: str | None = None

    def suggestions(self) -> list[dict[str, Any]]:
        """The promoted suggestions, refreshed first when `refresh` seconds have passed."""
        if time.monotonic() >= self._next_refresh:
            self.refresh()
        return list(self._suggestions)

    def refresh(self) -> bool:
        """Ask the desk now; True when it answered (200 or 304)."""
        with self._lock:
            self._next_refresh = time.monotonic() + self.refresh_interval
            headers = {"Authorization": f"Bearer {self._read_key}", "Accept": "application/json"}
            if self._etag:
                headers["If-None-Match"] = self._etag
            connection = self._connection_class(self._host, self._port, timeout=self._timeout)
            try:
                connection.request("GET", self._target, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.last_status = None
                return self._failed(f"cannot reach the desk: {type(exc).__name__}: {exc}")
            finally:
                connection.close()
            self.last_status = response.status
            if response.status == 304:
                self.last_error = None
                return True
            if response.status != 200:
                return self._failed(f"HTTP {response.status}")
            try:
                suggestions = json.loads(data)["suggestions"]
            except (ValueError, TypeError, KeyError):
                return self._failed("an answer without suggestions")
            if not isinstance(suggestions, list):
                return self._failed("an answer without suggestions")
            self._suggestions = [item for item in suggestions if isinstance(item, dict)]
            self._etag = response.getheader("ETag")
            self.last_error = None
            return True

    def _failed(self, error: str) -> bool:
        self.last_error = error
        logger.warning(
            "triage desk suggestions for %s: %s; keeping the last answer", self.collection, error
        )
        return False

    def apply(self, query: str, candidates: list[Any]) -> dict[str, Any]:
        """graph-tool-call's ``apply_learning_suggestions(query, candidates, suggestions,
        mode="promoted")`` with the cached suggestions."""
        from graph_tool_call.learning import apply_learning_suggestions

        return apply_learning_suggestions(query, candidates, self.suggestions(), mode="promoted")
