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
Provider keys and tokens by their shape (OpenAI, Anthropic, AWS, GitHub, Slack tokens and
webhook URLs, Stripe keys and webhook secrets, Google, Hugging Face, GitLab, npm), JWTs,
``Bearer``/``Basic``/``Token`` credentials, PEM private keys, the userinfo of URLs,
``Authorization``/``Cookie``/``X-Api-Key`` header lines, ``key=value`` / ``"key": "value"``
pairs whose key names a secret (also in JSON inside a JSON string and after ``--``),
emails, phone numbers, card numbers (Luhn), IBANs (mod 97) and resident registration
numbers; Korean text may touch any of them ("...@example.com으로", "010-1234-5678로").
Text that is URL- or form-encoded (``%40``, ``+``) or escaped (``\\n``, ``\\u0040``, JSON in
JSON) is decoded and scrubbed as well, so an encoded secret does not pass as noise.
``tests/security/test_scrub_property.py`` plants 26 kinds of generated secrets in 11
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
hostile shape against ordinary text.
"""

from __future__ import annotations

import bisect
import contextvars
import functools
import hashlib
import hmac
import json
import logging
import math
import re
from typing import Any, Final
from urllib.parse import unquote, unquote_plus

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
    r"(?P<bearer>\b(?i:bearer)(?:\s+(?i:bearer|basic|token))*\s+(?!\[REDACTED)[^\s\"'<>,;]+)"
    r"|(?P<basic>\b(?i:basic)\s+"
    r"(?=[A-Za-z0-9+/=]{0,400}?[0-9+/=]|[A-Za-z0-9+/]{0,400}?[a-z][A-Z])"
    r"[A-Za-z0-9+/]{6,}={0,2}(?![A-Za-z0-9+/=_~]|[.-][A-Za-z0-9]))"
    r"|(?P<auth_token>\b(?i:token)\s+"
    r"(?=[A-Za-z0-9._~+/=-]{0,200}?\d)(?=[A-Za-z0-9._~+/=-]{0,200}?[A-Za-z])"
    r"[A-Za-z0-9._~+/=-]{12,})"
    r"|(?P<jwt>(?<![A-Za-z0-9_])eyJ[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]*){0,4})"
    r"|(?P<anthropic_key>(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{16,})"
    # The digit is looked for up to the next "-sk-" only: "sk-sk-sk-..." would otherwise read
    # 300 chars ahead from every "sk-" (a hundred steps a char); the next one looks itself.
    r"|(?P<openai_key>(?<![A-Za-z0-9])sk-(?=(?:[A-Za-z0-9_]|-(?!sk-)){0,300}?\d)"
    r"[A-Za-z0-9_-]{16,})"
    r"|(?P<stripe_key>(?<![A-Za-z0-9])(?:(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|whsec_[A-Za-z0-9]{24,}))"
    r"|(?P<github_token>(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}))"
    r"|(?P<aws_access_key_id>(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16,}(?![a-z0-9]))"
    r"|(?P<aws_secret_key>(?<![A-Za-z0-9])(?P<aws_prefix>(?i:aws_?secret_?access_?key)"
    r"[\"']?\s{0,3}[:=]\s{0,3}[\"']?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=]))"
    r"|(?P<slack_token>(?<![A-Za-z0-9])(?:xox[abprse]|xapp)-[A-Za-z0-9-]{10,})"
    r"|(?P<slack_webhook>(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/"
    r"[A-Za-z0-9_/-]{8,})"
    r"|(?P<google_api_key>(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35,})"
    r"|(?P<google_oauth_token>(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_-]{20,})"
    r"|(?P<huggingface_token>(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,})"
    r"|(?P<gitlab_token>(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,})"
    r"|(?P<npm_token>(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36,})"
    # gitleaks sendgrid-api-token: SG.<22>.<43>
    r"|(?P<sendgrid_key>(?<![A-Za-z0-9])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-]))"
    # A MySQL/MariaDB client's password glued to -p (mysql -u root -pSecret): the
    # command and its options stay, the password goes.
    r"|(?P<cli_password>(?P<cli_prefix>(?<![\w-])(?i:mysql|mysqldump|mysqladmin|mariadb"
    r"|mariadb-dump)(?![\w-])[^\n]{0,200}?\s-p)[^\s'\"]+)"
)
# Cheap reasons to run _TOKEN_RE at all, searched in the lower-cased text: plain literals,
# several times cheaper per char than the branches with lookarounds of _TOKEN_RE.
_TOKEN_GATE_RE = re.compile(
    r"bearer|basic|token|eyj|sk-|k_live_|k_test_|whsec_|gh[pousr]_|github_pat_|akia|asia|xox"
    r"|xapp-|hooks\.slack|aiza|ya29\.|hf_|glpat-|npm_|aws|sg\.|mysql|mariadb"
)

# Header lines in free text: the whole value up to the end of the line or a quote.
_HEADER_LINE_RE = re.compile(
    r"(?<![\w-])(?P<name>[\"']?(?i:proxy-authorization|authorization|set-cookie|cookie"
    r"|x-api-key|x-auth-token|x-amz-security-token)[\"']?\s{0,3}:\s{0,3})"
    r"(?P<value>[^\s\"'][^\r\n\"']{0,4000})"
)

# key=value / key: value / "key": "value" in free text, for keys that name a secret. Also
# JSON inside a JSON string ({\"password\": \"...\"}: the value ends at a quote escaped
# like its opening one, so deeper-escaped quotes inside it do not end it) and command-line
# options (--password=...); a key never starts inside a word or after "word-". The key is
# found first and its value read only when the key names a secret (see _scrub_text_pairs).
# An unquoted value also ends at an escaped newline, tab or quote (escaped text).
_TEXT_KEY_RE = re.compile(
    r"(?<![\w.])(?<![\w.]-)\\{0,3}[\"']?(?P<key>[A-Za-z_][A-Za-z0-9_.-]{0,63})"
    r"\\{0,3}[\"']?\s{0,3}(?P<sep>[:=])\s{0,3}"
)
_TEXT_VALUE_RE = re.compile(
    r"\"(?:[^\"\\\n]|\\.){0,2000}\"|'(?:[^'\\\n]|\\.){0,2000}'"
    r"|(?P<escape>\\{1,3})(?P<escaped_quote>[\"'])"
    r"(?:(?!(?<!\\)(?P=escape)(?P=escaped_quote))[^\n]){0,2000}(?P=escape)(?P=escaped_quote)"
    # A quote escaped more deeply (a repr of JSON inside JSON): the token after it.
    r"|(?P<lead>\\{1,15}[\"'])(?:[^\s,;&\"'<>(){}\[\]\\]){1,2000}"
    r"|\[REDACTED[^\]\s]{0,40}\]"
    r"|(?:[^\s,;&\"'<>(){}\[\]\\]|\\(?![nrt\"'])){1,2000}"
)
# A word one of the keys above must contain, then the separator (lower-cased text).
_TEXT_PAIR_GATE_RE = re.compile(
    r"(?:pass|pwd|pw|sig|secret|token|key|auth|cookie|sess|sid|credential|sign|user|member"
    r"|customer"
    r"|account|mail|phone|mobile)[\w.-]{0,40}\\{0,3}[\"']?\s{0,3}[:=]"
)
_BOOLEAN_WORDS = frozenset({"true", "false", "null", "none", "yes", "no", "[]", "{}"})

# Korean password labels (the seeds' operators write Korean): 비밀번호 (password), 비번 (its
# short form), 패스워드 (password, transliterated), 암호 (password; also "cipher", hence the
# separator it must be followed by). The value is the next token.
_KOREAN_PASSWORD_RE = re.compile(
    r"(?P<label>(?:비밀\s?번호|비번|패스워드|암호)\s{0,3}[:=\uff1a]\s{0,3})"
    r"(?P<value>(?!\[REDACTED)[^\s,;'\"<>()\[\]{}]{1,200})"
)
_KOREAN_PASSWORD_GATE: Final = ("비밀", "비번", "패스워드", "암호")

# A bare AWS secret access key, without the variable name _TOKEN_RE looks for: 40 chars
# of base64 standing alone. Neither gitleaks nor detect-secrets has a rule for it without
# context (too many look-alikes), so the shape is narrowed to what random base64 looks
# like and ordinary values do not: upper and lower case and a digit, at most a few
# slashes (a URL path has words between them), none leading, and at least 20 distinct
# characters (a 40-char random key has about 29; hex digests and words have far fewer).
_BARE_AWS_SECRET_RE = re.compile(
    r"(?<![A-Za-z0-9/+._-])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_-]|\.[A-Za-z0-9])"
)


def _is_bare_aws_secret(text: str) -> bool:
    return (
        not text.startswith("/")
        and text.count("/") <= 3
        and "//" not in text
        and any(char.isupper() for char in text)
        and any(char.islower() for char in text)
        and any(char.isdigit() for char in text)
        and len(set(text)) >= 20
    )


def _bare_aws_secret_replacement(match: re.Match[str]) -> str:
    return _marker("aws_secret_key") if _is_bare_aws_secret(match.group()) else match.group()


def _korean_password_replacement(match: re.Match[str]) -> str:
    return match.group("label") + _marker("password")


# Emails: the engine's _EMAIL_RE with bounded parts (RFC 5321 limits), so it stays linear;
# the engine's own pattern takes seconds on 100 KB of "a.a.a...@" (see _scrub_once).
# It ends at any char that cannot continue a domain: Korean particles follow it directly
# ("kim@example.com으로"), which a \b would not allow.
_EMAIL_RE = re.compile(
    r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,24}(?![A-Za-z0-9])"
)
_ENGINE_EMAIL_MAX_CHARS: Final = 256

# Numbers that identify a person or a card. ISO dates and times, versions, UUIDs, hex
# digests, epoch times, HTTP statuses, ports and ids like ORD-2026-000123 never match:
# every branch refuses to start right after an ASCII letter or digit, '_', '.', '-' or '+'
# and to end right before one. Other letters may touch a number: Korean particles follow
# it directly ("010-1234-5678로", "850317-2468135입니다").
_NUMBER_RE = re.compile(
    r"(?P<rrn>(?<![A-Za-z0-9_.+-])(?:\d{6}-|\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01]) ?)"
    r"[1-8]\d{6}(?![A-Za-z0-9_-]))"
    r"|(?P<card>(?<![A-Za-z0-9_.+-])\d(?:[ -]?\d){12,}(?![A-Za-z0-9_-]|\.\d))"
    r"|(?P<phone_intl>(?<![A-Za-z0-9_+])\+\d(?:[ .()-]{0,2}\d){7,14}(?![A-Za-z0-9_-]|\.\d))"
    r"|(?P<phone_kr>(?<![A-Za-z0-9_.+-])(?:0(?:1[016789]|2|[3-6][1-5]|70|50\d?)"
    r"|\(0(?:1[016789]|2|[3-6][1-5]|70)\))[ .-]?\d{3,4}[ .-]?\d{4}(?![A-Za-z0-9_-]|\.\d))"
    r"|(?P<phone_us>(?<![A-Za-z0-9_.+-])(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}"
    r"(?![A-Za-z0-9_-]|\.\d))"
)
# What a digit run that is not a card may still hold (see _scrub_digit_run).
_NOT_CARD_RE = re.compile(
    r"(?P<rrn>(?<![A-Za-z0-9_.+-])(?:\d{6}-|\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01]) ?)"
    r"[1-8]\d{6}(?![A-Za-z0-9_-]))"
    r"|(?P<phone_kr>(?<![A-Za-z0-9_.+-])(?:0(?:1[016789]|2|[3-6][1-5]|70|50\d?)"
    r"|\(0(?:1[016789]|2|[3-6][1-5]|70)\))[ .-]?\d{3,4}[ .-]?\d{4}(?![A-Za-z0-9_-]|\.\d))"
    r"|(?P<phone_us>(?<![A-Za-z0-9_.+-])(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}"
    r"(?![A-Za-z0-9_-]|\.\d))"
)
# Every number above sits in a run of digits, spaces, dots, dashes and parentheses holding
# at least 9 digits (8 after a '+'). Finding such runs is cheap: the pattern starts with a
# character set and never backtracks inside a run. Other scripts' digits (fullwidth ones
# typed with an IME, say) are folded to ASCII first, so [0-9] is enough.
_NUMBER_RUN_RE = re.compile(r"[+(0-9][0-9 ().-]{7,}[0-9]")
_NON_ASCII_DIGIT_RE = re.compile(r"(?![0-9])\d")
# Whole strings of these shapes hold nothing to redact: timestamps, UUIDs, hex digests.
_SAFE_SHAPE_RE = re.compile(
    r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d{1,9})?)?(?:Z|[+-]\d\d:?\d\d)?)?"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?:sha\d{1,3}:|md5:)?(?=\d{0,127}[a-f])[0-9a-f]{16,128}"
)

# IBANs (ISO 13616), compact or in groups of four: a country's exact length and the mod-97
# check, so upper-case ids that merely look alike stay. Length per country (SWIFT registry).
_IBAN_TABLE: Final = (
    "AD:24 AE:23 AL:28 AT:20 AZ:28 BA:20 BE:16 BG:22 BH:22 BI:27 BR:29 BY:28 CH:21 CR:22 CY:28 "
    "CZ:24 DE:22 DJ:27 DK:18 DO:28 EE:20 EG:29 ES:24 FI:18 FK:18 FO:18 FR:27 GB:22 GE:22 GI:23 "
    "GL:18 GR:27 GT:28 HR:21 HU:28 IE:22 IL:23 IQ:23 IS:26 IT:27 JO:30 KW:30 KZ:20 LB:28 LC:32 "
    "LI:21 LT:20 LU:20 LV:21 LY:25 MC:27 MD:24 ME:22 MK:19 MN:20 MR:27 MT:31 MU:30 NI:28 NL:18 "
    "NO:15 OM:23 PK:24 PL:28 PS:29 PT:25 QA:29 RO:24 RS:22 RU:33 SA:24 SC:31 SD:18 SE:24 SI:19 "
    "SK:24 SM:27 SO:23 ST:25 SV:28 TL:23 TN:24 TR:26 UA:29 VA:22 VG:24 XK:20 YE:30"
)
_IBAN_LENGTHS: Final = {entry[:2]: int(entry[3:]) for entry in _IBAN_TABLE.split()}
_IBAN_RE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d\d(?: ?[A-Z0-9]){11,30}")
_IBAN_GATE_RE = re.compile(r"[A-Z]{2}\d\d")


def _is_iban(compact: str) -> bool:
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def _scrub_ibans(text: str) -> str:
    """The pattern may run on into the next upper-case word: cut at the country's length."""
    pieces: list[str] = []
    done = 0
    for match in _IBAN_RE.finditer(text):
        length = _IBAN_LENGTHS.get(match.group()[:2])
        if length is None:
            continue
        kept = 0
        end = match.start()
        for end in range(match.start(), match.end()):
            if text[end] != " ":
                kept += 1
                if kept == length:
                    break
        end += 1
        after = text[end : end + 1]
        if kept != length or (after.isascii() and after.isalnum()):
            continue
        if _is_iban(text[match.start() : end].replace(" ", "")):
            pieces += [text[done : match.start()], _marker("iban")]
            done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


