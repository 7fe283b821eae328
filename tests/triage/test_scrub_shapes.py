"""The secret shapes review found unscrubbed, and the provider keys in common use.

Each shape is generated (random bodies, hypothesis choosing the seed) and embedded in a
realistic message, in English and in Korean, and must not survive the desk's
``triage.scrub.scrub_text`` nor the client's ``triage_desk_client.scrub.scrub_text``;
both give the same answer. The provider shapes follow the public rules named in the
client module (gitleaks rule ids, detect-secrets plugins). Look-alikes stay as they are,
and the new patterns stay linear on hostile input.

Fake credentials are assembled at run time ("sk_" + "live_") so secret scanners do not
flag this file; none of them is real.
"""

from __future__ import annotations

import base64
import random
import string
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from triage_desk_client import scrub as client_scrub

from triage.scrub import scrub_payload, scrub_text

BASE62 = string.ascii_letters + string.digits
URLSAFE = BASE62 + "-_"
BASE64 = BASE62 + "+/"
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Shape:
    """One generated secret: the text as written and the part that must not survive."""

    kind: str
    text: str
    needle: str


def _chars(rng: random.Random, alphabet: str, size: int) -> str:
    # A digit, a lower and an upper-case letter where the alphabet has them, as real keys
    # do (and as the provider rules' entropy floors require).
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(size))
        wanted = [
            chars for chars in (string.digits, string.ascii_lowercase) if chars[0] in alphabet
        ]
        if size < 8 or all(any(char in chars for char in value) for chars in wanted):
            return value


def _password(rng: random.Random) -> str:
    return _chars(rng, BASE62, rng.randint(10, 18)) + rng.choice(["", "!", "#", "_x"])


def _pw_pair(rng: random.Random) -> Shape:
    key = rng.choice(
        ["pw", "PW", "passwd", "pwd", "passphrase", "passcode", "db_pass", "smtp_pass", "key_pass"]
    )
    value = _password(rng)
    text = rng.choice(
        [f"{key}={value}", f"{key}: {value}", f'"{key}": "{value}"', f"--{key}={value}"]
    )
    return Shape("password_label", text, value)


def _mysql(rng: random.Random) -> Shape:
    value = _password(rng)
    command = rng.choice(["mysql", "mysqldump", "mysqladmin", "mariadb", "mariadb-dump"])
    options = rng.choice(["-u root", "-h db.internal -u app", "--host=10.0.0.5 -u shop -P 3306"])
    return Shape("mysql_password", f"{command} {options} -p{value} orders", value)


_KOREAN_LABELS = [
    "비밀번호",
    "비밀 번호",
    "비번",
    "패스워드",
    "암호",
    "관리자 비밀번호",
    "DB 비번",
    "비밀키",
    "인증키",
    "인증 키",
    "시크릿 키",
    "액세스 키",
    "API 키",
]


def _korean_label(rng: random.Random) -> Shape:
    value = _password(rng)
    separator = rng.choice([": ", ":", "=", " = ", "\uff1a "])  # the last a fullwidth colon
    return Shape("korean_label", f"{rng.choice(_KOREAN_LABELS)}{separator}{value}", value)


def _resident_number(rng: random.Random) -> Shape:
    birth = f"{rng.randint(0, 99):02d}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    rest = f"{rng.randint(1, 4)}{rng.randint(0, 999_999):06d}"
    text = f"{birth}{rng.choice(['', ' '])}{rest}"
    return Shape("resident_number", text, rest)


def _sendgrid(rng: random.Random) -> Shape:
    key = "S" + "G." + _chars(rng, URLSAFE, 22) + "." + _chars(rng, URLSAFE, 43)
    return Shape("sendgrid_key", key, key[3:])


def _bare_aws_secret(rng: random.Random) -> Shape:
    while True:
        secret = base64.b64encode(rng.randbytes(30)).decode()
        if (
            not secret.startswith("/")
            and secret.count("/") <= 3
            and "//" not in secret
            and any(char.isupper() for char in secret)
            and any(char.islower() for char in secret)
            and any(char.isdigit() for char in secret)
        ):
            return Shape("bare_aws_secret", secret, secret)


