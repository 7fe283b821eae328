"""Cases and execution settings: a case in the documented schema (:class:`CaseSpec`),
the tool names it mentions checked against a collection (:func:`check_case_tools`), and
where and as whom execute cases run (:class:`ExecutionContext`, :class:`AuthProfile`)."""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from qualitylab import assertions as case_assertions
from qualitylab.assertions import AssertionSet, CaseSpecError, gettext_noop

_MODES = case_assertions.MODES
_MUTATION_SAFETY = ("read_only", "mutating")
_DEFAULT_TOP_K = 8
_MAX_TIMEOUT_SEC = 300.0
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
