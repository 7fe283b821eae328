"""The desk's taxonomy on the runtime's side: a snapshot bundled with the package
(``taxonomy.json``, what ``GET /api/v1/taxonomy`` answers), replaced by the desk's current
document when a refresh from the desk succeeds.

The snapshot is regenerated from the desk's own code with::

    python manage.py taxonomy > client/triage_desk_client/taxonomy.json

and a test fails when it drifts from ``triage.vocabulary.taxonomy.public_document()``.

A ``TaxonomySource`` refreshes from the desk in a background thread, with the ETag, so a
poll the desk answers ``304`` costs one small request; a refresh that fails is logged and
ignored (the last document in force stays). Nothing on a tool call's path waits for it:
``current()`` is one attribute read.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

logger = logging.getLogger("triage_desk_client")

TAXONOMY_PATH = "/api/v1/taxonomy"
SNAPSHOT = "taxonomy.json"
EXECUTION_STATES = ("not_started", "started_unknown", "partially_completed", "completed")
# A document bigger than this is not a taxonomy (today's is about 40 KB).
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
_USER_AGENT = "triage-desk-client/0.1.0"


@dataclass(frozen=True)
class ReasonFacts:
    """One reason of the catalog, as the desk publishes it."""

    code: str
    stage: str
    lane: str
    retryable: bool
    api_called: str  # "no", "yes" or "maybe"
    execution_state: str  # the default state of a failure with this reason
    meaning: str  # in English


@dataclass(frozen=True)
class LaneFacts:
    code: str
    next_action: str
    meaning: str  # in English


class Taxonomy:
    """A taxonomy document, read once into lookups (immutable after construction)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        """Raises ``ValueError`` for a document that is not the desk's taxonomy."""
        try:
            self.version = str(document["version"])
            self.reasons = {
                entry["code"]: ReasonFacts(
                    code=entry["code"],
                    stage=entry["stage"],
                    lane=entry["lane"],
                    retryable=bool(entry["retryable"]),
                    api_called=entry["api_called"],
                    execution_state=entry["execution_state"],
                    meaning=entry["meaning"]["en"],
                )
                for entry in document["reasons"]
            }
            self.lanes = {
                entry["code"]: LaneFacts(
                    code=entry["code"],
                    next_action=entry["next_action"],
                    meaning=entry["meaning"]["en"],
                )
                for entry in document["lanes"]
            }
            self.stages = tuple(entry["code"] for entry in document["stages"])
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a taxonomy document: {error!r}") from error
        for reason in self.reasons.values():
            if reason.lane not in self.lanes or reason.execution_state not in EXECUTION_STATES:
                raise ValueError(f"reason {reason.code!r} names an unknown lane or state")
        self.document: Mapping[str, Any] = document

    def reason(self, code: str) -> ReasonFacts | None:
        return self.reasons.get(code)

    def next_action(self, lane: str) -> str:
        return self.lanes[lane].next_action


@lru_cache(maxsize=1)
def bundled() -> Taxonomy:
    """The snapshot shipped with this package."""
    text = resources.files("triage_desk_client").joinpath(SNAPSHOT).read_text(encoding="utf-8")
    return Taxonomy(json.loads(text))


class DeskDocument:
    """A JSON document the desk serves, polled in a background thread with its ETag (a
    ``304`` costs one small request); what is in force is one attribute read. A refresh
    that fails is logged once per kind of problem and the last document stays in force.

    ``desk_url`` None: the initial document only, no thread. Otherwise ``start()`` polls
    ``GET {desk_url}{path}`` every ``interval`` seconds (the first at once).
    """

    what = "document"

    def __init__(
        self,
        initial: Any,
        path: str,
        desk_url: str | None = None,
        api_key: str | None = None,
        *,
        interval: float = 300.0,
        timeout: float = 5.0,
    ) -> None:
        self._current = initial
        self._etag: str | None = None
        self._interval = interval
        self._timeout = timeout
        self._api_key = api_key
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_problem: str | None = None
        self._target: tuple[str, str, int | None, str] | None = None
        if desk_url:
            parts = urllib.parse.urlsplit(desk_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"desk_url must be an http(s) URL, not {desk_url!r}")
            self._target = (parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/") + path)

    def parse(self, document: Any) -> Any:
        """The document read into what is kept; ValueError refuses it."""
        return document

    def current(self) -> Any:
        return self._current

    def start(self) -> None:
        """Start the background refresh (once; nothing happens without a desk URL)."""
        if self._target is None or self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"triage-desk-{self.what.replace(' ', '-')}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def refresh(self) -> bool:
        """Ask the desk once; True when a new document is now in force. Never raises for
        the desk's sake: an unreachable desk or a bad answer is logged and ignored."""
        if self._target is None:
            return False
        try:
            status, etag, body = self._get()
        except (OSError, http.client.HTTPException) as error:
            self._problem(f"the desk could not be reached ({type(error).__name__})")
            return False
        if status == 304:
            return False
        if status != 200:
            self._problem(f"the desk answered {status}")
            return False
        try:
            parsed = self.parse(json.loads(body))
        except ValueError as error:  # JSONDecodeError is one
            self._problem(f"the desk's document was refused: {error}")
            return False
        self._current = parsed
        self._etag = etag
        self._last_problem = None
        logger.info("%s from the desk is in force", self.what)
        return True

    def _get(self) -> tuple[int, str | None, bytes]:
        assert self._target is not None
        scheme, host, port, path = self._target
        connection_class = (
            http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        )
        connection = connection_class(host, port, timeout=self._timeout)
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if self._etag:
            headers["If-None-Match"] = self._etag
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            body = response.read(MAX_DOCUMENT_BYTES + 1)
            if len(body) > MAX_DOCUMENT_BYTES:
                return 413, None, b""
            return response.status, response.getheader("ETag"), body
        finally:
            connection.close()

    def _problem(self, text: str) -> None:
        # Once per kind of problem, not once per poll: a desk away for a day is one line.
        if text != self._last_problem:
            logger.warning("%s refresh: %s; the last one stays in force", self.what, text)
            self._last_problem = text

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self._interval)


class TaxonomySource(DeskDocument):
    """The taxonomy in force: the bundled snapshot until the desk's answers replace it."""

    what = "taxonomy"

    def __init__(
        self,
        desk_url: str | None = None,
        api_key: str | None = None,
        *,
        interval: float = 300.0,
        timeout: float = 5.0,
    ) -> None:
        super().__init__(
            bundled(), TAXONOMY_PATH, desk_url, api_key, interval=interval, timeout=timeout
        )

    def parse(self, document: Any) -> Taxonomy:
        return Taxonomy(document)

    def current(self) -> Taxonomy:
        taxonomy: Taxonomy = self._current
        return taxonomy
