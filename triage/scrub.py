"""Make every ingested item body safe before it reaches the database, a log line or Celery.

The security boundary (DESIGN section 6, seed 000 "Security Boundary") stores booleans such
as ``auth_token_present``, header *names*, field names and paths, HTTP statuses, hashes and
scrubbed values, and never bearer tokens, ``Authorization`` / ``Cookie`` / API-key values,
raw request or response bodies, raw user ids, emails, phone numbers or card numbers.

Public API: :func:`scrub_payload` (a whole nested JSON body; returns a new JSON-safe value),
:func:`scrub_text` (one free-text string; also what :class:`ScrubLogFilter` runs),
:func:`hash_identifier` and :class:`ScrubError` (the item is rejected with ``scrub_failed``;
``.path`` names the field; the message never contains the offending value). Both scrub
functions are idempotent: scrubbing scrubbed output changes nothing.

What happens to a body
----------------------
* Keys naming a secret (``authorization``, ``cookie``, ``token``, ``api_key``, ``secret``,
  ``password``, ``credentials``, ``session``, ... matched per word, so ``accessToken`` and
  ``x-api-key`` count and ``idempotency_key`` does not): the value becomes ``[REDACTED]``,
  unless it is a boolean or null, or the key ends in ``_present``, ``_names``, ``_name``,
  ``_hash``, ``_count``, ``_required`` (and a few more descriptive suffixes).
* Identifiers (``user_id``, ``userId``, ``x-user-id``, ``member_id``, ``customer_id``,
  ``session_id``, ``account_id``, ``email``, phone keys): ``<snake_key>_hash`` with
  :func:`hash_identifier` of the value; an existing ``..._hash`` key wins.
* Headers (a dict under ``*headers``, ``[name, value]`` pairs, ``{"name", "value"}``
  objects): names stay; values of names containing auth/token/secret/key/session/cookie/...
  become ``[REDACTED]``. ``{"name": N, "value": V}`` objects anywhere (OpenAPI parameters)
  treat V as if it were keyed by N.
* Raw bodies (``body``, ``raw_body``, ``request_body``, ``response_body``, ``raw``,
  ``payload``, ``output_preview``; ``output`` / ``result`` unless a short code such as a
  receipt's ``"blocked"``): ``{"redacted": "raw_body", "type", "size", "keys"}``. The root
  is never a raw body.
* Every string: :func:`scrub_text`, typed markers (``[REDACTED:jwt]``, ``[REDACTED:email]``);
  then cut to 2,000 chars (``...[truncated N chars]`` included). Dict keys that look
  secret become ``[REDACTED_KEY:n]``; lists keep 200 items plus ``"[truncated N items]"``.
* Refused (ScrubError): nesting deeper than 32, more than 20,000 values, non-string keys,
  NaN/infinity, anything that is not JSON (bytes, sets, objects), and text that would cost
  more than its work budget (see Speed).

What :func:`scrub_text` finds
-----------------------------
The text rules live in ``triage_desk_client.scrub`` (standard library only), which the
client also runs on every item before it spools, so the two cannot drift; this module
imports them (patterns and the field-name rules: which names hold secrets, which hold
identifiers) and adds its own steps on top: the keyed hashes, the raw-body summaries,
the work budget and the engine's backstop below. ``tests/triage/test_scrub_shared.py``
checks that both give the same text on every generated secret and clean value.

Provider keys and tokens by their shape, after gitleaks' and detect-secrets' public rules
(OpenAI, Anthropic, AWS key ids and secret keys, also bare ones, GitHub ``gh?_`` and
``github_pat_``, Slack ``xox*`` tokens and webhook URLs, Stripe keys and webhook secrets,
Google, Hugging Face, GitLab, npm, SendGrid, Azure AD client secrets), JWTs,
``Bearer``/``Basic``/``Token`` credentials, PEM private keys, the userinfo of URLs,
``Authorization``/``Cookie``/``X-Api-Key`` header lines, ``key=value`` / ``"key": "value"``
pairs whose key names a secret (``password``, ``pw``, ``AccountKey``, ``sig``, ...; also in
JSON inside a JSON string and after ``--``), a MySQL client's ``-p<password>``, Korean
password and key labels (``비밀번호: ...``), emails, phone numbers, card numbers (Luhn),
IBANs (mod 97) and resident registration numbers with or without their hyphen; Korean text
may touch any of them ("...@example.com으로", "010-1234-5678로").
Text that is URL- or form-encoded (``%40``, ``+``) or escaped (``\\n``, ``\\u0040``, JSON in
JSON) is decoded and scrubbed as well, so an encoded secret does not pass as noise.
``tests/security/test_scrub_property.py`` plants 31 kinds of generated secrets in 11
encodings and 11 positions of 10,000 items sent through ingest and finds none of them
afterwards, and checks that fewer than 1% of generated clean values change.

How graph-tool-call's ``scrub_trace_payload`` is used, and why not as a whole
---------------------------------------------------------------------------
``graph_tool_call.learning`` (0.47.0) is right about bearer tokens, JWTs and emails: its
``_BEARER_RE`` and ``_JWT_RE`` run over every string, and its ``_EMAIL_RE`` over strings up
to 256 chars, as a backstop after our own broader patterns (its email pattern backtracks
quadratically: 100 KB of ``a.a.a...@`` takes a minute, so ours is the same pattern with
RFC 5321 length bounds). Its ``_RAW_PAYLOAD_KEY_RE`` decides which keys hold raw bodies.
Calling ``scrub_trace_payload`` itself would break the boundary the other way:

* ``_PHONE_RE`` (any run of 9+ digits, spaces and dashes) redacts ISO dates and timestamps
  (``2026-11-29T20:16:13Z``), order numbers (``ORD-2026-000123``) and epoch milliseconds.
  Replaced by format-specific phone patterns (``+82 10-1234-5678``, ``010-1234-5678``,
  ``(555) 123-4567``, ``+1 555 123 4567``), Luhn-checked card numbers and resident
  registration numbers (fullwidth digits included).
* ``_HEX_SECRET_RE`` (any 32+ hex run) redacts ``payload_hash``, ``target_fingerprint``,
  ``session_id_hash`` and git SHAs, which the boundary stores. Not used: a bare hex string
  is a digest here. A hex *secret* is still caught by its key (``api_key``, ``token=...``).
* ``_SECRET_KEY_RE`` (a substring match) redacts ``auth_token_present: true``,
  ``session_station_header_names: ["Authorization"]``, ``user_id_hash`` and LLM usage
  counters (``prompt_tokens``), and drops raw user ids instead of hashing them.
* ``_RAW_PAYLOAD_KEY_RE`` matches ``result``; a receipt's ``result: "blocked"`` is a
  contract code (``triage.intake.normalize`` requires it), so short codes there are kept.
* ``max_string=240`` and 100 list items: shorter than the limits above.
* It misses provider keys (``sk-``, ``sk-ant-``, ``ghp_``, ``github_pat_``, ``AKIA``,
  ``xoxb-``, Stripe, Google, ...), PEM private keys (also cut ones), URLs with credentials,
  ``password=...`` / ``"client_secret": "..."`` in text, ``Basic``/``Token`` auth, cookie
  and API-key header values, card and resident registration numbers, IBANs, parenthesized
  phone numbers, anything URL-encoded or escaped, and identifiers under keys such as
  ``member_id``. All are added here.

``tests/triage/test_scrub.py`` proves, on a corpus of secret strings, that every secret
``scrub_trace_payload`` removes is removed here too, and that what it over-redacts survives.

Speed
-----
Each string meets cheap checks first (a whole-string match for timestamps, UUIDs and
digests; ``"@" in s``; one character-set search for digit runs; one literal search of the
lower-cased text for token prefixes and one for ``secret-ish-key[:=]``), so the real
patterns only run where they can match. Short strings found clean (``"execute"``) are
remembered in a bounded set and dict keys are classified once per process. Measured on the
development machine (Python 3.11, 2 shared vCPUs), 500 fresh realistic items (failure
records, runner events, receipts, learning attempts, audit events; unique ids and
timestamps in each): about 12 ms for items of 1.0 KB of JSON on average, about 25 ms for
2.0 KB, about 20 ms for the very first 500 in a new process. For scale,
``json.loads(json.dumps(item))`` of the same 2 KB items takes about 20 ms. Decoding
(URL-encoded words, string escapes) scrubs a decoded copy only of strings holding ``%XX``,
a ``+`` between word characters or a backslash escape: on 500 items of 1.6 KB it added about
6% (19 -> 20 ms, best of 8), on free text full of encoded and escaped values about 20-30%
(2.6 -> 2.0 MB/s). Strings are scanned in a 5,000-char window, since only 2,000 chars are
kept. Hostile text stays linear with a small constant: card windows in a digit run are
checked in constant time (Luhn prefix sums), so ``"1 1 1 ..."`` costs about 0.5 us a char
instead of 25; and every scrub_payload call has a deterministic work budget (characters
scanned, at most WORK_PER_INPUT_CHAR per input char plus WORK_ALLOWANCE; see _WorkMeter)
beyond which the item is refused with ``scrub_failed``. ``bench/scrub.py`` measures every
hostile shape against ordinary text. Running the shared rules through their hooks (the
budget's charge, the backstop) costs about 4% on 500 items of 1.6 KB (19.7 -> 20.5 ms).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import json
import logging
import math
import re
from typing import Any, Final

from graph_tool_call import learning as engine_learning
from triage_desk_client import scrub as rules

__all__ = [
    "MAX_DEPTH",
    "MAX_LIST_ITEMS",
    "MAX_NODES",
    "MAX_STRING_CHARS",
    "REDACTED",
    "ScrubError",
    "ScrubLogFilter",
    "hash_identifier",
    "scrub_payload",
    "scrub_text",
]

# The limits are the shared module's, so the client's copy and the desk's cut alike.
REDACTED: Final = rules.REDACTED
MAX_STRING_CHARS: Final = rules.MAX_STRING_CHARS
MAX_LIST_ITEMS: Final = rules.MAX_LIST_ITEMS
MAX_DEPTH: Final = rules.MAX_DEPTH
MAX_NODES: Final = rules.MAX_NODES
MAX_SUMMARY_KEYS: Final = 20
MAX_PATH_CHARS: Final = 200  # a ScrubError's path, cut in the middle beyond this
# The work budget of one scrub_payload call, in characters scanned (each pass of the
# patterns over a string, decoded copies included, plus SCAN_CALL_COST per pass): this many
# per character of the strings it was given, plus a flat allowance. See _WorkMeter.
WORK_PER_INPUT_CHAR: Final = 6
WORK_ALLOWANCE: Final = 50_000
SCAN_CALL_COST: Final = 32


class ScrubError(Exception):
    """The payload cannot be made safe; the item is rejected with code scrub_failed."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


