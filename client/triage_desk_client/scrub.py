"""Scrub an item before it leaves the runtime, with the rules the desk itself runs.

Standard library only (``re``), Python 3.9 or later, nothing of the desk imported: the
desk's scrubber (``triage.scrub``) imports its text rules *from here*, so what the client
removes before spooling and what the desk removes before storing cannot drift apart. The
desk adds steps of its own on top (keyed hashes of identifiers, raw bodies reduced to
their shape, a work budget per item, graph-tool-call's patterns as a backstop).

Public API:

* :func:`scrub_text` - one free-text string: secrets and personal data become typed
  markers (``Bearer abc`` -> ``[REDACTED:bearer]``, ``kim@example.com`` ->
  ``[REDACTED:email]``). Idempotent.
* :func:`scrub_item` - a scrubbed deep copy of a JSON-like value (an item body): every
  string through :func:`scrub_text` and cut to 2,000 chars, values under keys naming a
  secret (``password``, ``api_key``, ``Authorization`` ...) become ``[REDACTED]``, keys
  that look like secrets become ``[REDACTED_KEY:n]``. Bounded in depth, values and work;
  never raises on odd input (bytes, sets, objects, NaN), except for a body that contains
  itself (``ValueError``), which no copy can represent.
* :func:`is_clean_item` - whether :func:`scrub_item` would give back an equal copy: the
  reporter then encodes the item itself (a read-only pass, about 2.5 times cheaper than
  the copy on the bench's items); :func:`may_change` - whether any pass of
  :func:`scrub_text` could change a text.
* :class:`TextScrubber` - the same passes with two hooks, for the desk: a charge per scan
  (its work budget) and an extra pass (its backstop).
* The field-name rules both sides share: :func:`key_class`, :func:`snake_case`,
  :func:`is_identifier_key`, :func:`is_descriptive_key`, :func:`names_a_secret`,
  :data:`SENSITIVE_HEADER_PARTS`, :data:`WELL_KNOWN_SECRET_HEADERS`.

What :func:`scrub_text` finds
-----------------------------
Provider keys and tokens by their shape, after the public rules of gitleaks
(``cmd/generate/config/rules/*.go``; rule ids beside each branch below) and Yelp's
detect-secrets (``detect_secrets/plugins/*.py``): OpenAI, Anthropic, AWS (key ids, secret
keys after their name, and bare secret keys, see below), GitHub (``ghp_``, ``gho_``,
``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), Slack (``xox*``, ``xapp-``, webhook URLs),
Stripe (``sk_``/``rk_``/``pk_`` ``live``/``test``/``prod``, ``whsec_``), Google (``AIza``,
``ya29.``), Hugging Face, GitLab, npm, SendGrid, Azure AD client secrets; JWTs;
``Bearer``/``Basic``/``Token`` credentials; PEM private keys (also cut ones); the
userinfo of URLs; ``Authorization``/``Cookie``/``X-Api-Key`` header lines; ``key=value``
and ``"key": "value"`` pairs whose key names a secret (``password``, ``pw``, ``passwd``,
``client_secret``, ``AccountKey``, ``SharedAccessSignature``, ``sig`` ... also in JSON
inside a JSON string and after ``--``); a MySQL/MariaDB client's ``-p<password>``;
Korean labels (``비밀번호``, ``비밀 번호``, ``비번``, ``패스워드``, ``암호``, ``비밀키``,
``인증키``, ...) followed by ``:`` or ``=``; emails; phone numbers; card numbers (Luhn);
IBANs (mod 97); resident registration numbers with or without their hyphen (date-checked).
Korean text may touch any of them ("...@example.com으로", "010-1234-5678로"). Text that is
URL- or form-encoded or escaped (``\\n``, ``\\u0040``, JSON in JSON) is decoded and
scrubbed as well.

Speed: every pattern is linear in its input (each quantifier over a run is bounded or
starts where a lookbehind allows only the run's beginning; no possessive quantifiers or
atomic groups, which Python 3.9 lacks, are needed), and cheap literal gates decide which
patterns run at all.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from typing import Any, Callable, Final
from urllib.parse import unquote, unquote_plus

__all__ = [
    "IDENTIFIER",
    "MAX_DEPTH",
    "MAX_LIST_ITEMS",
    "MAX_NODES",
    "MAX_STRING_CHARS",
    "PLAIN",
    "REDACTED",
    "SECRET",
    "SENSITIVE_HEADER_PARTS",
    "WELL_KNOWN_SECRET_HEADERS",
    "TextScrubber",
    "is_clean_item",
    "is_descriptive_key",
    "is_identifier_key",
    "is_safe_shape",
    "key_class",
    "list_limit",
    "marker",
    "may_change",
    "names_a_secret",
    "scrub_item",
    "scrub_text",
    "snake_case",
]

REDACTED: Final = "[REDACTED]"
MAX_STRING_CHARS: Final = 2_000
MAX_LIST_ITEMS: Final = 200
MAX_DEPTH: Final = 32
MAX_NODES: Final = 20_000
# Long strings are scanned in a window, not whole: only MAX_STRING_CHARS are kept.
SCAN_WINDOW: Final = 2 * MAX_STRING_CHARS + 1_000

# The classes of a field name (key_class).
SECRET: Final = "secret"
IDENTIFIER: Final = "identifier"
PLAIN: Final = "plain"


def marker(kind: str) -> str:
    """The typed marker that replaces a finding: ``[REDACTED:<kind>]``."""
    return f"[REDACTED:{kind}]"


_marker = marker


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

# Provider keys and tokens by their shape. The rule ids are gitleaks' (its
# cmd/generate/config/rules/*.go) or detect-secrets' plugins; where a rule fixes a length,
# the branch takes that length or more, since providers lengthen their keys.
_TOKEN_RE = re.compile(
    r"(?P<bearer>\b(?i:bearer)(?:\s+(?i:bearer|basic|token))*\s+(?!\[REDACTED)[^\s\"'<>,;]+)"
    r"|(?P<basic>\b(?i:basic)\s+"
    r"(?=[A-Za-z0-9+/=]{0,400}?[0-9+/=]|[A-Za-z0-9+/]{0,400}?[a-z][A-Z])"
    r"[A-Za-z0-9+/]{6,}={0,2}(?![A-Za-z0-9+/=_~]|[.-][A-Za-z0-9]))"
    r"|(?P<auth_token>\b(?i:token)\s+"
    r"(?=[A-Za-z0-9._~+/=-]{0,200}?\d)(?=[A-Za-z0-9._~+/=-]{0,200}?[A-Za-z])"
    r"[A-Za-z0-9._~+/=-]{12,})"
    # gitleaks jwt; also a JWT cut short (its header alone still names the algorithm).
    r"|(?P<jwt>(?<![A-Za-z0-9_])eyJ[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]*){0,4})"
    # gitleaks anthropic-api-key, anthropic-admin-api-key
    r"|(?P<anthropic_key>(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{16,})"
    # gitleaks openai-api-key (and the project, service-account and admin keys). The digit
    # is looked for up to the next "-sk-" only: "sk-sk-sk-..." would otherwise read 300
    # chars ahead from every "sk-" (a hundred steps a char); the next one looks itself.
    r"|(?P<openai_key>(?<![A-Za-z0-9])sk-(?=(?:[A-Za-z0-9_]|-(?!sk-)){0,300}?\d)"
    r"[A-Za-z0-9_-]{16,})"
    # gitleaks stripe-access-token ((?:sk|rk)_(?:test|live|prod)_...), detect-secrets
    # StripeDetector; publishable keys (pk_) too, and webhook signing secrets (whsec_).
    r"|(?P<stripe_key>(?<![A-Za-z0-9])(?:(?:sk|rk|pk)_(?:live|test|prod)_[A-Za-z0-9]{10,}"
    r"|whsec_[A-Za-z0-9]{24,}))"
    # gitleaks github-pat, github-oauth, github-app-token (ghu_, ghs_),
    # github-refresh-token, github-fine-grained-pat
    r"|(?P<github_token>(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}))"
    # gitleaks aws-access-token
    r"|(?P<aws_access_key_id>(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16,}(?![a-z0-9]))"
    # gitleaks aws-secret-access-key (a 40-char secret after its name)
    r"|(?P<aws_secret_key>(?<![A-Za-z0-9])(?P<aws_prefix>(?i:aws_?secret_?access_?key)"
    r"[\"']?\s{0,3}[:=]\s{0,3}[\"']?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=]))"
    # gitleaks slack-bot-token, slack-user-token, slack-app-token, slack-legacy-bot-token,
    # slack-legacy-workspace-token, slack-config-access-token (xoxe.xoxp-),
    # slack-config-refresh-token; slack-legacy-token's xoxo- only in its own shape (digit
    # groups, then hex), since "xoxo-" also starts words.
    r"|(?P<slack_token>(?<![A-Za-z0-9])(?:(?:xox[abprse]|xapp|xoxe\.xox[bp])-[A-Za-z0-9-]{10,}"
    r"|xoxo-\d+-\d+-\d+-[A-Fa-f0-9]+))"
    # gitleaks slack-webhook-url
    r"|(?P<slack_webhook>(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/"
    r"[A-Za-z0-9_/-]{8,})"
    # gitleaks gcp-api-key
    r"|(?P<google_api_key>(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35,})"
    r"|(?P<google_oauth_token>(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_-]{20,})"
    # gitleaks huggingface-access-token, gitlab-pat, npm-access-token
    r"|(?P<huggingface_token>(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,})"
    r"|(?P<gitlab_token>(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,})"
    r"|(?P<npm_token>(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36,})"
    # gitleaks sendgrid-api-token (SG. and 66 chars): SG.<22>.<43>
    r"|(?P<sendgrid_key>(?<![A-Za-z0-9])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-]))"
    # gitleaks azure-ad-client-secret: three chars, a digit, "Q~", 31-34 more.
    r"|(?P<azure_client_secret>(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"
    r"(?![A-Za-z0-9_~.-]))"
    # A MySQL/MariaDB client's password glued to -p (mysql -u root -pSecret): the
    # command and its options stay, the password goes.
    r"|(?P<cli_password>(?P<cli_prefix>(?<![\w-])(?i:mysql|mysqldump|mysqladmin|mariadb"
    r"|mariadb-dump)(?![\w-])[^\n]{0,200}?\s-p)[^\s'\"]+)"
)
# Cheap reasons to run _TOKEN_RE at all, searched in the lower-cased text: plain literals,
# several times cheaper per char than the branches with lookarounds of _TOKEN_RE.
_TOKEN_GATE_RE = re.compile(
    r"bearer|basic|token|eyj|sk-|k_live_|k_test_|k_prod_|whsec_|gh[pousr]_|github_pat_|akia"
    r"|asia|xox|xapp-|hooks\.slack|aiza|ya29\.|hf_|glpat-|npm_|aws|sg\.|q~|mysql|mariadb"
)

# Header lines in free text: the whole value up to the end of the line or a quote.
_HEADER_LINE_RE = re.compile(
    r"(?<![\w-])(?P<name>[\"']?(?i:proxy-authorization|authorization|set-cookie|cookie"
    r"|x-api-key|x-auth-token|x-amz-security-token)[\"']?\s{0,3}:\s{0,3})"
    r"(?P<value>[^\s\"'][^\r\n\"']{0,4000})"
)

# key=value / key: value / "key": "value" in free text, for keys that name a secret. Also
# JSON inside a JSON string ({\"password\": \"...\"}, or deeper: a log line's repr of JSON
# in JSON: the value ends at a quote escaped like its opening one, so deeper-escaped quotes
# inside it do not end it, and a value with a space is redacted whole) and command-line
# options (--password=...); a key never starts inside a word or after "word-". The key is
# found first and its value read only when the key names a secret (see _scrub_text_pairs).
# An unquoted value also ends at an escaped newline, tab or quote (escaped text).
_TEXT_KEY_RE = re.compile(
    r"(?<![\w.])(?<![\w.]-)\\{0,3}[\"']?(?P<key>[A-Za-z_][A-Za-z0-9_.-]{0,63})"
    r"\\{0,3}[\"']?\s{0,3}(?P<sep>[:=])\s{0,3}"
)
_TEXT_VALUE_RE = re.compile(
    r"\"(?:[^\"\\\n]|\\.){0,2000}\"|'(?:[^'\\\n]|\\.){0,2000}'"
    r"|(?P<escape>\\{1,15})(?P<escaped_quote>[\"'])"
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

# Korean labels of passwords and keys (the seeds' operators write Korean): 비밀번호 and
# 비밀 번호 (password), 비번 (its short form), 패스워드 (password, transliterated), 암호
# (password; also "cipher", hence the separator it must be followed by: 암호화 방식 is
# "encryption method"), 비밀키 (secret key), 인증키 (authentication key), 시크릿 키, 액세스 키
# and API 키 (transliterated). The value is the next token, unless it is a Korean word (비밀번호:
# 불일치, "password: mismatch"), which is an error message, not a password.
_KOREAN_PASSWORD_RE = re.compile(
    r"(?P<label>(?:비밀\s?번호|비번|패스워드|암호|비밀\s?키|인증\s?키|시크릿\s?키|액세스\s?키"
    r"|(?i:api)\s?키)\s{0,3}[:=\uff1a]\s{0,3})"
    r"(?P<value>(?!\[REDACTED)[^\s,;'\"<>()\[\]{}]{1,200})"
)
_KOREAN_PASSWORD_GATE: Final = ("비밀", "비번", "패스워드", "암호", "키")
_HANGUL_WORD_RE = re.compile(r"[\uac00-\ud7a3]+[.!?]?")


def _korean_password_replacement(match: re.Match[str]) -> str:
    if _HANGUL_WORD_RE.fullmatch(match.group("value")):
        return match.group()
    kind = "password" if "키" not in match.group("label") else "secret"
    return match.group("label") + _marker(kind)


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


# Emails, with bounded parts (RFC 5321 limits) so the pattern stays linear: an unbounded
# local part and domain take seconds on 100 KB of "a.a.a...@".
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
# (The word's head is taken whole, as a possessive quantifier would, by a lookahead and a
# backreference: Python 3.9 has no possessive quantifiers.)
_ENCODED_WORD_RE = re.compile(r"(?<![^\s\"'<>])(?=(?P<head>[^\s\"'<>%+]*))(?P=head)[%+][^\s\"'<>]*")
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
    kind = key_class(key.group("key"))
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
    if kind == IDENTIFIER:
        label = "identifier"
    else:
        snake = snake_case(key.group("key"))
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
        if key_class(key.group("key")) == PLAIN:
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


# --- field names -------------------------------------------------------------------------
# Keys ending like these describe a secret without holding it (the boundary stores them).
_DESCRIPTIVE_SUFFIXES = (
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
        # Short names in common use: pw=..., a SAS URL's sig=; passcode (detect-secrets'
        # keyword plugin lists the pass/pwd family).
        "pw",
        "sig",
        "passcode",
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
        # detect-secrets' keyword plugin: db_pass, database_pass, key_pass, priv_key
        ("db", "pass"),
        ("database", "pass"),
        ("key", "pass"),
        ("smtp", "pass"),
        ("priv", "key"),
    }
)
# Single generic words that also occur in prose ("token: expired").
_WEAK_SECRET_KEYS = frozenset({"token", "session", "credential", "credentials", "auth"})
IDENTIFIER_KEY_RE = re.compile(
    r"(?:^|_)(?:(?:x_)?(?:user|member|customer|session|account)_?ids?"
    r"|e_?mails?|e_?mail_address(?:es)?|phone(?:_numbers?)?|phones|mobile(?:_number)?)$"
)
# Header names whose values are credentials (rule: any name containing one of these).
SENSITIVE_HEADER_PARTS = (
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
WELL_KNOWN_SECRET_HEADERS = frozenset(
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
# Our own markers used as keys ("[REDACTED_KEY:1]", "[REDACTED:email]") are plain keys.
_REDACTED_KEY_RE = re.compile(r"^\[REDACTED[^\]]*\]\Z")
# Between an upper-case run and its last letter when a lower-case one follows ("HTTPServer"):
# a zero-width match, so a long upper-case key is not re-scanned from every position.
_CAMEL_BOUNDARY_1 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")
_CAMEL_BOUNDARY_2 = re.compile(r"([a-z0-9])([A-Z])")
_NON_ALNUM = re.compile(r"[^0-9A-Za-z]+")

_KEY_CLASS_CACHE_LIMIT: Final = 4_096
_KEY_CLASS_MAX_LEN: Final = 64
_key_classes: dict[str, str] = {}


@functools.lru_cache(maxsize=4096)
def _snake_case_cached(key: str) -> str:
    snake = _CAMEL_BOUNDARY_2.sub(r"\1_\2", _CAMEL_BOUNDARY_1.sub("_", key))
    return _NON_ALNUM.sub("_", snake).strip("_").lower()


def snake_case(key: str) -> str:
    """``accessToken``, ``X-Api-Key``, ``HTTPServer`` -> ``access_token``, ``x_api_key``, ..."""
    return _snake_case_cached(key)


def is_identifier_key(snake: str) -> bool:
    """A snake-cased name of a person's identifier (user_id, email, phone, ...)."""
    return IDENTIFIER_KEY_RE.search(snake) is not None


