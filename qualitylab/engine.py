"""Quality Lab's engine: the only module that calls graph-tool-call for collection runs.

Pure Python plus graph-tool-call: no Django ORM, nothing read from settings. Everything a
caller needs is passed in, and everything returned is JSON-able (``to_dict()``).

Public API
----------
Collections
    ``parse_spec(text, *, max_bytes=DEFAULT_MAX_SPEC_BYTES) -> dict``
        JSON or YAML (``yaml.safe_load``) text or bytes to a spec dict; raises
        :class:`SpecError` (safe to show: what failed, with line/column) unless it is an
        OpenAPI 3.x or Swagger 2 document with at least one operation, at most
        ``max_bytes`` long (callers pass the QUALITYLAB_MAX_SPEC_BYTES setting).
    ``build_artifact(spec, *, progress=None, semantic_options=None) -> BuiltArtifact``
        graph-tool-call's ``build_openapi_collection_artifact`` on the dict (never a URL:
        nothing is fetched; ``allow_private_hosts=False``). ``BuiltArtifact`` carries the
        artifact, its ``artifact_hash`` (the key of what the build read: see
        :func:`artifact_hash`), the readiness report,
        ``readiness_summary`` (issue codes counted by severity), the semantic summary, the
        operation count, the spec's default server URL and the engine version.
    ``artifact_hash(spec, *, semantic_options, engine_version=GRAPH_TOOL_CALL_VERSION)``
        sha256 over the canonical JSON (sorted keys) of the parsed spec, graph-tool-call's
        version and the build options. The build is a pure function of these, so the key
        identifies the artifact as well as a hash of the artifact would, for a 13 MB spec's
        hash instead of a 160 MB artifact's; the same spec and engine version give the
        same key whenever they are built.
    ``engine_for(artifact, artifact_hash) -> LoadedCollection``
        The loaded ``ToolGraph`` plus what the selector and synthesizer need, cached per
        process by hash (LRU of :data:`ENGINE_CACHE_SIZE`); the same hash returns the same
        object.
    ``check_case_tools(case, tool_names)``
        Checks every tool name a case mentions (targets, cleanup steps, assertions) against
        the collection's tools; an unknown one raises :class:`CaseSpecError` naming the
        closest tools. Tool names are operationIds as the spec spells them (``pulls/list``).

Cases
    ``CaseSpec.from_json(data)`` validates the documented case schema (``id, mode, query,
    expected_target, expected_top_k, provided_entities, mutation_safety, timeout_sec,
    assertions``) plus ``llm_target``, ``cleanup`` (``[{"tool", "args"}]``; ``args`` may
    bind ``${<step id or tool name>.<path>}`` and ``${input.<entity>}`` from the main run),
    ``auth_session`` (which runtime session of the :class:`ExecutionContext` to use;
    default ``"default"``) and ``description``. Unknown keys are kept in ``extra``
    (the schema is additive). Errors are :class:`CaseSpecError` naming the field.
    ``run_case(collection, case, *, execution=None, rerank=None, shadow=None) -> CaseOutcome``
        Never raises: any exception inside a case becomes ``service/uncaught_server_error``
        (the exception type in evidence, never its message).

Execution
    ``ExecutionContext(base_url, allowed_hosts, auth_headers=None, sessions={},
    auth_profile=None, timeout_sec=30.0, allow_mutations=False, private_allowed=(),
    max_response_bytes=10 MiB, credential_refusals={})``. Header values are given
    at run time and are never copied into an outcome (``repr=False``). ``timeout_sec`` is a
    ceiling a case's own ``timeout_sec`` may lower; a session listed in
    ``credential_refusals`` fails at ``auth_preflight`` (``auth_header_resolution_failed``).
    Every request goes through ``core.outbound.fetch`` (HttpExecutor only builds it):
    public addresses only unless ``private_allowed``, redirects checked hop by hop and
    without credentials across origins, the body capped; a refusal is
    ``execute/network_error`` with ``blocked_by`` ``address`` / ``redirect`` /
    ``response_size`` / ``scheme`` and the refusal's evidence. An empty ``base_url`` (or
    no context at all) means the collection is not configured for execute mode.
    ``AuthProfile`` describes the collection's auth (header names, required flag), never a secret.

What each mode does (failure reasons are taxonomy codes; first failure wins)
------------------------------------------------------------------------------
search   ``retrieve_graphify(..., include_evidence=True)`` over ``expected_top_k``:
         ``retrieve/no_candidates`` (nothing returned), ``retrieve/not_retrieved``
         (expected target not in Top-K), ``retrieve/low_confidence`` (in Top-K only through
         graph expansion: no direct seed match, see :data:`LOW_CONFIDENCE_RULE`).
plan     search, then ``select_target_candidate`` (with the case's ``llm_target``), then
         ``PathSynthesizer.synthesize``. A wrong selection is ``retrieve/not_retrieved``
         when the expected target was not in Top-K, ``select_target/
         llm_target_not_in_candidates`` when the kept LLM target was outside the retrieved
         catalog, ``select_target/llm_target_mismatch`` when the selector kept the LLM's
         wrong target, ``select_target/ambiguous_target`` when the selector itself reported
         weak evidence, else ``select_target/selector_mismatch``. Synthesis failures are
         ``PlanSynthesisError.to_dict()`` as given. A required field left as a
         ``${user_input.*}`` slot (no producer, no provided entity) is
         ``synthesize/unsatisfied_field``: graph-tool-call 0.47 falls back to a user input
         slot instead of raising, and Quality Lab has no user to ask.
execute  plan, then, before any request: mutation safety (a plan with a POST/PUT/PATCH/
         DELETE step needs ``mutation_safety: "mutating"``, cleanup steps naming known
         tools, and ``allow_mutations``; else ``cleanup/cleanup_not_configured``; judged
         first, it needs no base URL), a base URL (else ``execute/base_url_not_configured``,
         Quality Lab's own reason: a configuration gap, nothing sent), the base
         URL's host in ``allowed_hosts`` (else ``execute/network_error`` with
         ``request_sent: false`` and ``blocked_by: "allowed_hosts"``: the seed files
         allowlist problems under ``network_error`` and no code fits better), and the auth
         preflight (``auth_profile_missing`` / ``auth_context_required`` /
         ``auth_header_resolution_failed``). Then the plan runs through ``PlanRunner``
         over ``HttpExecutor``; non-2xx raises (``HTTP 404: Not Found``) and the status is
         attached to the ``step.failed`` error, which ``triage.intake.runner_events.
         failure_from_runner_event`` classifies exactly as ingest does (401/403
         ``auth_failed``, 4xx, 5xx, timeouts, connection errors). Cleanup runs when a
         mutating step completed; ``cleanup/cleanup_failed`` is reported (as the case's
         failure when the main run passed, else inside ``execute.cleanup``).

Outcome sections (``CaseOutcome.to_dict()``): ``search``, ``target_selector``, ``plan``,
``execute`` (compact runner ``events``: ``dataclasses.asdict`` with argument values,
outputs and previews replaced by shapes; ``http_status``; ``calls``; ``cleanup``;
``json_paths``), ``auth_readiness``, ``learning``, ``assertions``, ``failure`` (the seed's
normalized record), ``failure_allowed``, ``latency_ms`` per stage (``search``, ``select``,
``plan``, ``execute``, ``cleanup``). No response body is stored: JSON-path assertions keep
only ``{exists, shape}``.

Extension points for learning
-----------------------------
``run_case(..., rerank=...)`` takes ``(query, retrieval_rows) -> retrieval_rows`` and runs
it between retrieval and target selection: the case then runs on the reranked rows and the
outcome records ``learning = {"rerank_applied": true}``.

``run_case(..., shadow=...)`` takes the same kind of callable (the learning review passes a
closure over graph-tool-call's ``apply_learning_suggestions(query, rows, suggestions,
mode="shadow")``, sorted best first) but changes nothing about the run: the case selects,
plans and executes on the current rows, and ``learning`` records the comparison
(``mode: "shadow"``): ``expected_target``, ``current_rank`` / ``shadow_rank`` of it in the
Top-K, ``rank_delta`` (current minus shadow: positive when learning moves it up),
``current_selected_target`` / ``shadow_selected_target`` and ``selected_target_changed``
(the selector run again on the shadow rows; ``None`` for search cases),
``current_failure_reason`` / ``shadow_failure_reason`` and ``failure_reason_changed`` (the
shadow reason is judged at retrieval and selection; when the shadow run would select the
same target the later stages are the same, when it selects another one they are unknown
and ``shadow_failure_reason`` is ``None``), the shadow Top-5 and the applied ``signals``
(suggestion id, type, target, status, boost). A case whose collection is not in shadow mode
has no comparison; its learning assertions read ``null`` and are not evaluated.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import re
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, NoReturn, cast
from urllib.parse import urlsplit

import graph_tool_call
import yaml
from graph_tool_call import ToolGraph
from graph_tool_call.core.tool import ToolSchema
from graph_tool_call.execute import http_executor as _gtc_http
from graph_tool_call.execute.http_executor import HttpExecutor
from graph_tool_call.graphify import (
    build_openapi_collection_artifact,
    retrieve_graphify,
    select_target_candidate,
)
from graph_tool_call.plan import (
    BindingError,
    PathSynthesizer,
    Plan,
    PlanRunner,
    PlanStep,
    PlanSynthesisError,
    resolve_bindings,
)

from core import outbound
from core.json_limits import DEFAULT_MAX_DEPTH, JSONTooDeep, loads_bounded
from qualitylab import assertions as case_assertions
from qualitylab.assertions import AssertionSet, CaseSpecError, gettext_noop
from triage import taxonomy
from triage.intake.runner_events import failure_from_runner_event
from triage.storable import first_unstorable_text, may_hold_unstorable_text

__all__ = [
    "DEFAULT_MAX_SPEC_BYTES",
    "ENGINE_CACHE_SIZE",
    "AuthProfile",
    "BuiltArtifact",
    "CaseOutcome",
    "CaseSpec",
    "CaseSpecError",
    "CleanupStep",
    "ExecutionContext",
    "LoadedCollection",
    "Rerank",
    "SpecError",
    "artifact_hash",
    "build_artifact",
    "check_case_tools",
    "clear_engine_cache",
    "engine_for",
    "failure_record",
    "format_size",
    "parse_spec",
    "run_case",
]

ENGINE_CACHE_SIZE = 8
GRAPH_TOOL_CALL_VERSION: str = str(graph_tool_call.__version__)
# The largest public descriptions (GitHub's 13 MB, the cloud providers') fit; callers pass
# the deployment's own limit (the QUALITYLAB_MAX_SPEC_BYTES setting).
DEFAULT_MAX_SPEC_BYTES = 64 * 1024 * 1024
LOW_CONFIDENCE_RULE = "direct match: the expected target must be a retrieval seed (seed > 0)"

Rerank = Callable[[str, list[dict[str, Any]]], list[dict[str, Any]]]
Progress = Callable[[str, float], None]

_MODES = case_assertions.MODES
_MUTATION_SAFETY = ("read_only", "mutating")
_MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_MAX_YAML_ALIASES = 200
# What aliases may add to a YAML spec once expanded (nodes plus scalar characters): shared
# parameter blocks and merge keys stay far below it, an alias bomb far above.
_MAX_YAML_ALIAS_EXPANSION = 1_000_000
_DEFAULT_TOP_K = 8
_MAX_TIMEOUT_SEC = 300.0
# Names what :func:`artifact_hash` hashes; a change to that list changes this tag.
_BUILD_KEY_FORMAT = "qualitylab-build-inputs/1"
_CASE_KEYS = frozenset(
    {
        "id",
        "mode",
        "query",
        "expected_target",
        "expected_top_k",
        "provided_entities",
        "mutation_safety",
        "timeout_sec",
        "assertions",
        "llm_target",
        "cleanup",
        "auth_session",
        "description",
    }
)
_MAX_CASE_ID_CHARS = 200
_ID_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}\Z")
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


# ======================================================================================
# Collections: parse, build, load
# ======================================================================================


class SpecError(ValueError):
    """The OpenAPI source cannot be used; the message is safe to show to the user."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