def hash_identifier(value: str, *, hash_key: bytes) -> str:
    """Keyed HMAC-SHA256 of an identifier: 32 lowercase hex chars, stable per key.

    Keyed on purpose: the engine's unkeyed ``stable_hash`` of a user id or an email can be
    reversed by hashing every candidate.
    """
    return hmac.new(
        hash_key, str(value).encode("utf-8", "surrogatepass"), hashlib.sha256
    ).hexdigest()[:32]


# --- the engine's patterns that are right (see the module docstring) ---------------------
_ENGINE_BEARER_RE: re.Pattern[str] = engine_learning._BEARER_RE
_ENGINE_JWT_RE: re.Pattern[str] = engine_learning._JWT_RE
_ENGINE_EMAIL_RE: re.Pattern[str] = engine_learning._EMAIL_RE
_ENGINE_RAW_PAYLOAD_KEY_RE: re.Pattern[str] = engine_learning._RAW_PAYLOAD_KEY_RE
_ENGINE_EMAIL_MAX_CHARS: Final = 256
_marker = rules.marker


# --- the text rules: triage_desk_client.scrub, with the desk's budget and backstop -------
class _WorkMeter:
    """What one scrub_payload call has spent and may spend, in characters scanned.

    Every pass of the patterns over a string (each pass of the text rules, at any decoding
    depth, and the re-scans of the fixed-point loop and of truncation) is charged its length
    plus SCAN_CALL_COST; every string handed to the walker adds WORK_PER_INPUT_CHAR per char
    to the budget. So the work on a payload is at most linear in its size, whatever its
    shape, and an item that would need more is refused (scrub_failed) instead of being
    scrubbed. The count is deterministic: the same item is refused on every machine, under
    any load.
    """

    __slots__ = ("allowed", "spent")

    def __init__(self) -> None:
        self.spent = 0
        self.allowed = WORK_ALLOWANCE

    def charge(self, chars: int) -> None:
        self.spent += chars + SCAN_CALL_COST
        if self.spent > self.allowed:
            raise _Failure(_OVER_BUDGET)


