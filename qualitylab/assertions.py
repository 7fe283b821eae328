"""Quality Lab case assertions: parse both documented styles, evaluate them on an outcome.

Two styles reach us from case files (graph-tool-call's Quality Lab docs and seed 000):

* the typed list::

      [{"type": "top_k_contains", "tool": "getOrderDetail", "k": 8},
       {"type": "selected_target", "equals": "getOrderDetail"},
       {"type": "plan_contains_tool", "tool": "getOrderDetail"},
       {"type": "http_status", "equals": 200},            # or {"in": [200, 201]}
       {"type": "json_path_exists", "path": "$.orderNo"}]

* the object::

      {"selected_target": "getOrderDetail",
       "allowed_failure_reasons": ["auth_context_required", "auth_failed", "http_4xx"],
       "uncaught_server_error": false}

Both parse (:func:`parse_assertions`, called by ``CaseSpec.from_json``) into one
:class:`AssertionSet`, so an unknown type, a bad value or an assertion the case's mode can
never evaluate is a :class:`CaseSpecError` naming the field when the case is imported, never
a surprise at run time. ``allowed_failure_reasons`` must be taxonomy reason codes (a typo
would otherwise never match and silently turn a known failure into a red case).

:func:`evaluate` reads only the JSON-able sections of a finished ``CaseOutcome`` (the engine
pre-evaluates the JSON paths a case asks about into ``execute.json_paths``), so a stored
outcome can be re-evaluated later. Each result is ``{name, expected, actual, passed}``;
``passed`` is ``None`` when the stage the assertion reads never ran (for example
``http_status`` after an auth preflight stop). :func:`decide` turns failure + results into
the case status: a failure whose reason is in ``allowed_failure_reasons`` does not fail the
case (``failure_allowed`` records that), any assertion with ``passed is False`` does.

Learning assertions (graph-tool-call's shadow and promotion docs) read the outcome's
``learning`` section, which the engine fills when the case runs with a shadow ranking (its
collection is in ``shadow`` mode), and the outcome as a whole:

* ``shadow_rank_lte_current_rank`` (default ``true``): the expected target ranks no worse
  with learning applied (a target missing from the Top-K ranks last);
* ``selected_target_changed`` (``true``/``false``, plan and execute cases): whether the
  selector would pick another target on the shadow ranking;
* ``raw_secret_present`` (default ``false``): whether anything in the stored outcome is
  still a secret (triage.scrub finds something to redact); reports paths, never values;
* ``promotion_status`` (a status or a list): the status of the learning suggestion that
  boosted the expected target in the shadow ranking.

Written in the list style (``{"type": "selected_target_changed", "equals": false}``,
``{"type": "promotion_status", "in": ["suggested", "promotable"]}``), in the object style
(``{"raw_secret_present": false}``) or in the documented learning block of a case
(``"learning": {"mode": "shadow", "assertions": {...}}``, see :func:`add_learning_block`).
Without a shadow comparison they are not evaluated (``passed: null``), except
``raw_secret_present``, which always is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from triage.vocabulary import taxonomy

MODES: tuple[str, ...] = ("search", "plan", "execute")

ASSERTION_TYPES: tuple[str, ...] = (
    "top_k_contains",
    "selected_target",
    "plan_contains_tool",
    "http_status",
    "json_path_exists",
)

# The stage an assertion reads decides which modes can ever evaluate it.
_MODES_FOR_TYPE: dict[str, frozenset[str]] = {
    "top_k_contains": frozenset(MODES),
    "selected_target": frozenset({"plan", "execute"}),
    "plan_contains_tool": frozenset({"plan", "execute"}),
    "http_status": frozenset({"execute"}),
    "json_path_exists": frozenset({"execute"}),
    "uncaught_server_error": frozenset(MODES),
    "shadow_rank_lte_current_rank": frozenset(MODES),
    "selected_target_changed": frozenset({"plan", "execute"}),
    "raw_secret_present": frozenset(MODES),
    "promotion_status": frozenset(MODES),
}

# ---- learning (shadow metrics, scrubbing, promotion) --------------------------------------
LEARNING_ASSERTION_TYPES: frozenset[str] = frozenset(
    {
        "shadow_rank_lte_current_rank",
        "selected_target_changed",
        "raw_secret_present",
        "promotion_status",
    }
)
# A boolean learning check written without a value asserts its usual expectation.
_LEARNING_DEFAULTS: dict[str, bool] = {
    "shadow_rank_lte_current_rank": True,
    "raw_secret_present": False,
}
PROMOTION_STATUSES: tuple[str, ...] = ("suggested", "promotable", "promoted", "rejected")
# Hashing the check's copy of an identifier needs a key; nothing it hashes is kept.
_SECRET_CHECK_KEY = b"quality-lab-raw-secret-check"

_OBJECT_KEYS: tuple[str, ...] = (
    "selected_target",
    "allowed_failure_reasons",
    "uncaught_server_error",
    *sorted(LEARNING_ASSERTION_TYPES),
)
# Tool names are operationIds as the spec spells them (GitHub's are "pulls/list"): any text
# up to the column's 200 characters without control characters. Whether the collection has
# the tool is checked against its built catalog (``engine.check_case_tools``).
TOOL_NAME_MAX_LENGTH = 200
_TOOL_NAME_FORBIDDEN_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_JSON_PATH_SEGMENT_RE = re.compile(r"\.([^.\[\]]+)|\[(\d+|\*)\]|\['([^']+)'\]")
_MAX_ASSERTIONS = 50
_MAX_TOP_K = 50


def gettext_noop(message: str) -> str:
    """Marks a message for the catalog (makemessages reads this name) without Django here:
    the pages translate it with CaseSpecError.translated."""
    return message


class CaseSpecError(ValueError):
    """A case (or one of its assertions) does not follow the documented schema.

    ``field`` names the offending field (``"mode"``, ``"assertions[2].type"``,
    ``"cleanup[0].tool"``); the message never repeats a provided value that could be large.
    ``message`` is English; ``template`` and ``params`` let a page write it in its reader's
    language.
    """

    def __init__(self, field: str, message: str, params: dict[str, object] | None = None):
        self.template = message
        self.params = params or {}
        self.message = message % self.params if self.params else message
        super().__init__(f"{field}: {self.message}")
        self.field = field

    def translated(self, translate: Callable[[str], str]) -> str:
        """The message in the reader's language (``translate`` is Django's gettext)."""
        text = translate(self.template)
        return text % self.params if self.params else text


@dataclass(frozen=True, slots=True)
class Assertion:
    """One check; ``expected`` is a tool name, a tuple of statuses, a JSON path or a bool."""

    type: str
    expected: Any
    k: int | None = None  # top_k_contains only

    def describe_expected(self) -> Any:
        if self.type == "top_k_contains":
            return {"tool": self.expected, "k": self.k}
        if self.type in ("http_status", "promotion_status"):
            values = list(self.expected)
            return values[0] if len(values) == 1 else values
        return self.expected


@dataclass(frozen=True, slots=True)
class AssertionSet:
    """The parsed assertions of one case, whichever style they were written in."""

    checks: tuple[Assertion, ...] = ()
    allowed_failure_reasons: tuple[str, ...] = ()
    style: str = "none"  # "list", "object" or "none"

    def json_paths(self) -> list[str]:
        """The JSON paths the engine must pre-evaluate on the target's response."""
        return [check.expected for check in self.checks if check.type == "json_path_exists"]


