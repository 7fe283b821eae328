"""Collections: parse an OpenAPI spec (JSON or YAML, bounded), build its collection
artifact with graph-tool-call and name the build by its inputs (:func:`artifact_hash`).

Pure Python plus graph-tool-call and PyYAML: no Django ORM, nothing read from settings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import graph_tool_call
import yaml
from graph_tool_call.graphify import build_openapi_collection_artifact

from core.json_limits import DEFAULT_MAX_DEPTH, JSONTooDeep, loads_bounded
from core.storable import first_unstorable_text, may_hold_unstorable_text

GRAPH_TOOL_CALL_VERSION: str = str(graph_tool_call.__version__)
# The largest public descriptions (GitHub's 13 MB, the cloud providers') fit; callers pass
# the deployment's own limit (the QUALITYLAB_MAX_SPEC_BYTES setting).
DEFAULT_MAX_SPEC_BYTES = 64 * 1024 * 1024

Progress = Callable[[str, float], None]

_MAX_YAML_ALIASES = 200
# What aliases may add to a YAML spec once expanded (nodes plus scalar characters): shared
# parameter blocks and merge keys stay far below it, an alias bomb far above.
_MAX_YAML_ALIAS_EXPANSION = 1_000_000
# Names what :func:`artifact_hash` hashes; a change to that list changes this tag.
_BUILD_KEY_FORMAT = "qualitylab-build-inputs/1"


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