_METER: contextvars.ContextVar[_WorkMeter | None] = contextvars.ContextVar(
    "scrub_work_meter", default=None
)


def _charge_work(chars: int) -> None:
    meter = _METER.get()
    if meter is not None:
        meter.charge(chars)


def _engine_backstop(text: str, lowered: str) -> str:
    """The engine's own patterns, after the shared rules. Its email pattern backtracks
    quadratically, so it only runs on short strings (ours covers the rest)."""
    if "@" in text and len(text) <= _ENGINE_EMAIL_MAX_CHARS:
        text = _ENGINE_EMAIL_RE.sub(_marker("email"), text)
    if "eyJ" in text:
        text = _ENGINE_JWT_RE.sub(_marker("jwt"), text)
    if "bearer" in lowered:
        text = _ENGINE_BEARER_RE.sub(_marker("bearer"), text)
    return text


_RULES: Final = rules.TextScrubber(charge=_charge_work, extra_pass=_engine_backstop)


def scrub_text(text: str) -> str:
    """Redact secrets and personal data in one free-text string with typed markers.

    ``Bearer abc`` -> ``[REDACTED:bearer]``, ``alice@example.com`` -> ``[REDACTED:email]``,
    and so on. Idempotent: ``scrub_text(scrub_text(s)) == scrub_text(s)``. The rules are
    ``triage_desk_client.scrub``'s (the client runs them before it spools), plus the
    engine's patterns as a backstop.
    """
    return _RULES.scrub_text(text)


