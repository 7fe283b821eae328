"""Make every ingested item body safe before it reaches the database, a log line or Celery.

The security boundary (DESIGN section 6, seed 000 "Security Boundary") allows booleans such as
``auth_token_present``, header *names*, field names and paths, HTTP statuses, hashes and
scrubbed values, and forbids bearer tokens, ``Authorization`` / ``Cookie`` / API-key values,
raw request and response bodies, raw user ids, emails, phone numbers and card numbers.

Public API: :func:`scrub_payload` (a whole nested JSON body), :func:`scrub_text` (one
free-text string, also used by :class:`ScrubLogFilter`), :func:`hash_identifier` and
:class:`ScrubError` (the item is rejected with ``scrub_failed``; ``.path`` names the field,
the message never contains the offending value).

How graph-tool-call's ``scrub_trace_payload`` is used, and why not as a whole
---------------------------------------------------------------------------
``graph_tool_call.learning.scrub_trace_payload`` (0.47.0) is right about bearer tokens,
JWTs and emails, and its ``_BEARER_RE`` / ``_JWT_RE`` / ``_EMAIL_RE`` are applied here to
every string as a final backstop pass (after our own, broader patterns have run, so they
rarely find anything left). Its ``_RAW_PAYLOAD_KEY_RE`` decides which keys hold raw bodies.
Calling the whole function, or its other patterns, would break the boundary the other way:

* ``_PHONE_RE`` (any run of 9+ digits, spaces and dashes) redacts ISO dates and timestamps
  (``2026-11-29T20:16:13Z``), order numbers (``ORD-2026-000123``) and epoch milliseconds.
  Replaced by format-specific phone patterns (``+82 10-1234-5678``, ``010-1234-5678``,
  ``(555) 123-4567``, ``+1 555 123 4567``), Luhn-checked card numbers and resident
  registration numbers.
* ``_HEX_SECRET_RE`` (any 32+ hex run) redacts ``payload_hash``, ``target_fingerprint``,
  ``session_id_hash`` and git SHAs, which the boundary explicitly stores. Not used: a bare
  hex string is treated as a digest. A hex *secret* is still caught by its key
  (``api_key``, ``token=...``) or its prefix.
* ``_SECRET_KEY_RE`` (a substring match on the key) redacts ``auth_token_present: true``,
  ``session_station_header_names: ["Authorization"]``, ``user_id_hash`` and LLM usage
  counters such as ``prompt_tokens``. Replaced by word-level key matching with allowed
  suffixes (``_present``, ``_names``, ``_hash``, ``_count``, ...), booleans always kept, and
  identifiers hashed instead of dropped (``user_id`` -> ``user_id_hash``).
* ``_RAW_PAYLOAD_KEY_RE`` also matches ``result`` and ``output``; a receipt's
  ``result: "blocked"`` is a contract code, so a short code-like string under those two
  keys is kept (a structured value is still summarized).
* It misses provider keys (``sk-``, ``ghp_``, ``AKIA``, ``xoxb-``, Stripe, Google), PEM
  private keys, URLs with credentials, ``password=...`` in text, ``Basic``/``Token`` auth,
  cookies and API-key headers, card numbers, resident registration numbers and
  parenthesized phone numbers; it leaves identifiers under keys such as ``member_id``.
  All are added here.

``tests/triage/test_scrub.py`` proves, on a corpus of secret strings, that every secret
``scrub_trace_payload`` removes is removed here too.

Speed
-----
Every string first meets cheap substring checks (``"@" in s``, ``"PRIVATE KEY" in s``, one
digit-run search, ...) so the expensive patterns only run where they can match; strings
that come out unchanged (short codes such as ``"execute"``) are remembered in a bounded
set; dict keys are classified once and cached. Measured on this machine (Python 3.11,
2 cores): 500 realistic items (failure records, runner events, receipts, learning
attempts, audit events; 1.0-1.9 KB of JSON each, every one with unique ids and
timestamps) take about 17 ms in total (~34 us per item; the first, cold run ~24 ms).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import re
from typing import Any, Final

from graph_tool_call import learning as engine_learning

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

REDACTED: Final = "[REDACTED]"
MAX_STRING_CHARS: Final = 2_000
MAX_LIST_ITEMS: Final = 200
MAX_DEPTH: Final = 32
MAX_NODES: Final = 20_000
MAX_SUMMARY_KEYS: Final = 20


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
    return hmac.new(hash_key, str(value).encode("utf-8"), hashlib.sha256).hexdigest()[:32]


# --- the engine's patterns that are right (see the module docstring) ---------------------
_ENGINE_BEARER_RE: re.Pattern[str] = engine_learning._BEARER_RE
_ENGINE_JWT_RE: re.Pattern[str] = engine_learning._JWT_RE
_ENGINE_EMAIL_RE: re.Pattern[str] = engine_learning._EMAIL_RE
_ENGINE_RAW_PAYLOAD_KEY_RE: re.Pattern[str] = engine_learning._RAW_PAYLOAD_KEY_RE


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# --- text patterns ------------------------------------------------------------------------
# Every quantifier on a run of characters either is bounded or starts where a lookbehind
# allows only the beginning of that run, so no pattern goes quadratic on long input.

_PEM_RE = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r".*?(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
# scheme://userinfo@host: userinfo is dropped, scheme and host stay.
_URL_USERINFO_RE = re.compile(r"(?<=://)[^\s/?#@\[\]<>\"']{1,512}@")

_TOKEN_RE = re.compile(
    r"(?P<bearer>\b(?i:bearer)\s+(?!\[REDACTED)[^\s\"'<>,;]+)"
    r"|(?P<basic>\b(?i:basic)\s+"
    r"(?=[A-Za-z0-9+/=]{0,400}?[0-9+/=]|[A-Za-z0-9+/]{0,400}?[a-z][A-Z])"
    r"[A-Za-z0-9+/]{6,}={0,2}(?![A-Za-z0-9+/=]))"
    r"|(?P<auth_token>\b(?i:token)\s+"
    r"(?=[A-Za-z0-9._~+/=-]{0,200}?\d)(?=[A-Za-z0-9._~+/=-]{0,200}?[A-Za-z])"
    r"[A-Za-z0-9._~+/=-]{12,})"
    r"|(?P<jwt>(?<![A-Za-z0-9_])eyJ[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]*){0,4})"
    r"|(?P<anthropic_key>(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{16,})"
    r"|(?P<openai_key>(?<![A-Za-z0-9])sk-(?=[A-Za-z0-9_-]{0,300}?\d)[A-Za-z0-9_-]{16,})"
    r"|(?P<stripe_key>(?<![A-Za-z0-9])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,})"
    r"|(?P<github_token>(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}))"
    r"|(?P<aws_access_key_id>(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9]))"
    r"|(?P<aws_secret_key>(?<![A-Za-z0-9])(?P<aws_prefix>(?i:aws_?secret_?access_?key)"
    r"[\"']?\s{0,3}[:=]\s{0,3}[\"']?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=]))"
    r"|(?P<slack_token>(?<![A-Za-z0-9])xox[abprse]-[A-Za-z0-9-]{10,})"
    r"|(?P<google_api_key>(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35,})"
    r"|(?P<google_oauth_token>(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_-]{20,})"
    r"|(?P<huggingface_token>(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,})"
    r"|(?P<gitlab_token>(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,})"
    r"|(?P<npm_token>(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36,})"
)
# Cheap reasons to run _TOKEN_RE at all, searched in the lower-cased text: every branch
# starts with a literal, so the engine skips ahead in C instead of trying 16 branches.
_TOKEN_GATE_RE = re.compile(
    r"bearer|basic|token|eyj|sk-|k_live_|k_test_|gh[pousr]_|github_pat_|akia|asia|xox|aiza"
    r"|ya29\.|hf_|glpat-|npm_|aws"
)

# Header lines in free text: the whole value up to the end of the line or a quote.
_HEADER_LINE_RE = re.compile(
    r"(?<![\w-])(?P<name>[\"']?(?i:proxy-authorization|authorization|set-cookie|cookie"
    r"|x-api-key|x-auth-token|x-amz-security-token)[\"']?\s{0,3}:\s{0,3})"
    r"(?P<value>[^\r\n\"']{1,4000})"
)

# key=value / key: value / "key": "value" in free text, for keys that name a secret.
_TEXT_PAIR_RE = re.compile(
    r"(?<![\w.-])(?P<quote>[\"']?)(?P<key>[A-Za-z_][A-Za-z0-9_.-]{0,63})(?P=quote)"
    r"\s{0,3}(?P<sep>[:=])\s{0,3}"
    r"(?P<value>\"(?:[^\"\\\n]|\\.){0,2000}\"|'[^'\n]{0,2000}'|\[REDACTED[^\]\s]{0,40}\]"
    r"|[^\s,;&\"'<>(){}\[\]]{1,2000})"
)
# Words one of the keys above must contain (searched in the lower-cased text).
_TEXT_PAIR_GATE_RE = re.compile(
    r"pass|pwd|secret|token|key|auth|cookie|session|credential|sign|user|member|customer"
    r"|account|mail|phone|mobile"
)
_BOOLEAN_WORDS = frozenset({"true", "false", "null", "none", "yes", "no", "[]", "{}"})

# Emails: like the engine's _EMAIL_RE, but starting only where a local part can start.
_EMAIL_RE = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,24}\b"
)

# Numbers that identify a person or a card. ISO dates and times, versions, UUIDs, hex
# digests, epoch times, HTTP statuses, ports and ids like ORD-2026-000123 never match:
# every branch refuses to start right after a word character, '.', '-' or '+'.
_NUMBER_RE = re.compile(
    r"(?P<rrn>(?<![\w.+-])\d{6}-[1-8]\d{6}(?![\w-]))"
    r"|(?P<card>(?<![\w.+-])\d(?:[ -]?\d){12,18}(?![\w-]|\.\d))"
    r"|(?P<phone_intl>(?<![\w+])\+\d(?:[ .()-]{0,2}\d){7,14}(?![\w-]|\.\d))"
    r"|(?P<phone_kr>(?<![\w.+-])0(?:1[016789]|2|[3-6][1-5]|70|50\d?)[ .-]?\d{3,4}[ .-]?\d{4}"
    r"(?![\w-]|\.\d))"
    r"|(?P<phone_us>(?<![\w.+-])(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-]|\.\d))"
)
_PHONE_ONLY_RE = re.compile(
    r"(?P<phone_kr>(?<![\w.+-])0(?:1[016789]|2|[3-6][1-5]|70|50\d?)[ .-]?\d{3,4}[ .-]?\d{4}"
    r"(?![\w-]|\.\d))"
    r"|(?P<phone_us>(?<![\w.+-])(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-]|\.\d))"
)
# Every number above is a run of 9+ digits, spaces, dots, dashes and parentheses; finding
# one such run is cheap (the pattern starts with a character set).
_NUMBER_GATE_RE = re.compile(r"[+(\d][\d ().-]{7,}\d")
# Whole strings of these shapes hold nothing to redact: timestamps, UUIDs, hex digests.
_SAFE_SHAPE_RE = re.compile(
    r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d{1,9})?)?(?:Z|[+-]\d\d:?\d\d)?)?"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?:sha\d{1,3}:|md5:)?(?=\d{0,127}[a-f])[0-9a-f]{16,128}"
)


def _luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        number = ord(char) - 48
        if position % 2:
            number *= 2
            if number > 9:
                number -= 9
        total += number
    return total % 10 == 0


def _number_replacement(match: re.Match[str]) -> str:
    kind = match.lastgroup or "number"
    text = match.group()
    if kind == "card":
        digits = text.replace(" ", "").replace("-", "")
        # Payment networks issue cards starting with 2-6; order numbers and epoch
        # milliseconds (starting with 1) stay, and so does anything failing the Luhn check.
        if 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn_valid(digits):
            return _marker("card")
        # Not a card; a phone number may still hide inside the run.
        return _PHONE_ONLY_RE.sub(_phone_replacement, text)
    if kind == "phone_intl":
        digit_count = sum(char.isdigit() for char in text)
        return _marker("phone") if 8 <= digit_count <= 15 else text
    if kind == "rrn":
        return _marker("resident_id")
    return _marker("phone")


def _phone_replacement(match: re.Match[str]) -> str:
    return _marker("phone")


def _token_replacement(match: re.Match[str]) -> str:
    kind = match.lastgroup or "secret"
    if kind == "jwt":
        text = match.group()
        if "." not in text and len(text) < 20:
            return text
    elif kind == "aws_secret_key":
        return match.group("aws_prefix") + _marker(kind)
    return _marker(kind)


def _header_line_replacement(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.lstrip().startswith("[REDACTED"):
        return match.group()
    return match.group("name") + _marker("secret")


def _text_pair_replacement(match: re.Match[str]) -> str:
    key = match.group("key")
    kind = _classify_key(key)[0]
    if kind not in (_SECRET, _IDENTIFIER):
        return match.group()
    value = match.group("value")
    quote = value[0] if value[:1] in ("'", '"') else ""
    inner = value[1:-1] if quote else value
    if not inner or inner.startswith("[REDACTED") or inner.lower() in _BOOLEAN_WORDS:
        return match.group()
    if kind == _IDENTIFIER:
        label = "identifier"
    else:
        snake = _snake_case(key)
        if snake.endswith("tokens") and inner.isdigit():
            return match.group()  # LLM usage counters (prompt_tokens=123)
        # A generic word ("token: expired") with a short plain word after it is prose.
        if (
            snake in _WEAK_SECRET_KEYS
            and match.group("sep") == ":"
            and inner.isalpha()
            and len(inner) < 12
        ):
            return match.group()
        label = "secret"
    start = match.start("value") - match.start()
    return match.group()[:start] + quote + _marker(label) + quote


def _scrub_once(text: str) -> str:
    if _SAFE_SHAPE_RE.fullmatch(text):
        return text
    out = text
    lowered = text.lower()
    if _TOKEN_GATE_RE.search(lowered) or "private key" in lowered:
        if "PRIVATE KEY" in out:
            out = _PEM_RE.sub(_marker("private_key"), out)
        out = _TOKEN_RE.sub(_token_replacement, out)
    has_at = "@" in out
    if has_at and "://" in out:
        out = _URL_USERINFO_RE.sub(_marker("userinfo") + "@", out)
    if (":" in out or "=" in out) and _TEXT_PAIR_GATE_RE.search(lowered):
        out = _HEADER_LINE_RE.sub(_header_line_replacement, out)
        out = _TEXT_PAIR_RE.sub(_text_pair_replacement, out)
    if has_at:
        out = _EMAIL_RE.sub(_marker("email"), out)
    if _NUMBER_GATE_RE.search(out):
        out = _NUMBER_RE.sub(_number_replacement, out)
    # The engine's own patterns, as a backstop after ours.
    if has_at and "@" in out:
        out = _ENGINE_EMAIL_RE.sub(_marker("email"), out)
    if "eyJ" in out:
        out = _ENGINE_JWT_RE.sub(_marker("jwt"), out)
    if "bearer" in lowered:
        out = _ENGINE_BEARER_RE.sub(_marker("bearer"), out)
    return out


def scrub_text(text: str) -> str:
    """Redact secrets and personal data in one free-text string with typed markers.

    ``Bearer abc`` -> ``[REDACTED:bearer]``, ``alice@example.com`` -> ``[REDACTED:email]``,
    and so on. Idempotent: ``scrub_text(scrub_text(s)) == scrub_text(s)``.
    """
    if not isinstance(text, str):
        text = str(text)
    out = _scrub_once(text)
    # A redaction can change the context of its neighbours; repeat to a fixed point.
    for _ in range(3):
        if out == text:
            break
        text, out = out, _scrub_once(out)
    return out


# --- keys ---------------------------------------------------------------------------------
_PLAIN, _SECRET, _IDENTIFIER, _RAW, _RAW_UNLESS_CODE, _HEADERS = range(6)

# Keys ending like these describe a secret without holding it (the boundary stores them).
_ALLOWED_SUFFIXES = (
    "_present",
    "_names",
    "_name",
    "_hash",
    "_hashes",
    "_count",
    "_counts",
    "_required",
    "_fingerprint",
    "_type",
    "_kind",
    "_source",
    "_usage",
    "_status",
    "_state",
    "_configured",
    "_missing",
    "_enabled",
    "_length",
    "_size",
    "_ttl",
    "_at",
    "_expires_in",
    "_id",
    "_ref",
    "_env",
    "_env_var",
    "_header_name",
    "_location",
    "_policy",
    "_scope",
    "_scopes",
    "_reason",
)
_SECRET_WORDS = frozenset(
    {
        "authorization",
        "cookie",
        "cookies",
        "token",
        "secret",
        "secrets",
        "password",
        "passwords",
        "passwd",
        "pwd",
        "passphrase",
        "credential",
        "credentials",
        "session",
        "apikey",
        "privatekey",
        "accesskey",
        "secretkey",
        "signingkey",
    }
)
# A word ending in one of these names a secret too (accesstoken, xapikey, sessiontoken).
_SECRET_WORD_ENDINGS = ("token", "secret", "password", "passwd", "apikey", "cookie", "privatekey")
_SECRET_WORD_PAIRS = frozenset(
    {
        ("api", "key"),
        ("private", "key"),
        ("access", "key"),
        ("secret", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("master", "key"),
        ("auth", "key"),
        ("set", "cookie"),
        ("client", "secret"),
    }
)
# Single generic words that also occur in prose ("token: expired").
_WEAK_SECRET_KEYS = frozenset({"token", "session", "credential", "credentials", "auth"})
_IDENTIFIER_KEY_RE = re.compile(
    r"(?:^|_)(?:(?:x_)?(?:user|member|customer|session|account)_?ids?"
    r"|e_?mails?|e_?mail_address(?:es)?|phone(?:_numbers?)?|phones|mobile(?:_number)?)$"
)
# Header names whose values are credentials (rule: any name containing one of these).
_SENSITIVE_HEADER_PARTS = (
    "auth",
    "token",
    "secret",
    "key",
    "session",
    "cookie",
    "password",
    "credential",
    "signature",
)
_EXTRA_RAW_KEYS = frozenset(
    {"output_preview", "raw_request", "raw_response", "request_payload", "response_payload"}
)
_REDACTED_KEY_RE = re.compile(r"^\[REDACTED_KEY:\d+\]$")
_CAMEL_BOUNDARY_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_BOUNDARY_2 = re.compile(r"([a-z0-9])([A-Z])")
_NON_ALNUM = re.compile(r"[^0-9A-Za-z]+")


def _snake_case(key: str) -> str:
    snake = _CAMEL_BOUNDARY_2.sub(r"\1_\2", _CAMEL_BOUNDARY_1.sub(r"\1_\2", key))
    return _NON_ALNUM.sub("_", snake).strip("_").lower()


_KEY_CACHE: dict[tuple[str, bool], tuple[int, str]] = {}
_KEY_CACHE_LIMIT: Final = 4_096


def _classify_key(key: str, header: bool = False) -> tuple[int, str]:
    """(class, hashed key name) for a dict key or a header name; cached per process."""
    cache_key = (key, header)
    cached = _KEY_CACHE.get(cache_key)
    if cached is not None:
        return cached
    result = _classify_key_uncached(key, header)
    # Only short keys with nothing to redact in them are remembered.
    if len(key) <= 64 and "@" not in key:
        if len(_KEY_CACHE) >= _KEY_CACHE_LIMIT:
            _KEY_CACHE.clear()
        _KEY_CACHE[cache_key] = result
    return result


def _classify_key_uncached(key: str, header: bool) -> tuple[int, str]:
    if _REDACTED_KEY_RE.match(key):
        return _PLAIN, ""
    snake = _snake_case(key)
    if header:
        if _IDENTIFIER_KEY_RE.search(snake):
            return _IDENTIFIER, snake + "_hash"
        lowered = key.lower()
        if any(part in lowered for part in _SENSITIVE_HEADER_PARTS):
            return _SECRET, ""
        return _PLAIN, ""
    if _IDENTIFIER_KEY_RE.search(snake):
        return _IDENTIFIER, snake + "_hash"
    if snake.endswith(_ALLOWED_SUFFIXES):
        return _PLAIN, ""
    if _ENGINE_RAW_PAYLOAD_KEY_RE.search(key) or _ENGINE_RAW_PAYLOAD_KEY_RE.search(snake):
        return (_RAW_UNLESS_CODE if snake in ("output", "result") else _RAW), ""
    if snake in _EXTRA_RAW_KEYS:
        return _RAW, ""
    if snake == "headers" or snake.endswith("_headers"):
        return _HEADERS, ""
    words = snake.split("_")
    for index, word in enumerate(words):
        if word in _SECRET_WORDS or word.endswith(_SECRET_WORD_ENDINGS):
            return _SECRET, ""
        if index and (words[index - 1], word) in _SECRET_WORD_PAIRS:
            return _SECRET, ""
    return _PLAIN, ""


# --- strings ------------------------------------------------------------------------------
_CLEAN_STRINGS: set[str] = set()
_CLEAN_STRING_MAX_LEN: Final = 64
_CLEAN_STRINGS_LIMIT: Final = 16_384
# Long strings are scanned in a window, not whole; see _scrub_string.
_SCAN_WINDOW: Final = 8 * MAX_STRING_CHARS
_CODE_VALUE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$")


def _truncate(scrubbed: str, original_length: int, limit: int) -> str:
    """Cut to at most `limit` chars, suffix included, so a second pass leaves it alone."""
    total = max(original_length, len(scrubbed))
    head = scrubbed
    for _ in range(4):
        head = head[: limit - len(f"...[truncated {total} chars]")]
        candidate = f"{head}...[truncated {total - len(head)} chars]"
        if scrub_text(candidate) == candidate:
            return candidate
        # The cut made something new look like a secret (a digit run, say): scrub again.
        head = scrub_text(head)
    return _marker("unscrubbable_text")


def _scrub_string(text: str) -> str:
    if len(text) <= _CLEAN_STRING_MAX_LEN and text in _CLEAN_STRINGS:
        return text
    if len(text) > _SCAN_WINDOW:
        # Only the first MAX_STRING_CHARS survive, so scrub a generous window (and widen it
        # while redactions shrink it below what is kept), never megabytes.
        window = _SCAN_WINDOW
        while True:
            out = scrub_text(text[:window])
            if window >= len(text) or len(out) > 2 * MAX_STRING_CHARS:
                break
            window *= 4
        return _truncate(out, len(text), MAX_STRING_CHARS)
    out = scrub_text(text)
    if len(out) > MAX_STRING_CHARS:
        return _truncate(out, len(text), MAX_STRING_CHARS)
    if out == text and len(text) <= _CLEAN_STRING_MAX_LEN:
        if len(_CLEAN_STRINGS) >= _CLEAN_STRINGS_LIMIT:
            _CLEAN_STRINGS.clear()
        _CLEAN_STRINGS.add(text)
    return out


# --- the walker ---------------------------------------------------------------------------
class _Failure(Exception):
    """Raised deep in the walk; containers add their path segment on the way out."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.segments: list[str] = []


