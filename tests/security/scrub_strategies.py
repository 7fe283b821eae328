"""Secrets to plant and clean values to keep, for tests/security/test_scrub_property.py.

Every secret is generated, none is listed: each kind has a generator driven by a seed that
hypothesis draws (one choice per secret keeps 10,000 payloads within hypothesis's budget per
example), and hypothesis draws the kind, where the secret goes and how it is encoded, so it
explores those (and shrinks them, in the tests that shrink). All credentials are fake,
assembled at run time, so secret scanners do not flag this file.

A planted :class:`Secret` carries its *needles*: the parts that must never be stored (a
token's random body, not its public prefix; a URL's password, not its host). No needle, no
URL-encoded, JSON-escaped or base64 form of one, and no 12-character window of any of them
may appear afterwards (:class:`LeakFinder`).
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
import random
import string
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

from hypothesis import strategies as st

from triage.vocabulary import taxonomy

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
HEX = "0123456789abcdef"
BASE62 = UPPER + LOWER + DIGITS
URLSAFE = BASE62 + "-_"
BASE64 = BASE62 + "+/"
# An unquoted "password=..." in text ends at whitespace or one of , ; & " ' < > ( ) { } [ ]:
# no reader (nor the scrubber) can tell where such a value would end otherwise, so unquoted
# passwords avoid them; quoted ones may hold spaces and more. Quotes and backslashes are left
# out of both, so a needle reads the same in every JSON layer of the dump.
PASSWORD_UNQUOTED = BASE62 + "!#$%*+-.=?@^_~"
PASSWORD_QUOTED = PASSWORD_UNQUOTED + " &(),;<>[]{}|:/"
WINDOW = 12
# Fullwidth digits (U+FF10..U+FF19), which Korean IMEs type.
_FULLWIDTH = "".join(chr(0xFF10 + digit) for digit in range(10))
FULLWIDTH_DIGITS = str.maketrans("0123456789", _FULLWIDTH)
_FOLD_DIGITS = str.maketrans(_FULLWIDTH, "0123456789")


# --- the secret ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Secret:
    """One generated secret and every way a payload may carry it."""

    kind: str
    text: str  # self-contained free-text form: "Bearer ...", "password=...", an email
    value: str  # the secret alone, as a key such as "password" or "access_token" holds it
    needles: tuple[str, ...]  # what must never survive (nor any 12-char window of it)
    header: str = ""  # the header that carries it ("Authorization"), if any
    header_value: str = ""  # what that header holds ("Bearer ...")
    fields: tuple[tuple[str, Any], ...] = ()  # (natural key, value): ("email", "kim@..")
    case_variants: tuple[str, ...] = ()  # the text with other letter case, same secret

    def needle_forms(self) -> Iterator[tuple[str, bool]]:
        """Each needle and its trivially recoverable forms, and whether a 12-char window of
        the form counts too (not for \\uXXXX escapes: "\\uff11\\uff12" is in many numbers)."""
        for needle in self.needles:
            forms = {
                needle,
                quote(needle, safe=""),
                quote_plus(needle),
                json.dumps(needle, ensure_ascii=False)[1:-1],
                base64.b64encode(needle.encode()).decode().rstrip("="),
                base64.urlsafe_b64encode(needle.encode()).decode().rstrip("="),
            }
            if self.case_variants:
                forms |= {needle.lower(), needle.upper()}
            for form in forms:
                yield form, True
            escaped = json.dumps(needle)[1:-1]
            if escaped not in forms:
                yield escaped, False


def _chars(rng: random.Random, alphabet: str, size: int, *, need: tuple[str, ...] = ()) -> str:
    """`size` random chars of `alphabet`, with at least one char of each group in `need`.

    Real keys are uniformly random: 40 base62 chars without a digit happen about once in a
    thousand keys, and the scrubber needs a digit to tell "sk-learn-classifier" from a key.
    """
    out = [rng.choice(alphabet) for _ in range(size)]
    for position, group in zip(rng.sample(range(size), len(need)), need, strict=True):
        out[position] = rng.choice(group)
    return "".join(out)


def _word(rng: random.Random, low: int = 4, high: int = 9) -> str:
    return _chars(rng, LOWER, rng.randint(low, high))


def _case(rng: random.Random, word: str) -> str:
    return rng.choice([word, word.lower(), word.upper(), word.title()])


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _luhn_complete(digits: str) -> str:
    """digits + the check digit that makes the whole Luhn-valid."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        number = int(char)
        if position % 2 == 0:  # doubled: the check digit will shift everything by one
            number *= 2
            if number > 9:
                number -= 9
        total += number
    return digits + str((10 - total % 10) % 10)


def _fullwidth_sometimes(rng: random.Random, text: str) -> str:
    # Korean IMEs type fullwidth digits; the scrubber folds them.
    return text.translate(FULLWIDTH_DIGITS) if rng.random() < 0.08 else text


def _digits_needles(formatted: str) -> tuple[str, ...]:
    """The number as written, in ASCII digits, and its bare digits when they are many."""
    digits = "".join(char for char in formatted.translate(_FOLD_DIGITS) if char.isdigit())
    ascii_form = formatted.translate(_FOLD_DIGITS)
    needles = {formatted, ascii_form}
    if len(digits) >= 10:
        needles.add(digits)
    return tuple(sorted(needles))


# --- the kinds ----------------------------------------------------------------------------
def _openai(rng: random.Random) -> Secret:
    prefix = rng.choice(["sk-", "sk-proj-", "sk-svcacct-", "sk-admin-"])
    if prefix == "sk-" and rng.random() < 0.5:
        body = _chars(rng, BASE62, 20, need=(DIGITS,)) + "T3BlbkFJ" + _chars(rng, BASE62, 20)
    else:
        body = _chars(rng, URLSAFE, rng.randint(20, 160), need=(DIGITS, LOWER, UPPER))
        body = body.replace("ant-", "anT-")
    key = "sk-" + prefix[3:] + body
    return Secret(
        "openai_key",
        key,
        key,
        (body,),
        header="Authorization",
        header_value=f"Bearer {key}",
        fields=(("OPENAI_API_KEY", key), ("openai_api_key", key), ("llm_key", key)),
    )


def _anthropic(rng: random.Random) -> Secret:
    body = _chars(rng, URLSAFE, rng.randint(20, 93), need=(DIGITS,)) + "AA"
    key = "sk-" + "ant-" + rng.choice(["api03-", "admin01-"]) + body
    return Secret(
        "anthropic_key",
        key,
        key,
        (body,),
        header=rng.choice(["x-api-key", "X-Api-Key"]),
        header_value=key,
        fields=(("ANTHROPIC_API_KEY", key), ("model_provider_key", key)),
    )


def _aws_access_key_id(rng: random.Random) -> Secret:
    key = rng.choice(["AK" + "IA", "AS" + "IA"]) + _chars(rng, UPPER + "234567", 16)
    return Secret(
        "aws_access_key_id",
        key,
        key,
        (key,),
        fields=(("aws_access_key_id", key), ("AccessKeyId", key), ("AWS_ACCESS_KEY_ID", key)),
    )


