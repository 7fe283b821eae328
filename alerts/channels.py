"""Sending one message on one channel: email through Django's mail backend, webhooks through
the desk's guarded outbound transport (core/outbound.py).

The address rule is written once, here (`webhook_policy`), and applied twice: when a channel
is created (`webhook_url_check`) and on every delivery (`outbound.fetch` checks again, and
each redirect, against the same policy), so a name that resolved to a public address at
creation and to the metadata service later is refused then. Nothing here logs or returns a
webhook URL: errors name the host at most.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import smtplib
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.mail import BadHeaderError, EmailMessage
from django.utils.translation import gettext as _

from alerts.models import Channel, ChannelKind
from core import outbound

SIGNATURE_HEADER = "X-Triage-Signature"
DELIVERY_HEADER = "X-Triage-Delivery"


@dataclass(frozen=True)
class WebhookPolicy:
    """Any host, but only public addresses unless ALERTS_ALLOWED_HOSTS names it."""

    private_allowed: outbound.PrivateAllowance
    timeout: float
    max_body_bytes: int


def webhook_policy() -> WebhookPolicy:
    return WebhookPolicy(
        private_allowed=outbound.PrivateAllowance.parse(settings.ALERTS_ALLOWED_HOSTS),
        timeout=settings.ALERTS_TIMEOUT_SECONDS,
        max_body_bytes=settings.ALERTS_MAX_RESPONSE_BYTES,
    )


class ChannelRefused(ValueError):
    """A webhook address the policy refuses; `code` is stable, the message names no path."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# Tests replace it to make a name resolve where they need; None is the system's resolver.
resolver: outbound.Resolver | None = None


def webhook_url_check(url: str) -> None:
    """Raise ChannelRefused when `url` may not be called now (scheme, address, resolution)."""
    # The form rule Quality Lab's base URLs meet too (control characters, spaces, a zone
    # id, a malformed host or port); a scheme is refused below with its own code.
    problem = outbound.url_problem(url)
    if problem is not None and url.partition(":")[0].lower() in outbound.ALLOWED_SCHEMES:
        raise ChannelRefused("invalid_url", _("This URL cannot be called: %s.") % problem)
    policy = webhook_policy()
    try:
        outbound.check_url(
            url, allowed_hosts=None, private_allowed=policy.private_allowed, resolve=resolver
        )
    except outbound.OutboundRefused as exc:
        raise ChannelRefused(exc.code, str(exc)) from None
    except (socket.gaierror, UnicodeError):
        raise ChannelRefused(
            "host_unresolved", _("The host of this URL does not resolve.")
        ) from None


def signature(secret: str, body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256 of the raw body>`, the X-Triage-Signature header's value."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Message:
    """What one delivery says: the webhook payload, and text for email and Slack."""

    payload: Mapping[str, Any]
    subject: str
    text: str
    idempotency_key: str


@dataclass(frozen=True)
class Answer:
    """The far side's answer: `code` (HTTP status, "250" for SMTP), and whether to retry."""

    ok: bool
    code: str = ""
    error: str = ""
    retry: bool = False


def send(channel: Channel, message: Message) -> Answer:
    if channel.kind == ChannelKind.EMAIL:
        return _send_email(channel, message)
    if channel.kind == ChannelKind.SLACK:
        body = {"text": message.text}
        return _post(channel, json.dumps(body).encode(), message, signed=False)
    body_bytes = json.dumps(message.payload, separators=(",", ":"), sort_keys=True).encode()
    return _post(channel, body_bytes, message, signed=True)


def _send_email(channel: Channel, message: Message) -> Answer:
    email = EmailMessage(
        subject=message.subject,
        body=message.text,
        from_email=settings.ALERTS_FROM_EMAIL,
        to=[channel.target],
        headers={"X-Triage-Delivery": message.idempotency_key},
    )
    try:
        email.send(fail_silently=False)
    except BadHeaderError:
        # A newline in a header value (the subject carries a group's tool name): Django
        # refuses to send it, and it would refuse again at every attempt.
        return Answer(ok=False, code="bad_header", error="BadHeaderError: a header holds a newline")
    except smtplib.SMTPResponseException as exc:
        # 4xx: the server asks to try later; 5xx: it refuses this message for good.
        return Answer(
            ok=False, code=str(exc.smtp_code), error=short_error(exc), retry=exc.smtp_code < 500
        )
    except (smtplib.SMTPException, OSError) as exc:
        return Answer(ok=False, error=short_error(exc), retry=True)
    return Answer(ok=True, code="250")


def _post(channel: Channel, body: bytes, message: Message, *, signed: bool) -> Answer:
    problem = outbound.url_problem(channel.target)
    if problem is not None:
        # A channel saved before its URL was checked at creation: no attempt can succeed.
        return Answer(ok=False, code="invalid_url", error=f"The URL cannot be called: {problem}.")
    policy = webhook_policy()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "triage-desk-alerts",
        DELIVERY_HEADER: message.idempotency_key,
    }
    if signed:
        headers[SIGNATURE_HEADER] = signature(channel.signing_secret, body)
    try:
        response = outbound.fetch(
            channel.target,
            method="POST",
            headers=headers,
            body=body,
            allowed_hosts=None,
            private_allowed=policy.private_allowed,
            timeout=policy.timeout,
            max_body_bytes=policy.max_body_bytes,
            max_redirects=3,
            resolve=resolver,
        )
    except outbound.OutboundRefused as exc:
        # Refused by the address rule (never sent), or an answer too large to read (sent):
        # sending again changes neither.
        return Answer(ok=False, code=exc.code, error=short_error(exc), retry=False)
    except (OSError, TimeoutError, UnicodeError) as exc:
        return Answer(ok=False, error=short_error(exc), retry=True)
    except Exception as exc:  # http.client's protocol errors: a broken answer
        return Answer(ok=False, error=short_error(exc), retry=True)
    code = str(response.status)
    if 200 <= response.status < 300:
        return Answer(ok=True, code=code)
    retry = response.status in (408, 425, 429) or response.status >= 500
    return Answer(ok=False, code=code, error=f"HTTP {response.status}", retry=retry)


# What an exception's text may hold of a webhook URL: http.client, urllib and OSError quote
# the URL or its path (a quote opens and closes beside no letter, so "can't" opens none),
# and any word with a slash left after that may be a path.
_QUOTED = re.compile(r"""(?<!\w)(['"]).*?\1(?!\w)""", re.DOTALL)
_PATH_LIKE = re.compile(r"\S*/\S*")


def short_error(exc: BaseException) -> str:
    """`Class: message` for the delivery's error column, which every role sees on /alerts/:
    without what the exception quoted nor anything like a path (a webhook URL's path can
    hold a token)."""
    text = _QUOTED.sub("'...'", f"{exc}")
    text = _PATH_LIKE.sub("...", text)
    return f"{exc.__class__.__name__}: {text}"[:480]