class _AliasCountingLoader(yaml.SafeLoader):
    """SafeLoader that refuses alias bombs ("billion laughs") before they expand.

    PyYAML builds an alias as a second reference to the same node, so a document of a few
    hundred bytes can stand for billions of nodes, which only materialize when the spec is
    copied or serialized. The composed node graph is measured first (see
    :func:`_check_yaml_expansion`); nothing is constructed from a document that fails.
    """

    alias_count = 0
    max_depth = DEFAULT_MAX_DEPTH

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > _MAX_YAML_ALIASES:
                raise SpecError(f"the YAML uses more than {_MAX_YAML_ALIASES} aliases")
        return super().compose_node(parent, index)

    # The scanner keeps per-level state that it rescans for every token, so nesting is
    # bounded while scanning, before the cost of a deep document can grow with its square.
    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= self.max_depth:
            raise SpecError(f"the YAML is nested deeper than {self.max_depth} levels")
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        if self.indent < column and len(self.indents) >= self.max_depth:
            raise SpecError(f"the YAML is nested deeper than {self.max_depth} levels")
        return bool(super().add_indent(column))

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        _check_yaml_expansion(node, max_depth=self.max_depth)
        return self.construct_document(node)


def _yaml_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_yaml_expansion(root: yaml.Node, *, max_depth: int) -> None:
    """Refuse a composed YAML document whose aliases expand it by more than
    :data:`_MAX_YAML_ALIAS_EXPANSION` (nodes plus scalar characters), that refers to itself,
    or that nests deeper than ``max_depth``. Iterative, and each node is measured once, so
    the cost follows the text's size, never the expanded size."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded weight, depth)
    in_progress: set[int] = set()
    distinct_weight = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            in_progress.discard(key)
            children = _yaml_children(node)
            if isinstance(node, yaml.ScalarNode):
                own = 1 + len(node.value)
                weight, depth = own, 0
            else:
                own = 1
                weight = own + sum(measured[id(child)][0] for child in children)
                depth = 1 + max((measured[id(child)][1] for child in children), default=0)
            distinct_weight += own
            if depth > max_depth:
                raise SpecError(f"the YAML is nested deeper than {max_depth} levels")
            if weight > distinct_weight + _MAX_YAML_ALIAS_EXPANSION:
                raise SpecError(
                    "the YAML's aliases expand it by more than "
                    f"{_MAX_YAML_ALIAS_EXPANSION:,} nodes and characters"
                )
            measured[key] = (weight, depth)
            continue
        if key in measured:
            continue
        if key in in_progress:
            raise SpecError("the YAML has an alias inside the node it refers to")
        in_progress.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _yaml_children(node) if id(child) not in measured)


def format_size(size: int) -> str:
    """A byte count for people: ``64 MiB``, ``13.0 MiB``, ``900 KiB``."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= scale:
            whole, rest = divmod(size, scale)
            return f"{whole} {unit}" if not rest else f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def parse_spec(
    text: str | bytes,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_bytes: int = DEFAULT_MAX_SPEC_BYTES,
) -> dict[str, Any]:
    """Parse JSON or YAML into an OpenAPI 3.x / Swagger 2 spec dict, or raise SpecError.

    Arrays and objects nested deeper than ``max_depth`` levels are refused before they are
    built, and so are YAML aliases that would expand the document (see
    :func:`_check_yaml_expansion`). ``max_bytes`` is the deployment's size limit; callers
    that read a file or an upload check its size before reading it, this is the last line
    for text already in memory.
    """
    too_large = f"the spec is larger than the {format_size(max_bytes)} limit"
    if isinstance(text, bytes):
        if len(text) > max_bytes:
            raise SpecError(too_large)
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SpecError(f"the spec is not UTF-8 text (byte {exc.start})") from None
    if len(text) > max_bytes:
        raise SpecError(too_large)
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        raise SpecError("the spec is empty")
    document: Any
    if stripped[0] in "{[":
        try:
            document = loads_bounded(stripped, max_depth=max_depth)
        except JSONTooDeep as exc:
            raise SpecError(f"the JSON is {exc}") from None
        except json.JSONDecodeError as exc:
            raise SpecError(
                f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                line=exc.lineno,
                column=exc.colno,
            ) from None
        spec = document  # what json.loads gives is JSON already
    else:
        spec = _json_safe(_load_yaml(text, max_depth=max_depth))
    _validate_openapi(spec)
    _refuse_unstorable_text(spec)
    return cast(dict[str, Any], spec)


def _refuse_unstorable_text(spec: Any) -> None:
    # Its operations become tool names, readiness and results in PostgreSQL, which cannot
    # hold these characters; a spec is fixed at its source rather than changed here.
    if not may_hold_unstorable_text(json.dumps(spec, ensure_ascii=False)):
        return
    found = first_unstorable_text(spec, path="spec")
    if found is not None:
        path, what = found
        raise SpecError(f"the spec holds {what} at {path[:200]}; the database cannot store it")