# Encoded text: a secret inside a URL-encoded redirect target, a query value or a form body
# ("next=https%3A%2F%2Fuser%3Apass%40host", "Bearer%20abc", "card=4111+1111+1111+1111"), or
# inside an escaped string (JSON or a Python repr, where an escaped newline puts an "n"
# right before a token; Go escapes "&" as \u0026, ensure_ascii escapes fullwidth digits)
# shows its shape only once decoded. The decoded text is scrubbed; when that finds
# something, it replaces the original, otherwise the original stays as it was. URL encoding
# is decoded word by word (a word starts only after whitespace, a quote or a bracket, and
# the first part of the pattern cannot give back what it took, so the scan stays linear);
# string escapes in the whole string, one level per pass.
_ENCODED_WORD_RE = re.compile(r"(?<![^\s\"'<>])[^\s\"'<>%+]*+[%+][^\s\"'<>]*")
_PERCENT_ESCAPE_RE = re.compile(r"%[0-9A-Fa-f]{2}")
# One level of string escapes: a string escaped twice (JSON in a JSON string) holds
# \\uff10, which decodes to \uff10 here and to a fullwidth zero one level further down.
_JSON_ESCAPE_RE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|([\"\\/bfnrt]))")
_JSON_SIMPLE_ESCAPES: Final = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# A '+' standing for a space between two parts of a form-encoded value ("Bearer+abc").
_PLUS_BETWEEN_RE = re.compile(r"[A-Za-z0-9_]\+[A-Za-z0-9_.~/-]")
_MAX_DECODING_DEPTH: Final = 3


def _json_unescape(escape: re.Match[str]) -> str:
    code, char = escape.groups()
    return chr(int(code, 16)) if code else _JSON_SIMPLE_ESCAPES.get(char, char)


def _scrub_decoded(text: str, depth: int) -> str:
    if "\\" in text and _JSON_ESCAPE_RE.search(text):
        decoded = _JSON_ESCAPE_RE.sub(_json_unescape, text)
        # Surrogate pairs (emoji) become one char; a lone surrogate cannot be stored.
        decoded = decoded.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        scrubbed = _scrub_once(decoded, depth + 1)
        if scrubbed != decoded:
            return scrubbed
    if "%" in text or "+" in text:
        return _ENCODED_WORD_RE.sub(lambda word: _scrub_encoded_word(word.group(), depth), text)
    return text


def _scrub_encoded_word(word: str, depth: int) -> str:
    if "%" in word and _PERCENT_ESCAPE_RE.search(word):
        decoded = unquote_plus(word) if "+" in word else unquote(word)
    elif "+" in word and _PLUS_BETWEEN_RE.search(word):
        decoded = word.replace("+", " ")
    else:
        return word
    scrubbed = _scrub_once(decoded, depth + 1)
    return scrubbed if scrubbed != decoded else word


_DIGIT_GROUP_RE = re.compile(r"\d+")


def _luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        number = int(char)
        if position % 2:
            number *= 2
            if number > 9:
                number -= 9
        total += number
    return total % 10 == 0


# 2 * d with its digits added (9 for 9), the Luhn term of a doubled digit d.
_LUHN_DOUBLED: Final = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def _is_card_number(digits: str) -> bool:
    # Payment networks issue cards starting with 2-6; order numbers and epoch milliseconds
    # (starting with 1) stay, and so does anything failing the Luhn check.
    if not digits.isascii():
        digits = "".join(str(int(char)) for char in digits)  # fullwidth and other digits
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn_valid(digits)


def _scrub_digit_run(text: str) -> str:
    """A run of digit groups: redact the card numbers inside it, then the other numbers.

    The run may hold more than the card (``4111 1111 1111 1111 12/26``, ``order 12 4111 ...``),
    so every window of whole groups holding 13-19 digits is tried, longest first. Prefix
    sums of the Luhn terms make each window's check constant time, and only windows of
    13-19 digits that start with 2-6 are looked at: at most 7 per group, so the cost stays
    linear in the run ("1 1 1 ..." and "4 4 4 ..." included).
    """
    groups = [(match.start(), match.end()) for match in _DIGIT_GROUP_RE.finditer(text)]
    digits = "".join(text[start:end] for start, end in groups)
    if not digits.isascii():
        digits = "".join(str(int(char)) for char in digits)  # fullwidth and other digits
    # starts[g]: how many digits precede group g (plus the total at the end).
    starts = [0]
    for start, end in groups:
        starts.append(starts[-1] + end - start)
    # Luhn terms of digit k when the window's last digit has the same parity as k (plain)
    # or the other one (doubled), summed by the parity of k: a window [a, b) sums to
    # even_last[b] - even_last[a] when b - 1 is even, odd_last[b] - odd_last[a] otherwise.
    even_last = [0]
    odd_last = [0]
    for index, char in enumerate(digits):
        plain = ord(char) - 48
        doubled = _LUHN_DOUBLED[plain]
        if index % 2:
            even_last.append(even_last[-1] + doubled)
            odd_last.append(odd_last[-1] + plain)
        else:
            even_last.append(even_last[-1] + plain)
            odd_last.append(odd_last[-1] + doubled)
    pieces: list[str] = []
    done = 0
    first = 0
    while first < len(groups):
        begin = starts[first]
        found = -1
        if digits[begin] in "23456":
            # Windows ending after group `last` hold starts[last + 1] - begin digits.
            longest = bisect.bisect_right(starts, begin + 19) - 1
            shortest = bisect.bisect_left(starts, begin + 13)
            for end_group in range(longest, max(shortest, first + 1) - 1, -1):
                end = starts[end_group]
                sums = even_last if (end - 1) % 2 == 0 else odd_last
                if (sums[end] - sums[begin]) % 10 == 0:
                    found = end_group - 1
                    break
        if found < 0:
            first += 1
            continue
        pieces.append(_NOT_CARD_RE.sub(_number_replacement, text[done : groups[first][0]]))
        pieces.append(_marker("card"))
        done = groups[found][1]
        first = found + 1
    pieces.append(_NOT_CARD_RE.sub(_number_replacement, text[done:]))
    return "".join(pieces)


def _number_replacement(match: re.Match[str]) -> str:
    kind = match.lastgroup or "number"
    text = match.group()
    if kind == "card":
        if _is_card_number(text.replace(" ", "").replace("-", "")):
            return _marker("card")
        return _scrub_digit_run(text)
    if kind == "phone_intl":
        digit_count = sum(char.isdigit() for char in text)
        return _marker("phone") if 8 <= digit_count <= 15 else text
    if kind == "rrn":
        return _marker("resident_id")
    return _marker("phone")


def _scrub_numbers(text: str) -> str:
    """Run _NUMBER_RE only over candidate runs (plus the context its lookarounds read)."""
    probe = text
    if not text.isascii() and _NON_ASCII_DIGIT_RE.search(text):
        # Same length, same positions, ASCII digits: fullwidth "010" is matched as "010".
        probe = "".join(str(int(char)) if char.isdecimal() else char for char in text)
    pieces: list[str] = []
    done = 0
    for candidate in _NUMBER_RUN_RE.finditer(probe):
        run = candidate.group()
        separators = (
            run.count(" ") + run.count("-") + run.count(".") + run.count("(") + run.count(")")
        )
        plus = run.count("+")
        if len(run) - separators - plus < (8 if plus else 9):
            continue  # a date, a time, a version: too few digits for any number above
        start, end = candidate.span()
        # One char of left context and two of right context: number patterns never start
        # or end inside them (they start with [+(0-9] and end with a digit).
        left = 1 if start else 0
        right = min(2, len(text) - end)
        region = probe[start - left : end + right]
        scrubbed = _NUMBER_RE.sub(_number_replacement, region)
        if scrubbed != region:
            pieces.append(text[done:start])
            pieces.append(scrubbed[left : len(scrubbed) - right])
            done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _token_replacement(match: re.Match[str]) -> str:
    kind = match.lastgroup or "secret"
    if kind == "jwt":
        text = match.group()
        if "." not in text and len(text) < 20:
            return text
    elif kind == "aws_secret_key":
        return match.group("aws_prefix") + _marker(kind)
    elif kind == "cli_password":
        return match.group("cli_prefix") + _marker("password")
    return _marker(kind)


def _header_line_replacement(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.lstrip().startswith("[REDACTED"):
        return match.group()
    return match.group("name") + _marker("secret")


def _text_pair_value(key: re.Match[str], value: re.Match[str]) -> str | None:
    """The redacted value of a secret key's value, or None when it stays as it is."""
    kind = _key_kind(key.group("key"))
    text = value.group()
    quote = text[0] if text[:1] in ("'", '"') else ""
    inner = text[1:-1] if quote else text
    closing = True
    if value.group("escape"):  # \"...\": JSON inside a JSON string
        quote = value.group("escape") + value.group("escaped_quote")
        inner = text[len(quote) : -len(quote)]
    elif value.group("lead"):  # its closing quote, escaped differently, is left as it is
        quote, closing = value.group("lead"), False
        inner = text[len(quote) :]
    if not inner or inner.startswith("[REDACTED") or inner.lower() in _BOOLEAN_WORDS:
        return None
    if kind == _IDENTIFIER:
        label = "identifier"
    else:
        snake = _snake_case(key.group("key"))
        if snake.endswith("tokens") and inner.isdigit():
            return None  # LLM usage counters (prompt_tokens=123)
        # A generic word ("token: expired") with a short plain word after it is prose.
        if (
            snake in _WEAK_SECRET_KEYS
            and key.group("sep") == ":"
            and inner.isalpha()
            and len(inner) < 12
        ):
            return None
        label = "secret"
    return quote + _marker(label) + (quote if closing else "")


def _scrub_text_pairs(text: str) -> str:
    """Redact the values of secret keys. The scan goes on right after each key, so a value
    of a key that names nothing secret may hold a pair or start one ("next=Api-Key: abc",
    'plan_1: "password": "x"'), and each char is looked at a bounded number of times."""
    pieces: list[str] = []
    done = position = 0
    while (key := _TEXT_KEY_RE.search(text, position)) is not None:
        position = key.end()
        if _key_kind(key.group("key")) not in (_SECRET, _IDENTIFIER):
            continue
        value = _TEXT_VALUE_RE.match(text, position)
        replacement = None if value is None else _text_pair_value(key, value)
        if value is None or replacement is None:
            continue
        pieces += [text[done:position], replacement]
        done = position = value.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


class _WorkMeter:
    """What one scrub_payload call has spent and may spend, in characters scanned.

    Every pass of the patterns over a string (:func:`_scrub_once`, at any decoding depth,
    and the re-scans of the fixed-point loop and of truncation) is charged its length plus
    SCAN_CALL_COST; every string handed to the walker adds WORK_PER_INPUT_CHAR per char to
    the budget. So the work on a payload is at most linear in its size, whatever its shape,
    and an item that would need more is refused (scrub_failed) instead of being scrubbed.
    The count is deterministic: the same item is refused on every machine, under any load.
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


def _scrub_once(text: str, depth: int = 0) -> str:
    meter = _METER.get()
    if meter is not None:
        meter.charge(len(text))
    if _SAFE_SHAPE_RE.fullmatch(text):
        return text
    out = text
    lowered = text.lower()
    # IBANs and numbers first: a scheme word in front ("Bearer +82 10-...") must not split
    # them, and a card pattern must not take the digits of an IBAN.
    if _IBAN_GATE_RE.search(out):
        out = _scrub_ibans(out)
    out = _scrub_numbers(out)
    if _TOKEN_GATE_RE.search(lowered) or "private key" in lowered:
        if "PRIVATE KEY" in out:
            out = _PEM_RE.sub(_marker("private_key"), out)
        out = _TOKEN_RE.sub(_token_replacement, out)
    if not out.isascii() and any(label in out for label in _KOREAN_PASSWORD_GATE):
        out = _KOREAN_PASSWORD_RE.sub(_korean_password_replacement, out)
    has_at = "@" in out
    if has_at and "://" in out:
        out = _URL_USERINFO_RE.sub(_marker("userinfo") + "@", out)
    if (":" in out or "=" in out) and _TEXT_PAIR_GATE_RE.search(lowered):
        out = _HEADER_LINE_RE.sub(_header_line_replacement, out)
        out = _scrub_text_pairs(out)
    if has_at:
        out = _EMAIL_RE.sub(_marker("email"), out)
    # The engine's own patterns, as a backstop after ours. Its email pattern backtracks
    # quadratically, so it only runs on short strings (ours covers the rest).
    if has_at and "@" in out and len(out) <= _ENGINE_EMAIL_MAX_CHARS:
        out = _ENGINE_EMAIL_RE.sub(_marker("email"), out)
    if "eyJ" in out:
        out = _ENGINE_JWT_RE.sub(_marker("jwt"), out)
    if "bearer" in lowered:
        out = _ENGINE_BEARER_RE.sub(_marker("bearer"), out)
    # Last, what only shows once decoded; what was found above is no longer encoded there.
    if depth < _MAX_DECODING_DEPTH and ("%" in out or "+" in out or "\\" in out):
        out = _scrub_decoded(out, depth)
    # After decoding: a run of base64 may be a piece of an encoded key the passes above
    # redact whole (a PEM block inside a URL).
    if len(out) >= 40:
        out = _BARE_AWS_SECRET_RE.sub(_bare_aws_secret_replacement, out)
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
        # Short names in common use: pw=..., a SAS URL's sig=.
        "pw",
        "sig",
    }
)
# A word ending in one of these names a secret too (accesstoken, xapikey, sessiontoken,
# the session cookies JSESSIONID and PHPSESSID; "sessionid" alone is an identifier).
_SECRET_WORD_ENDINGS = (
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "cookie",
    "privatekey",
    "sessionid",
    "sessid",
    "secretkey",
    "secretaccesskey",
)
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
        ("subscription", "key"),  # Ocp-Apim-Subscription-Key
        ("connect", "sid"),  # Express's session cookie
        ("account", "key"),  # Azure storage: AccountKey=
        ("access", "signature"),  # Azure: SharedAccessSignature=
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
# Header pairs with these names are recognized in any list, not only under a headers key.
_WELL_KNOWN_SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "x-auth-token",
        "x-access-token",
        "x-session-token",
        "x-csrf-token",
        "x-xsrf-token",
        "x-amz-security-token",
        "x-goog-api-key",
        "x-user-id",
        "x-session-id",
    }
)
_EXTRA_RAW_KEYS = frozenset(
    {"output_preview", "raw_request", "raw_response", "request_payload", "response_payload"}
)
# Our own markers used as keys ("[REDACTED_KEY:1]", "[REDACTED:email]") are plain keys.
_REDACTED_KEY_RE = re.compile(r"^\[REDACTED[^\]]*\]\Z")
# Between an upper-case run and its last letter when a lower-case one follows ("HTTPServer"):
# a zero-width match, so a long upper-case key is not re-scanned from every position.
_CAMEL_BOUNDARY_1 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")
_CAMEL_BOUNDARY_2 = re.compile(r"([a-z0-9])([A-Z])")
_NON_ALNUM = re.compile(r"[^0-9A-Za-z]+")


@functools.lru_cache(maxsize=4096)
def _snake_case(key: str) -> str:
    snake = _CAMEL_BOUNDARY_2.sub(r"\1_\2", _CAMEL_BOUNDARY_1.sub("_", key))
    return _NON_ALNUM.sub("_", snake).strip("_").lower()


def _hashed_key_name(snake: str) -> str:
    """user_id -> user_id_hash; just the identifier part if the rest would look secret."""
    name = snake + "_hash"
    if scrub_text(name) == name:
        return name
    match = _IDENTIFIER_KEY_RE.search(snake)
    return (match.group().lstrip("_") if match else "identifier") + "_hash"


def _classify_key_uncached(key: str, header: bool) -> tuple[int, str]:
    if _REDACTED_KEY_RE.match(key):
        return _PLAIN, ""
    snake = _snake_case(key)
    if header:
        if snake.endswith("_hash"):
            return _PLAIN, ""
        if _IDENTIFIER_KEY_RE.search(snake):
            return _IDENTIFIER, _hashed_key_name(snake)
        lowered = key.lower()
        if any(part in lowered for part in _SENSITIVE_HEADER_PARTS):
            return _SECRET, ""
        return _PLAIN, ""
    if _IDENTIFIER_KEY_RE.search(snake):
        return _IDENTIFIER, _hashed_key_name(snake)
    if snake.endswith(_ALLOWED_SUFFIXES):
        return _PLAIN, ""
    if _ENGINE_RAW_PAYLOAD_KEY_RE.search(key) or _ENGINE_RAW_PAYLOAD_KEY_RE.search(snake):
        return (_RAW_UNLESS_CODE if snake in ("output", "result") else _RAW), ""
    if snake in _EXTRA_RAW_KEYS:
        return _RAW, ""
    words = snake.split("_")
    if "headers" in words or "header" in words:  # headers, request_headers, header_pairs
        return _HEADERS, ""
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
_SCAN_WINDOW: Final = 2 * MAX_STRING_CHARS + 1_000
_CODE_VALUE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}\Z")
_MARKER_RE = re.compile(r"\[REDACTED[^\]]{0,40}\]")


def _is_code(text: str) -> bool:
    """A code-like string ("blocked"), also once scrubbed ("[REDACTED:jwt]" counts as a word)."""
    return bool(_CODE_VALUE_RE.match(_MARKER_RE.sub("x", text) if "[" in text else text))


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
    """scrub_text plus the length limit, with a memory of short strings found clean."""
    if len(text) <= _CLEAN_STRING_MAX_LEN:
        if text in _CLEAN_STRINGS:
            return text
        if _SAFE_SHAPE_RE.fullmatch(text):
            return text  # timestamps, UUIDs, digests: unique, so not worth remembering
    meter = _METER.get()
    if meter is not None:
        meter.allowed += WORK_PER_INPUT_CHAR * len(text)
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


_TRUNCATED_ITEMS_RE = re.compile(r"^\[truncated \d+ items\]\Z")
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


def _list_limit(value: list[Any] | tuple[Any, ...]) -> int:
    """How many items to keep: one more when an earlier pass already added its marker."""
    if (
        len(value) == MAX_LIST_ITEMS + 1
        and type(value[-1]) is str
        and _TRUNCATED_ITEMS_RE.match(value[-1])
    ):
        return MAX_LIST_ITEMS + 1
    return MAX_LIST_ITEMS


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
                        if len(item) <= _CLEAN_STRING_MAX_LEN and item in clean_strings:
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
                    and item[0].lower() in _WELL_KNOWN_SECRET_HEADERS
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