_TRUNCATED_ITEMS_RE = re.compile(r"^\[truncated \d+ items\]$")
_SUMMARY_KEYS = frozenset({"redacted", "type", "size", "keys"})
_SUMMARY_TYPES = frozenset({"object", "array", "string", "number"})


def _json_size(value: Any) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    except RecursionError:
        raise _Failure(f"value nested deeper than {MAX_DEPTH} levels") from None
    except (TypeError, ValueError):
        raise _Failure("value is not plain JSON (bytes, set, object, NaN or infinity)") from None


def _path_segment_for_key(key: object) -> str:
    if not isinstance(key, str):
        return "<non-string key>"
    if scrub_text(key) != key:
        return "[REDACTED_KEY]"
    return "." + (key if len(key) <= 64 else key[:64] + "...")


class _Walker:
    __slots__ = ("hash_key", "nodes")

    def __init__(self, hash_key: bytes) -> None:
        self.hash_key = hash_key
        self.nodes = 0

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Failure(f"more than {MAX_NODES} values")

    def walk(self, value: Any, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Failure(f"more than {MAX_NODES} values")
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
            return self.scrub_int(value)
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
            return self.scrub_int(int(value))
        if isinstance(value, float):
            return self.walk(float(value), depth)
        if isinstance(value, dict):
            return self.walk_dict(dict(value), depth + 1, header=False)
        if isinstance(value, (list, tuple)):
            return self.walk_list(list(value), depth + 1)
        raise _Failure(f"value of type {type(value).__name__} is not JSON")

    @staticmethod
    def scrub_int(value: int) -> Any:
        # A card number sent as a JSON number.
        if value >= 10**12 or value <= -(10**12):
            text = str(value)
            scrubbed = scrub_text(text)
            if scrubbed != text:
                return scrubbed
        return value

    def walk_dict(self, value: dict[Any, Any], depth: int, *, header: bool) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise _Failure(f"nested deeper than {MAX_DEPTH} levels")
        out: dict[str, Any] = {}
        redacted_keys = 0
        key: Any = None
        try:
            if not header and "name" in value and ("value" in value or "values" in value):
                name = value["name"]
                if type(name) is str:
                    return self.walk_name_value(value, depth, header=False)
            for key, item in value.items():
                if type(key) is not str:
                    if isinstance(key, str):
                        key = str.__str__(key)
                    else:
                        raise _Failure("object key is not a string")
                clean_key = _scrub_string(key)
                if clean_key != key:
                    redacted_keys += 1
                    while f"[REDACTED_KEY:{redacted_keys}]" in value:
                        redacted_keys += 1
                    clean_key = f"[REDACTED_KEY:{redacted_keys}]"
                    kind, hashed_key = _PLAIN, ""
                else:
                    kind, hashed_key = _classify_key(key, header)
                if kind == _PLAIN:
                    out[clean_key] = self.walk(item, depth)
                elif kind == _SECRET:
                    out[clean_key] = self.secret_value(key, item)
                elif kind == _IDENTIFIER:
                    if hashed_key in value or hashed_key in out:
                        self.count()
                        continue  # the caller's own hash wins; the raw value is dropped
                    out[hashed_key] = self.hashed(item)
                elif kind == _HEADERS:
                    out[clean_key] = self.walk_headers(item, depth)
                elif kind == _RAW_UNLESS_CODE and (
                    item is None or (type(item) is str and _CODE_VALUE_RE.match(item))
                ):
                    out[clean_key] = self.walk(item, depth)
                else:
                    out[clean_key] = self.summarize(item)
        except _Failure as failure:
            failure.segments.append(_path_segment_for_key(key))
            raise
        return out

    def walk_name_value(self, value: dict[str, Any], depth: int, *, header: bool) -> Any:
        """{"name": N, "value": V} objects: V is treated as if it were keyed by N."""
        name: str = value["name"]
        clean_name = _scrub_string(name)
        kind, hashed_name = (_PLAIN, "") if clean_name != name else _classify_key(name, header)
        out: dict[str, Any] = {}
        key: Any = None
        try:
            for key, item in value.items():
                if type(key) is not str:
                    raise _Failure("object key is not a string")
                if key == "name":
                    self.count()
                    out["name"] = hashed_name if kind == _IDENTIFIER else clean_name
                elif key in ("value", "values"):
                    if kind == _SECRET:
                        out[key] = self.secret_value(name, item)
                    elif kind == _IDENTIFIER:
                        out[key] = self.hashed(item)
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
            raise _Failure(f"nested deeper than {MAX_DEPTH} levels")
        limit = MAX_LIST_ITEMS
        if (
            len(value) == MAX_LIST_ITEMS + 1
            and type(value[-1]) is str
            and _TRUNCATED_ITEMS_RE.match(value[-1])
        ):
            limit += 1  # already truncated by an earlier pass
        out: list[Any] = []
        index = 0
        try:
            for index in range(min(len(value), limit)):
                out.append(self.walk(value[index], depth))
        except _Failure as failure:
            failure.segments.append(f"[{index}]")
            raise
        if len(value) > limit:
            out.append(f"[truncated {len(value) - limit} items]")
        return out

    def walk_headers(self, value: Any, depth: int) -> Any:
        """Headers as a dict, [name, value] pairs or {"name", "value"} objects."""
        if isinstance(value, dict):
            self.count()
            return self.walk_dict(dict(value), depth + 1, header=True)
        if not isinstance(value, (list, tuple)):
            return self.walk(value, depth)
        if depth + 1 > MAX_DEPTH:
            raise _Failure(f"nested deeper than {MAX_DEPTH} levels")
        self.count()
        out: list[Any] = []
        index = 0
        try:
            for index in range(min(len(value), MAX_LIST_ITEMS)):
                item = value[index]
                if isinstance(item, (list, tuple)) and len(item) == 2 and type(item[0]) is str:
                    self.count()
                    pair = self.walk_dict({item[0]: item[1]}, depth + 2, header=True)
                    out.extend([name, item_value] for name, item_value in pair.items())
                elif isinstance(item, dict) and type(item.get("name")) is str:
                    self.count()
                    out.append(self.walk_name_value(item, depth + 2, header=True))
                else:
                    out.append(self.walk(item, depth + 1))
        except _Failure as failure:
            failure.segments.append(f"[{index}]")
            raise
        if len(value) > MAX_LIST_ITEMS:
            out.append(f"[truncated {len(value) - MAX_LIST_ITEMS} items]")
        return out

    def secret_value(self, key: str, value: Any) -> Any:
        self.count()
        if value is None or type(value) is bool:
            return value
        if type(value) is int and _snake_case(key).endswith("tokens"):
            return value  # LLM usage counters: prompt_tokens, max_tokens
        if type(value) is float and not math.isfinite(value):
            raise _Failure("number is NaN or infinite")
        if not isinstance(value, (str, int, float, dict, list, tuple)):
            raise _Failure(f"value of type {type(value).__name__} is not JSON")
        return REDACTED

    def hashed(self, value: Any) -> Any:
        self.count()
        if value is None or type(value) is bool or value == "":
            return value
        if type(value) is str:
            return hash_identifier(value, hash_key=self.hash_key)
        if isinstance(value, (list, tuple)):
            return [self.hashed(item) for item in value[:MAX_LIST_ITEMS]]
        if isinstance(value, float) and not math.isfinite(value):
            raise _Failure("number is NaN or infinite")
        if isinstance(value, (int, float)):
            return hash_identifier(str(value), hash_key=self.hash_key)
        if isinstance(value, str):
            return hash_identifier(str.__str__(value), hash_key=self.hash_key)
        if isinstance(value, dict):
            _json_size(value)  # validates: plain JSON only
            canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
            return hash_identifier(canonical, hash_key=self.hash_key)
        raise _Failure(f"value of type {type(value).__name__} is not JSON")

    def summarize(self, value: Any) -> Any:
        """A raw body becomes its shape: type, JSON size and top-level field names."""
        self.count()
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
            raise _Failure(f"value of type {type(value).__name__} is not JSON")
        summary["size"] = _json_size(value)
        if isinstance(value, dict):
            summary["keys"] = self.summary_keys(list(value)[:MAX_SUMMARY_KEYS])
        return summary

    def existing_summary(self, value: dict[Any, Any]) -> dict[str, Any] | None:
        """An earlier pass's summary passes through (scrubbing stays idempotent)."""
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


def scrub_payload(value: Any, *, path: str = "body", hash_key: bytes) -> Any:
    """Return a scrubbed, JSON-safe copy of ``value``; never mutates it.

    Raises :class:`ScrubError` (with ``.path``) when the value cannot be made safe: nesting
    deeper than 32 levels, more than 20,000 values, bytes / sets / other objects, NaN or
    infinite floats, non-string object keys. The root is never treated as a raw body.
    """
    walker = _Walker(hash_key)
    try:
        return walker.walk(value, 0)
    except _Failure as failure:
        raise ScrubError(failure.message, path=path + "".join(reversed(failure.segments))) from None
    except RecursionError:
        raise ScrubError(f"nested deeper than {MAX_DEPTH} levels", path=path) from None


# --- logging ------------------------------------------------------------------------------
_UNFORMATTABLE: Final = "[log message could not be formatted; scrubbed]"


class ScrubLogFilter(logging.Filter):
    """Scrubs every record's message, exception and stack text; never raises, never drops."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            self._scrub(record)
        except Exception:  # a log filter must not break logging
            record.msg = _UNFORMATTABLE
            record.args = None
        return True

    @staticmethod
    def _scrub(record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # bad format args: keep what can be kept, safely
            message = f"{scrub_text(str(record.msg))} {_UNFORMATTABLE}"
            record.msg, record.args = message, None
            return
        scrubbed = scrub_text(message)
        if scrubbed != message:
            # A secret may span the template and its args ("Bearer %s"): replace both.
            record.msg, record.args = scrubbed, None
        if record.exc_info and not record.exc_text:
            formatter = logging.Formatter()
            record.exc_text = formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub_text(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub_text(record.stack_info)