def _load_yaml(text: str, *, max_depth: int) -> Any:
    try:
        # The reader checks the characters as it is made: a NUL byte raises here.
        loader = _AliasCountingLoader(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {exc}") from None
    loader.max_depth = max_depth
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if mark is None:
            raise SpecError(f"invalid YAML: {problem}") from None
        raise SpecError(
            f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}",
            line=mark.line + 1,
            column=mark.column + 1,
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {type(exc).__name__}") from None
    except RecursionError:  # the composer recursed past the stack before any check
        raise SpecError(f"the YAML is nested deeper than {max_depth} levels") from None
    except SpecError:
        raise
    except ValueError as exc:
        # A plain scalar YAML turns into a Python value that cannot exist: an integer of
        # more than 4,300 digits (Python's limit), a date such as 2020-13-45.
        if "digits" in str(exc):
            raise SpecError("invalid YAML: a number has more than 4,300 digits") from None
        raise SpecError(f"invalid YAML: a value cannot be read ({exc})") from None
    finally:
        loader.dispose()


def _json_safe(document: Any) -> Any:
    # YAML turns unquoted dates into date objects and status codes into int keys; the
    # artifact and the hash need plain JSON.
    try:
        return json.loads(json.dumps(document, ensure_ascii=False, default=str))
    except (TypeError, ValueError, RecursionError):
        raise SpecError("the spec cannot be represented as JSON") from None


def _validate_openapi(spec: Any) -> None:
    not_openapi = "not an OpenAPI 3.x or Swagger 2 document"
    if not isinstance(spec, dict):
        kind = "a list" if isinstance(spec, list) else type(spec).__name__
        raise SpecError(f"{not_openapi}: the top level is {kind}, not an object")
    openapi, swagger = spec.get("openapi"), spec.get("swagger")
    if openapi is not None:
        if not str(openapi).startswith("3."):
            raise SpecError(f"{not_openapi}: 'openapi' is {str(openapi)[:20]!r}, not 3.x")
    elif swagger is not None:
        if str(swagger) not in ("2.0", "2"):
            raise SpecError(f"{not_openapi}: 'swagger' is {str(swagger)[:20]!r}, not 2.0")
    else:
        raise SpecError(f"{not_openapi}: it has no 'openapi: 3.x' or 'swagger: \"2.0\"' field")
    paths = spec.get("paths")
    if not isinstance(paths, dict) or not paths:
        raise SpecError(f"{not_openapi}: it has no 'paths'")
    methods = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
    if not any(
        isinstance(item, dict) and any(isinstance(item.get(m), dict) for m in methods)
        for item in paths.values()
    ):
        raise SpecError("the spec has paths but no operations (get, post, ...) under them")


@dataclass(frozen=True)
class BuiltArtifact:
    """A built collection artifact and the facts a Collection row stores about it."""

    artifact: dict[str, Any] = field(repr=False)
    artifact_hash: str
    readiness: dict[str, Any] = field(repr=False)
    readiness_summary: dict[str, dict[str, int]]
    semantic_summary: dict[str, Any] = field(repr=False)
    operation_count: int
    tool_names: tuple[str, ...]
    default_base_url: str | None
    graph_tool_call_version: str


def build_artifact(
    spec: dict[str, Any],
    *,
    progress: Progress | None = None,
    semantic_options: dict[str, Any] | None = None,
    parsed: bool = False,
) -> BuiltArtifact:
    """Build the collection artifact for ``spec`` (a dict: nothing is ever fetched).

    ``parsed=True`` says ``spec`` is :func:`parse_spec`'s fresh result, already plain JSON
    and checked, which the build may consume: no copy of it is made (a big spec's copy
    costs seconds and a hundred MB).
    """
    report = progress or (lambda _stage, _fraction: None)
    report("validate", 0.0)
    if not parsed:
        # A JSON round trip: plain JSON for the engine, and a copy the build may change.
        spec = cast(dict[str, Any], _json_safe(spec))
        _validate_openapi(spec)
    # Before the build: with ``parsed=True`` the build may change the spec it reads.
    key = artifact_hash(spec, semantic_options=semantic_options)
    report("build", 0.1)
    try:
        artifact = build_openapi_collection_artifact(
            spec,
            allow_private_hosts=False,
            semantic_options=semantic_options,
        )
    except SpecError:
        raise
    except Exception as exc:  # the engine's own errors, surfaced as a spec problem
        detail = str(exc).splitlines()[0][:200] if str(exc) else ""
        suffix = f": {detail}" if detail else ""
        raise SpecError(
            f"graph-tool-call could not build the collection ({type(exc).__name__}{suffix})"
        ) from None
    report("summarize", 0.9)
    readiness = cast(dict[str, Any], artifact.get("readiness_report") or {})
    manifest = cast(dict[str, Any], artifact.get("source_snapshot_manifest") or {})
    built = BuiltArtifact(
        artifact=artifact,
        artifact_hash=key,
        readiness=readiness,
        readiness_summary=_issues_by_severity(readiness),
        semantic_summary=cast(dict[str, Any], artifact.get("semantic_summary") or {}),
        operation_count=int(manifest.get("operation_count") or len(artifact.get("tools") or {})),
        tool_names=tuple(sorted(str(name) for name in artifact.get("tools") or {})),
        default_base_url=_default_base_url(artifact),
        graph_tool_call_version=GRAPH_TOOL_CALL_VERSION,
    )
    report("done", 1.0)
    return built


def artifact_hash(
    spec: Mapping[str, Any],
    *,
    semantic_options: Mapping[str, Any] | None,
    engine_version: str = GRAPH_TOOL_CALL_VERSION,
) -> str:
    """The key of a build: sha256 of its inputs' canonical JSON (spec, engine, options).

    The artifact is a pure function of the spec, graph-tool-call's version and the build
    options, so this names it as well as a hash of the artifact itself; the spec is a
    tenth of the artifact's size (GitHub's: 13 MB against 160 MB). ``spec`` is plain JSON
    (:func:`parse_spec`'s result or its ``_json_safe`` copy).
    """
    inputs = {
        "format": _BUILD_KEY_FORMAT,
        "graph_tool_call": engine_version,
        "options": {"allow_private_hosts": False, "semantic_options": semantic_options},
        "spec": spec,
    }
    # ensure_ascii: a lone surrogate becomes an escape instead of failing to encode.
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _issues_by_severity(readiness: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    summary: dict[str, dict[str, int]] = {}
    for issue in readiness.get("issues") or []:
        if not isinstance(issue, Mapping):
            continue
        severity = str(issue.get("severity") or "unknown")
        code = str(issue.get("code") or "unknown")
        counts = summary.setdefault(severity, {})
        counts[code] = counts.get(code, 0) + 1
    return {severity: dict(sorted(codes.items())) for severity, codes in sorted(summary.items())}


def _default_base_url(artifact: Mapping[str, Any]) -> str | None:
    for tool in (artifact.get("tools") or {}).values():
        url = ((tool or {}).get("metadata") or {}).get("base_url")
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            return url
    return None


@dataclass(eq=False)
class LoadedCollection:
    """A collection artifact loaded into graph-tool-call, shared by the cases of a worker."""

    artifact_hash: str
    graph: ToolGraph = field(repr=False)
    tools: dict[str, dict[str, Any]] = field(repr=False)
    tool_schemas: dict[str, ToolSchema] = field(repr=False)
    synthesizer: PathSynthesizer = field(repr=False)
    graph_tool_call_version: str
    _synthesis_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def tool_names(self) -> list[str]:
        return sorted(self.tools)

    def check_case(self, case: CaseSpec) -> None:
        """Raise CaseSpecError when the case names a tool this collection does not have."""
        check_case_tools(case, self.tools)

    def synthesize(self, *, target: str, entities: Mapping[str, Any], goal: str) -> Plan:
        # PathSynthesizer keeps per-call diagnostics on the instance: one call at a time.
        with self._synthesis_lock:
            return self.synthesizer.synthesize(target=target, entities=dict(entities), goal=goal)


_engine_cache: OrderedDict[str, LoadedCollection] = OrderedDict()
_engine_cache_lock = threading.Lock()


def engine_for(artifact: Mapping[str, Any], artifact_hash: str) -> LoadedCollection:
    """The loaded collection for ``artifact_hash``, loading ``artifact`` on a cache miss."""
    with _engine_cache_lock:
        cached = _engine_cache.get(artifact_hash)
        if cached is not None:
            _engine_cache.move_to_end(artifact_hash)
            return cached
        loaded = _load_collection(artifact, artifact_hash)
        _engine_cache[artifact_hash] = loaded
        while len(_engine_cache) > ENGINE_CACHE_SIZE:
            _engine_cache.popitem(last=False)
        return loaded


def clear_engine_cache() -> None:
    """Forget every loaded collection (tests; a worker never needs it)."""
    with _engine_cache_lock:
        _engine_cache.clear()


def _load_collection(artifact: Mapping[str, Any], artifact_hash: str) -> LoadedCollection:
    # ToolGraph.load is the documented way back from an artifact and takes a path.
    with tempfile.TemporaryDirectory(prefix="qualitylab-") as directory:
        path = Path(directory) / "collection.json"
        path.write_text(json.dumps(artifact, ensure_ascii=False, default=str), encoding="utf-8")
        graph = ToolGraph.load(path)
    tools = {
        str(name): cast(dict[str, Any], tool)
        for name, tool in (artifact.get("tools") or {}).items()
        if isinstance(tool, dict)
    }
    synthesizer = PathSynthesizer({"graph": artifact.get("graph") or {}, "tools": tools})
    retrieve_graphify(graph, "warm up", top_k=1)  # builds the BM25 index once, up front
    return LoadedCollection(
        artifact_hash=artifact_hash,
        graph=graph,
        tools=tools,
        tool_schemas=graph.tools,
        synthesizer=synthesizer,
        graph_tool_call_version=GRAPH_TOOL_CALL_VERSION,
    )


# ======================================================================================
# Cases and execution settings
# ======================================================================================


@dataclass(frozen=True)
class CleanupStep:
    """One cleanup call of a mutating case; ``args`` may bind the main run's outputs."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CaseSpec:
    """A Quality Lab case in the documented schema (plus llm_target, cleanup, session)."""

    id: str
    mode: str
    query: str
    expected_target: str | None = None
    expected_top_k: int = _DEFAULT_TOP_K
    provided_entities: Mapping[str, Any] = field(default_factory=dict)
    mutation_safety: str = "read_only"
    timeout_sec: float | None = None
    assertions: AssertionSet = field(default_factory=AssertionSet)
    llm_target: str | None = None
    cleanup: tuple[CleanupStep, ...] = ()
    auth_session: str | None = None
    description: str = ""
    raw_assertions: Any = field(default=None, repr=False, compare=False)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: Any) -> CaseSpec:
        """Validate one case; raise :class:`CaseSpecError` naming the first bad field."""
        if not isinstance(data, Mapping):
            raise CaseSpecError("case", gettext_noop("must be a JSON object"))
        case_id = data.get("id")
        if not isinstance(case_id, str) or not case_id:
            raise CaseSpecError(
                "id", gettext_noop("is required: letters, digits, '_.:-', at most 200")
            )
        if len(case_id) > _MAX_CASE_ID_CHARS:
            raise CaseSpecError(
                "id",
                gettext_noop("is %(length)d characters long; the limit is %(limit)d"),
                {"length": len(case_id), "limit": _MAX_CASE_ID_CHARS},
            )
        if not _ID_RE.match(case_id):
            raise CaseSpecError("id", gettext_noop("must be letters, digits and '_.:-' only"))
        mode = data.get("mode")
        if mode not in _MODES:
            raise CaseSpecError(
                "mode", gettext_noop("must be one of %(choices)s"), {"choices": ", ".join(_MODES)}
            )
        query = data.get("query")
        if not isinstance(query, str) or not query.strip() or len(query) > 2000:
            raise CaseSpecError(
                "query", gettext_noop("is required (non-empty text, at most 2000 characters)")
            )
        expected_target = _optional_tool(data, "expected_target")
        llm_target = _optional_tool(data, "llm_target")
        top_k = data.get("expected_top_k", _DEFAULT_TOP_K)
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= 50:
            raise CaseSpecError("expected_top_k", gettext_noop("must be an integer from 1 to 50"))
        entities = data.get("provided_entities") or {}
        if not isinstance(entities, Mapping) or not all(isinstance(k, str) for k in entities):
            raise CaseSpecError(
                "provided_entities", gettext_noop("must be an object of field name -> value")
            )
        mutation_safety = data.get("mutation_safety", "read_only")
        if mutation_safety not in _MUTATION_SAFETY:
            raise CaseSpecError(
                "mutation_safety",
                gettext_noop("must be one of %(choices)s"),
                {"choices": ", ".join(_MUTATION_SAFETY)},
            )
        timeout_sec = data.get("timeout_sec")
        if timeout_sec is not None and (
            isinstance(timeout_sec, bool)
            or not isinstance(timeout_sec, (int, float))
            or not 0 < timeout_sec <= _MAX_TIMEOUT_SEC
        ):
            raise CaseSpecError(
                "timeout_sec", gettext_noop("must be a number of seconds, 0 < t <= 300")
            )
        cleanup = _cleanup_steps(data.get("cleanup"), mode=str(mode))
        auth_session = data.get("auth_session")
        if auth_session is not None and (
            not isinstance(auth_session, str) or not _ID_RE.match(auth_session)
        ):
            raise CaseSpecError("auth_session", gettext_noop("must be a session name"))
        description = data.get("description") or ""
        if not isinstance(description, str):
            raise CaseSpecError("description", gettext_noop("must be text"))
        parsed = case_assertions.parse_assertions(
            data.get("assertions"), mode=str(mode), expected_top_k=top_k
        )
        # graph-tool-call's documented learning block: {"learning": {"mode": "shadow",
        # "expected_target": ..., "assertions": {...}}}; kept in extra, its checks added.
        parsed = case_assertions.add_learning_block(parsed, data.get("learning"), mode=str(mode))
        return cls(
            id=case_id,
            mode=str(mode),
            query=query,
            expected_target=expected_target,
            expected_top_k=top_k,
            provided_entities=dict(entities),
            mutation_safety=str(mutation_safety),
            timeout_sec=float(timeout_sec) if timeout_sec is not None else None,
            assertions=parsed,
            llm_target=llm_target,
            cleanup=cleanup,
            auth_session=auth_session,
            description=description,
            raw_assertions=copy.deepcopy(data.get("assertions")),
            extra={
                key: copy.deepcopy(value) for key, value in data.items() if key not in _CASE_KEYS
            },
        )

    def tool_references(self) -> list[tuple[str, str]]:
        """Every tool name the case mentions, with the field that holds it
        (``expected_target``, ``cleanup[0].tool``, ``assertions[2].tool``...)."""
        references: list[tuple[str, str]] = []
        for where, name in (
            ("expected_target", self.expected_target),
            ("llm_target", self.llm_target),
        ):
            if name is not None:
                references.append((where, name))
        references += [(f"cleanup[{i}].tool", step.tool) for i, step in enumerate(self.cleanup)]
        raw = self.raw_assertions
        if isinstance(raw, list):
            for index, item in enumerate(raw):
                if not isinstance(item, Mapping):
                    continue
                key = {"top_k_contains": "tool", "plan_contains_tool": "tool",
                       "selected_target": "equals"}.get(str(item.get("type")))  # fmt: skip
                if key is not None and isinstance(item.get(key), str):
                    references.append((f"assertions[{index}].{key}", item[key]))
        elif isinstance(raw, Mapping) and isinstance(raw.get("selected_target"), str):
            references.append(("assertions.selected_target", raw["selected_target"]))
        learning = self.extra.get("learning")
        if isinstance(learning, Mapping) and isinstance(learning.get("expected_target"), str):
            references.append(("learning.expected_target", learning["expected_target"]))
        return references

    def to_json(self) -> dict[str, Any]:
        """The case in the documented schema again (unknown keys included)."""
        data: dict[str, Any] = {
            **copy.deepcopy(dict(self.extra)),
            "id": self.id,
            "mode": self.mode,
            "query": self.query,
            "expected_target": self.expected_target,
            "expected_top_k": self.expected_top_k,
            "provided_entities": copy.deepcopy(dict(self.provided_entities)),
            "mutation_safety": self.mutation_safety,
            "timeout_sec": self.timeout_sec,
            "assertions": copy.deepcopy(self.raw_assertions),
        }
        if self.llm_target is not None:
            data["llm_target"] = self.llm_target
        if self.cleanup:
            data["cleanup"] = [
                {"tool": step.tool, "args": copy.deepcopy(dict(step.args))} for step in self.cleanup
            ]
        if self.auth_session is not None:
            data["auth_session"] = self.auth_session
        if self.description:
            data["description"] = self.description
        return data


def check_case_tools(case: CaseSpec, tool_names: Collection[str]) -> None:
    """Raise :class:`CaseSpecError` when the case names a tool the collection does not have.

    Any name the collection has is valid, whatever characters it uses (``pulls/list``); an
    unknown one is named with the collection's closest tools (difflib).
    """
    known = tool_names if isinstance(tool_names, (set, frozenset, dict)) else set(tool_names)
    for where, name in case.tool_references():
        if name in known:
            continue
        closest = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
        if closest:
            raise CaseSpecError(
                where,
                gettext_noop("%(name)r is not an operation of this collection; the closest: "
                             "%(closest)s"),
                {"name": name, "closest": ", ".join(closest)},
            )  # fmt: skip
        raise CaseSpecError(
            where,
            gettext_noop("%(name)r is not an operation of this collection; none of its "
                         "%(count)d operations has a similar name"),
            {"name": name, "count": len(known)},
        )  # fmt: skip


def _optional_tool(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    return case_assertions.checked_tool_name(value, key)


def _cleanup_steps(value: Any, *, mode: str) -> tuple[CleanupStep, ...]:
    if value is None or value == []:
        return ()
    if mode != "execute":
        raise CaseSpecError("cleanup", gettext_noop("only execute cases run cleanup steps"))
    if not isinstance(value, list) or len(value) > 10:
        raise CaseSpecError(
            "cleanup", gettext_noop("must be a list of at most 10 {tool, args} steps")
        )
    steps: list[CleanupStep] = []
    for index, item in enumerate(value):
        where = f"cleanup[{index}]"
        if not isinstance(item, Mapping):
            raise CaseSpecError(where, gettext_noop("must be an object with 'tool' and 'args'"))
        tool = case_assertions.checked_tool_name(item.get("tool"), f"{where}.tool")
        args = item.get("args") or {}
        if not isinstance(args, Mapping) or not all(isinstance(k, str) for k in args):
            raise CaseSpecError(
                f"{where}.args", gettext_noop("must be an object of argument name -> value")
            )
        extra = sorted(str(key) for key in item if key not in ("tool", "args"))
        if extra:
            raise CaseSpecError(
                f"{where}.{extra[0]}", gettext_noop("is not a field of a cleanup step")
            )
        steps.append(CleanupStep(tool=tool, args=copy.deepcopy(dict(args))))
    return tuple(steps)


@dataclass(frozen=True)
class AuthProfile:
    """A collection's auth profile: which headers carry the credential; never a secret."""

    header_names: tuple[str, ...] = ("Authorization",)
    required: bool = False  # the collection policy demands auth even where the spec does not

    def __post_init__(self) -> None:
        if not self.header_names or not all(
            _HEADER_NAME_RE.match(name) for name in self.header_names
        ):
            raise ValueError("an auth profile names at least one valid header")


@dataclass(frozen=True)
class ExecutionContext:
    """Where and as whom execute cases run. Header values are never stored or shown."""

    base_url: str  # empty: the collection has none, execute cases are not configured
    allowed_hosts: tuple[str, ...] | frozenset[str]
    auth_headers: Mapping[str, str] | None = field(default=None, repr=False)
    sessions: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False)
    auth_profile: AuthProfile | None = None
    timeout_sec: float = 30.0  # a ceiling: a case's timeout_sec may lower it, not raise it
    allow_mutations: bool = False
    # Non-public hosts, addresses and networks an administrator allows, on every port or
    # as host:port on one (core.outbound.PrivateAllowance).
    private_allowed: tuple[str, ...] = ()
    max_response_bytes: int = 10 * 1024 * 1024
    # Sessions whose credential variable the desk refused to read: session -> why.
    credential_refusals: Mapping[str, str] = field(default_factory=dict)

    def session_headers(self, name: str | None) -> dict[str, str] | None:
        """The headers of a runtime session; ``None`` when there is no such context."""
        headers = self.auth_headers if name in (None, "default") else self.sessions.get(str(name))
        if not headers:
            return None
        return {str(key): str(value) for key, value in headers.items()}


# ======================================================================================
# Outcome
# ======================================================================================

_STAGES_TIMED = ("search", "select", "plan", "execute", "cleanup")


@dataclass
class CaseOutcome:
    """The result of one case; ``to_dict()`` is what a CaseResult row stores."""

    case_id: str
    mode: str
    status: str = "failed"
    failure: dict[str, Any] | None = None
    failure_allowed: bool = False
    search: dict[str, Any] | None = None
    target_selector: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    execute: dict[str, Any] | None = None
    auth_readiness: dict[str, Any] | None = None
    learning: dict[str, Any] | None = None
    assertions: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: dict[str, float | None] = field(
        default_factory=lambda: dict.fromkeys(_STAGES_TIMED)
    )
    graph_tool_call_version: str = GRAPH_TOOL_CALL_VERSION
    taxonomy_version: str = taxonomy.TAXONOMY_VERSION

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return cast(dict[str, Any], _json_safe_outcome(dataclasses.asdict(self)))


def _json_safe_outcome(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def _learning_expected_target(case: CaseSpec) -> str | None:
    """The target a shadow comparison ranks: the case's documented ``learning`` block may
    name its own (graph-tool-call's Quality Lab docs), else the case's expected target."""
    block = case.extra.get("learning")
    if isinstance(block, Mapping) and isinstance(block.get("expected_target"), str):
        return str(block["expected_target"]) or case.expected_target
    return case.expected_target


def failure_record(
    stage: str,
    reason: str,
    message: str,
    *,
    tool: str | None = None,
    plan_id: str | None = None,
    step_id: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    execution_state: str | None = None,
) -> dict[str, Any]:
    """The seed's normalized failure record, with retryable/operator action from taxonomy."""
    info = taxonomy.reason_info(reason)
    return {
        "stage": stage,
        "reason": reason,
        "message": message[:500],
        "tool": tool,
        "plan_id": plan_id,
        "step_id": step_id,
        "retryable": info.retryable if info else False,
        "operator_action": info.operator_action if info else None,
        "execution_state": execution_state or (info.default_execution_state if info else None),
        "evidence": dict(evidence or {}),
    }


# ======================================================================================
# Running a case
# ======================================================================================


def run_case(
    collection: LoadedCollection,
    case: CaseSpec,
    *,
    execution: ExecutionContext | None = None,
    rerank: Rerank | None = None,
    shadow: Rerank | None = None,
) -> CaseOutcome:
    """Run one case through its mode's stages. Never raises (see the module docstring)."""
    run = _CaseRun(collection, case, execution, rerank, shadow)
    try:
        run.run()
    except Exception as exc:  # a case must never crash its run
        if _must_propagate(exc):
            raise
        run.fail_uncaught(exc)
    try:
        run.compare_shadow()
    except Exception as exc:  # the shadow comparison never decides a case either
        if _must_propagate(exc):
            raise
        run.outcome.learning = {
            **(run.outcome.learning or {}),
            "mode": "shadow",
            "error": f"{type(exc).__name__} while comparing the shadow ranking",
        }
    try:
        run.finish()
    except Exception as exc:  # the same promise for assertion evaluation
        if _must_propagate(exc):
            raise
        run.fail_uncaught(exc)
        run.outcome.status = "failed"
    return run.outcome


# A worker's time limits arrive as Exception subclasses (Celery's SoftTimeLimitExceeded);
# turning them into a case failure would keep a task running past its limit.
_PROPAGATED_EXCEPTIONS = frozenset({"SoftTimeLimitExceeded", "TimeLimitExceeded", "Terminated"})


def _must_propagate(exc: BaseException) -> bool:
    return any(cls.__name__ in _PROPAGATED_EXCEPTIONS for cls in type(exc).__mro__)


class _Stop(Exception):
    """Ends the pipeline after a stage recorded the case's failure."""


class _CaseRun:
    def __init__(
        self,
        collection: LoadedCollection,
        case: CaseSpec,
        execution: ExecutionContext | None,
        rerank: Rerank | None,
        shadow: Rerank | None = None,
    ) -> None:
        self.collection = collection
        self.case = case
        self.execution = execution
        self.rerank = rerank
        self.shadow = shadow
        self.current_rows: list[dict[str, Any]] | None = None
        self.outcome = CaseOutcome(case_id=case.id, mode=case.mode)
        self.stage = "search"

    # -- bookkeeping -----------------------------------------------------------------

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        self.stage = stage
        started = time.perf_counter()
        try:
            yield
        finally:
            self.outcome.latency_ms[stage] = round((time.perf_counter() - started) * 1000, 3)

    def fail(self, failure: dict[str, Any]) -> NoReturn:
        if self.outcome.failure is None:
            self.outcome.failure = failure
        raise _Stop

    def fail_uncaught(self, exc: BaseException) -> None:
        if isinstance(exc, _Stop):
            return
        # The message of an arbitrary exception may quote a header, a body or a token.
        self.outcome.failure = failure_record(
            "service",
            "uncaught_server_error",
            f"{type(exc).__name__} raised during the {self.stage} stage",
            evidence={"exception_type": type(exc).__name__, "during_stage": self.stage},
        )

    def finish(self) -> None:
        results = case_assertions.evaluate(self.case.assertions, self.outcome)
        self.outcome.assertions = results
        status, allowed = case_assertions.decide(
            self.case.assertions, self.outcome.failure, results
        )
        self.outcome.status = status
        self.outcome.failure_allowed = allowed

    # -- pipeline --------------------------------------------------------------------

    def run(self) -> None:
        try:
            rows = self.search()
            if self.case.mode == "search":
                self.check_search(rows)
                return
            selection = self.select(rows)
            selection_failure = self.selection_failure(rows, selection)
            plan = self.synthesize(selection, stop=selection_failure is None)
            if selection_failure is not None:
                self.fail(selection_failure)
            if plan is None:  # synthesize() has recorded the failure already
                return
            self.check_slots(plan)
            if self.case.mode == "execute":
                self.execute(plan)
        except _Stop:
            return

    # -- learning: the shadow comparison ---------------------------------------------

    def compare_shadow(self) -> None:
        """Record what the shadow ranking would change (see "Extension points"). Runs after
        the case, so a failing shadow callable can never change the case's own outcome."""
        if self.shadow is None or self.current_rows is None:
            return
        case, outcome = self.case, self.outcome
        # Copies: the shadow ranking must not touch the rows the case ran on.
        shadow_rows = list(self.shadow(case.query, [dict(row) for row in self.current_rows]))[
            : case.expected_top_k
        ]
        expected = _learning_expected_target(case)
        current_names = [str(row.get("name")) for row in self.current_rows]
        shadow_names = [str(row.get("name")) for row in shadow_rows]
        current_rank = current_names.index(expected) + 1 if expected in current_names else None
        shadow_rank = shadow_names.index(expected) + 1 if expected in shadow_names else None
        current_reason = (outcome.failure or {}).get("reason")
        current_selected: str | None = None
        shadow_selected: str | None = None
        target_changed: bool | None = None
        if case.mode == "search":
            shadow_reason = self.search_failure_reason(shadow_rows)
            if current_reason not in (None, "no_candidates", "not_retrieved", "low_confidence"):
                shadow_reason = current_reason
        else:
            current_selected = (outcome.target_selector or {}).get("selected_target")
            selection = select_target_candidate(
                case.query,
                shadow_names,
                self.collection.tools,
                retrieval_results=shadow_rows,
                llm_target=case.llm_target,
            )
            shadow_selected = str(selection.get("selected_target") or "") or None
            target_changed = shadow_selected != current_selected
            failure = self.selection_failure(shadow_rows, selection)
            if failure is not None:
                shadow_reason = failure["reason"]
            elif not target_changed:
                shadow_reason = current_reason  # the same target: the same later stages
            else:
                shadow_reason = None  # another target: what would follow is unknown
        outcome.learning = {
            **(outcome.learning or {}),
            "mode": "shadow",
            "expected_target": expected,
            "current_rank": current_rank,
            "shadow_rank": shadow_rank,
            "rank_delta": current_rank - shadow_rank if current_rank and shadow_rank else None,
            "current_selected_target": current_selected,
            "shadow_selected_target": shadow_selected,
            "selected_target_changed": target_changed,
            "current_failure_reason": current_reason,
            "shadow_failure_reason": shadow_reason,
            "failure_reason_changed": shadow_reason != current_reason,
            "shadow_top": shadow_names[:5],
            "signals": [
                {
                    key: row["learning"].get(key)
                    for key in ("suggestion_id", "suggestion_type", "target", "status", "score")
                }
                for row in shadow_rows
                if isinstance(row.get("learning"), Mapping)
            ],
        }

    def search_failure_reason(self, rows: list[dict[str, Any]]) -> str | None:
        """What check_search would say about these rows, without failing the case."""
        expected = self.case.expected_target
        if not rows:
            return "no_candidates"
        if expected is None:
            return None
        names = [str(row.get("name")) for row in rows]
        if expected not in names:
            return "not_retrieved"
        breakdown = rows[names.index(expected)].get("score_breakdown") or {}
        return "low_confidence" if float(breakdown.get("seed") or 0.0) <= 0.0 else None

    # -- search ----------------------------------------------------------------------

    def search(self) -> list[dict[str, Any]]:
        case = self.case
        with self.timed("search"):
            response = retrieve_graphify(
                self.collection.graph, case.query, top_k=case.expected_top_k, include_evidence=True
            )
            rows = [
                {key: value for key, value in row.items() if key != "tool"}
                for row in response.get("results") or []
                if isinstance(row, dict)
            ]
            if self.rerank is not None:
                rows = list(self.rerank(case.query, rows))[: case.expected_top_k]
                self.outcome.learning = {"rerank_applied": True}
        self.current_rows = rows
        names = [str(row.get("name")) for row in rows]
        hit_rank = names.index(case.expected_target) + 1 if case.expected_target in names else None
        scores = [float(row.get("score") or 0.0) for row in rows]
        self.outcome.search = {
            "query": case.query,
            "top_k": case.expected_top_k,
            "expected_target": case.expected_target,
            "hit": None if case.expected_target is None else hit_rank is not None,
            "hit_rank": hit_rank,
            "results": [_compact_row(rank, row) for rank, row in enumerate(rows, start=1)],
            "seeds": list((response.get("stats") or {}).get("seeds") or []),
            "intent": dict(response.get("intent") or {}),
            "score_distribution": _score_distribution(scores),
        }
        return rows

    def check_search(self, rows: list[dict[str, Any]]) -> None:
        case = self.case
        if not rows:
            self.fail(self.no_candidates())
        if case.expected_target is None:
            return
        names = [str(row.get("name")) for row in rows]
        if case.expected_target not in names:
            self.fail(self.not_retrieved(names))
        hit = rows[names.index(case.expected_target)]
        breakdown = hit.get("score_breakdown") or {}
        if float(breakdown.get("seed") or 0.0) <= 0.0:
            self.fail(
                failure_record(
                    "retrieve",
                    "low_confidence",
                    f"{case.expected_target} is in the Top-{case.expected_top_k} only through "
                    "graph expansion, without a direct match",
                    tool=case.expected_target,
                    evidence={
                        "expected_target": case.expected_target,
                        "hit_rank": names.index(case.expected_target) + 1,
                        "score_breakdown": dict(breakdown),
                        "expanded_from": hit.get("expanded_from"),
                        "score_distribution": self.outcome.search["score_distribution"]
                        if self.outcome.search
                        else {},
                        "threshold": LOW_CONFIDENCE_RULE,
                    },
                )
            )

    def no_candidates(self) -> dict[str, Any]:
        return failure_record(
            "retrieve",
            "no_candidates",
            "retrieval returned no tool for the query",
            evidence={"query": self.case.query, "filter": None, "top_k": self.case.expected_top_k},
        )

    def not_retrieved(self, names: list[str]) -> dict[str, Any]:
        case = self.case
        return failure_record(
            "retrieve",
            "not_retrieved",
            f"{case.expected_target} is not in the Top-{case.expected_top_k}",
            tool=case.expected_target,
            evidence={"expected_target": case.expected_target, "returned_tool_names": names},
        )

    # -- target selection ------------------------------------------------------------

    def select(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        case = self.case
        with self.timed("select"):
            selection = select_target_candidate(
                case.query,
                [str(row.get("name")) for row in rows],
                self.collection.tools,
                retrieval_results=rows,
                llm_target=case.llm_target,
            )
        self.outcome.target_selector = _compact_selection(selection, case)
        return selection

    def selection_failure(
        self, rows: list[dict[str, Any]], selection: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        case = self.case
        selected = str(selection.get("selected_target") or "")
        names = [str(row.get("name")) for row in rows]
        if not selected or selected not in self.collection.tools:
            return self.no_candidates() if not names else self.not_retrieved(names)
        expected = case.expected_target
        if expected is None or selected == expected:
            return None
        if expected not in names:
            return self.not_retrieved(names)
        llm = case.llm_target
        overrode = bool(selection.get("overrode_llm"))
        evidence: dict[str, Any] = {
            "expected_target": expected,
            "selected_target": selected,
            "llm_target": llm,
            "reason_codes": list(selection.get("reason_codes") or []),
        }
        if llm and selected == llm and not overrode:
            if llm not in names:
                return failure_record(
                    "select_target",
                    "llm_target_not_in_candidates",
                    f"the LLM target {llm} is outside the retrieved Top-{case.expected_top_k}",
                    tool=selected,
                    evidence={**evidence, "candidate_names": names},
                )
            return failure_record(
                "select_target",
                "llm_target_mismatch",
                f"the selector kept the LLM target {llm}; the case expects {expected}",
                tool=selected,
                evidence={**evidence, "llm_margin": selection.get("llm_margin")},
            )
        if selection.get("ambiguous"):
            return failure_record(
                "select_target",
                "ambiguous_target",
                f"{selected} and {expected} have similar evidence; the case expects {expected}",
                tool=selected,
                evidence={
                    **evidence,
                    "margin": selection.get("margin"),
                    "ambiguity_set": list(selection.get("ambiguity_set") or []),
                },
            )
        return failure_record(
            "select_target",
            "selector_mismatch",
            f"the selector chose {selected}; the case expects {expected}",
            tool=selected,
            evidence={
                **evidence,
                "override_flag": overrode,
                "rank_signals": (self.outcome.target_selector or {}).get("rank_signals", [])[:5],
            },
        )

    # -- plan synthesis --------------------------------------------------------------

    def synthesize(self, selection: Mapping[str, Any], *, stop: bool) -> Plan | None:
        target = str(selection.get("selected_target") or "")
        if not target or target not in self.collection.tools:
            if stop:
                self.fail(self.no_candidates())
            return None
        with self.timed("plan"):
            try:
                plan = self.collection.synthesize(
                    target=target, entities=self.case.provided_entities, goal=self.case.query
                )
            except PlanSynthesisError as exc:
                diagnostic = exc.to_dict()
                self.outcome.plan = {"target": target, "steps": None, "diagnostics": diagnostic}
                if stop:
                    self.fail(_synthesis_failure(diagnostic, target))
                return None
        self.outcome.plan = _compact_plan(plan, self.case.provided_entities)
        return plan

    def check_slots(self, plan: Plan) -> None:
        slots = [
            slot
            for slot in plan.metadata.get("user_input_slots") or []
            if isinstance(slot, Mapping) and slot.get("required", True)
        ]
        if not slots:
            return
        first = slots[0]
        field_name = str(first.get("field_name") or "")
        self.fail(
            failure_record(
                "synthesize",
                "unsatisfied_field",
                f"Required field {field_name} cannot be supplied: no producer and no "
                "provided entity",
                tool=str(first.get("tool") or "") or None,
                plan_id=plan.id,
                step_id=str(first.get("step_id") or "") or None,
                evidence={
                    "field_name": field_name,
                    "semantic_tag": first.get("semantic_tag"),
                    "target_tool": first.get("tool"),
                    "location": first.get("location"),
                    "cause": first.get("cause") or first.get("reason"),
                    "missing_fields": [str(slot.get("field_name")) for slot in slots],
                },
            )
        )

    # -- execution -------------------------------------------------------------------

    def execute(self, plan: Plan) -> None:
        case, execution = self.case, self.execution
        self.stage = "execute"
        mutating = [
            step.tool for step in plan.steps if self.method_of(step.tool) in _MUTATING_METHODS
        ]
        section: dict[str, Any] = {
            "plan_id": plan.id,
            "status": "not_run",
            "http_status": None,
            "mutating_tools": mutating,
            "mutation_safety": case.mutation_safety,
            "session": case.auth_session or "default",
            "calls": [],
            "events": [],
            "cleanup": {"status": "not_needed"},
            "json_paths": {},
        }
        self.outcome.execute = section
        # Mutation safety is a rule about the case and the collection's policy: judged
        # before anything that needs somewhere to call.
        self.check_mutation_safety(
            plan, mutating, execution.allow_mutations if execution is not None else None
        )
        if execution is None or not execution.base_url:
            self.fail(self.base_url_not_configured(plan, execution))
        timeout = float(min(case.timeout_sec or execution.timeout_sec, execution.timeout_sec))
        section["timeout_sec"] = timeout
        host = self.check_host(plan, execution)
        section["host"] = host
        headers = self.auth_preflight(plan, execution)
        section["status"] = "running"
        with self.timed("execute"):
            adapter = _HttpAdapter(self.collection, execution.base_url, headers, timeout, execution)
            adapter.credential_headers = (
                execution.auth_profile.header_names if execution.auth_profile else ()
            )
            events, failure, trace_steps = self.run_plan(plan, adapter)
        section["calls"] = adapter.calls
        section["events"] = events
        target_tool = plan.steps[-1].tool if plan.steps else None
        target_call = adapter.last_response.get(target_tool or "")
        section["http_status"] = target_call.status if target_call else None
        section["status"] = "failed" if failure else "completed"
        section["json_paths"] = {
            path: _json_path_fact(target_call.body if target_call else _MISSING, path)
            for path in case.assertions.json_paths()
        }
        cleanup_failure = None
        if mutating and any(call.get("tool") in mutating for call in adapter.calls):
            cleanup_failure = self.cleanup(plan, trace_steps, adapter, mutating)
        if failure is not None:
            self.fail(failure)
        if cleanup_failure is not None:
            self.fail(cleanup_failure)

    def method_of(self, tool_name: str) -> str:
        metadata = (self.collection.tools.get(tool_name) or {}).get("metadata") or {}
        return str(metadata.get("method") or "").upper()

    def base_url_not_configured(
        self, plan: Plan, execution: ExecutionContext | None
    ) -> dict[str, Any]:
        """Nothing to call: a configuration gap of the collection, never a server bug."""
        # The spec's servers entry, when it has one: a relative "/v3" is why none was taken.
        spec_server = next(
            (
                url
                for tool in self.collection.tools.values()
                if isinstance(url := (tool.get("metadata") or {}).get("base_url"), str) and url
            ),
            None,
        )
        relative = spec_server is not None and not spec_server.startswith(("http://", "https://"))
        return failure_record(
            "execute",
            "base_url_not_configured",
            "Not called: the collection has no base URL"
            + (f" (the spec's server URL {spec_server!r} is relative)" if relative else "")
            + "; set one in its settings or import it with --base-url",
            tool=plan.steps[0].tool if plan.steps else None,
            plan_id=plan.id,
            evidence={
                "base_url_present": False,
                "spec_server_url": spec_server,
                "request_sent": False,
                "execution_context": execution is not None,
            },
            execution_state="not_started",
        )

    def check_mutation_safety(
        self, plan: Plan, mutating: list[str], allow_mutations: bool | None
    ) -> None:
        """``allow_mutations`` is ``None`` when the run has no execution context at all: the
        case's own rules (declared mutating, cleanup steps) are still judged."""
        if not mutating:
            return
        case = self.case
        unknown = [step.tool for step in case.cleanup if step.tool not in self.collection.tools]
        problem = None
        if case.mutation_safety != "mutating":
            problem = f"the plan calls {mutating[0]} but the case declares read_only"
        elif not case.cleanup:
            problem = f"the plan calls {mutating[0]} and the case has no cleanup steps"
        elif unknown:
            problem = f"cleanup step {unknown[0]} is not an operation of this collection"
        elif allow_mutations is False:
            problem = "this collection does not allow mutating cases"
        if problem is None:
            return
        self.fail(
            failure_record(
                "cleanup",
                "cleanup_not_configured",
                f"Mutating case not run: {problem}",
                tool=mutating[0],
                plan_id=plan.id,
                evidence={
                    "case_id": case.id,
                    "mutation_safety": case.mutation_safety,
                    "mutating_tools": mutating,
                    "cleanup_steps": [step.tool for step in case.cleanup],
                    "mutations_allowed": allow_mutations,
                },
                execution_state="not_started",
            )
        )

    def check_host(self, plan: Plan, execution: ExecutionContext) -> str | None:
        allowed, host = _host_allowed(execution.base_url, execution.allowed_hosts)
        if not allowed:
            self.fail(
                failure_record(
                    "execute",
                    "network_error",
                    f"Not called: the base URL host {host or '(none)'} is not in the "
                    "collection's allowed hosts",
                    tool=plan.steps[0].tool if plan.steps else None,
                    plan_id=plan.id,
                    evidence={
                        "host": host,
                        "request_sent": False,
                        "blocked_by": "allowed_hosts",
                        "error_class": "HostNotAllowed",
                    },
                    execution_state="not_started",
                )
            )
        try:  # resolved now and every address checked; each call checks again
            outbound.check_url(
                execution.base_url,
                allowed_hosts=execution.allowed_hosts,
                private_allowed=outbound.PrivateAllowance.parse(execution.private_allowed),
            )
        except outbound.OutboundRefused as exc:
            self.fail(
                failure_record(
                    "execute",
                    "network_error",
                    f"Not called: {exc}",
                    tool=plan.steps[0].tool if plan.steps else None,
                    plan_id=plan.id,
                    evidence={
                        **exc.evidence,
                        "request_sent": False,
                        "blocked_by": "address",
                        "error_class": "AddressNotAllowed",
                    },
                    execution_state="not_started",
                )
            )
        except OSError:
            pass  # resolution failed: the call itself reports it as a network error
        return host

    def auth_preflight(self, plan: Plan, execution: ExecutionContext) -> dict[str, str]:
        case = self.case
        profile = execution.auth_profile
        needs = [
            (step.tool, schemes)
            for step in plan.steps
            if (schemes := self.security_schemes(step.tool)) is not None
        ]
        required = bool(needs) or bool(profile and profile.required)
        headers = execution.session_headers(case.auth_session)
        refused = execution.credential_refusals.get(case.auth_session or "default")
        readiness: dict[str, Any] = {
            "required": required,
            "source": "openapi_security" if needs else ("collection_policy" if required else None),
            "tools_requiring_auth": [tool for tool, _ in needs],
            "security_schemes": sorted({name for _, schemes in needs for name in schemes}),
            "auth_profile_id_present": profile is not None,
            "auth_token_present": bool(headers),
            "session": case.auth_session or "default",
            "session_station_attempted": required,
            "session_station_header_names": sorted(headers) if headers else [],
            "required_header_names": list(profile.header_names) if profile else [],
            "failure_reason": None,
        }
        self.outcome.auth_readiness = readiness
        if not required and refused is None:
            return headers or {}
        reason, message, missing = None, "", []
        if refused is not None:
            # The profile names a variable the desk may not send: never run as someone else.
            reason = "auth_header_resolution_failed"
            message = f"The credential was not read: {refused}"
            readiness["credential_refused"] = True
        elif profile is None:
            reason = "auth_profile_missing"
            message = "Auth is required but the collection has no auth profile"
        elif not headers:
            reason = "auth_context_required"
            message = f"Auth is required but there is no runtime session {readiness['session']!r}"
        else:
            present = {name.lower() for name, value in headers.items() if value}
            missing = [name for name in profile.header_names if name.lower() not in present]
            if not missing:
                missing = self.unsatisfied_schemes(needs, headers)
            if missing:
                reason = "auth_header_resolution_failed"
                message = "The session could not supply the auth headers: " + ", ".join(missing)
        if reason is None:
            return headers or {}
        readiness["failure_reason"] = reason
        if missing:
            readiness["missing_header_names"] = missing
        self.fail(
            failure_record(
                "auth_preflight",
                reason,
                message,
                tool=needs[0][0] if needs else None,
                plan_id=plan.id,
                evidence={
                    "auth_readiness": dict(readiness),
                    "auth_profile_id_present": readiness["auth_profile_id_present"],
                    "auth_token_present": readiness["auth_token_present"],
                    "session_station_header_names": readiness["session_station_header_names"],
                },
                execution_state="not_started",
            )
        )
        return {}

    def security_schemes(self, tool_name: str) -> list[str] | None:
        """Scheme names a tool requires, or None when it can be called anonymously."""
        openapi = ((self.collection.tools.get(tool_name) or {}).get("metadata") or {}).get(
            "openapi"
        ) or {}
        requirements = (openapi.get("security") or {}).get("requirements") or []
        if not requirements or any(req == {} for req in requirements):
            return None
        return sorted({str(name) for req in requirements if isinstance(req, dict) for name in req})

    def unsatisfied_schemes(
        self, needs: list[tuple[str, list[str]]], headers: Mapping[str, str]
    ) -> list[str]:
        # graph-tool-call's own security check, without building or sending a request.
        executor = HttpExecutor("http://preflight.invalid", headers=dict(headers))
        missing: list[str] = []
        for tool_name, _ in needs:
            diagnostics = executor.validate_request(self.collection.tool_schemas[tool_name], {})
            for requirement in diagnostics.get("missing_security") or []:
                for scheme in requirement.get("schemes") or []:
                    name = str(scheme.get("credential_name") or scheme.get("name") or "")
                    if name and name not in missing:
                        missing.append(name)
        return missing

    def run_plan(
        self, plan: Plan, adapter: _HttpAdapter
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None, list[Any]]:
        runner = PlanRunner(adapter, on_error="abort")
        events: list[dict[str, Any]] = []
        failure: dict[str, Any] | None = None
        trace_steps: list[Any] = []
        metadata = {
            "source": "quality_lab",
            "case_id": self.case.id,
            "collection_hash": self.collection.artifact_hash[:16],
            "auth_readiness": _readiness_for_events(self.outcome.auth_readiness),
        }
        for event in runner.run_stream(
            plan, input_context=dict(self.case.provided_entities), trace_metadata=metadata
        ):
            if getattr(event, "type", "") in ("plan.completed", "plan.aborted"):
                trace_steps = list(getattr(event, "trace_steps", []) or [])
            error = getattr(event, "error", None)
            if isinstance(error, dict) and error.get("kind") == "tool":
                adapter.annotate_error(str(getattr(event, "tool", "") or ""), error)
            payload = _compact_event(event)
            events.append(payload)
            if failure is None:
                record = failure_from_runner_event(payload)
                if record is not None:
                    failure = self.execute_failure(record, adapter)
        return events, failure, trace_steps

    def execute_failure(self, record: Mapping[str, Any], adapter: _HttpAdapter) -> dict[str, Any]:
        reason = str(record.get("reason") or "uncaught_server_error")
        evidence = dict(record.get("evidence") or {})
        if evidence.get("exception_type") == HostNotAllowedError.__name__:
            reason = "network_error"
            evidence.update({"request_sent": False, "blocked_by": "allowed_hosts"})
            record = {**record, "stage": "execute", "execution_state": "not_started"}
        refused = (adapter.last_call_for(str(record.get("tool") or "")) or {}).get("refused")
        if evidence.get("exception_type") == outbound.OutboundRefused.__name__ and refused:
            # Refused by the outbound policy: before sending (not_started), or after the
            # remote side answered (a redirect not followed, a body over the cap).
            sent = bool(refused.get("request_sent")) or refused["refused"] == "response_too_large"
            reason = "network_error"
            evidence.update(refused)
            evidence.update({"request_sent": sent, "blocked_by": _BLOCKED_BY[refused["refused"]]})
            evidence["error_class"] = outbound.OutboundRefused.__name__
            record = {
                **record,
                "stage": "execute",
                "execution_state": "completed" if sent else "not_started",
            }
        tool = record.get("tool")
        state = record.get("execution_state")
        call = adapter.last_call_for(str(tool or ""))
        if reason == "timeout" and call is not None:
            evidence["timeout_ms"] = int(adapter.timeout * 1000)
            evidence["elapsed_ms"] = call.get("elapsed_ms")
        if reason == "http_5xx" and state is None and tool:
            # DESIGN section 3: a 5xx on a read completed; on a write the outcome is unknown.
            write = self.method_of(str(tool)) in _MUTATING_METHODS
            state = "started_unknown" if write else "completed"
        if reason in ("auth_failed", "auth_context_required"):
            evidence["session_station_header_names"] = (self.outcome.auth_readiness or {}).get(
                "session_station_header_names", []
            )
            evidence["auth_profile_id_present"] = (self.outcome.auth_readiness or {}).get(
                "auth_profile_id_present"
            )
        evidence.pop("auth_readiness", None)  # kept once, in the auth_readiness section
        return failure_record(
            str(record.get("stage") or "execute"),
            reason,
            str(record.get("message") or reason),
            tool=str(tool) if tool else None,
            plan_id=record.get("plan_id"),
            step_id=record.get("step_id"),
            evidence=evidence,
            execution_state=str(state) if state else None,
        )

    # -- cleanup ---------------------------------------------------------------------

    def cleanup(
        self, plan: Plan, trace_steps: list[Any], adapter: _HttpAdapter, mutating: list[str]
    ) -> dict[str, Any] | None:
        case = self.case
        section = cast(dict[str, Any], self.outcome.execute)
        completed = {
            str(getattr(step, "tool", "")): getattr(step, "output", None)
            for step in trace_steps
            if getattr(step, "error", None) is None
        }
        if not any(tool in completed for tool in mutating):
            section["cleanup"] = {
                "status": "skipped",
                "reason": "no mutating step completed, so there is nothing to undo",
            }
            return None
        context: dict[str, Any] = {
            "input": dict(case.provided_entities),
            "user_input": dict(case.provided_entities),
        }
        for step in trace_steps:
            output = getattr(step, "output", None)
            if getattr(step, "error", None) is None:
                context[str(getattr(step, "id", ""))] = output
                context[str(getattr(step, "tool", ""))] = output
        with self.timed("cleanup"):
            steps: list[PlanStep] = []
            failure = None
            for index, cleanup_step in enumerate(case.cleanup):
                try:
                    args = resolve_bindings(dict(cleanup_step.args), context)
                except BindingError:
                    failure = self.cleanup_failure(
                        plan,
                        cleanup_step.tool,
                        None,
                        "a cleanup argument binding did not resolve against the main run's outputs",
                        mutating,
                        error_kind="binding",
                    )
                    break
                steps.append(PlanStep(id=f"c{index + 1}", tool=cleanup_step.tool, args=args))
            cleanup_events: list[dict[str, Any]] = []
            calls_before = len(adapter.calls)
            if failure is None:
                cleanup_plan = Plan(id=f"{plan.id}:cleanup", goal="cleanup", steps=steps)
                for event in PlanRunner(adapter, on_error="abort").run_stream(
                    cleanup_plan, trace_metadata={"source": "quality_lab", "case_id": case.id}
                ):
                    error = getattr(event, "error", None)
                    if isinstance(error, dict) and error.get("kind") == "tool":
                        adapter.annotate_error(str(getattr(event, "tool", "") or ""), error)
                    payload = _compact_event(event)
                    cleanup_events.append(payload)
                    record = failure_from_runner_event(payload)
                    if record is not None and failure is None:
                        failure = self.cleanup_failure(
                            plan,
                            str(record.get("tool") or ""),
                            record.get("evidence", {}).get("http_status"),
                            str(record.get("message") or "cleanup step failed"),
                            mutating,
                            error_kind=str(record.get("reason") or ""),
                        )
        section["cleanup"] = {
            "status": "failed" if failure else "passed",
            "steps": [{"id": step.id, "tool": step.tool} for step in steps],
            "calls": adapter.calls[calls_before:],
            "events": cleanup_events,
            "failure": failure,
        }
        section["calls"] = adapter.calls[:calls_before]
        return failure

    def cleanup_failure(
        self,
        plan: Plan,
        tool: str,
        status: Any,
        message: str,
        mutating: list[str],
        *,
        error_kind: str,
    ) -> dict[str, Any]:
        return failure_record(
            "cleanup",
            "cleanup_failed",
            f"Cleanup failed: {message}",
            tool=tool or None,
            plan_id=plan.id,
            evidence={
                "case_id": self.case.id,
                "cleanup_step": tool,
                "http_status": status,
                "affected_targets": mutating,
                "error_kind": error_kind,
            },
        )


# ======================================================================================
# HTTP adapter for PlanRunner
# ======================================================================================


class ToolHttpError(Exception):
    """A non-2xx answer; PlanRunner only sees exceptions, HttpExecutor returns ok=False."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status


# Which rule refused a call (evidence.blocked_by), by core.outbound's refusal code.
_BLOCKED_BY = {
    "scheme_not_allowed": "scheme",
    "host_not_allowed": "allowed_hosts",
    "address_not_allowed": "address",
    "redirect_refused": "redirect",
    "too_many_redirects": "redirect",
    "response_too_large": "response_size",
}


class HostNotAllowedError(ConnectionError):
    """The request would leave the collection's allowed hosts (checked per request too)."""


@dataclass
class _Response:
    status: int
    body: Any = field(repr=False)


_MISSING: Any = object()


class _HttpAdapter:
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
        allowed, host = _host_allowed(request.full_url, self.allowed_hosts)
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


def _host_allowed(
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


# ======================================================================================
# Compact, JSON-able sections
# ======================================================================================


def _compact_row(rank: int, row: Mapping[str, Any]) -> dict[str, Any]:
    semantic = row.get("semantic_evidence") or {}
    compact: dict[str, Any] = {
        "rank": rank,
        "name": row.get("name"),
        "score": row.get("score"),
        "score_breakdown": dict(row.get("score_breakdown") or {}),
        "semantic": {
            key: semantic.get(key)
            for key in ("canonical_action", "primary_resource", "result_shape", "matched_terms")
            if key in semantic
        },
    }
    if row.get("expanded_from"):
        compact["expanded_from"] = row["expanded_from"]
    edges = row.get("edge_evidence") or []
    if edges and isinstance(edges[0], Mapping):
        edge = edges[0]
        compact["edge"] = {
            key: edge.get(key) for key in ("source", "target", "relation", "confidence")
        }
    if row.get("learning_evidence"):
        compact["learning"] = row["learning_evidence"]
    return compact


def _score_distribution(scores: list[float]) -> dict[str, Any]:
    if not scores:
        return {"count": 0}
    return {
        "count": len(scores),
        "top": round(max(scores), 4),
        "min": round(min(scores), 4),
        "gap_1_2": round(scores[0] - scores[1], 4) if len(scores) > 1 else None,
    }


def _compact_selection(selection: Mapping[str, Any], case: CaseSpec) -> dict[str, Any]:
    signals = []
    for row in selection.get("rank_signals") or []:
        if not isinstance(row, Mapping):
            continue
        signals.append(
            {
                "name": row.get("name"),
                "selector_score": row.get("selector_score"),
                "retrieval_rank": row.get("original_rank"),
                "canonical_action": row.get("canonical_action"),
                "result_shape": row.get("result_shape"),
                "strong_evidence": bool(row.get("strong_evidence")),
                "evidence_sources": [
                    str(item.get("source"))
                    for item in row.get("evidence") or []
                    if isinstance(item, Mapping)
                ],
                "selected": bool(row.get("selected")),
                "llm_target": bool(row.get("llm_target")),
            }
        )
    selected = selection.get("selected_target") or None
    return {
        "selected_target": selected,
        "llm_target": selection.get("llm_target"),
        "expected_target": case.expected_target,
        "matches_expected": None
        if case.expected_target is None
        else selected == case.expected_target,
        "overrode_llm": bool(selection.get("overrode_llm")),
        "ambiguous": bool(selection.get("ambiguous")),
        "reason_codes": list(selection.get("reason_codes") or []),
        "confidence": selection.get("confidence"),
        "margin": selection.get("margin"),
        "llm_margin": selection.get("llm_margin"),
        "decision": selection.get("decision"),
        "ambiguity_set": list(selection.get("ambiguity_set") or []),
        "needs_expansion": bool(selection.get("needs_expansion")),
        "policy": selection.get("policy"),
        "policy_revision": selection.get("policy_revision"),
        "rank_signals": signals,
    }


def _compact_plan(plan: Plan, entities: Mapping[str, Any]) -> dict[str, Any]:
    synthesis = plan.metadata.get("synthesis") or {}
    steps = []
    for step in plan.steps:
        args = {
            name: value if isinstance(value, str) and "${" in value else "<provided>"
            for name, value in (step.args or {}).items()
        }
        steps.append(
            {
                "id": step.id,
                "tool": step.tool,
                "args": args,
                "depends_on": list(getattr(step, "depends_on", []) or []),
            }
        )
    return {
        "plan_id": plan.id,
        "target": plan.metadata.get("target"),
        "steps": steps,
        "tools": [step.tool for step in plan.steps],
        "user_input_slots": [dict(slot) for slot in plan.metadata.get("user_input_slots") or []],
        "selected_producers": list(synthesis.get("selected_producers") or []),
        "fallbacks": list(synthesis.get("fallbacks") or []),
        "entity_names": sorted(entities),
        "diagnostics": None,
    }


def _synthesis_failure(diagnostic: Mapping[str, Any], target: str) -> dict[str, Any]:
    reason = str(diagnostic.get("reason") or "synthesis_error")
    stage = str(diagnostic.get("stage") or "synthesize")
    evidence = {
        key: value for key, value in diagnostic.items() if key not in ("stage", "reason", "message")
    }
    evidence.setdefault("target_tool", target)
    return failure_record(
        stage,
        reason,
        str(diagnostic.get("message") or reason),
        tool=str(diagnostic.get("tool") or diagnostic.get("target_tool") or target),
        evidence=evidence,
        execution_state="not_started",
    )


def _compact_event(event: Any) -> dict[str, Any]:
    """``dataclasses.asdict(event)`` with raw values replaced (no bodies, no arguments)."""
    data = dataclasses.asdict(event)
    if isinstance(data.get("args_resolved"), dict):
        data["args_resolved"] = dict.fromkeys(data["args_resolved"], "[omitted]")
    for key in ("output_preview", "output", "value_preview"):
        if key in data:
            data[f"{key}_shape"] = _shape(data[key])
            data[key] = None
    if isinstance(data.get("trace_steps"), list):
        data["trace_steps"] = [
            {
                key: step.get(key)
                for key in ("id", "tool", "error", "duration_ms", "retries")
                if isinstance(step, dict)
            }
            for step in data["trace_steps"]
        ]
    return cast(dict[str, Any], _json_safe_outcome(data))


def _readiness_for_events(readiness: Mapping[str, Any] | None) -> dict[str, Any]:
    if not readiness:
        return {"required": False, "failure_reason": None}
    keys = (
        "required",
        "auth_profile_id_present",
        "auth_token_present",
        "session_station_header_names",
        "failure_reason",
    )
    return {key: readiness.get(key) for key in keys}


def _shape(value: Any, depth: int = 0) -> Any:
    """Type-level summary of a value: names and counts, never the value itself."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return {"type": "array", "length": len(value)}
    if isinstance(value, dict):
        keys = sorted(str(key) for key in value)[:20]
        return {"type": "object", "keys": keys}
    return type(value).__name__


def _json_path_fact(body: Any, path: str) -> dict[str, Any]:
    if body is _MISSING:
        return {"exists": None, "shape": None}
    values = case_assertions.json_path_values(body, path)
    return {
        "exists": bool(values),
        "count": len(values),
        "shape": _shape(values[0]) if values else None,
    }