def _slack(rng: random.Random) -> Shape:
    digits = string.digits
    shape = rng.randrange(5)
    if shape == 0:  # bot, user, legacy workspace tokens
        secret = _chars(rng, BASE62, 24)
        token = (
            f"xox{rng.choice('bpar')}-{_chars(rng, digits, 12)}-{_chars(rng, digits, 13)}-{secret}"
        )
    elif shape == 1:  # app-level token
        secret = _chars(rng, HEX, 64)
        app = _chars(rng, string.ascii_uppercase + digits, 10)
        token = f"xapp-1-A{app}-{_chars(rng, digits, 13)}-{secret}"
    elif shape == 2:  # configuration access token
        secret = _chars(rng, BASE62, 163)
        token = f"xoxe.xox{rng.choice('bp')}-1-{secret}"
    elif shape == 3:  # configuration refresh token
        secret = _chars(rng, BASE62, 146)
        token = f"xoxe-1-{secret}"
    else:  # legacy token
        secret = _chars(rng, HEX, 10)
        groups = "-".join(_chars(rng, digits, 10) for _ in range(3))
        token = f"xox{rng.choice('os')}-{groups}-{secret}"
    return Shape("slack_token", token, secret)


def _github(rng: random.Random) -> Shape:
    if rng.random() < 0.7:
        body = _chars(rng, BASE62, 76 if rng.random() < 0.2 else 36)
        return Shape("github_token", "gh" + rng.choice("pousr") + "_" + body, body)
    body = _chars(rng, BASE62, 22) + "_" + _chars(rng, BASE62, 59)
    return Shape("github_token", "github" + "_pat_" + body, body)


def _stripe(rng: random.Random) -> Shape:
    prefix = rng.choice(["sk", "rk"]) + "_" + rng.choice(["live", "test", "prod"]) + "_"
    body = _chars(rng, BASE62, rng.randint(24, 99))
    return Shape("stripe_key", prefix + body, body)


def _google(rng: random.Random) -> Shape:
    body = _chars(rng, URLSAFE, 35)
    return Shape("google_api_key", "AI" + "za" + body, body)


def _azure_connection_string(rng: random.Random) -> Shape:
    key = _chars(rng, BASE64, 86) + "=="
    shape = rng.randrange(3)
    if shape == 0:
        text = (
            "DefaultEndpointsProtocol=https;AccountName=shoplogs;"
            f"AccountKey={key};EndpointSuffix=core.windows.net"
        )
    elif shape == 1:
        key = _chars(rng, BASE64, 43) + "="
        text = (
            "Endpoint=sb://orders.servicebus.windows.net/;SharedAccessKeyName=send;"
            f"SharedAccessKey={key}"
        )
    else:
        key = _chars(rng, BASE62, 40)
        text = (
            "BlobEndpoint=https://shoplogs.blob.core.windows.net/;"
            f"SharedAccessSignature=sv=2022-11-02&ss=b&srt=o&sp=r&sig={key}"
        )
    return Shape("azure_connection_string", text, key)


def _azure_sas_url(rng: random.Random) -> Shape:
    signature = _chars(rng, BASE62, 43) + "%3D"
    url = (
        "https://shoplogs.blob.core.windows.net/exports/orders.csv?"
        f"sv=2022-11-02&se=2026-12-06T00%3A00%3A00Z&sr=b&sp=r&sig={signature}"
    )
    return Shape("azure_sas_url", url, signature[:43])


def _azure_client_secret(rng: random.Random) -> Shape:
    # Three chars, a digit, "Q~", then 34 more (gitleaks azure-ad-client-secret).
    head = _chars(rng, BASE62 + "_~.", 3) + rng.choice(string.digits) + "Q~"
    secret = (
        head + _chars(rng, BASE62, 2) + _chars(rng, BASE62 + "_~.-", 30) + _chars(rng, BASE62, 2)
    )
    return Shape("azure_client_secret", secret, secret[len(head) :])


def _npm(rng: random.Random) -> Shape:
    body = _chars(rng, BASE62, 36)
    return Shape("npm_token", "npm" + "_" + body, body)


SHAPES: dict[str, Callable[[random.Random], Shape]] = {
    "password_label": _pw_pair,
    "mysql_password": _mysql,
    "korean_label": _korean_label,
    "resident_number": _resident_number,
    "sendgrid_key": _sendgrid,
    "bare_aws_secret": _bare_aws_secret,
    "slack_token": _slack,
    "github_token": _github,
    "stripe_key": _stripe,
    "google_api_key": _google,
    "azure_connection_string": _azure_connection_string,
    "azure_sas_url": _azure_sas_url,
    "azure_client_secret": _azure_client_secret,
    "npm_token": _npm,
}

ENGLISH = [
    "{}",
    "upstream call failed: {}",
    "retrying with {} after 401 Unauthorized",
    "config dump: {} (rotated?)",
    'tool getOrder raised ValueError("{}")',
    'Traceback (most recent call last):\n  File "agent.py", line 12\n    connect({})\n',
    "env: {}\nretry 2 of 3",
    "[{}]",
]
KOREAN = [
    "요청이 실패했습니다: {}",
    "{}로 인증 시도 중 오류",
    "설정값 {} 확인 필요",
    "키 값은 {}입니다",
    "결제 승인 거절 - {}\n다시 시도해 주세요",
    "주문 조회 중 오류 ({})",
    "「{}」",
]