def parse_assertions(
    value: Any, *, mode: str, expected_top_k: int, field: str = "assertions"
) -> AssertionSet:
    """Parse either documented style; raise :class:`CaseSpecError` naming the bad field."""
    if value is None:
        return AssertionSet()
    if isinstance(value, Mapping):
        return _parse_object(value, mode=mode, field=field)
    if isinstance(value, list):
        return _parse_list(value, mode=mode, expected_top_k=expected_top_k, field=field)
    raise CaseSpecError(
        field, gettext_noop("must be a list of typed assertions or an assertion object")
    )


def _parse_list(items: list[Any], *, mode: str, expected_top_k: int, field: str) -> AssertionSet:
    if len(items) > _MAX_ASSERTIONS:
        raise CaseSpecError(
            field, gettext_noop("at most %(limit)d assertions per case"), {"limit": _MAX_ASSERTIONS}
        )
    checks: list[Assertion] = []
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        if not isinstance(item, Mapping):
            raise CaseSpecError(where, gettext_noop("must be an object with a 'type'"))
        kind = item.get("type")
        if not isinstance(kind, str) or not kind:
            raise CaseSpecError(f"{where}.type", gettext_noop("is required"))
        if kind in LEARNING_ASSERTION_TYPES:
            checks.append(_parse_learning_typed(kind, item, where=where, mode=mode))
            continue
        if kind not in ASSERTION_TYPES:
            known = ", ".join((*ASSERTION_TYPES, *sorted(LEARNING_ASSERTION_TYPES)))
            raise CaseSpecError(
                f"{where}.type",
                gettext_noop("unknown assertion type %(kind)r (known: %(known)s)"),
                {"kind": kind, "known": known},
            )
        check = _parse_typed(kind, item, where=where, expected_top_k=expected_top_k)
        _check_mode(check.type, mode=mode, where=f"{where}.type")
        checks.append(check)
    return AssertionSet(checks=tuple(checks), style="list")