def is_descriptive_key(snake: str) -> bool:
    """A snake-cased name that describes a secret without holding it (token_present)."""
    return snake.endswith(_DESCRIPTIVE_SUFFIXES)


def names_a_secret(snake: str) -> bool:
    """A snake-cased name whose value is a secret: matched per word, so ``accessToken`` and
    ``x-api-key`` count and ``idempotency_key`` does not."""
    words = snake.split("_")
    for index, word in enumerate(words):
        if word in _SECRET_WORDS or word.endswith(_SECRET_WORD_ENDINGS):
            return True
        if index and (words[index - 1], word) in _SECRET_WORD_PAIRS:
            return True
    return False


def key_class(key: str) -> str:
    """:data:`SECRET`, :data:`IDENTIFIER` or :data:`PLAIN`: what a field name says of its value."""
    known = _key_classes.get(key)
    if known is not None:
        return known
    if _REDACTED_KEY_RE.match(key):
        found = PLAIN
    else:
        snake = snake_case(key)
        if is_identifier_key(snake):
            found = IDENTIFIER
        elif is_descriptive_key(snake):
            found = PLAIN
        else:
            found = SECRET if names_a_secret(snake) else PLAIN
    if len(key) <= _KEY_CLASS_MAX_LEN:
        if len(_key_classes) >= _KEY_CLASS_CACHE_LIMIT:
            _key_classes.clear()
        _key_classes[key] = found
    return found