def _aws_secret_key(rng: random.Random) -> Secret:
    secret = _chars(rng, BASE64, 40, need=(DIGITS, LOWER, UPPER))
    key = rng.choice(["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "SecretAccessKey"])
    text = rng.choice(
        [
            f"{key}={secret}",
            f"{key} = {secret}",
            f"{key}: {secret}",
            f'"{key}": "{secret}"',
            f"'{key}': '{secret}'",
        ]
    )
    return Secret(
        "aws_secret_key",
        text,
        secret,
        (secret,),
        fields=(("aws_secret_access_key", secret), ("SecretAccessKey", secret)),
        case_variants=(text.replace(key, key.upper()), text.replace(key, key.lower())),
    )


def _github(rng: random.Random) -> Secret:
    if rng.random() < 0.7:
        body = _chars(rng, BASE62, 36, need=(DIGITS,))
        token = "gh" + rng.choice("pousr") + "_" + body
    else:
        body = _chars(rng, BASE62, 22, need=(DIGITS,)) + "_" + _chars(rng, BASE62, 59)
        token = "github" + "_pat_" + body
    return Secret(
        "github_token",
        token,
        token,
        (body,),
        header="Authorization",
        header_value=f"{rng.choice(['token', 'Bearer'])} {token}",
        fields=(("GITHUB_TOKEN", token), ("gh_token", token)),
    )


def _slack(rng: random.Random) -> Secret:
    shape = rng.randrange(3)
    if shape == 0:
        secret = _chars(rng, BASE62, 24, need=(DIGITS,))
        token = (
            f"xox{rng.choice('bpars')}-{_chars(rng, DIGITS, rng.randint(10, 13))}"
            f"-{_chars(rng, DIGITS, 13)}-{secret}"
        )
    elif shape == 1:
        secret = _chars(rng, HEX, 32, need=(LOWER[:6],))
        token = (
            f"xoxp-{_chars(rng, DIGITS, 12)}-{_chars(rng, DIGITS, 12)}"
            f"-{_chars(rng, DIGITS, 13)}-{secret}"
        )
    else:
        secret = _chars(rng, HEX, 64, need=(LOWER[:6],))
        token = f"xapp-1-A{_chars(rng, UPPER + DIGITS, 10)}-{_chars(rng, DIGITS, 13)}-{secret}"
    return Secret(
        "slack_token",
        token,
        token,
        (secret,),
        header="Authorization",
        header_value=f"Bearer {token}",
        fields=(("SLACK_BOT_TOKEN", token), ("slack", token)),
    )


def _slack_webhook(rng: random.Random) -> Secret:
    secret = _chars(rng, BASE62, 24, need=(DIGITS,))
    url = (
        f"https://hooks.slack.com/services/T{_chars(rng, UPPER + DIGITS, rng.randint(8, 10))}"
        f"/B{_chars(rng, UPPER + DIGITS, rng.randint(8, 10))}/{secret}"
    )
    return Secret(
        "slack_webhook",
        url,
        url,
        (secret,),
        fields=(("webhook_url", url), ("slack_webhook_url", url), ("notify", url)),
    )


def _stripe(rng: random.Random) -> Secret:
    if rng.random() < 0.8:
        prefix = rng.choice(["sk", "rk"]) + "_" + rng.choice(["live", "test"]) + "_"
        body = _chars(rng, BASE62, rng.randint(24, 99), need=(DIGITS,))
    else:
        prefix = "wh" + "sec_"
        body = _chars(rng, BASE62, 32, need=(DIGITS,))
    key = prefix + body
    return Secret(
        "stripe_key",
        key,
        key,
        (body,),
        header="Authorization",
        header_value=f"Bearer {key}",
        fields=(("STRIPE_SECRET_KEY", key), ("stripe_key", key), ("webhook_signing", key)),
    )


def _google(rng: random.Random) -> Secret:
    if rng.random() < 0.7:
        body = _chars(rng, URLSAFE, 35, need=(DIGITS,))
        key = "AI" + "za" + body
        header = "X-Goog-Api-Key"
    else:
        body = _chars(rng, URLSAFE, rng.randint(60, 180), need=(DIGITS,))
        key = "ya" + "29." + body
        header = "Authorization"
    return Secret(
        "google_key",
        key,
        key,
        (body,),
        header=header,
        header_value=key if header != "Authorization" else f"Bearer {key}",
        fields=(("GOOGLE_API_KEY", key), ("maps_key", key), ("key", key)),
    )


def _jwt(rng: random.Random) -> Secret:
    alg = rng.choice(["HS256", "RS256", "ES256", "none"])
    header = _b64url(json.dumps({"alg": alg, "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {
        "sub": f"user-{rng.randint(1, 10**9)}",
        "iat": rng.randint(1_600_000_000, 1_800_000_000),
        "exp": rng.randint(1_800_000_000, 1_900_000_000),
        "jti": _chars(rng, HEX, 16),
        "scope": rng.choice(["orders:read", "openid profile", "admin"]),
    }
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = "" if alg == "none" else _chars(rng, URLSAFE, rng.choice([43, 86]))
    token = f"{header}.{payload}.{signature}"
    return Secret(
        "jwt",
        token,
        token,
        tuple(part for part in (payload, signature) if part),
        header="Authorization",
        header_value=f"Bearer {token}",
        fields=(("id_token", token), ("jwt", token), ("assertion", token)),
    )


def _bearer(rng: random.Random) -> Secret:
    token = _chars(rng, URLSAFE + "._~+/", rng.randint(20, 64), need=(DIGITS, LOWER))
    if rng.random() < 0.2:
        token += "=" * rng.randint(1, 2)
    scheme = rng.choice(["Bearer", "bearer", "BEARER"])
    text = f"{scheme} {token}"
    return Secret(
        "bearer_token",
        text,
        token,
        (token.rstrip("="),),
        header=rng.choice(["Authorization", "authorization", "AUTHORIZATION"]),
        header_value=text,
        fields=(("access_token", token), ("auth", text), ("Authorization", text)),
        case_variants=(f"BEARER {token}", f"bearer {token}"),
    )


def _basic(rng: random.Random) -> Secret:
    user = _word(rng) + rng.choice(["", str(rng.randint(1, 99)), ".ops"])
    password = _chars(rng, PASSWORD_UNQUOTED + ":", rng.randint(12, 24), need=(DIGITS,))
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    scheme = rng.choice(["Basic", "basic", "BASIC"])
    text = f"{scheme} {encoded}"
    return Secret(
        "basic_auth",
        text,
        encoded,
        (encoded.rstrip("="), password, f"{user}:{password}"),
        header=rng.choice(["Authorization", "Proxy-Authorization", "authorization"]),
        header_value=text,
        fields=(("Authorization", text), ("basic_auth", text), ("credentials", encoded)),
        case_variants=(f"BASIC {encoded}", f"basic {encoded}"),
    )


def _url_password(rng: random.Random) -> Secret:
    scheme = rng.choice(
        ["postgres", "postgresql", "mysql", "redis", "rediss", "mongodb+srv", "amqp", "https"]
    )
    user = "" if scheme.startswith("redis") and rng.random() < 0.5 else _word(rng)
    password = _chars(rng, PASSWORD_UNQUOTED + "/:#?[]", rng.randint(12, 24), need=(DIGITS,))
    encoded = quote(password, safe="!$*+-.=_~")
    host = rng.choice(
        [
            f"{_word(rng)}.internal",
            f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
            f"{_word(rng)}-master.{_word(rng)}.svc.cluster.local",
            f"cluster0.{_chars(rng, LOWER + DIGITS, 5)}.mongodb.net",
            f"{_word(rng)}.example.com",
        ]
    )
    port = rng.choice(["", ":5432", ":6379", ":3306", ":5672", ":8443"])
    url = f"{scheme}://{user}:{encoded}@{host}{port}/{_word(rng)}"
    upper = url.replace(scheme, scheme.upper(), 1).replace(host, host.upper(), 1)
    return Secret(
        "url_password",
        url,
        url,
        (password, encoded, f"{user}:{encoded}") if user else (password, encoded),
        fields=(("DATABASE_URL", url), ("dsn", url), ("broker_url", url), ("upstream", url)),
        case_variants=(upper,),
    )


def _pem(rng: random.Random) -> Secret:
    label = rng.choice(["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "DSA ", ""]) + "PRIVATE KEY"
    lines = [_chars(rng, BASE64, 64, need=(DIGITS,)) for _ in range(rng.randint(2, 8))]
    lines.append(_chars(rng, BASE64, rng.randint(12, 60), need=(DIGITS,)) + "==")
    newline = rng.choice(["\n", "\n", "\r\n"])
    text = f"-----BEGIN {label}-----{newline}{newline.join(lines)}{newline}"
    if rng.random() < 0.8:
        text += f"-----END {label}-----"
    else:  # cut by a log line limit: no END line
        text = text[: rng.randint(len(label) + 40, len(text) - 1)]
    needles = tuple(line.rstrip("=") for line in lines if line.rstrip("=") in text)
    needles = needles or (text[len(label) + 20 :].strip(),)
    return Secret(
        "pem_private_key",
        text,
        text,
        needles,
        fields=(("private_key", text), ("tls_key", text), ("ssh_identity", text)),
    )


_TLDS = [".com", ".co.kr", ".kr", ".net", ".io", ".org", ".dev", ".ac.kr", ".jp"]


def _email(rng: random.Random) -> Secret:
    first, last = _word(rng, 3, 7), _word(rng, 3, 8)
    local = rng.choice(
        [
            f"{first}.{last}",
            f"{first}_{last}{rng.randint(1, 99)}",
            f"{first}{last}",
            f"{first}+{_word(rng, 3, 6)}",
            f"{first}-{last}",
        ]
    )
    domain = rng.choice(["", "mail.", "corp."]) + _word(rng, 5, 10) + rng.choice(_TLDS)
    email = f"{local}@{domain}"
    return Secret(
        "email",
        email,
        email,
        (email,),
        fields=(
            ("email", email),
            ("contact", email),
            ("to", f"{first.title()} <{email}>"),
            ("reply_to", email),
        ),
        case_variants=(email.upper(), email.lower(), email.title()),
    )


def _phone_kr(rng: random.Random) -> Secret:
    mobile = rng.random() < 0.7
    if mobile:
        prefix = rng.choice(["010", "010", "010", "011", "016", "017", "019"])
        middle, last = _chars(rng, DIGITS, 4), _chars(rng, DIGITS, 4)
        national = prefix[1:]
        formatted = rng.choice(
            [
                f"{prefix}-{middle}-{last}",
                f"{prefix} {middle} {last}",
                f"{prefix}.{middle}.{last}",
                f"{prefix}{middle}{last}",
                f"+82 {national}-{middle}-{last}",
                f"+82-{national}-{middle}-{last}",
                f"+82{national}{middle}{last}",
                f"+82 (0){national} {middle} {last}",
            ]
        )
    else:
        area = rng.choice(["02", "031", "032", "051", "053", "062", "064", "070"])
        middle = _chars(rng, DIGITS, rng.choice([3, 4]))
        last = _chars(rng, DIGITS, 4)
        formatted = rng.choice(
            [
                f"{area}-{middle}-{last}",
                f"({area}) {middle}-{last}",
                f"{area} {middle} {last}",
                f"+82 {area[1:]}-{middle}-{last}",
            ]
        )
    formatted = _fullwidth_sometimes(rng, formatted)
    return Secret(
        "phone_kr",
        formatted,
        formatted,
        _digits_needles(formatted),
        fields=(("phone", formatted), ("mobile", formatted), ("tel", formatted)),
    )


def _phone_intl(rng: random.Random) -> Secret:
    def d(count: int) -> str:
        return _chars(rng, DIGITS, count)

    area = str(rng.randint(2, 9)) + d(2)
    exchange = str(rng.randint(2, 9)) + d(2)
    formatted = rng.choice(
        [
            f"+1 ({area}) {exchange}-{d(4)}",
            f"+1 {area}-{exchange}-{d(4)}",
            f"+1{area}{exchange}{d(4)}",
            f"({area}) {exchange}-{d(4)}",
            f"{area}-{exchange}-{d(4)}",
            f"{area}.{exchange}.{d(4)}",
            f"+44 20 {d(4)} {d(4)}",
            f"+44 7{d(3)} {d(6)}",
            f"+44 (0)20 {d(4)} {d(4)}",
            f"+49 30 {d(8)}",
            f"+49 15{d(1)} {d(8)}",
            f"+81 3-{d(4)}-{d(4)}",
            f"+81 90-{d(4)}-{d(4)}",
            f"+33 {rng.randint(1, 7)} {d(2)} {d(2)} {d(2)} {d(2)}",
            f"+86 13{d(1)} {d(4)} {d(4)}",
            f"+65 {rng.choice('689')}{d(3)} {d(4)}",
            f"+61 4{d(2)} {d(3)} {d(3)}",
        ]
    )
    return Secret(
        "phone_intl",
        formatted,
        formatted,
        _digits_needles(formatted),
        fields=(("phone_number", formatted), ("callback", formatted), ("fax", formatted)),
    )


def _resident_registration_number(rng: random.Random) -> Secret:
    birth = f"{rng.randint(0, 99):02d}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    separator = rng.choice(["-", "-", "", " "])  # as written on forms, and typed without one
    number = f"{birth}{separator}{rng.choice('12345678')}{_chars(rng, DIGITS, 6)}"
    number = _fullwidth_sometimes(rng, number)
    return Secret(
        "resident_registration_number",
        number,
        number,
        _digits_needles(number),
        fields=(("rrn", number), ("jumin", number), ("주민등록번호", number)),
    )


_CARD_BRANDS: list[tuple[Callable[[random.Random], str], int]] = [
    (lambda rng: "4", 16),
    (lambda rng: "4", 13),
    (lambda rng: str(rng.randint(51, 55)), 16),
    (lambda rng: str(rng.randint(2221, 2720)), 16),
    (lambda rng: rng.choice(["34", "37"]), 15),
    (lambda rng: rng.choice(["6011", "65"]), 16),
    (lambda rng: str(rng.randint(3528, 3589)), 16),
    (lambda rng: "36", 14),
    (lambda rng: "62", 16),
    (lambda rng: "62", 19),
]


def _card(rng: random.Random) -> Secret:
    prefix_of, length = rng.choice(_CARD_BRANDS)
    prefix = prefix_of(rng)
    digits = _luhn_complete(prefix + _chars(rng, DIGITS, length - len(prefix) - 1))
    separator = rng.choice([" ", "-", ""])
    if length == 15:
        groups = [digits[:4], digits[4:10], digits[10:]]
    else:
        groups = [digits[index : index + 4] for index in range(0, length, 4)]
    formatted = _fullwidth_sometimes(rng, separator.join(groups))
    return Secret(
        "card_number",
        formatted,
        formatted,
        (*_digits_needles(formatted), digits),
        fields=(
            ("card_number", formatted),
            ("pan", int(digits)),
            ("cardNo", digits),
            ("카드번호", formatted),
        ),
    )


# Country: (length, BBAN layout: "n" digits, "a" upper-case letters, "c" either).
_IBAN_LAYOUTS = {
    "DE": "n" * 18,
    "GB": "aaaa" + "n" * 14,
    "FR": "n" * 10 + "c" * 11 + "nn",
    "ES": "n" * 20,
    "IT": "a" + "n" * 10 + "c" * 12,
    "NL": "aaaa" + "n" * 10,
    "BE": "n" * 12,
    "CH": "n" * 5 + "c" * 12,
    "AT": "n" * 16,
    "PL": "n" * 24,
    "SE": "n" * 20,
    "IE": "aaaa" + "n" * 14,
    "PT": "n" * 21,
    "SA": "nn" + "c" * 18,
    "AE": "n" * 19,
    "NO": "n" * 11,
    "DK": "n" * 14,
}


def _iban(rng: random.Random) -> Secret:
    country = rng.choice(sorted(_IBAN_LAYOUTS))
    pools = {"n": DIGITS, "a": UPPER, "c": UPPER + DIGITS}
    bban = "".join(rng.choice(pools[slot]) for slot in _IBAN_LAYOUTS[country])
    numeric = "".join(str(int(char, 36)) for char in bban + country + "00")
    iban = f"{country}{98 - int(numeric) % 97:02d}{bban}"
    grouped = " ".join(iban[index : index + 4] for index in range(0, len(iban), 4))
    formatted = rng.choice([iban, grouped])
    return Secret(
        "iban",
        formatted,
        formatted,
        (iban, grouped),
        fields=(("iban", formatted), ("payout_account", formatted), ("bank_account", iban)),
    )


_SESSION_COOKIES = [
    "sessionid",
    "session",
    "JSESSIONID",
    "PHPSESSID",
    "laravel_session",
    "__Host-session",
    "next-auth.session-token",
    "connect.sid",
    "SESSION",
]


def _session_cookie(rng: random.Random) -> Secret:
    name = rng.choice(_SESSION_COOKIES)
    value = _chars(rng, rng.choice([BASE62, HEX, URLSAFE]), rng.randint(24, 64), need=(DIGITS,))
    header = rng.choice(["Cookie", "Set-Cookie", "cookie"])
    if header.lower() == "cookie":
        header_value = f"theme=dark; {name}={value}; lang=ko"
    else:
        header_value = f"{name}={value}; Path=/; HttpOnly; Secure; SameSite=Lax"
    text = rng.choice([f"{header}: {header_value}", f"{name}={value}"])
    return Secret(
        "session_cookie",
        text,
        value,
        (value,),
        header=header,
        header_value=header_value,
        fields=(("session_token", value), ("cookie", header_value), (name, value)),
        case_variants=(text.replace(header, header.upper()), text.replace(header, "COOKIE")),
    )


_HOSTS = ["api.example.com", "shop.example.co.kr", "payments.example.net", "10.0.3.17:8080"]
_API_KEY_PARAMS = [
    "api_key",
    "apikey",
    "api-key",
    "access_token",
    "auth_token",
    "token",
    "client_secret",
    "password",
    "secret",
    "apiKey",
]


def _query_url(rng: random.Random, name: str, value: str) -> str:
    params = [
        ("page", str(rng.randint(1, 99))),
        ("size", str(rng.choice([20, 50, 100]))),
        ("expand", "items"),
    ]
    params.insert(rng.randrange(len(params) + 1), (name, value))
    query = "&".join(f"{key}={quote(item, safe='')}" for key, item in params)
    path = rng.choice(["v1/orders", "v2/members/search", "maps/api/geocode/json", "hooks/in"])
    return f"https://{rng.choice(_HOSTS)}/{path}?{query}"


def _api_key_param(rng: random.Random) -> Secret:
    value = _chars(rng, rng.choice([BASE62, HEX, URLSAFE]), rng.randint(20, 48), need=(DIGITS,))
    name = rng.choice(_API_KEY_PARAMS)
    url = _query_url(rng, name, value)
    return Secret(
        "api_key_query_param",
        url,
        value,
        (value,),
        fields=(("request_url", url), ("callback", url), ("next", url), ("href", url)),
        case_variants=(url.replace(f"{name}=", f"{name.upper()}="),),
    )


def _api_key_header(rng: random.Random) -> Secret:
    value = _chars(rng, rng.choice([BASE62, HEX]), rng.randint(24, 48), need=(DIGITS,))
    header = rng.choice(
        [
            "X-Api-Key",
            "x-api-key",
            "Api-Key",
            "X-Auth-Token",
            "X-Access-Token",
            "X-Goog-Api-Key",
            "Ocp-Apim-Subscription-Key",
            "X-Vendor-Token",
        ]
    )
    text = f"{header}: {value}"
    return Secret(
        "api_key_header",
        text,
        value,
        (value,),
        header=header,
        header_value=value,
        fields=(("api_key", value), ("apiKey", value), ("x-api-key", value)),
        case_variants=(f"{header.upper()}: {value}", f"{header.lower()}: {value}"),
    )


def _platform_token(rng: random.Random) -> Secret:
    shape = rng.randrange(3)
    if shape == 0:
        body = _chars(rng, BASE62, 34, need=(DIGITS,))
        token = "hf" + "_" + body
    elif shape == 1:
        body = _chars(rng, URLSAFE, 20, need=(DIGITS,))
        token = "gl" + "pat-" + body
    else:
        body = _chars(rng, BASE62, 36, need=(DIGITS,))
        token = "npm" + "_" + body
    return Secret(
        "platform_token",
        token,
        token,
        (body,),
        header="Authorization",
        header_value=f"Bearer {token}",
        fields=(("HF_TOKEN", token), ("registry_auth", token), ("ci_secret", token)),
    )


_PASSWORD_KEYS = [
    "password",
    "Password",
    "PASSWORD",
    "passwd",
    "pwd",
    "pw",
    "PW",
    "db_password",
    "DB_PASSWORD",
    "userPassword",
    "new_password",
    "passphrase",
    "client_secret",
    "secret",
    "SECRET_KEY",
    "mysql_root_password",
]


def _keyed_text(rng: random.Random, key: str, value: str, *, quoted_value: str) -> str:
    return rng.choice(
        [
            f"{key}={value}",
            f"{key}: {value}",
            f"{key} = {value}",
            f"--{key}={value}",
            f'"{key}": "{quoted_value}"',
            f"'{key}': '{quoted_value}'",
            f'{key}="{quoted_value}"',
        ]
    )


def _password(rng: random.Random) -> Secret:
    key = rng.choice(_PASSWORD_KEYS)
    if rng.random() < 0.6:
        value = _chars(rng, PASSWORD_UNQUOTED, rng.randint(12, 24), need=(DIGITS, LOWER))
        text = _keyed_text(rng, key, value, quoted_value=value)
    else:  # only quoted: may hold spaces, commas, brackets
        value = _chars(rng, PASSWORD_QUOTED, rng.randint(12, 24), need=(DIGITS, " "))
        value = value.strip() + _chars(rng, BASE62, 3, need=(DIGITS,))
        text = rng.choice([f'"{key}": "{value}"', f"'{key}': '{value}'", f'{key}="{value}"'])
    return Secret(
        "password",
        text,
        value,
        (value,),
        fields=((key, value), ("credentials", {"username": _word(rng), "password": value})),
        case_variants=(text.replace(key, key.upper()), text.replace(key, key.lower())),
    )


_OAUTH_KEYS = [
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "token",
    "accessToken",
    "refreshToken",
    "oauth_token",
    "session_token",
]


def _oauth_token(rng: random.Random) -> Secret:
    value = _chars(rng, URLSAFE + ".", rng.randint(24, 64), need=(DIGITS, UPPER))
    key = rng.choice(_OAUTH_KEYS)
    text = _keyed_text(rng, key, value, quoted_value=value)
    return Secret(
        "oauth_token",
        text,
        value,
        (value,),
        header="Authorization",
        header_value=f"Bearer {value}",
        fields=((key, value), ("tokens", {"access_token": value, "expires_in": 3600})),
        case_variants=(text.replace(key, key.upper()),),
    )


def _sendgrid(rng: random.Random) -> Secret:
    key = f"SG.{_chars(rng, URLSAFE, 22, need=(DIGITS,))}.{_chars(rng, URLSAFE, 43, need=(UPPER,))}"
    return Secret("sendgrid_key", key, key, (key,), fields=(("sendgrid_api_key", key),))


def _bare_aws_secret(rng: random.Random) -> Secret:
    """The secret access key alone, without the variable name that usually names it."""
    while True:
        secret = _chars(rng, BASE64, 40, need=(DIGITS, LOWER, UPPER))
        if not secret.startswith("/") and secret.count("/") <= 3 and "//" not in secret:
            break
    text = rng.choice([secret, f"key {secret}", f"aws configure set {secret}"])
    return Secret(
        "bare_aws_secret", text, secret, (secret,), fields=(("aws_secret_access_key", secret),)
    )


_KOREAN_PASSWORD_LABELS = ["비밀번호", "비밀 번호", "비번", "패스워드", "암호"]


def _korean_password(rng: random.Random) -> Secret:
    label = rng.choice(_KOREAN_PASSWORD_LABELS)
    value = _chars(rng, PASSWORD_UNQUOTED, rng.randint(10, 20), need=(DIGITS, LOWER))
    separator = rng.choice([": ", ":", "=", " : ", "\uff1a "])  # the last a fullwidth colon
    text = f"{label}{separator}{value}"
    return Secret(
        "korean_password", text, value, (value,), fields=(("password", value), ("note", text))
    )


def _mysql_password(rng: random.Random) -> Secret:
    value = _chars(rng, BASE62 + "!#$%*^_~", rng.randint(10, 20), need=(DIGITS, LOWER))
    command = rng.choice(["mysql", "mysqldump", "mariadb", "mysqladmin"])
    text = f"{command} -h db.internal -u {_word(rng)} -p{value} {_word(rng)}"
    return Secret(
        "mysql_password", text, value, (value,), fields=(("password", value), ("command", text))
    )


def _azure_connection_string(rng: random.Random) -> Secret:
    key = _chars(rng, BASE64, 86, need=(DIGITS, UPPER, LOWER)) + "=="
    name = rng.choice(["AccountKey", "SharedAccessKey"])
    text = (
        f"DefaultEndpointsProtocol=https;AccountName={_word(rng)};{name}={key};"
        "EndpointSuffix=core.windows.net"
    )
    return Secret(
        "azure_connection_string",
        text,
        key,
        (key,),
        fields=(("AccountKey", key), ("connection_string", text)),
    )


KINDS: dict[str, Callable[[random.Random], Secret]] = {
    "openai_key": _openai,
    "anthropic_key": _anthropic,
    "aws_access_key_id": _aws_access_key_id,
    "aws_secret_key": _aws_secret_key,
    "github_token": _github,
    "slack_token": _slack,
    "slack_webhook": _slack_webhook,
    "stripe_key": _stripe,
    "google_key": _google,
    "jwt": _jwt,
    "bearer_token": _bearer,
    "basic_auth": _basic,
    "url_password": _url_password,
    "pem_private_key": _pem,
    "email": _email,
    "phone_kr": _phone_kr,
    "phone_intl": _phone_intl,
    "resident_registration_number": _resident_registration_number,
    "card_number": _card,
    "iban": _iban,
    "session_cookie": _session_cookie,
    "api_key_query_param": _api_key_param,
    "api_key_header": _api_key_header,
    "platform_token": _platform_token,
    "password": _password,
    "oauth_token": _oauth_token,
    "sendgrid_key": _sendgrid,
    "bare_aws_secret": _bare_aws_secret,
    "korean_password": _korean_password,
    "mysql_password": _mysql_password,
    "azure_connection_string": _azure_connection_string,
}


def make_secret(kind: str, seed: int) -> Secret:
    # Hypothesis likes to repeat a drawn number: a string seed per use keeps a secret's
    # stream apart from an item's clean values drawn with the same number.
    return KINDS[kind](random.Random(f"secret:{kind}:{seed}"))


# Built once: hypothesis spends more time building strategies than drawing from them.
SEEDS = st.integers(0, 2**32 - 1)
SECRETS = st.builds(make_secret, st.sampled_from(sorted(KINDS)), SEEDS)


# --- encodings: how the free-text form is written ------------------------------------------
_WRAPPERS = [
    '"{}"',
    "'{}'",
    "({})",
    "[{}]",
    "<{}>",
    "{{{}}}",
    "「{}」",
    "“{}”",
    "{}.",
    "{},",
    "{};",
    "{}!",
    "={}&",
    "키: {}",
    "값은 {}입니다",
    "{}으로 보냈습니다",
    "{}를 확인하세요",
    "{}이(가) 노출됨",
    "\t{}\n",
    "({}).",
]


def _json_doc(rng: random.Random, payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=rng.random() < 0.5)


def _encode_plain(secret: Secret, rng: random.Random) -> str:
    return secret.text


def _encode_wrapped(secret: Secret, rng: random.Random) -> str:
    return rng.choice(_WRAPPERS).format(secret.text)


def _encode_case(secret: Secret, rng: random.Random) -> str:
    return rng.choice(secret.case_variants) if secret.case_variants else secret.text


def _encode_url(secret: Secret, rng: random.Random) -> str:
    return quote(secret.text, safe="")


def _encode_url_plus(secret: Secret, rng: random.Random) -> str:
    return quote_plus(secret.text)


def _encode_url_in_redirect(secret: Secret, rng: random.Random) -> str:
    return f"https://{rng.choice(_HOSTS)}/login?next={quote(secret.text, safe='')}&lang=ko"


def _encode_json_string(secret: Secret, rng: random.Random) -> str:
    return _json_doc(rng, {"error": {"detail": f"{filler(rng)} {secret.text} {filler(rng)}"}})


def _encode_json_keyed(secret: Secret, rng: random.Random) -> str:
    key, value = rng.choice(secret.fields)
    return _json_doc(rng, {"request": {key: value, "retry": rng.randint(0, 3)}})


def _encode_double_json(secret: Secret, rng: random.Random) -> str:
    key, value = rng.choice(secret.fields)
    inner = rng.choice([{key: value}, {"detail": secret.text}])
    return _json_doc(rng, {"body": _json_doc(rng, inner)})[len('{"body": ') : -1]


def _encode_python_repr(secret: Secret, rng: random.Random) -> str:
    key, value = rng.choice(secret.fields)
    return repr(rng.choice([{key: value}, {"detail": secret.text}]))


def _encode_header_line(secret: Secret, rng: random.Random) -> str:
    if not secret.header:
        return secret.text
    return f"{_case(rng, secret.header)}: {secret.header_value}"


ENCODINGS: dict[str, Callable[[Secret, random.Random], str]] = {
    "plain": _encode_plain,
    "wrapped": _encode_wrapped,
    "letter_case": _encode_case,
    "url_encoded": _encode_url,
    "form_encoded": _encode_url_plus,
    "url_in_redirect": _encode_url_in_redirect,
    "json_escaped": _encode_json_string,
    "json_keyed": _encode_json_keyed,
    "double_json": _encode_double_json,
    "python_repr": _encode_python_repr,
    "header_line": _encode_header_line,
}


# --- filler: the realistic text around a secret ---------------------------------------------
_FILLER = [
    "upstream call failed",
    "HTTP 401 Unauthorized",
    "retry 2 of 3",
    "getOrderDetail returned 500",
    "request rejected by gateway",
    "요청이 실패했습니다",
    "인증에 실패했습니다",
    "주문 조회 중 오류",
    "다시 시도해 주세요",
    "timeout after 30s",
    "see trace plan_01HZX3K9QW",
    "결제 승인 거절",
    "",
]


def filler(rng: random.Random) -> str:
    return rng.choice(_FILLER)


def in_sentence(rng: random.Random, encoded: str) -> str:
    """The encoded secret inside a sentence (Korean touches it through the wrappers)."""
    before, after = filler(rng), filler(rng)
    left = rng.choice([" ", ": ", " - ", "\n"]) if before else ""
    right = rng.choice([" ", "\n", ". ", " | "]) if after else ""
    return f"{before}{left}{encoded}{right}{after}"


# --- positions: where in an item body it goes ----------------------------------------------
_CLEAN_PATH_KEYS = [
    "detail",
    "context",
    "response",
    "request",
    "data",
    "meta",
    "step",
    "args",
    "upstream",
    "cause",
    "debug",
    "attempts",
    "error_info",
    "diagnostics",
]
_BLOB_KEYS = ["stderr", "stdout", "traceback", "log_excerpt", "response_text", "detail_text"]
_RAW_KEYS = ["response_body", "raw_body", "request_body", "payload", "body", "raw_response"]
_HEADER_CONTAINERS = ["headers", "request_headers", "response_headers", "header_pairs"]
SENSITIVE_KEYS = [
    "password",
    "Password",
    "passwd",
    "secret",
    "client_secret",
    "clientSecret",
    "api_key",
    "apiKey",
    "API_KEY",
    "x-api-key",
    "access_token",
    "accessToken",
    "refresh_token",
    "id_token",
    "auth_token",
    "token",
    "authorization",
    "Authorization",
    "cookie",
    "Set-Cookie",
    "session",
    "session_token",
    "private_key",
    "privateKey",
    "credentials",
    "aws_secret_access_key",
    "signing_key",
    "passphrase",
]
_CLEAN_HEADERS = [
    ("Accept", "application/json"),
    ("Content-Type", "application/json; charset=utf-8"),
    ("X-Request-Id", "req-7f3a9c2e"),
    ("User-Agent", "graph-tool-call/0.47.0"),
    ("Retry-After", "120"),
]
_PLAIN_HEADERS = ["X-Debug-Info", "Referer", "From", "Location", "X-Forwarded-For", "Link"]


def _descend(container: dict[str, Any], rng: random.Random, depth: int) -> dict[str, Any]:
    """A dict `depth` levels below `container` through clean keys (sometimes a list)."""
    node = container
    for _ in range(depth):
        key = rng.choice(_CLEAN_PATH_KEYS)
        child = node.get(key)
        if isinstance(child, list) and child and isinstance(child[-1], dict):
            node = child[-1]
            continue
        if not isinstance(child, dict):
            child = {}
            node[key] = [{"attempt": 1}, child] if rng.random() < 0.25 else child
        node = child
    return node


def _free_key(node: dict[str, Any], base: str) -> str:
    key, number = base, 1
    while key in node:
        number += 1
        key = f"{base}_{number}"
    return key


@dataclass
class Slot:
    """The parts of an item body a plant may go to."""

    body: dict[str, Any]
    container: dict[str, Any]  # nested evidence-like data that is stored
    message: tuple[dict[str, Any], str]  # (dict, key) of the main free-text field


def _place_message(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    node, key = slot.message
    node[key] = f"{node.get(key, '')} {in_sentence(rng, encoded)}".strip()
    return key


def _place_nested(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    node = _descend(slot.container, rng, rng.randint(0, 6))
    node[_free_key(node, rng.choice(["note", "reason_text", "msg", "value", "hint"]))] = (
        in_sentence(rng, encoded)
    )
    return "nested value"


def _place_list_item(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    node = _descend(slot.container, rng, rng.randint(0, 4))
    items: list[Any] = ["getOrderDetail", "listOrders", rng.randint(1, 999)]
    items.insert(rng.randrange(len(items) + 1), in_sentence(rng, encoded))
    node[_free_key(node, "items")] = [items] if rng.random() < 0.3 else items
    return "list item"


def _place_blob(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    lines = [
        "Traceback (most recent call last):",
        '  File "/srv/app/client.py", line 88, in call',
        "    response.raise_for_status()",
        f"requests.exceptions.HTTPError: 401 Client Error for url: https://{rng.choice(_HOSTS)}/v1",
        "2026-11-29T20:16:13Z WARN retrying in 4s",
        "응답 본문을 해석할 수 없습니다",
    ]
    lines.insert(rng.randrange(len(lines) + 1), in_sentence(rng, encoded))
    node = _descend(slot.container, rng, rng.randint(0, 3))
    node[_free_key(node, rng.choice(_BLOB_KEYS))] = "\n".join(lines)
    return "text blob"


def _place_dict_key(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    node = _descend(slot.container, rng, rng.randint(0, 5))
    node[encoded] = rng.choice([1, "seen", {"count": 2}, None])
    return "dict key"


def _place_url(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    node = _descend(slot.container, rng, rng.randint(0, 4))
    if secret.kind in ("url_password", "slack_webhook", "api_key_query_param"):
        url = encoded  # already a URL
    elif rng.random() < 0.5:
        url = _query_url(rng, rng.choice(["q", "filter", "to", "memo", "ref"]), secret.text)
    else:
        url = _query_url(rng, rng.choice(_API_KEY_PARAMS), secret.value)
    node[_free_key(node, rng.choice(["url", "request_url", "endpoint", "link"]))] = url
    return "url"


def _place_sensitive_key(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    node = _descend(slot.container, rng, rng.randint(0, 6))
    value: Any = rng.choice(
        [secret.value, secret.text, encoded, [secret.value], {"current": secret.value}]
    )
    node[_free_key(node, rng.choice(SENSITIVE_KEYS))] = value
    return "sensitive key"


def _place_natural_key(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    node = _descend(slot.container, rng, rng.randint(0, 5))
    key, value = rng.choice(secret.fields)
    node[_free_key(node, key)] = value
    return "natural key"


def _place_headers(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    if secret.header:
        name, value = _case(rng, secret.header), secret.header_value
    else:
        name, value = rng.choice(_PLAIN_HEADERS), encoded
    headers = list(_CLEAN_HEADERS[: rng.randint(1, len(_CLEAN_HEADERS))])
    headers.insert(rng.randrange(len(headers) + 1), (name, value))
    shape = rng.randrange(3)
    node = _descend(slot.container, rng, rng.randint(0, 3))
    holder: Any
    if shape == 0:
        holder = dict(headers)
    elif shape == 1:
        holder = [[header, item] for header, item in headers]
    else:
        holder = [{"name": header, "value": item} for header, item in headers]
    node[_free_key(node, rng.choice(_HEADER_CONTAINERS))] = holder
    return "headers"


def _place_raw_body(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    node = _descend(slot.container, rng, rng.randint(0, 3))
    raw: Any = rng.choice(
        [
            encoded,
            {"detail": encoded, "code": "E401"},
            {encoded: "x", "ok": False},
            [encoded],
        ]
    )
    node[_free_key(node, rng.choice(_RAW_KEYS))] = raw
    return "raw body"


def _place_parameters(slot: Slot, secret: Secret, encoded: str, rng: random.Random) -> str:
    """OpenAPI-style {"name", "value", "in"} parameters."""
    node = _descend(slot.container, rng, rng.randint(0, 3))
    name, value = rng.choice(
        [(rng.choice(SENSITIVE_KEYS), secret.value), ("q", encoded), ("memo", secret.text)]
    )
    node[_free_key(node, "parameters")] = [
        {"name": "page", "value": 2, "in": "query"},
        {"name": name, "value": value, "in": rng.choice(["query", "header", "body"])},
    ]
    return "parameter object"


POSITIONS: dict[str, Callable[[Slot, Secret, str, random.Random], str]] = {
    "message": _place_message,
    "nested_value": _place_nested,
    "list_item": _place_list_item,
    "text_blob": _place_blob,
    "dict_key": _place_dict_key,
    "url": _place_url,
    "sensitive_key": _place_sensitive_key,
    "natural_key": _place_natural_key,
    "headers": _place_headers,
    "raw_body": _place_raw_body,
    "parameter_object": _place_parameters,
}


# --- items ----------------------------------------------------------------------------------
_TOOLS = ["getOrderDetail", "listOrders", "createRefund", "getDelivery", "searchMembers"]
_REASONS = sorted(taxonomy.REASONS)


def _timestamp(rng: random.Random) -> str:
    return (
        f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
        f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999999):06d}Z"
    )


def _failure_body(rng: random.Random) -> Slot:
    reason = rng.choice(_REASONS)
    evidence: dict[str, Any] = {"http_status": rng.choice([400, 401, 403, 500, 503])}
    body: dict[str, Any] = {
        "stage": taxonomy.REASONS[reason].stage,
        "reason": reason,
        "message": "call failed",
        "tool": rng.choice(_TOOLS),
        "collection": rng.choice(["shop", "bo-dev", "payments"]),
        "plan_id": f"plan_{rng.getrandbits(40):010x}",
        "step_id": f"step_{rng.randint(1, 9)}",
        "occurred_at": _timestamp(rng),
        "graph_tool_call_version": "0.47.0",
        "evidence": evidence,
    }
    container = evidence
    if rng.random() < 0.3:  # an adapter's own field: kept, scrubbed, in extra
        container = body["adapter_context"] = {}
    return Slot(body, container, (body, "message"))


def _runner_event_body(rng: random.Random) -> Slot:
    error: dict[str, Any] = {"kind": "tool", "type": "HTTPError", "message": "HTTP 500"}
    trace: dict[str, Any] = {"http_status": 500}
    context: dict[str, Any] = {}
    body: dict[str, Any] = {
        "type": "step.failed",
        "stage": "execute",
        "plan_id": f"plan_{rng.getrandbits(40):010x}",
        "step_id": f"step_{rng.randint(1, 9)}",
        "tool": rng.choice(_TOOLS),
        "collection": rng.choice(["shop", "bo-dev"]),
        "error": error,
        "duration_ms": rng.randint(1, 30_000),
        "graph_tool_call_version": "0.47.0",
        "occurred_at": _timestamp(rng),
        "trace_metadata": trace,
        "context": context,
    }
    return Slot(body, rng.choice([trace, error, context]), (error, "message"))


def _receipt_body(rng: random.Random) -> Slot:
    context: dict[str, Any] = {}
    body = {
        "tool_run_id": f"tr_{rng.getrandbits(48):012x}",
        "tool": "publish_changelog",
        "collection": "shop",
        "authority_scope": "repo:docs / write:release-note",
        "target_fingerprint": "sha256:" + _chars(rng, HEX, 64),
        "attempt": rng.randint(1, 3),
        "result": rng.choice(["blocked", "failed", "unknown"]),
        "code": "POLICY_APPROVAL_REQUIRED",
        "execution_state": rng.choice(taxonomy.EXECUTION_STATES),
        "next_action": "request_approval",
        "evidence_ref": "policy://release-note/approval-required/v3",
        "idempotency_key": str(uuid.UUID(int=rng.getrandbits(128))),
        "context": context,
    }
    return Slot(body, context, (body, "stop_detail"))


def _audit_body(rng: random.Random) -> Slot:
    context: dict[str, Any] = {}
    body = {
        "tool_run_id": f"tr_{rng.getrandbits(48):012x}",
        "method": rng.choice(["GET", "POST", "PUT"]),
        "host": rng.choice(_HOSTS),
        "path": f"/v1/orders/{rng.randint(1, 10**8)}",
        "status": rng.choice([200, 201, 401, 500]),
        "occurred_at": _timestamp(rng),
        "context": context,
    }
    return Slot(body, context, (body, "detail"))


def _attempt_body(rng: random.Random) -> Slot:
    selector: dict[str, Any] = {"overrode_llm": rng.random() < 0.5, "reason_codes": ["rank"]}
    body: dict[str, Any] = {
        "query": rng.choice(["주문 상세를 보여줘", "find refund-ready orders", "배송 상태 알려줘"]),
        "collection_id": rng.choice(["bo-dev", "shop"]),
        "session_id": f"sess-{rng.getrandbits(64):016x}",
        "selected_target": rng.choice(_TOOLS),
        "llm_target": rng.choice(_TOOLS),
        "plan_tools": rng.sample(_TOOLS, 2),
        "success": rng.random() < 0.7,
        "latency_ms": rng.randint(10, 9_000),
        "target_selector": selector,
    }
    container = selector
    if rng.random() < 0.4:
        container = body["context"] = {}
    return Slot(body, container, (body, "query"))


ITEM_TYPES: dict[str, Callable[[random.Random], Slot]] = {
    "failure": _failure_body,
    "runner_event": _runner_event_body,
    "receipt": _receipt_body,
    "audit_event": _audit_body,
    "learning_attempt": _attempt_body,
}
# A field that refuses anything but a code: the item is rejected, and the rejection (its
# message and field are stored and answered) must not carry the secret either.
_REJECTING_FIELDS = {
    "failure": "lane",
    "runner_event": "type",
    "receipt": "result",
    "audit_event": "status",
    "learning_attempt": "failure_reason",
}


@dataclass(frozen=True)
class Plant:
    """One secret planted in one item."""

    secret: Secret
    item_id: str
    item_type: str
    position: str
    encoding: str
    planted: str  # the encoded text as written into the body (for the failure message)


@dataclass
class Batch:
    items: list[dict[str, Any]] = field(default_factory=list)
    plants: list[Plant] = field(default_factory=list)
    rejected_ids: set[str] = field(default_factory=set)


_KINDS = st.sampled_from(sorted(KINDS))
_ITEM_TYPES = st.sampled_from(sorted(ITEM_TYPES))
_PLACEMENTS = st.sampled_from(
    [(position, encoding) for position in sorted(POSITIONS) for encoding in sorted(ENCODINGS)]
)
_PLANT_COUNTS = st.integers(1, 4)
_ONE_IN_FIFTY = st.integers(0, 49)


def _draw_item(draw: st.DrawFn, index: int, batch: Batch) -> None:
    item_type = draw(_ITEM_TYPES)
    rng = random.Random(f"item:{index}:{draw(SEEDS)}")
    slot = ITEM_TYPES[item_type](rng)
    item_id = f"{item_type[:2]}-{index}"
    plants = []
    for _ in range(draw(_PLANT_COUNTS)):
        secret = make_secret(draw(_KINDS), draw(SEEDS))
        position, encoding = draw(_PLACEMENTS)
        encoded = ENCODINGS[encoding](secret, rng)
        POSITIONS[position](slot, secret, encoded, rng)
        plants.append(Plant(secret, item_id, item_type, position, encoding, encoded))
    if draw(_ONE_IN_FIFTY) == 0:
        slot.body[_REJECTING_FIELDS[item_type]] = plants[0].secret.text
        plants[0] = Plant(plants[0].secret, item_id, item_type, "rejected field", "plain", "")
        batch.rejected_ids.add(item_id)
    batch.items.append({"type": item_type, "id": item_id, "body": slot.body})
    batch.plants.extend(plants)


@st.composite
def batches(draw: st.DrawFn, size: int) -> Batch:
    """`size` items of every type, each with 1-4 planted secrets (about 1 in 50 rejected)."""
    batch = Batch()
    for index in range(size):
        _draw_item(draw, index, batch)
    return batch


# --- finding survivors ----------------------------------------------------------------------
@dataclass(frozen=True)
class Survivor:
    plant: Plant
    fragment: str
    where: str
    context: str


class LeakFinder:
    """Every 12-char window of every needle variant, looked up in one pass over all texts."""

    def __init__(self, plants: list[Plant]) -> None:
        self.windows: dict[str, Plant] = {}
        self.short: dict[str, Plant] = {}  # looked up whole
        for plant in plants:
            for needle, windowed in plant.secret.needle_forms():
                if len(needle) < WINDOW or not windowed:
                    self.short.setdefault(needle, plant)
                    continue
                for start in range(len(needle) - WINDOW + 1):
                    self.windows.setdefault(needle[start : start + WINDOW], plant)

    def find(self, texts: list[tuple[str, str]]) -> list[Survivor]:
        """Survivors in (where, text) pairs: at most one per plant."""
        joined = "\x00".join(text for _, text in texts)
        starts = list(itertools.accumulate((len(text) + 1 for _, text in texts), initial=0))
        present = {joined[start : start + WINDOW] for start in range(len(joined) - WINDOW + 1)}
        hits = [(window, self.windows[window]) for window in present & self.windows.keys()]
        hits += [(needle, plant) for needle, plant in self.short.items() if needle in joined]
        found: dict[int, Survivor] = {}
        for fragment, plant in sorted(hits, key=lambda hit: joined.find(hit[0])):
            if id(plant) in found:
                continue
            offset = joined.find(fragment)
            index = bisect.bisect_right(starts, offset) - 1
            where, text = texts[index]
            start = offset - starts[index]
            context = text[max(0, start - 60) : start + len(fragment) + 60]
            found[id(plant)] = Survivor(plant, fragment, where, context)
        return list(found.values())


# --- the clean corpus -------------------------------------------------------------------------
def clean_corpus(seed: int, size: int) -> list[tuple[str, str]]:
    """(field name, value) pairs a runtime sends that hold nothing secret or personal.

    Generated from families of realistic values; each family draws fresh numbers, ids and
    words, so the corpus is not a list the scrubber could have been tuned to.
    """
    rng = random.Random(seed)
    families = [family for family, _ in _CLEAN_FAMILIES]
    weights = [weight for _, weight in _CLEAN_FAMILIES]
    corpus = []
    for _ in range(size):
        family = rng.choices(families, weights)[0]
        corpus.append(family(rng))
    return corpus


def _c_tool(rng: random.Random) -> tuple[str, str]:
    verb = rng.choice(["get", "list", "create", "update", "delete", "search", "cancel", "sync"])
    noun = rng.choice(
        [
            "OrderDetail",
            "Orders",
            "Refund",
            "Delivery",
            "Members",
            "AuthTokens",
            "SessionList",
            "PasswordPolicy",
            "ApiKeys",
            "SecretRotation",
            "CardBins",
            "PhoneVerification",
            "Coupon",
        ]
    )
    return "tool", f"{verb}{noun}" + rng.choice(["", "V2", "_v3", "ById"])


def _c_url(rng: random.Random) -> tuple[str, str]:
    host = rng.choice([*_HOSTS, "localhost:8000", "docs.example.com", "192.168.0.12"])
    path = "/".join(
        rng.choice(["v1", "v2", "orders", "members", str(rng.randint(1, 10**9)), "items", "auth"])
        for _ in range(rng.randint(1, 4))
    )
    query = rng.choice(
        [
            "",
            f"?page={rng.randint(1, 300)}&size=50",
            f"?sort=created_at&since=2026-{rng.randint(1, 12):02d}-01",
            "?expand=items&token_type=bearer",
            f"?q=%EC%A3%BC%EB%AC%B8+{rng.randint(1, 99)}",
            f"?session_expired=true&redirect=%2Fv1%2Forders%2F{rng.randint(1, 999)}",
            f"#section-{rng.randint(1, 9)}",
        ]
    )
    return "url", f"{rng.choice(['https', 'http'])}://{host}/{path}{query}"


def _c_timestamp(rng: random.Random) -> tuple[str, str]:
    base = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    time = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    return rng.choice(
        [
            ("occurred_at", f"{base}T{time}Z"),
            ("occurred_at", f"{base}T{time}.{rng.randint(0, 999999):06d}+09:00"),
            ("date", base),
            ("logged", f"{base} {time},{rng.randint(0, 999):03d}"),
            ("date", f"{rng.randint(1, 28)} Nov 2026 {time} GMT"),
            ("epoch_ms", str(rng.randint(1_600_000_000_000, 1_799_999_999_999))),
            ("epoch", str(rng.randint(1_600_000_000, 1_799_999_999))),
            ("date_kr", f"2026년 {rng.randint(1, 12)}월 {rng.randint(1, 28)}일 {time}"),
            ("date", base.replace("-", rng.choice(["/", ".", ""]))),
        ]
    )


def _c_ids(rng: random.Random) -> tuple[str, str]:
    return rng.choice(
        [
            ("request_id", str(uuid.UUID(int=rng.getrandbits(128), version=4))),
            ("commit", f"{rng.getrandbits(160):040x}"),
            ("commit", f"{rng.getrandbits(28):07x}"),
            ("payload_hash", f"{rng.getrandbits(256):064x}"),
            ("target_fingerprint", f"sha256:{rng.getrandbits(256):064x}"),
            ("request_id", f"req_{_chars(rng, UPPER + DIGITS, 26)}"),
            ("trace_id", f"{rng.getrandbits(128):032x}"),
            ("span_id", f"{rng.getrandbits(64):016x}"),
            ("order_no", f"ORD-2026-{rng.randint(0, 999999):06d}"),
            ("order_no", str(rng.randint(10**9, 10**12))),
            ("plan_id", f"plan_{_chars(rng, UPPER + DIGITS, 10)}"),
            ("tool_run_id", f"tr_2026{rng.randint(1000, 1231)}_{rng.randint(0, 999):03d}"),
            (
                "idempotency_key",
                f"idem-2026-11-{rng.randint(1, 28):02d}-{rng.randint(0, 9999):04d}",
            ),
            ("sku", f"SKU-{rng.randint(200, 300)}-{_chars(rng, UPPER, 3)}-{rng.randint(1, 99)}"),
            ("tracking_no", f"{rng.choice(['CJ', 'LOGEN'])}{rng.randint(10**9, 10**10)}"),
            ("image", f"ghcr.io/acme/worker@sha256:{rng.getrandbits(256):064x}"),
            ("ulid", "01" + _chars(rng, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", 24)),
        ]
    )


_EN_ERRORS = [
    "Read timed out. (read timeout={n})",
    "HTTP Error {status}: {phrase}",
    "{status} Client Error: {phrase} for url: https://api.example.com/v1/orders/{n}",
    "Connection refused by api.example.com:{port}",
    "token expired",
    "Invalid token: expired",
    "session timeout after {n}s",
    "password must be at least 12 characters",
    "No Authorization header was sent",
    "Bearer authentication is required for this API",
    "Basic authentication failed",
    "auth_token_present: true",
    "api key missing for tool {tool}",
    "secret rotation scheduled in {n} days",
    "KeyError: 'orderNo'",
    "TypeError: expected str, got int",
    "Required field orderNo cannot be supplied",
    "score {f} below threshold 0.35",
    "retry budget exhausted: {n} failures in 5 minutes",
    "rate limited; retry-after: {n}",
    "cookie consent banner not found",
    "target {tool} is not in the graph artifact",
    "prompt_tokens={n} completion_tokens={n}",
    "max_tokens=1024",
    "status_code={status}",
    "order {n} not found",
]
_KO_ERRORS = [
    "주문 {n}건을 찾았습니다",
    "인증 토큰이 만료되었습니다. 다시 로그인하세요.",
    "필수 필드 orderNo 를 채울 수 없습니다",
    "배송 상태 조회에 실패했습니다 (HTTP {status})",
    "세션이 만료되었습니다",
    "비밀번호는 12자 이상이어야 합니다",
    "결제 금액 {amount}원이 한도를 초과했습니다",
    "{n}번째 재시도 후 실패",
    "API 키가 설정되지 않았습니다",
    "주문번호 ORD-2026-{n:06d} 처리 중 오류",
    "요청 시간이 초과되었습니다 ({n}ms)",
]


def _c_message(rng: random.Random) -> tuple[str, str]:
    template = rng.choice(_EN_ERRORS + _KO_ERRORS)
    text = template.format(
        n=rng.randint(1, 99999),
        status=rng.choice([400, 401, 403, 404, 409, 422, 429, 500, 502, 503]),
        phrase=rng.choice(["Not Found", "Unauthorized", "Forbidden", "Too Many Requests"]),
        port=rng.choice([443, 5432, 6379, 8080]),
        tool=_c_tool(rng)[1],
        f=round(rng.random(), 4),
        amount=f"{rng.randint(1, 9_999_999):,}",
    )
    return "message", text


def _c_path(rng: random.Random) -> tuple[str, str]:
    parts = [
        rng.choice(["v1", "v2", "api"]),
        rng.choice(["orders", "members", "refunds", "sessions", "tokens"]),
    ]
    for _ in range(rng.randint(1, 3)):
        parts.append(rng.choice([str(rng.randint(1, 10**10)), "items", "{orderNo}", "status"]))
    return "path", "/" + "/".join(parts)


def _c_version(rng: random.Random) -> tuple[str, str]:
    major, minor, patch = rng.randint(0, 30), rng.randint(0, 99), rng.randint(0, 999)
    return rng.choice(
        [
            ("version", f"{major}.{minor}.{patch}"),
            ("version", f"v{major}.{minor}.{patch}-rc.{rng.randint(1, 9)}"),
            ("graph_tool_call_version", f"0.{rng.randint(30, 60)}.{rng.randint(0, 9)}"),
            ("user_agent", f"python-requests/2.{minor}.{patch % 10}"),
            ("runtime", f"Python 3.{rng.randint(9, 13)}.{rng.randint(0, 12)}"),
            ("taxonomy_version", f"2026.{rng.randint(1, 12)}.{rng.randint(1, 9)}"),
        ]
    )


def _c_field_name(rng: random.Random) -> tuple[str, str]:
    names = [
        "auth_token_present",
        "session_station_header_names",
        "token_budget",
        "max_tokens",
        "password_policy",
        "api_key_required",
        "secret_ref",
        "authorization_header_name",
        "cookie_names",
        "orderNo",
        "memberGrade",
        "expected_top_k",
        "idempotency_key",
        "session_id_hash",
    ]
    return rng.choice(
        [
            ("field_name", rng.choice(names)),
            ("path", f"$.data.items[{rng.randint(0, 9)}].{rng.choice(names)}"),
        ]
    )


def _c_host(rng: random.Random) -> tuple[str, str]:
    return rng.choice(
        [
            (
                "host",
                f"{_word(rng)}.{rng.choice(['example.com', 'internal', 'svc.cluster.local'])}",
            ),
            ("host", f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"),
            ("host", f"{_word(rng)}:{rng.randint(1024, 65535)}"),
            ("ipv6", f"fe80::{rng.getrandbits(16):x}:{rng.getrandbits(16):x}"),
        ]
    )


def _c_number(rng: random.Random) -> tuple[str, str]:
    return rng.choice(
        [
            ("amount", f"{rng.randint(1, 99_999_999):,}원"),
            ("amount", f"${rng.randint(1, 999_999):,}.{rng.randint(0, 99):02d}"),
            ("amount", f"₩{rng.randint(1, 99_999_999):,}"),
            ("count", str(rng.randint(0, 10**6))),
            ("latency_ms", str(rng.randint(1, 99_999))),
            ("ratio", f"{rng.random():.4f}"),
            ("coordinates", f"{rng.uniform(33, 38):.4f}, {rng.uniform(125, 130):.4f}"),
            ("duration", f"PT{rng.randint(1, 59)}S"),
            ("size", f"{rng.randint(1, 999)} KB"),
            ("quantity", f"{rng.randint(1, 99)}개"),
            (
                "business_no",
                f"{rng.randint(100, 999)}-{rng.randint(10, 99)}-{rng.randint(10000, 99999)}",
            ),
        ]
    )


def _c_reason(rng: random.Random) -> tuple[str, str]:
    return rng.choice(
        [
            ("reason", rng.choice(_REASONS)),
            ("operator_action", taxonomy.REASONS[rng.choice(_REASONS)].operator_action),
            ("lane", rng.choice(taxonomy.LANES)),
            ("execution_state", rng.choice(taxonomy.EXECUTION_STATES)),
            ("stage", rng.choice(taxonomy.STAGES)),
            ("meaning", taxonomy.REASONS[rng.choice(_REASONS)].meaning),
            ("advice", taxonomy.REASONS[rng.choice(_REASONS)].usual_action),
        ]
    )


def _c_config(rng: random.Random) -> tuple[str, str]:
    return "config", rng.choice(
        [
            f"timeout={rng.randint(1, 120)}",
            f"retries={rng.randint(0, 5)}",
            "grant_type=client_credentials",
            "token_type=Bearer",
            f"page={rng.randint(1, 9)}&size=50",
            f"api_version=2026-{rng.randint(1, 12):02d}-01",
            "Content-Type: application/json; charset=utf-8",
            f"Server-Timing: db;dur={rng.randint(1, 99)}, app;dur={rng.random() * 99:.1f}",
            f"retry-after: {rng.randint(1, 600)}",
            "auth_profile=shop-default",
            f"session_ttl={rng.randint(60, 86400)}",
            "password_min_length=12",
            "Accept-Language: ko-KR,ko;q=0.9,en;q=0.8",
        ]
    )


def _c_query(rng: random.Random) -> tuple[str, str]:
    return "query", rng.choice(
        [
            "주문 상세를 보여줘",
            f"{rng.randint(1, 12)}월 주문 내역 알려줘",
            "환불 가능한 주문 찾아줘",
            f"find product 'blue shoes' size {rng.randint(220, 300)}",
            f"show my last {rng.randint(2, 20)} orders",
            "배송 상태 알려줘",
            "비밀번호 변경 방법",
            "API 토큰 재발급",
            "reset my password",
            "list members with grade VIP",
        ]
    )


def _c_korean_numbers(rng: random.Random) -> tuple[str, str]:
    """Korean text with numbers glued to it (no space), as Korean is written."""
    return "message", rng.choice(
        [
            f"총{rng.randint(1, 99999)}건",
            f"주문번호{rng.randint(2020, 2026)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
            f"-{rng.randint(0, 9999):04d}",
            f"{rng.randint(1, 12)}월{rng.randint(1, 28)}일 "
            f"{rng.randint(0, 23)}시{rng.randint(0, 59)}분",
            f"재고{rng.randint(0, 9999)}개 남음",
            f"요청{rng.randint(1, 9)}회 중{rng.randint(1, 9)}회 실패",
            f"결제금액{rng.randint(1000, 9_999_999):,}원",
            f"응답시간{rng.randint(1, 99_999)}ms",
            f"버전{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 99)}으로 업데이트",
        ]
    )


def _c_upper_ids(rng: random.Random) -> tuple[str, str]:
    """Upper-case ids that start like an IBAN (two letters, two digits)."""
    country = rng.choice(["DE", "GB", "FR", "NL", "KR", "US", "ES", "IT"])
    return rng.choice(
        [
            ("vat_id", f"{country}{_chars(rng, DIGITS, rng.choice([9, 11]))}"),
            ("request_id", f"{country}{_chars(rng, DIGITS, 2)}{_chars(rng, UPPER + DIGITS, 12)}"),
            ("shipment", f"{country}{_chars(rng, DIGITS, 9)}{country}"),
            ("sku", f"{country}{rng.randint(10, 99)}-{_chars(rng, UPPER, 4)}-{rng.randint(1, 9)}"),
        ]
    )


def _c_encoded(rng: random.Random) -> tuple[str, str]:
    """Clean values as adapters pass them along: URL-, form- or JSON-encoded, or repr'd."""
    families = [_c_message, _c_url, _c_query, _c_path, _c_korean_numbers, _c_timestamp]
    key, value = rng.choice(families)(rng)
    return rng.choice(
        [
            ("next", quote(value, safe="")),
            ("form", f"{key}={quote_plus(value)}&page={rng.randint(1, 9)}"),
            ("json", json.dumps({key: value}, ensure_ascii=rng.random() < 0.5)),
            ("json", json.dumps(json.dumps({key: value, "retry": rng.randint(0, 3)}))),
            ("repr", repr({key: value, "lines": [value, "done"]})),
            ("escaped", json.dumps(f"{value}\n{value}")[1:-1]),
        ]
    )


_CLEAN_FAMILIES: list[tuple[Callable[[random.Random], tuple[str, str]], int]] = [
    (_c_tool, 8),
    (_c_url, 10),
    (_c_timestamp, 10),
    (_c_ids, 16),
    (_c_message, 16),
    (_c_path, 6),
    (_c_version, 5),
    (_c_field_name, 5),
    (_c_host, 5),
    (_c_number, 8),
    (_c_reason, 6),
    (_c_config, 5),
    (_c_query, 4),
    (_c_korean_numbers, 5),
    (_c_upper_ids, 4),
    (_c_encoded, 10),
]