# --- keys ---------------------------------------------------------------------------------
# Which names hold secrets and identifiers is the shared rule of triage_desk_client.scrub;
# raw bodies, header containers and the hashing of identifiers are the desk's own steps.
_PLAIN, _SECRET, _IDENTIFIER, _RAW, _RAW_UNLESS_CODE, _HEADERS = range(6)

_EXTRA_RAW_KEYS = frozenset(
    {"output_preview", "raw_request", "raw_response", "request_payload", "response_payload"}
)
# Our own markers used as keys ("[REDACTED_KEY:1]", "[REDACTED:email]") are plain keys.
_REDACTED_KEY_RE = re.compile(r"^\[REDACTED[^\]]*\]\Z")
_snake_case = rules.snake_case


def _hashed_key_name(snake: str) -> str:
    """user_id -> user_id_hash; just the identifier part if the rest would look secret."""
    name = snake + "_hash"
    if scrub_text(name) == name:
        return name
    match = rules.IDENTIFIER_KEY_RE.search(snake)
    return (match.group().lstrip("_") if match else "identifier") + "_hash"


def _classify_key_uncached(key: str, header: bool) -> tuple[int, str]:
    if _REDACTED_KEY_RE.match(key):
        return _PLAIN, ""
    snake = _snake_case(key)
    if header:
        if snake.endswith("_hash"):
            return _PLAIN, ""
        if rules.is_identifier_key(snake):
            return _IDENTIFIER, _hashed_key_name(snake)
        lowered = key.lower()
        if any(part in lowered for part in rules.SENSITIVE_HEADER_PARTS):
            return _SECRET, ""
        return _PLAIN, ""
    if rules.is_identifier_key(snake):
        return _IDENTIFIER, _hashed_key_name(snake)
    if rules.is_descriptive_key(snake):
        return _PLAIN, ""
    if _ENGINE_RAW_PAYLOAD_KEY_RE.search(key) or _ENGINE_RAW_PAYLOAD_KEY_RE.search(snake):
        return (_RAW_UNLESS_CODE if snake in ("output", "result") else _RAW), ""
    if snake in _EXTRA_RAW_KEYS:
        return _RAW, ""
    words = snake.split("_")
    if "headers" in words or "header" in words:  # headers, request_headers, header_pairs
        return _HEADERS, ""
    if rules.names_a_secret(snake):
        return _SECRET, ""
    return _PLAIN, ""


# --- strings ------------------------------------------------------------------------------
_CLEAN_STRINGS: set[str] = set()
_CLEAN_STRING_MAX_LEN: Final = 64
_CLEAN_STRINGS_LIMIT: Final = 16_384
_CODE_VALUE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}\Z")
_MARKER_RE = re.compile(r"\[REDACTED[^\]]{0,40}\]")


def _is_code(text: str) -> bool:
    """A code-like string ("blocked"), also once scrubbed ("[REDACTED:jwt]" counts as a word)."""
    return bool(_CODE_VALUE_RE.match(_MARKER_RE.sub("x", text) if "[" in text else text))