def is_safe_shape(text: str) -> bool:
    """A whole string that holds nothing to redact: a timestamp, a UUID, a hex digest."""
    return _SAFE_SHAPE_RE.fullmatch(text) is not None


# --- the passes ---------------------------------------------------------------------------


class TextScrubber:
    """The passes of :func:`scrub_text`, with two hooks for a caller that needs them.

    ``charge(chars)`` is called before every pass over a string (decoded copies and the
    re-scans of the fixed-point loop included) with its length: the desk counts its work
    budget with it, and may raise to stop. ``extra_pass(text, lowered)`` runs after the
    patterns here and before decoding, on every pass: the desk's backstop patterns.
    """

    __slots__ = ("_charge", "_extra_pass")

    def __init__(
        self,
        *,
        charge: Callable[[int], None] | None = None,
        extra_pass: Callable[[str, str], str] | None = None,
    ) -> None:
        self._charge = charge
        self._extra_pass = extra_pass

    def scrub_text(self, text: str) -> str:
        """Redact secrets and personal data in one string; idempotent."""
        if not isinstance(text, str):
            text = str(text)
        out = self._scrub_once(text)
        # A redaction can change the context of its neighbours; repeat to a fixed point.
        for _ in range(3):
            if out == text:
                break
            text, out = out, self._scrub_once(out)
        return out

    def scrub_string(self, text: str) -> str:
        """:meth:`scrub_text` cut to MAX_STRING_CHARS (a suffix says how much was cut).

        Only a window of a long string is scanned: what lies past it is cut anyway.
        """
        if len(text) > SCAN_WINDOW:
            # Widen the window while redactions shrink it below what is kept.
            window = SCAN_WINDOW
            while True:
                out = self.scrub_text(text[:window])
                if window >= len(text) or len(out) > 2 * MAX_STRING_CHARS:
                    break
                window *= 4
            return self._truncate(out, len(text), MAX_STRING_CHARS)
        out = self.scrub_text(text)
        if len(out) > MAX_STRING_CHARS:
            return self._truncate(out, len(text), MAX_STRING_CHARS)
        return out

    def _truncate(self, scrubbed: str, original_length: int, limit: int) -> str:
        """Cut to at most `limit` chars, suffix included, so a second pass leaves it alone."""
        total = max(original_length, len(scrubbed))
        head = scrubbed
        for _ in range(4):
            head = head[: limit - len(f"...[truncated {total} chars]")]
            candidate = f"{head}...[truncated {total - len(head)} chars]"
            if self.scrub_text(candidate) == candidate:
                return candidate
            # The cut made something new look like a secret (a digit run, say): scrub again.
            head = self.scrub_text(head)
        return _marker("unscrubbable_text")

    def _scrub_once(self, text: str, depth: int = 0) -> str:
        if self._charge is not None:
            self._charge(len(text))
        if _SAFE_SHAPE_RE.fullmatch(text):
            return text
        out = text
        lowered = text.lower()
        # IBANs and numbers first: a scheme word in front ("Bearer +82 10-...") must not
        # split them, and a card pattern must not take the digits of an IBAN.
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
        if self._extra_pass is not None:
            out = self._extra_pass(out, lowered)
        # Last, what only shows once decoded; what was found above is no longer encoded.
        if depth < _MAX_DECODING_DEPTH and ("%" in out or "+" in out or "\\" in out):
            out = self._scrub_decoded(out, depth)
        # After decoding: a run of base64 may be a piece of an encoded key the passes above
        # redact whole (a PEM block inside a URL).
        if len(out) >= 40:
            out = _BARE_AWS_SECRET_RE.sub(_bare_aws_secret_replacement, out)
        return out

    def _scrub_decoded(self, text: str, depth: int) -> str:
        if "\\" in text and _JSON_ESCAPE_RE.search(text):
            decoded = _JSON_ESCAPE_RE.sub(_json_unescape, text)
            # Surrogate pairs (emoji) become one char; a lone surrogate cannot be stored.
            decoded = decoded.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            scrubbed = self._scrub_once(decoded, depth + 1)
            if scrubbed != decoded:
                return scrubbed
        if "%" in text or "+" in text:
            return _ENCODED_WORD_RE.sub(
                lambda word: self._scrub_encoded_word(word.group(), depth), text
            )
        return text

    def _scrub_encoded_word(self, word: str, depth: int) -> str:
        if "%" in word and _PERCENT_ESCAPE_RE.search(word):
            decoded = unquote_plus(word) if "+" in word else unquote(word)
        elif "+" in word and _PLUS_BETWEEN_RE.search(word):
            decoded = word.replace("+", " ")
        else:
            return word
        scrubbed = self._scrub_once(decoded, depth + 1)
        return scrubbed if scrubbed != decoded else word