def _parse_typed(
    kind: str, item: Mapping[str, Any], *, where: str, expected_top_k: int
) -> Assertion:
    allowed_keys = {
        "top_k_contains": {"type", "tool", "k"},
        "selected_target": {"type", "equals"},
        "plan_contains_tool": {"type", "tool"},
        "http_status": {"type", "equals", "in"},
        "json_path_exists": {"type", "path"},
    }[kind]
    extra = sorted(str(key) for key in item if key not in allowed_keys)
    if extra:
        raise CaseSpecError(
            f"{where}.{extra[0]}", gettext_noop("is not a field of %(kind)s"), {"kind": kind}
        )
    if kind == "top_k_contains":
        k = item.get("k", expected_top_k)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= _MAX_TOP_K:
            raise CaseSpecError(
                f"{where}.k",
                gettext_noop("must be an integer from 1 to %(limit)d"),
                {"limit": _MAX_TOP_K},
            )
        return Assertion(kind, checked_tool_name(item.get("tool"), f"{where}.tool"), k=k)
    if kind == "selected_target":
        return Assertion(kind, checked_tool_name(item.get("equals"), f"{where}.equals"))
    if kind == "plan_contains_tool":
        return Assertion(kind, checked_tool_name(item.get("tool"), f"{where}.tool"))
    if kind == "http_status":
        return Assertion(kind, _statuses(item, where))
    path = item.get("path")
    if not isinstance(path, str):
        raise CaseSpecError(
            f"{where}.path", gettext_noop("is required (a JSON path such as '$.orderNo')")
        )
    parse_json_path(path, field=f"{where}.path")
    return Assertion(kind, path)


def _statuses(item: Mapping[str, Any], where: str) -> tuple[int, ...]:
    if ("equals" in item) == ("in" in item):
        raise CaseSpecError(
            where, gettext_noop("http_status needs exactly one of 'equals' or 'in'")
        )
    key = "equals" if "equals" in item else "in"
    raw = item[key]
    values = raw if key == "in" else [raw]
    if not isinstance(values, list) or not values:
        raise CaseSpecError(
            f"{where}.in", gettext_noop("must be a non-empty list of HTTP statuses")
        )
    statuses: list[int] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 599:
            raise CaseSpecError(
                f"{where}.{key}", gettext_noop("HTTP statuses are integers from 100 to 599")
            )
        statuses.append(value)
    return tuple(statuses)


def _parse_object(value: Mapping[str, Any], *, mode: str, field: str) -> AssertionSet:
    for key in value:
        if key not in _OBJECT_KEYS:
            known = ", ".join(_OBJECT_KEYS)
            raise CaseSpecError(
                f"{field}.{key}",
                gettext_noop("unknown assertion key (known: %(known)s)"),
                {"known": known},
            )
    checks: list[Assertion] = []
    if "selected_target" in value:
        where = f"{field}.selected_target"
        _check_mode("selected_target", mode=mode, where=where)
        checks.append(
            Assertion("selected_target", checked_tool_name(value["selected_target"], where))
        )
    if "uncaught_server_error" in value:
        flag = value["uncaught_server_error"]
        if not isinstance(flag, bool):
            raise CaseSpecError(
                f"{field}.uncaught_server_error", gettext_noop("must be true or false")
            )
        checks.append(Assertion("uncaught_server_error", flag))
    for key in sorted(LEARNING_ASSERTION_TYPES):
        if key in value:
            checks.append(_learning_check(key, value[key], where=f"{field}.{key}", mode=mode))
    allowed: tuple[str, ...] = ()
    if "allowed_failure_reasons" in value:
        allowed = _reason_codes(
            value["allowed_failure_reasons"], f"{field}.allowed_failure_reasons"
        )
    return AssertionSet(checks=tuple(checks), allowed_failure_reasons=allowed, style="object")