def _scrub_string(text: str) -> str:
    """scrub_text plus the length limit, with a memory of short strings found clean."""
    if len(text) <= _CLEAN_STRING_MAX_LEN:
        if text in _CLEAN_STRINGS:
            return text
        if rules.is_safe_shape(text):
            return text  # timestamps, UUIDs, digests: unique, so not worth remembering
    meter = _METER.get()
    if meter is not None:
        meter.allowed += WORK_PER_INPUT_CHAR * len(text)
    # Long strings: only a window is scanned, as only MAX_STRING_CHARS survive.
    out = _RULES.scrub_string(text)
    if out == text and len(text) <= _CLEAN_STRING_MAX_LEN:
        if len(_CLEAN_STRINGS) >= _CLEAN_STRINGS_LIMIT:
            _CLEAN_STRINGS.clear()
        _CLEAN_STRINGS.add(text)
    return out


# --- the walker ---------------------------------------------------------------------------
# key -> (class, output key) for keys that need no redaction themselves; the output key is
# the key, or "<snake>_hash" for identifiers. Bounded, per process.
_KEY_INFO: dict[str, tuple[int, str]] = {}
_HEADER_KEY_INFO: dict[str, tuple[int, str]] = {}
_KEY_INFO_LIMIT: Final = 4_096


def _key_info(key: str, header: bool) -> tuple[int, str] | None:
    """(class, output key), or None when the key itself looks like a secret."""
    cache = _HEADER_KEY_INFO if header else _KEY_INFO
    info = cache.get(key)
    if info is not None:
        return info
    if _scrub_string(key) != key:
        return None
    kind, hashed_key = _classify_key_uncached(key, header)
    info = (kind, hashed_key or key)
    if len(key) <= _CLEAN_STRING_MAX_LEN:
        if len(cache) >= _KEY_INFO_LIMIT:
            cache.clear()
        cache[key] = info
    return info


def _key_kind(key: str) -> int:
    info = _key_info(key, False)
    return _PLAIN if info is None else info[0]