def _shape(kind: str, seed: int) -> Shape:
    return SHAPES[kind](random.Random(f"shape:{kind}:{seed}"))


SHAPE_DRAWS = st.builds(_shape, st.sampled_from(sorted(SHAPES)), st.integers(0, 2**32 - 1))


def _assert_gone(shape: Shape, message: str) -> None:
    desk = scrub_text(message)
    client = client_scrub.scrub_text(message)
    assert shape.needle not in desk, (shape.kind, message, desk)
    assert client == desk, (shape.kind, message)
    assert scrub_text(desk) == desk


@settings(max_examples=600, deadline=None)
@given(shape=SHAPE_DRAWS, template=st.sampled_from(ENGLISH))
def test_every_added_shape_is_redacted_in_english_messages(shape: Shape, template: str) -> None:
    _assert_gone(shape, template.format(shape.text))


@settings(max_examples=600, deadline=None)
@given(shape=SHAPE_DRAWS, template=st.sampled_from(KOREAN))
def test_every_added_shape_is_redacted_in_korean_messages(shape: Shape, template: str) -> None:
    _assert_gone(shape, template.format(shape.text))


@settings(max_examples=200, deadline=None)
@given(shape=SHAPE_DRAWS, template=st.sampled_from(ENGLISH + KOREAN))
def test_every_added_shape_is_redacted_inside_an_item_body(shape: Shape, template: str) -> None:
    message = template.format(shape.text)
    body = {"stage": "execute", "message": message, "evidence": {"lines": [message]}}
    assert shape.needle not in repr(scrub_payload(body, hash_key=b"k"))
    assert shape.needle not in repr(client_scrub.scrub_item(body))


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_each_shape_is_generated_and_caught(kind: str) -> None:
    """Not vacuous: each kind is in the generator and is caught on its own."""
    for seed in range(25):
        shape = _shape(kind, seed)
        assert shape.needle and shape.needle in shape.text
        _assert_gone(shape, shape.text)


@pytest.mark.parametrize(
    "text",
    [
        "pw=true",  # a flag, not a password
        "passcode: null",
        "hugs xoxo-gossip-girl",  # "xoxo-" starts words too
        "xoxb-12345",  # too short for any Slack token
        "sk_test_mode enabled",
        "task_test_abcdefghijklmnopqrstuvwxyz",  # "sk_test_" inside a word
        "npm_config_registry=https://registry.npmjs.org/",
        "see SG.docs for the template",
        "ghp_short",
        "order 1764921600000 placed at 2026-12-05",  # epoch ms: month 64 is no birth date
        "tracking 9913451234567 (courier)",  # month 13: not a resident number
        "비밀번호: 불일치",  # "password: mismatch", an error message
        "비밀번호가 일치하지 않습니다",
        "API 키: 없음",  # "API key: none"
        "암호화 방식: AES-256",
        "version 1.2.3Q~ build",
        "mysql -u root -p orders",  # -p alone asks for the password at the prompt
        "GET /api/v1/orders/ABCdef123/items/xyzQRS789 returned 503",
        "commit 3f2a9c1e0b7d4a5f6e8c9b0a1d2e3f4a5b6c7d8e",
    ],
)
def test_look_alikes_of_the_added_shapes_stay(text: str) -> None:
    assert scrub_text(text) == text
    assert client_scrub.scrub_text(text) == text


@pytest.mark.parametrize(
    "unit",
    [
        "xoxe.",
        "xoxo-1-",
        "xoxe.xoxb-",
        "1Q~",
        "aaa1Q~",
        "비밀번호:",
        "비밀번호: ",
        "API 키=",
        "mysql ",
        "mysql -p",
        "SG.",
        "sk_prod_",
        "npm_",
        "AccountKey=",
        "sig=",
        "pw=",
        "900101 ",
        "9001011",
    ],
)
def test_the_added_patterns_stay_linear_on_hostile_text(unit: str) -> None:
    small = unit * (20_000 // len(unit))
    large = unit * (40_000 // len(unit))
    # Each size's best of five, the two sizes taken in turn: a busy moment of the machine
    # slows both, not only the one measured during it.
    timings = [float("inf"), float("inf")]
    for _ in range(5):
        for index, text in enumerate((small, large)):
            started = time.perf_counter()
            client_scrub.scrub_text(text)
            timings[index] = min(timings[index], time.perf_counter() - started)
    assert timings[1] < 1.0, timings
    # Twice the text, about twice the time (a quadratic pattern would take four times).
    assert timings[1] < 3.0 * timings[0] + 0.005, timings