_SCRUBBER: Final = TextScrubber()


def scrub_text(text: str) -> str:
    """Redact secrets and personal data in one free-text string with typed markers.

    ``Bearer abc`` -> ``[REDACTED:bearer]``, ``alice@example.com`` -> ``[REDACTED:email]``,
    and so on. Idempotent: ``scrub_text(scrub_text(s)) == scrub_text(s)``.
    """
    return _SCRUBBER.scrub_text(text)


# --- items --------------------------------------------------------------------------------
# What one scrub_item call may scan, in characters: past it, strings are replaced by a
# marker instead of scanned, so an item of megabytes costs milliseconds, not seconds. The
# desk refuses items whose scrubbing would cost much more than their size anyway.
MAX_ITEM_SCAN_CHARS: Final = 1_000_000
_BIG_INT: Final = 10**12
_CLEAN_MAX_LEN: Final = 64
_CLEAN_LIMIT: Final = 4_096


class _Seen:
    """Strings found to need nothing, remembered in two generations: a full one is set
    aside (one assignment) rather than emptied, so the strings every item holds (field
    names, codes, tool names) come back from the older generation at the cost of a set
    lookup instead of a scan each. Emptying a full set used to cost about 50 us, and
    re-scanning what it forgot more, inside a report() call.

    Shared by the threads that call report(): every string in either set was checked
    before it was added, so an interleaving may forget one, never admit one unchecked."""

    __slots__ = ("older", "recent")

    def __init__(self) -> None:
        self.recent: set[str] = set()
        self.older: set[str] = set()

    def __contains__(self, text: str) -> bool:
        if text in self.recent:
            return True
        if text in self.older:
            self.recent.add(text)
            return True
        return False

    def add(self, text: str) -> None:
        if len(self.recent) >= _CLEAN_LIMIT:
            self.older, self.recent = self.recent, set()
        self.recent.add(text)

    def add_all(self, texts: set[str]) -> None:
        if len(self.recent) >= _CLEAN_LIMIT:
            self.older, self.recent = self.recent, set()
        self.recent |= texts

    def held(self, texts: set[str]) -> set[str]:
        """The strings of `texts` either generation holds."""
        return (texts & self.recent) | (texts & self.older)

    def unknown(self, texts: set[str]) -> set[str]:
        """The strings of `texts` in neither generation (those found in the older one
        move to the recent one)."""
        unknown = texts - self.recent
        if unknown:
            older = unknown & self.older
            if older:
                self.recent |= older
                unknown -= older
        return unknown