class _Failure(Exception):
    """Raised deep in the walk; containers add their path segment on the way out."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.segments: list[str] = []


_SUMMARY_KEYS = frozenset({"redacted", "type", "size", "keys"})
_SUMMARY_TYPES = frozenset({"object", "array", "string", "number"})
_NOT_JSON = "value is not plain JSON (bytes, set, object, NaN or infinity)"
_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"
_TOO_MANY = f"more than {MAX_NODES} values"
_OVER_BUDGET = (
    f"scrubbing it would scan more than {WORK_PER_INPUT_CHAR} times its size "
    "(text shaped to make the patterns work hard)"
)
_BIG_INT = 10**12


def _json_size(value: Any) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    except RecursionError:
        raise _Failure(_TOO_DEEP) from None
    except (TypeError, ValueError):
        raise _Failure(_NOT_JSON) from None


def _path_segment_for_key(key: object) -> str:
    if not isinstance(key, str):
        return "[<non-string key>]"
    unmetered = _METER.set(None)  # naming the path of a failure, the budget may be spent
    try:
        secret = _scrub_string(key) != key
    finally:
        _METER.reset(unmetered)
    if secret:
        return ".[REDACTED_KEY]"
    return "." + (key if len(key) <= 64 else key[:64] + "...")


_list_limit = rules.list_limit


def _unsupported(value: Any) -> _Failure:
    return _Failure(f"value of type {type(value).__name__} is not JSON")


class _Walker:
    """One scrub_payload call: the hash key and the running count of values."""

    __slots__ = ("hash_key", "nodes")

    def __init__(self, hash_key: bytes) -> None:
        self.hash_key = hash_key
        self.nodes = 1

    def add_nodes(self, count: int) -> None:
        self.nodes += count
        if self.nodes > MAX_NODES:
            raise _Failure(_TOO_MANY)

    def walk(self, value: Any, depth: int) -> Any:
        """Any JSON value; containers count their children, so nothing is counted here."""
        kind = type(value)
        if kind is str:
            return _scrub_string(value)
        if kind is dict:
            return self.walk_dict(value, depth + 1, header=False)
        if kind is list or kind is tuple:
            return self.walk_list(value, depth + 1)
        if value is None or kind is bool:
            return value
        if kind is int:
            return value if -_BIG_INT < value < _BIG_INT else self.scrub_big_int(value)
        if kind is float:
            if not math.isfinite(value):
                raise _Failure("number is NaN or infinite")
            return value
        # Subclasses (str enums, OrderedDict, IntEnum, ...) are reduced to plain JSON.
        if isinstance(value, str):
            return _scrub_string(str.__str__(value))
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, int):
            return self.walk(int(value), depth)
        if isinstance(value, float):
            return self.walk(float(value), depth)
        if isinstance(value, dict):
            return self.walk_dict(dict(value), depth + 1, header=False)
        if isinstance(value, (list, tuple)):
            return self.walk_list(list(value), depth + 1)
        raise _unsupported(value)

    @staticmethod
    def scrub_big_int(value: int) -> Any:
        """A card number sent as a JSON number becomes a marker string."""
        text = str(value)
        scrubbed = scrub_text(text)
        return value if scrubbed == text else scrubbed

    def walk_dict(self, value: dict[Any, Any], depth: int, *, header: bool) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise _Failure(_TOO_DEEP)
        self.nodes += len(value)
        if self.nodes > MAX_NODES:
            raise _Failure(_TOO_MANY)
        if (
            not header
            and "name" in value
            and ("value" in value or "values" in value)
            and type(value["name"]) is str
        ):
            return self.walk_name_value(value, depth, header=False)
        cache = _HEADER_KEY_INFO if header else _KEY_INFO
        clean_strings = _CLEAN_STRINGS
        out: dict[str, Any] = {}
        redacted_keys = 0
        key: Any = None
        try:
            for key, item in value.items():
                info = cache.get(key)
                if info is None:
                    if type(key) is not str:
                        if not isinstance(key, str):
                            raise _Failure("object key is not a string")
                        key = str.__str__(key)
                    info = _key_info(key, header)
                    if info is None:
                        redacted_keys += 1
                        while f"[REDACTED_KEY:{redacted_keys}]" in value:
                            redacted_keys += 1
                        info = (_PLAIN, f"[REDACTED_KEY:{redacted_keys}]")
                kind, out_key = info
                if kind == _PLAIN:
                    # The common cases, inlined: a short string already known to be clean,
                    # booleans, nulls and small integers.
                    item_type = type(item)
                    if item_type is str:
                        if (
                            len(item) <= _CLEAN_STRING_MAX_LEN and item in clean_strings
                        ) or rules.is_span_identity(key, item):
                            out[out_key] = item
                        else:
                            out[out_key] = _scrub_string(item)
                    elif (
                        item is None
                        or item_type is bool
                        or (item_type is int and -_BIG_INT < item < _BIG_INT)
                    ):
                        out[out_key] = item
                    elif item_type is dict:
                        out[out_key] = self.walk_dict(item, depth + 1, header=False)
                    else:
                        out[out_key] = self.walk(item, depth)
                elif kind == _SECRET:
                    out[out_key] = self.secret_value(key, item)
                elif kind == _IDENTIFIER:
                    if out_key in value or out_key in out:
                        continue  # the caller's own hash wins; the raw value is dropped
                    out[out_key] = self.hashed(item)
                elif kind == _HEADERS:
                    out[out_key] = self.walk_headers(item, depth)
                elif kind == _RAW_UNLESS_CODE and (
                    item is None or (type(item) is str and _is_code(item))
                ):
                    out[out_key] = self.walk(item, depth)  # a receipt's result: "blocked"
                else:
                    out[out_key] = self.summarize(item)
        except _Failure as failure:
            failure.segments.append(_path_segment_for_key(key))
            raise
        return out

    def walk_name_value(self, value: dict[str, Any], depth: int, *, header: bool) -> Any:
        """{"name": N, "value": V} objects (headers, parameters): V is treated as if keyed by N."""
        name: str = value["name"]
        info = _key_info(name, header)
        if info is None:
            # The name itself held a secret: go by its scrubbed text, as a second pass will.
            scrubbed_name = _scrub_string(name)
            info = _key_info(scrubbed_name, header) or (_PLAIN, scrubbed_name)
        kind, out_name = info
        out: dict[str, Any] = {}
        key: Any = None
        try:
            for key, item in value.items():
                if type(key) is not str:
                    raise _Failure("object key is not a string")
                if key == "name":
                    out["name"] = out_name
                elif key in ("value", "values"):
                    if kind == _SECRET:
                        out[key] = self.secret_value(name, item)
                    elif kind == _IDENTIFIER:
                        out[key] = self.hashed(item)
                    elif kind == _RAW_UNLESS_CODE and (
                        item is None or (type(item) is str and _is_code(item))
                    ):
                        out[key] = self.walk(item, depth)
                    elif kind in (_RAW, _RAW_UNLESS_CODE):
                        out[key] = self.summarize(item)
                    else:
                        out[key] = self.walk(item, depth)
                else:
                    out.update(self.walk_dict({key: item}, depth, header=False))
        except _Failure as failure:
            failure.segments.append(_path_segment_for_key(key))
            raise
        return out

    def walk_list(self, value: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
        if depth > MAX_DEPTH:
            raise _Failure(_TOO_DEEP)
        size = len(value)
        limit = _list_limit(value)
        kept = min(size, limit)
        self.add_nodes(kept)
        out: list[Any] = []
        index = 0
        try:
            for index in range(kept):
                item = value[index]
                if (
                    (type(item) is list or type(item) is tuple)
                    and len(item) == 2
                    and type(item[0]) is str
                    and item[0].lower() in rules.WELL_KNOWN_SECRET_HEADERS
                ):
                    # ["Authorization", "..."] is a header pair wherever it appears.
                    out.append(self.walk_header_pair(item[0], item[1], depth + 1))
                else:
                    out.append(self.walk(item, depth))
        except _Failure as failure:
            failure.segments.append(f"[{index}]")
            raise
        if size > limit:
            out.append(f"[truncated {size - limit} items]")
        return out

    def walk_headers(self, value: Any, depth: int) -> Any:
        """Headers as a dict, [name, value] pairs or {"name": .., "value": ..} objects."""
        if isinstance(value, dict):
            return self.walk_dict(dict(value), depth + 1, header=True)
        if not isinstance(value, (list, tuple)):
            return self.walk(value, depth)
        if depth + 1 > MAX_DEPTH:
            raise _Failure(_TOO_DEEP)
        limit = _list_limit(value)
        kept = min(len(value), limit)
        self.add_nodes(kept)
        out: list[Any] = []
        index = 0
        try:
            for index in range(kept):
                item = value[index]
                if isinstance(item, (list, tuple)) and len(item) == 2 and type(item[0]) is str:
                    out.append(self.walk_header_pair(item[0], item[1], depth + 2))
                elif isinstance(item, dict) and type(item.get("name")) is str:
                    self.add_nodes(len(item))
                    out.append(self.walk_name_value(item, depth + 2, header=True))
                else:
                    out.append(self.walk(item, depth + 1))
        except _Failure as failure:
            failure.segments.append(f"[{index}]")
            raise
        if len(value) > limit:
            out.append(f"[truncated {len(value) - limit} items]")
        return out

    def walk_header_pair(self, name: str, value: Any, depth: int) -> list[Any]:
        """[name, value]: the value is treated as the header's value (the pair is at depth)."""
        try:
            pair = self.walk_dict({name: value}, depth, header=True)
        except _Failure as failure:
            failure.segments[-1] = "[1]"  # the pair's value, not a dict key
            raise
        pair_name, pair_value = next(iter(pair.items()))
        return [pair_name, pair_value]

    @staticmethod
    def secret_value(key: str, value: Any) -> Any:
        """What a key naming a secret keeps: booleans and nulls (and LLM token counts)."""
        if value is None or type(value) is bool:
            return value
        if type(value) is int and _snake_case(key).endswith("tokens"):
            return value  # usage counters: prompt_tokens, max_tokens
        if type(value) is float and not math.isfinite(value):
            raise _Failure("number is NaN or infinite")
        if not isinstance(value, (str, int, float, dict, list, tuple)):
            raise _unsupported(value)
        return REDACTED

    def hashed(self, value: Any) -> Any:
        """An identifier becomes hash_identifier(str(value)); nulls, booleans and "" stay."""
        if value is None or type(value) is bool or value == "":
            return value
        if type(value) is str:
            return hash_identifier(value, hash_key=self.hash_key)
        if isinstance(value, (list, tuple)):
            kept = value[:MAX_LIST_ITEMS]
            self.add_nodes(len(kept))
            return [self.hashed(item) for item in kept]
        if isinstance(value, float) and not math.isfinite(value):
            raise _Failure("number is NaN or infinite")
        if isinstance(value, str):
            return hash_identifier(str.__str__(value), hash_key=self.hash_key)
        if isinstance(value, (int, float)):
            return hash_identifier(str(value), hash_key=self.hash_key)
        if isinstance(value, dict):
            _json_size(value)  # plain JSON only
            canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
            return hash_identifier(canonical, hash_key=self.hash_key)
        raise _unsupported(value)

    def summarize(self, value: Any) -> Any:
        """A raw body becomes its shape: type, JSON size and top-level field names."""
        if value is None or type(value) is bool:
            return value
        if isinstance(value, dict) and value.get("redacted") == "raw_body":
            existing = self.existing_summary(value)
            if existing is not None:
                return existing
        summary: dict[str, Any] = {"redacted": "raw_body"}
        if isinstance(value, dict):
            summary["type"] = "object"
        elif isinstance(value, (list, tuple)):
            summary["type"] = "array"
        elif isinstance(value, str):
            summary["type"] = "string"
        elif isinstance(value, (int, float)):
            summary["type"] = "number"
        else:
            raise _unsupported(value)
        summary["size"] = _json_size(value)
        if isinstance(value, dict):
            summary["keys"] = self.summary_keys(list(value)[:MAX_SUMMARY_KEYS])
        return summary

    def existing_summary(self, value: dict[Any, Any]) -> dict[str, Any] | None:
        """An earlier pass's summary passes through, so scrubbing stays idempotent."""
        keys = value.get("keys", [])
        if not (
            set(value) <= _SUMMARY_KEYS
            and value.get("type") in _SUMMARY_TYPES
            and type(value.get("size")) is int
            and isinstance(keys, list)
            and len(keys) <= MAX_SUMMARY_KEYS
        ):
            return None
        out: dict[str, Any] = {"redacted": "raw_body", "type": value["type"], "size": value["size"]}
        if "keys" in value:
            out["keys"] = self.summary_keys(keys)
        return out

    @staticmethod
    def summary_keys(keys: list[Any]) -> list[str]:
        names: list[str] = []
        for number, key in enumerate(keys, start=1):
            if not isinstance(key, str):
                raise _Failure("object key is not a string")
            clean = _scrub_string(key)
            names.append(clean if clean == key else f"[REDACTED_KEY:{number}]")
        return names