def _parse_learning_typed(
    kind: str, item: Mapping[str, Any], *, where: str, mode: str
) -> Assertion:
    allowed = {"type", "equals", "in"} if kind == "promotion_status" else {"type", "equals"}
    extra = sorted(str(key) for key in item if key not in allowed)
    if extra:
        raise CaseSpecError(
            f"{where}.{extra[0]}", gettext_noop("is not a field of %(kind)s"), {"kind": kind}
        )
    if kind == "promotion_status":
        if ("equals" in item) == ("in" in item):
            raise CaseSpecError(
                where, gettext_noop("promotion_status needs exactly one of 'equals' or 'in'")
            )
        key = "equals" if "equals" in item else "in"
        _check_mode(kind, mode=mode, where=f"{where}.type")
        return _learning_check(kind, item[key], where=f"{where}.{key}")
    if "equals" not in item and kind not in _LEARNING_DEFAULTS:
        raise CaseSpecError(f"{where}.equals", gettext_noop("is required (true or false)"))
    _check_mode(kind, mode=mode, where=f"{where}.type")
    value = item.get("equals", _LEARNING_DEFAULTS.get(kind))
    return _learning_check(kind, value, where=f"{where}.equals")


def _learning_check(kind: str, value: Any, *, where: str, mode: str | None = None) -> Assertion:
    if mode is not None:
        _check_mode(kind, mode=mode, where=where)
    if kind != "promotion_status":
        if not isinstance(value, bool):
            raise CaseSpecError(where, gettext_noop("must be true or false"))
        return Assertion(kind, value)
    statuses = [value] if isinstance(value, str) else value
    if (
        not isinstance(statuses, list)
        or not statuses
        or not all(status in PROMOTION_STATUSES for status in statuses)
    ):
        raise CaseSpecError(
            where,
            gettext_noop("must be a status or a list of statuses: %(statuses)s"),
            {"statuses": ", ".join(PROMOTION_STATUSES)},
        )
    return Assertion(kind, tuple(dict.fromkeys(statuses)))


def add_learning_block(assertions: AssertionSet, block: Any, *, mode: str) -> AssertionSet:
    """Add the checks of graph-tool-call's documented case block ``{"learning": {"mode":
    "shadow", "expected_target": ..., "assertions": {...}}}`` (learning checks only)."""
    if block is None:
        return assertions
    if not isinstance(block, Mapping):
        raise CaseSpecError(
            "learning", gettext_noop("must be an object (mode, expected_target, assertions)")
        )
    target = block.get("expected_target")
    if target is not None:
        checked_tool_name(target, "learning.expected_target")
    if block.get("mode") not in (None, "observe", "shadow", "promoted"):
        raise CaseSpecError("learning.mode", gettext_noop("must be observe, shadow or promoted"))
    checks = block.get("assertions")
    if checks is None:
        return assertions
    if not isinstance(checks, Mapping):
        raise CaseSpecError(
            "learning.assertions", gettext_noop("must be an object of learning assertions")
        )
    added: list[Assertion] = []
    for key, value in checks.items():
        if key not in LEARNING_ASSERTION_TYPES:
            known = ", ".join(sorted(LEARNING_ASSERTION_TYPES))
            raise CaseSpecError(
                f"learning.assertions.{key}",
                gettext_noop("is not a learning assertion (%(known)s)"),
                {"known": known},
            )
        added.append(_learning_check(key, value, where=f"learning.assertions.{key}", mode=mode))
    if len(assertions.checks) + len(added) > _MAX_ASSERTIONS:
        raise CaseSpecError(
            "learning.assertions",
            gettext_noop("at most %(limit)d assertions per case"),
            {"limit": _MAX_ASSERTIONS},
        )
    style = assertions.style if assertions.style != "none" else "object"
    return AssertionSet(
        checks=(*assertions.checks, *added),
        allowed_failure_reasons=assertions.allowed_failure_reasons,
        style=style,
    )