# Short strings found clean as values (scrub_item's walk).
_clean_strings = _Seen()
_TOO_DEEP: Final = f"[truncated: nested deeper than {MAX_DEPTH} levels]"
_TOO_MANY: Final = f"[truncated: more than {MAX_NODES} values]"
_UNSCANNED: Final = _marker("unscanned_text")
_TRUNCATED_ITEMS_RE = re.compile(r"^\[truncated \d+ items\]\Z")


def list_limit(value: list[Any] | tuple[Any, ...]) -> int:
    """How many items of a list to keep: one more when an earlier pass added its marker."""
    if (
        len(value) == MAX_LIST_ITEMS + 1
        and type(value[-1]) is str
        and _TRUNCATED_ITEMS_RE.match(value[-1])
    ):
        return MAX_LIST_ITEMS + 1
    return MAX_LIST_ITEMS


class _ItemWalk:
    """One scrub_item call: the values and characters it has taken so far."""

    __slots__ = ("nodes", "path", "scanned")

    def __init__(self) -> None:
        self.nodes = 0
        self.scanned = 0
        self.path: list[int] = []  # ids of the containers being copied, to find a cycle

    def text(self, value: str) -> str:
        if len(value) <= _CLEAN_MAX_LEN and value in _clean_strings:
            return value
        self.scanned += min(len(value), SCAN_WINDOW)
        if self.scanned > MAX_ITEM_SCAN_CHARS:
            return _UNSCANNED
        out = _SCRUBBER.scrub_string(value)
        if out == value and len(value) <= _CLEAN_MAX_LEN:
            _clean_strings.add(value)
        return out

    def count(self) -> bool:
        self.nodes += 1
        return self.nodes <= MAX_NODES

    def walk(self, value: Any, depth: int) -> Any:
        kind = type(value)
        if kind is str:
            return self.text(value)
        if value is None or kind is bool:
            return value
        if kind is int:
            return value if -_BIG_INT < value < _BIG_INT else self.big_int(value)
        if kind is float:
            return value
        if isinstance(value, dict):
            return self.container(value, depth, self.walk_dict)
        if isinstance(value, (list, tuple)):
            return self.container(value, depth, self.walk_list)
        if isinstance(value, (set, frozenset)):
            return self.container(list(value), depth, self.walk_list)
        if isinstance(value, str):
            return self.text(str.__str__(value))
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, int):
            return self.walk(int(value), depth)
        if isinstance(value, float):
            return float(value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return self.text(bytes(value).decode("utf-8", "replace"))
        # Anything else is written as its str() by the reporter: scrub that text.
        return self.text(_describe(value))

    def big_int(self, value: int) -> Any:
        """A card number sent as a JSON number becomes a marker string."""
        text = str(value)
        scrubbed = self.text(text)
        return value if scrubbed == text else scrubbed

    def container(self, value: Any, depth: int, copy: Callable[[Any, int], Any]) -> Any:
        if id(value) in self.path:
            raise ValueError("an item must not contain itself: no copy of it can be made")
        if depth >= MAX_DEPTH:
            return _TOO_DEEP
        self.path.append(id(value))
        try:
            return copy(value, depth + 1)
        finally:
            self.path.pop()

    def walk_dict(self, value: dict[Any, Any], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        redacted_keys = 0
        for key, item in value.items():
            if not self.count():
                out[_TOO_MANY] = None
                break
            name = key if type(key) is str else _key_text(key)
            scrubbed_name = self.text(name)
            if scrubbed_name != name:
                # A key that is itself a secret (an email as a key): numbered, so keys
                # stay distinct, and its value is scrubbed as any other.
                redacted_keys += 1
                while f"[REDACTED_KEY:{redacted_keys}]" in value:
                    redacted_keys += 1
                out[f"[REDACTED_KEY:{redacted_keys}]"] = self.walk(item, depth)
                continue
            out[name] = self.keyed(name, item, depth)
        return out

    def keyed(self, name: str, item: Any, depth: int) -> Any:
        """A value under a field name: the name may say it is a secret or an identifier."""
        if is_span_identity(name, item):
            return item
        kind = key_class(name)
        if kind == SECRET:
            if item is None or type(item) is bool:
                return item
            if type(item) is int and snake_case(name).endswith("tokens"):
                return item  # LLM usage counters: prompt_tokens, max_tokens
            return REDACTED
        if kind == IDENTIFIER and _plain_identifier(item):
            # The desk replaces it by a keyed hash, which keeps one user's failures
            # together; a marker here would merge everyone's. So it travels as it is.
            return item
        if _names_headers(name):  # headers, request_headers, header_pairs, as the desk reads
            if type(item) is dict:
                return self.container(item, depth, self.walk_headers)
            if isinstance(item, (list, tuple)):
                return self.container(item, depth, self.walk_header_list)
        return self.walk(item, depth)

    def walk_headers(self, value: dict[Any, Any], depth: int) -> dict[str, Any]:
        """A headers dict: names stay, values of names holding auth/token/key/... go."""
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not self.count():
                out[_TOO_MANY] = None
                break
            name = key if type(key) is str else _key_text(key)
            if self.text(name) != name:
                out[f"[REDACTED_KEY:{len(out) + 1}]"] = REDACTED
            elif _is_secret_header(name) and item is not None and type(item) is not bool:
                out[name] = REDACTED
            else:
                out[name] = self.keyed(name, item, depth)
        return out

    def walk_header_list(self, value: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
        """Headers as [name, value] pairs: as in a headers dict, the value of any name
        holding auth/token/key/... goes ([["X-Vendor-Token", "..."]])."""
        return self.walk_list(value, depth, headers=True)

    def walk_list(
        self, value: list[Any] | tuple[Any, ...], depth: int, *, headers: bool = False
    ) -> list[Any]:
        out: list[Any] = []
        limit = list_limit(value)
        for index, item in enumerate(value):
            if index == limit:
                out.append(f"[truncated {len(value) - limit} items]")
                break
            if not self.count():
                out.append(_TOO_MANY)
                break
            if (
                type(item) is list
                and len(item) == 2
                and type(item[0]) is str
                and item[0].lower() in WELL_KNOWN_SECRET_HEADERS
            ):
                # ["Authorization", "..."] is a header pair wherever it appears.
                out.append([item[0], self.keyed(item[0], item[1], depth)])
            elif (
                headers
                and isinstance(item, (list, tuple))
                and len(item) == 2
                and type(item[0]) is str
                and _is_secret_header(item[0])
            ):
                secret = item[1]
                kept = secret if secret is None or type(secret) is bool else REDACTED
                out.append([self.text(item[0]), kept])
            elif type(item) is dict and type(item.get("name")) is str and "value" in item:
                out.append(self.container(item, depth, self.walk_name_value))
            else:
                out.append(self.walk(item, depth))
        return out

    def walk_name_value(self, value: dict[Any, Any], depth: int) -> dict[str, Any]:
        """{"name": N, "value": V} (headers, parameters): V is treated as if keyed by N."""
        name: str = value["name"]
        out = self.walk_dict({key: item for key, item in value.items() if key != "value"}, depth)
        if _is_secret_header(name) or key_class(name) == SECRET:
            out["value"] = self.keyed("secret", value["value"], depth)
        else:
            out["value"] = self.keyed(name, value["value"], depth)
        return out


def _names_headers(name: str) -> bool:
    """A field holding headers, as the desk reads it: a word "headers" or "header" in a
    name that does not describe them (``header_names``, ``headers_count`` do)."""
    snake = snake_case(name)
    words = snake.split("_")
    return ("headers" in words or "header" in words) and not is_descriptive_key(snake)


def _is_secret_header(name: str) -> bool:
    lowered = name.lower()
    if is_identifier_key(snake_case(name)):
        return False
    return any(part in lowered for part in SENSITIVE_HEADER_PARTS)


def _plain_identifier(value: Any) -> bool:
    return type(value) in (str, int) or (
        type(value) is list
        and len(value) <= MAX_LIST_ITEMS
        and all(type(item) in (str, int) for item in value)
    )


def _key_text(key: Any) -> str:
    """A key that is not a string, spelled as JSON spells it (1 -> "1", None -> "null")."""
    if key is None or type(key) is bool:
        return "null" if key is None else ("true" if key else "false")
    if isinstance(key, float) and not math.isfinite(key):
        return "NaN" if key != key else ("Infinity" if key > 0 else "-Infinity")
    return _describe(key)


def _describe(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # an object whose __str__ fails is named by its type
        return f"<{type(value).__name__}>"


# OpenTelemetry's span identity: random hex, which one time in tens of thousands is all
# digits and passes the card checksum. Under these names, in exactly that shape, it is an
# id the desk matches a span and a report by, never a card.
SPAN_IDENTITY_KEYS: Final = frozenset({"trace_id", "span_id", "parent_span_id"})
_SPAN_IDENTITY_SHAPE = re.compile(r"[0-9a-f]{16}|[0-9a-f]{32}")


def is_span_identity(name: str, value: Any) -> bool:
    """Whether `value` under field `name` is a trace or span id, kept as it is."""
    return (
        name in SPAN_IDENTITY_KEYS
        and type(value) is str
        and _SPAN_IDENTITY_SHAPE.fullmatch(value) is not None
    )


def scrub_item(body: Any) -> Any:
    """A scrubbed deep copy of a JSON-like value (an item body); the input is not changed.

    Strings are scrubbed (:func:`scrub_text`) and cut to MAX_STRING_CHARS; values under
    keys naming a secret become ``[REDACTED]`` (booleans and nulls stay); identifiers
    (``user_id``, ``email`` keys) travel as they are, for the desk hashes them with its
    key; keys that look like secrets become ``[REDACTED_KEY:n]``; lists keep 200 items,
    containers below 32 levels and values past 20,000 become markers; tuples and sets
    become lists, bytes are decoded, other objects become their scrubbed ``str()``.
    Raises ``ValueError`` only for a body that contains itself.
    """
    return _ItemWalk().walk(body, 0)


# --- the reporter's shortcut: an item that holds nothing to scrub -------------------------
# Most items hold nothing to redact (0.7% of bench/reporter.py's do), yet the walk above
# costs several times what encoding the item does, most of it the interpreter's work per
# value (a call, a copy and a check each), not the rules' scans. So the reporter asks
# first, with is_clean_item, whether the walk would change anything: a read-only pass over
# the same values with less work each (set lookups for the keys and strings met before,
# no copy), then the rules' gates run once over all the strings not met before, joined,
# and the rules in full on each of them only when a gate fires.
_inert_keys = _Seen()  # keys the walk leaves alone, as it treats their values (see _inert_key)
_met_once = _Seen()  # strings found clean once by is_clean_item
# Joins strings for one pass of the gates: no gate's pattern takes this char (it is no word
# char, space, quote, digit, letter or punctuation any class of theirs holds), so a gate
# finds in the joined text at least what it finds in each string.
_JOIN: Final = "\x00"


def is_clean_item(body: Any) -> bool:
    """Whether ``scrub_item(body)`` would give back an equal copy of `body`: then the body
    itself can be encoded instead of the copy, with the same JSON and the same default id.

    True only when `body` is a dict made of dicts, lists, strings, ints, floats, booleans
    and None of exactly those types (a tuple, a subclass, bytes or any other object, which
    the walk converts, gives False), and the walk would change none of it:

    * every key is a string the rules leave as it is, naming no secret and no field of
      headers (``headers``, ``header_pairs``: the walk reads those as headers);
    * every string is one the rules leave as it is (none of their gates fires on it, or the
      rules ran and changed nothing), no longer than MAX_STRING_CHARS; or it is the value of
      an identifier key (``user_id``, ``email``) or a span id in its shape, which the walk
      keeps;
    * no list holds a pair led by a well-known secret header's name (``["Authorization",
      ...]``) or a dict with ``name`` and ``value`` (the walk reads those as a header or a
      parameter), and no integer of 1e12 or more has text the rules would change (a card
      number sent as a number);
    * within the walk's limits: containers nested less than MAX_DEPTH deep, at most
      MAX_LIST_ITEMS items a list, MAX_NODES values and MAX_ITEM_SCAN_CHARS scanned.

    False says only that the walk may change something (sometimes it would not: an email
    under ``user_id`` in a list, say); the caller then walks. Never raises.
    """
    if type(body) is not dict:
        return False
    check = _CleanCheck()
    return check.dict_clean(body, 0) and check.strings_clean()


class _CleanCheck:
    """One is_clean_item call: the values counted, the strings no cache holds."""

    __slots__ = ("clean", "keys", "new_keys", "nodes", "unseen")

    def __init__(self) -> None:
        self.nodes = 0
        self.unseen: list[str] = []  # strings to scan at the end, as often as they occur
        self.new_keys: list[str] = []
        # The recent generations (the older ones are looked up at the end): a rotation
        # meanwhile leaves these holding strings checked before, as always.
        self.clean = _clean_strings.recent
        self.keys = _inert_keys.recent

    def dict_clean(self, value: dict[Any, Any], depth: int) -> bool:
        if depth >= MAX_DEPTH:
            return False
        self.nodes += len(value)
        if self.nodes > MAX_NODES:
            return False
        clean, keys, unseen = self.clean, self.keys, self.unseen
        str_, dict_, list_ = str, dict, list  # locals: this loop is the hot one
        for key, item in value.items():
            if type(key) is not str_:  # the walk spells it as text (a subclass: its str())
                return False
            if key not in keys and not self.new_key(key):
                return False
            kind = type(item)
            if kind is str_:
                if item not in clean and not _kept_under(key, item):
                    unseen.append(item)
            elif kind is dict_:
                if not self.dict_clean(item, depth + 1):
                    return False
            elif kind is list_:
                if key_class(key) == IDENTIFIER and _plain_identifier(item):
                    continue  # kept as it is
                if not self.list_clean(item, depth + 1):
                    return False
            elif kind is int:
                if not -_BIG_INT < item < _BIG_INT and key_class(key) != IDENTIFIER:
                    unseen.append(str(item))
            elif kind is not float and kind is not bool and item is not None:
                return False
        return True

    def list_clean(self, value: list[Any], depth: int) -> bool:
        if depth >= MAX_DEPTH or len(value) > MAX_LIST_ITEMS:
            return False
        self.nodes += len(value)
        if self.nodes > MAX_NODES:
            return False
        clean, unseen = self.clean, self.unseen
        for item in value:
            kind = type(item)
            if kind is str:
                if item not in clean:
                    unseen.append(item)
            elif kind is dict:
                if "value" in item and type(item.get("name")) is str:
                    return False  # {"name": "Authorization", "value": "..."}
                if not self.dict_clean(item, depth + 1):
                    return False
            elif kind is list:
                if (
                    len(item) == 2
                    and type(item[0]) is str
                    and item[0].lower() in WELL_KNOWN_SECRET_HEADERS
                ):
                    return False  # ["Authorization", "..."]
                if not self.list_clean(item, depth + 1):
                    return False
            elif kind is int:
                if not -_BIG_INT < item < _BIG_INT:
                    unseen.append(str(item))
            elif kind is not float and kind is not bool and item is not None:
                return False
        return True

    def new_key(self, key: str) -> bool:
        if not _inert_key(key):
            return False
        self.new_keys.append(key)  # its text is scanned with the strings
        return True

    def strings_clean(self) -> bool:
        """The strings no cache held, through the rules' gates at once (the rules on each
        when a gate fires); remembered when clean."""
        unseen, new_keys = self.unseen, self.new_keys
        # What the walk would scan: these, and at most every key and cached value again.
        scanned = 2 * self.nodes * _CLEAN_MAX_LEN + sum(map(len, unseen)) + sum(map(len, new_keys))
        if scanned > MAX_ITEM_SCAN_CHARS:
            return False
        strings = _clean_strings.unknown({*unseen, *new_keys})
        todo = [string for string in strings if not _SAFE_SHAPE_RE.fullmatch(string)]
        if todo:
            if any(len(string) > MAX_STRING_CHARS for string in todo):
                return False  # the walk cuts it
            if may_change(_JOIN.join(todo)):
                for string in todo:
                    if _SCRUBBER.scrub_string(string) != string:
                        return False
            # Remembered the second time they come: ids met once each would otherwise push
            # the strings every item holds out of the recent generation.
            short = {string for string in todo if len(string) <= _CLEAN_MAX_LEN}
            again = _met_once.held(short)
            if again:
                _clean_strings.add_all(again)
            _met_once.add_all(short - again)
        if new_keys:
            _inert_keys.add_all({key for key in new_keys if len(key) <= _CLEAN_MAX_LEN})
        return True


def _inert_key(key: str) -> bool:
    """A key under which the walk treats a value as anywhere else, or keeps it: not a
    secret's name (its value becomes [REDACTED]) nor a field of headers."""
    return key_class(key) != SECRET and not _names_headers(key)


def _kept_under(key: str, value: str) -> bool:
    """A string the walk keeps as it is under this key: an identifier (the desk hashes it)
    or a span id in its shape."""
    return key_class(key) == IDENTIFIER or is_span_identity(key, value)


def may_change(text: str) -> bool:
    """Whether any pass of :func:`scrub_text` could change `text`: False means it comes back
    as it is. The gates of TextScrubber._scrub_once (the client's: without the desk's
    backstop), each a superset of what its pass looks for, so a new pass there needs its
    gate here. None of them reads past a char no pattern takes, such as the NUL
    is_clean_item joins strings with, so one call answers for several strings joined by
    one. tests/client/test_scrub_shortcut.py checks, on every generated secret in every
    encoding and on arbitrary text, that False never meets a string scrub_text changes."""
    lowered = text.lower()
    return bool(
        _IBAN_GATE_RE.search(text)
        or _NUMBER_RUN_RE.search(text)
        or "@" in text
        or "%" in text
        or "+" in text
        or "\\" in text
        or _TOKEN_GATE_RE.search(lowered)
        or "private key" in lowered
        or (("=" in text or ":" in text) and _TEXT_PAIR_GATE_RE.search(lowered))
        or (
            not text.isascii()
            and (
                _NON_ASCII_DIGIT_RE.search(text)
                or any(label in text for label in _KOREAN_PASSWORD_GATE)
            )
        )
        or (len(text) >= 40 and _BARE_AWS_SECRET_RE.search(text))
    )