def _shortened_path(path: str) -> str:
    """A path fits the ledger's field column: its start and its end, when it is longer."""
    if len(path) <= MAX_PATH_CHARS:
        return path
    keep = (MAX_PATH_CHARS - 5) // 2
    return f"{path[:keep]}[...]{path[-keep:]}"


def scrub_payload(value: Any, *, path: str = "body", hash_key: bytes) -> Any:
    """Return a scrubbed, JSON-safe copy of ``value``; never mutates it.

    Raises :class:`ScrubError` (with ``.path``) when the value cannot be made safe: nesting
    deeper than 32 levels, more than 20,000 values, bytes / sets / other objects, NaN or
    infinite floats, non-string object keys. The root is never treated as a raw body.
    """
    walker = _Walker(hash_key)
    metering = _METER.set(_WorkMeter())
    try:
        return walker.walk(value, 0)
    except _Failure as failure:
        full_path = path + "".join(reversed(failure.segments))
        raise ScrubError(failure.message, path=_shortened_path(full_path)) from None
    except RecursionError:
        raise ScrubError(_TOO_DEEP, path=path) from None
    finally:
        _METER.reset(metering)


# --- logging ------------------------------------------------------------------------------
_UNFORMATTABLE: Final = "[log message could not be formatted; scrubbed]"


class ScrubLogFilter(logging.Filter):
    """Scrubs every record's message, exception and stack text; never raises, never drops.

    Attach it to handlers (config.settings does), so records from any logger are covered.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            self._scrub(record)
        except Exception:  # a log filter must not break logging; drop what it cannot check
            record.msg, record.args = _UNFORMATTABLE, None
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True

    @staticmethod
    def _scrub(record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # bad format args: keep the template, scrubbed, and say so
            record.msg, record.args = f"{scrub_text(str(record.msg))} {_UNFORMATTABLE}", None
        else:
            scrubbed = scrub_text(message)
            if scrubbed != message:
                # A secret may span the template and its args ("Bearer %s"): replace both.
                record.msg, record.args = scrubbed, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub_text(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub_text(record.stack_info)