def _reason_codes(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise CaseSpecError(where, gettext_noop("must be a list of reason codes"))
    codes: list[str] = []
    for index, code in enumerate(value):
        if not isinstance(code, str) or taxonomy.reason_info(code) is None:
            raise CaseSpecError(
                f"{where}[{index}]", gettext_noop("is not a reason code of the taxonomy")
            )
        if code not in codes:
            codes.append(code)
    return tuple(codes)


def is_tool_name(value: Any) -> bool:
    """Whether ``value`` can be a tool name at all (not whether a collection has it)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= TOOL_NAME_MAX_LENGTH
        and value.strip() == value
        and not _TOOL_NAME_FORBIDDEN_RE.search(value)
    )


def checked_tool_name(value: Any, where: str) -> str:
    if not is_tool_name(value):
        raise CaseSpecError(
            where,
            gettext_noop(
                "must be a tool name (the operationId; at most %(limit)d characters, no "
                "surrounding spaces or control characters)"
            ),
            {"limit": TOOL_NAME_MAX_LENGTH},
        )
    return str(value)


def _check_mode(kind: str, *, mode: str, where: str) -> None:
    modes = _MODES_FOR_TYPE[kind]
    if mode not in modes:
        needed = " or ".join(sorted(modes))
        raise CaseSpecError(
            where,
            gettext_noop("%(kind)s needs a %(needed)s case; this case is %(mode)s"),
            {"kind": kind, "needed": needed, "mode": mode},
        )


# ---- JSON paths ------------------------------------------------------------------------


def parse_json_path(path: str, *, field: str = "path") -> list[str | int]:
    """Split ``$.a.b[0][*]['c d']`` into segments (``"*"`` is a wildcard) or raise."""
    if not path.startswith("$") or len(path) > 300:
        raise CaseSpecError(
            field, gettext_noop("must be a JSON path starting with '$' (e.g. '$.orderNo')")
        )
    segments: list[str | int] = []
    position = 1
    while position < len(path):
        match = _JSON_PATH_SEGMENT_RE.match(path, position)
        if match is None:
            raise CaseSpecError(
                field,
                gettext_noop("cannot read the JSON path after character %(position)d"),
                {"position": position},
            )
        name, index, quoted = match.groups()
        if name is not None:
            segments.append(name)
        elif quoted is not None:
            segments.append(quoted)
        else:
            segments.append("*" if index == "*" else int(index))
        position = match.end()
    return segments


def json_path_values(document: Any, path: str) -> list[Any]:
    """Every value ``path`` selects in ``document`` (empty when it selects nothing)."""
    current: list[Any] = [document]
    for segment in parse_json_path(path):
        selected: list[Any] = []
        for value in current:
            if segment == "*":
                if isinstance(value, list):
                    selected.extend(value)
                elif isinstance(value, Mapping):
                    selected.extend(value.values())
            elif isinstance(segment, int):
                if isinstance(value, list) and -len(value) <= segment < len(value):
                    selected.append(value[segment])
            elif isinstance(value, Mapping) and segment in value:
                selected.append(value[segment])
        current = selected
    return current


# ---- evaluation ------------------------------------------------------------------------


class OutcomeSections(Protocol):
    """What evaluation reads of a finished case (the engine's ``CaseOutcome``): its JSON-able
    sections and ``to_dict()``. Typed by shape, so this module, which the engine imports,
    imports nothing of the engine."""

    @property
    def search(self) -> Mapping[str, Any] | None: ...
    @property
    def target_selector(self) -> Mapping[str, Any] | None: ...
    @property
    def plan(self) -> Mapping[str, Any] | None: ...
    @property
    def execute(self) -> Mapping[str, Any] | None: ...
    @property
    def failure(self) -> Mapping[str, Any] | None: ...
    @property
    def learning(self) -> Mapping[str, Any] | None: ...
    def to_dict(self) -> dict[str, Any]: ...


def evaluate(assertions: AssertionSet, outcome: OutcomeSections) -> list[dict[str, Any]]:
    """Evaluate every check against the outcome's JSON-able sections."""
    return [_evaluate_one(check, outcome) for check in assertions.checks]


def _evaluate_one(check: Assertion, outcome: OutcomeSections) -> dict[str, Any]:
    actual: Any = None
    passed: bool | None = None
    if check.type == "top_k_contains":
        names = _returned_names(outcome.search)
        if names is not None:
            rank = names.index(check.expected) + 1 if check.expected in names else None
            actual = {"rank": rank}
            passed = rank is not None and check.k is not None and rank <= check.k
    elif check.type == "selected_target":
        if outcome.target_selector is not None:
            actual = outcome.target_selector.get("selected_target") or None
            passed = actual == check.expected
    elif check.type == "plan_contains_tool":
        if outcome.plan is not None and outcome.plan.get("steps") is not None:
            actual = [step.get("tool") for step in outcome.plan["steps"]]
            passed = check.expected in actual
    elif check.type == "http_status":
        status = (outcome.execute or {}).get("http_status")
        if isinstance(status, int):
            actual = status
            passed = status in check.expected
    elif check.type == "json_path_exists":
        found = ((outcome.execute or {}).get("json_paths") or {}).get(check.expected)
        if isinstance(found, Mapping) and found.get("exists") is not None:
            actual = dict(found)
            passed = bool(found["exists"])
    elif check.type == "uncaught_server_error":
        reason = (outcome.failure or {}).get("reason")
        actual = reason == "uncaught_server_error"
        passed = actual is check.expected
    elif check.type in LEARNING_ASSERTION_TYPES:
        actual, passed = _evaluate_learning(check, outcome)
    result: dict[str, Any] = {
        "name": check.type,
        "expected": check.describe_expected(),
        "actual": actual,
        "passed": passed,
    }
    if passed is None:
        result["note"] = (
            "not evaluated: no shadow comparison (the collection is not in shadow mode)"
            if check.type in LEARNING_ASSERTION_TYPES
            else "not evaluated: the stage it reads did not run"
        )
    return result


def _evaluate_learning(check: Assertion, outcome: OutcomeSections) -> tuple[Any, bool | None]:
    if check.type == "raw_secret_present":
        paths = raw_secret_paths(outcome)
        present = bool(paths)
        return ({"present": present, "paths": paths[:5]}, present is check.expected)
    learning = outcome.learning or {}
    if learning.get("mode") != "shadow" or "current_rank" not in learning:
        return None, None
    if check.type == "shadow_rank_lte_current_rank":
        current, shadow = learning.get("current_rank"), learning.get("shadow_rank")
        # A target outside the Top-K ranks after every row in it.
        holds = (shadow or 10**6) <= (current or 10**6)
        return {"current_rank": current, "shadow_rank": shadow}, holds is check.expected
    if check.type == "selected_target_changed":
        changed = learning.get("selected_target_changed")
        if changed is None:
            return None, None
        return changed, changed is check.expected
    target = learning.get("expected_target") or (outcome.search or {}).get("expected_target")
    statuses = [
        signal.get("status")
        for signal in learning.get("signals") or []
        if isinstance(signal, Mapping) and signal.get("target") == target
    ]
    status = statuses[0] if statuses else None
    return status, status in check.expected


# The scrubber redacts every value under a generic key such as "session" (it may be a
# token); the engine stores a session's *name* there ("default", "expired"), not a secret.
_GENERIC_SECRET_KEYS = frozenset({"session", "token", "auth", "credential", "credentials"})
_PLAIN_NAME_RE = re.compile(r"^[a-z][a-z_-]{0,39}\Z")


def _a_name_under_a_generic_key(key: str, value: Any) -> bool:
    return (
        key.lower() in _GENERIC_SECRET_KEYS
        and isinstance(value, str)
        and bool(_PLAIN_NAME_RE.match(value))
    )


def raw_secret_paths(outcome: OutcomeSections) -> list[str]:
    """Where the stored outcome still holds something triage.scrub would redact."""
    from triage.scrub import ScrubError, scrub_payload

    data = {key: value for key, value in outcome.to_dict().items() if key != "assertions"}
    try:
        clean = scrub_payload(data, path="$", hash_key=_SECRET_CHECK_KEY)
    except ScrubError as exc:
        return [exc.path]
    return _differences(data, clean, "$")


def _differences(raw: Any, clean: Any, path: str) -> list[str]:
    if isinstance(raw, Mapping) and isinstance(clean, Mapping):
        found = [f"{path}.{key}" for key in raw if key not in clean]
        for key, value in raw.items():
            if key not in clean or _a_name_under_a_generic_key(str(key), value):
                continue
            found += _differences(value, clean[key], f"{path}.{key}")
        return found
    if isinstance(raw, list) and isinstance(clean, list) and len(raw) == len(clean):
        found = []
        for index, (item, cleaned) in enumerate(zip(raw, clean, strict=True)):
            found += _differences(item, cleaned, f"{path}[{index}]")
        return found
    return [] if raw == clean else [path]


def _returned_names(search: Mapping[str, Any] | None) -> list[str] | None:
    if search is None:
        return None
    results = search.get("results")
    if not isinstance(results, Sequence):
        return None
    return [str(row.get("name")) for row in results if isinstance(row, Mapping)]


def decide(
    assertions: AssertionSet,
    failure: Mapping[str, Any] | None,
    results: Sequence[Mapping[str, Any]],
) -> tuple[str, bool]:
    """``(status, failure_allowed)`` for a case with this failure and assertion results."""
    failure_allowed = bool(
        failure is not None and failure.get("reason") in assertions.allowed_failure_reasons
    )
    if failure is not None and not failure_allowed:
        return "failed", False
    if any(result.get("passed") is False for result in results):
        return "failed", failure_allowed
    return "passed", failure_allowed
