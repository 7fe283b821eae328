"""Signing in with the organisation's OpenID Connect provider (docs/sign-in.md).

mozilla-django-oidc runs the authorization code flow: state, nonce and PKCE (S256), the code
exchanged at the token endpoint, the ID token's RS256 signature checked against the
provider's JWKS. It checks neither the token's issuer nor its audience, and would take an
unsigned token if a setting allowed it: ``ProviderBackend.get_payload_data`` does the whole
check itself (signature, issuer, audience, expiry). The provider's endpoints come from its
discovery document, read at the first sign-in rather than at start, so a provider that does
not answer is a page saying so, not a desk that does not start.

At each sign-in the person's roles and the team memberships the provider made follow their
groups at the provider (``TRIAGE_OIDC_ROLE_GROUPS``, ``TRIAGE_OIDC_TEAM_GROUPS``): what the
groups no longer give is taken away, and a person whose groups give nothing is refused.
The person is found by the provider's subject, so a new email or name is the same account.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from config.login import sign_in_refused
from organisation import audit
from organisation.models import Membership, MembershipSource, ProviderIdentity, Team
from organisation.roles import ROLES, ensure_role_group
from triage.language import PreferenceModelBackend

logger = logging.getLogger(__name__)

# What the audit says made a change at sign-in (the actor is the system: None).
BY_PROVIDER = "identity provider"
# The discovery document is read again after this long (a provider may move an endpoint).
METADATA_MAX_AGE_SECONDS = 3600
# Clock difference tolerated between the provider and the desk when checking expiry.
CLOCK_LEEWAY_SECONDS = 30


class ProviderUnavailable(Exception):
    """The provider did not answer, or its discovery document is not for the configured
    issuer."""


class SignInRefused(Exception):
    """The provider vouched for the person, but their groups give them nothing here."""


# --- the provider's discovery document -------------------------------------------------------

_metadata_lock = threading.Lock()
_metadata: dict[str, Any] = {}


def provider_metadata() -> dict[str, Any]:
    """The provider's discovery document, read once and kept for an hour per process."""
    issuer = settings.TRIAGE_OIDC_ISSUER
    with _metadata_lock:
        kept = _metadata.get(issuer)
        if kept is not None and time.monotonic() - kept[0] < METADATA_MAX_AGE_SECONDS:
            return dict(kept[1])
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"{url}: {exc}") from exc
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} is not a JSON object.")
    # OpenID Connect Discovery 1.0, section 4.3: the document must name the issuer asked.
    named = document.get("issuer")
    if not isinstance(named, str) or named.rstrip("/") != issuer:
        raise ProviderUnavailable(f"{url} names the issuer {named!r}, not {issuer!r}.")
    # An https issuer's endpoints are https too (plain http is for a provider on loopback).
    schemes = ("https://",) if issuer.startswith("https://") else ("http://", "https://")
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(document.get(key), str) or not document[key].startswith(schemes):
            raise ProviderUnavailable(f"{url} has no {key} (an {schemes[0]} URL).")
    if document.get("userinfo_endpoint") and not document["userinfo_endpoint"].startswith(schemes):
        raise ProviderUnavailable(f"{url} has a userinfo_endpoint that is not {schemes[0]}.")
    with _metadata_lock:
        _metadata[issuer] = (time.monotonic(), document)
    return dict(document)


def forget_provider_metadata() -> None:
    """Read the discovery document again at the next sign-in."""
    with _metadata_lock:
        _metadata.clear()


# --- from the provider's groups to the desk's roles and teams -------------------------------


@dataclass(frozen=True)
class Access:
    """What a person's groups give: roles everywhere, and a role in each team."""

    roles: frozenset[str] = frozenset()
    teams: dict[str, str] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not self.roles and not self.teams


def groups_of(claims: dict[str, Any]) -> set[str]:
    """The groups the claims name: a list of names (or ids), or one name alone."""
    value = claims.get(settings.TRIAGE_OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        return set()
    return {str(group) for group in value if isinstance(group, str | int)}


def access_for(groups: set[str]) -> Access:
    """The roles and team roles the mapping settings give these groups. For a team named by
    several entries, the first entry the groups match decides the role."""
    roles = frozenset(
        role
        for role, named in settings.TRIAGE_OIDC_ROLE_GROUPS.items()
        if role in ROLES and groups.intersection(named)
    )
    teams: dict[str, str] = {}
    for team, role, named in settings.TRIAGE_OIDC_TEAM_GROUPS:
        if team not in teams and groups.intersection(named):
            teams[team] = role
    return Access(roles=roles, teams=teams)


def access_sync(*, person: Any, access: Access) -> None:
    """Make the person's roles, and the memberships the provider made, what ``access`` says,
    with an audit entry per change. Memberships an admin made (source local) stay as they
    are; a team the mapping names that does not exist yet is created."""
    username = person.get_username()
    # The link rows are written directly, not through person.groups, so that the entry
    # says the provider made the change (organisation.signals would credit the request).
    links = get_user_model().groups.through.objects
    held = set(person.groups.filter(name__in=ROLES).values_list("name", flat=True))
    for role in sorted(access.roles - held):
        group = Group.objects.filter(name=role).first() or ensure_role_group(role)
        links.create(user_id=person.pk, group_id=group.pk)
        audit.record(None, "role.granted", username, detail=_detail(username, role=role))
    for role in sorted(held - access.roles):
        links.filter(user_id=person.pk, group__name=role).delete()
        audit.record(None, "role.removed", username, detail=_detail(username, role=role))

    memberships = {
        membership.team.name: membership
        for membership in Membership.objects.filter(person=person).select_related("team")
    }
    for name, role in sorted(access.teams.items()):
        membership = memberships.get(name)
        if membership is None:
            team, created = Team.objects.get_or_create(name=name)
            if created:
                audit.record(None, "team.created", name, detail={"team": name, "by": BY_PROVIDER})
            Membership.objects.create(
                team=team, person=person, role=role, source=MembershipSource.PROVIDER
            )
            audit.record(
                None, "team.member_added", name, detail=_detail(username, team=name, role=role)
            )
        elif membership.source == MembershipSource.PROVIDER and membership.role != role:
            before = membership.role
            membership.role = role
            membership.save(update_fields=["role"])
            audit.record(
                None, "team.member_changed", name,
                detail=_detail(username, team=name, role=role, previous_role=before),
            )  # fmt: skip
    for name, membership in sorted(memberships.items()):
        if membership.source == MembershipSource.PROVIDER and name not in access.teams:
            membership.delete()
            audit.record(
                None, "team.member_removed", name,
                detail=_detail(username, team=name, role=membership.role),
            )  # fmt: skip


def _detail(username: str, **values: str) -> dict[str, str]:
    return {"person": username, **values, "by": BY_PROVIDER}


def username_for(claims: dict[str, Any]) -> str:
    """A new account's username: the provider's preferred username (or the subject), made
    of the characters Django allows; another account's name gets a suffix from the subject,
    so a provider's "admin" never becomes the desk's "admin"."""
    wanted = str(claims.get("preferred_username") or claims["sub"])
    base = re.sub(r"[^\w.@+-]", "-", wanted)[:150] or "person"
    users = get_user_model()._default_manager
    if not users.filter(username=base).exists():
        return base
    digest = hashlib.sha256(f"{settings.TRIAGE_OIDC_ISSUER} {claims['sub']}".encode()).hexdigest()
    for length in (8, 16, 64):
        candidate = f"{base[: 149 - length]}-{digest[:length]}"
        if not users.filter(username=candidate).exists():
            return candidate
    raise SuspiciousOperation("No free username for this subject.")


# --- the authentication backend --------------------------------------------------------------


class ProviderBackend(OIDCAuthenticationBackend):
    """Signs in the person the provider vouches for, creating their account at the first
    sign-in. Permissions are not its business: the password backend's group and team
    permissions (triage.language) answer for everyone."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # mozilla-django-oidc reads the endpoints here; this backend is made for every request
        # of a session it opened, so they are read in authenticate(), when they are needed.
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.issuer = settings.TRIAGE_OIDC_ISSUER

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        # Only the callback view passes a nonce: a password sign-in is not this backend's.
        if request is None or not kwargs.get("nonce") or not settings.TRIAGE_OIDC_ENABLED:
            return None
        self.load_provider()
        return super().authenticate(request, **kwargs)

    def load_provider(self) -> None:
        """The provider's endpoints, and the issuer its ID tokens must name (exactly as its
        discovery document spells it)."""
        metadata = provider_metadata()
        self.issuer = metadata["issuer"]
        self.OIDC_OP_TOKEN_ENDPOINT = metadata["token_endpoint"]
        self.OIDC_OP_USER_ENDPOINT = metadata.get("userinfo_endpoint") or ""
        self.OIDC_OP_JWKS_ENDPOINT = metadata["jwks_uri"]

    def retrieve_matching_jwk(self, token: Any) -> Any:
        try:
            return super().retrieve_matching_jwk(token)
        except (KeyError, TypeError, ValueError, jwt.PyJWTError) as exc:
            raise SuspiciousOperation(
                f"No key of the provider's JWKS fits the token: {exc}"
            ) from exc

    def get_payload_data(self, token: Any, key: Any) -> dict[str, Any]:
        """The ID token's claims once its signature, issuer, audience and expiry hold."""
        try:
            payload = jwt.decode(
                token,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=self.issuer,
                leeway=CLOCK_LEEWAY_SECONDS,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"The ID token was refused: {exc}") from exc
        # OpenID Connect Core 1.0, 3.1.3.7: a token for several audiences names us as its
        # authorized party.
        audiences = payload["aud"] if isinstance(payload["aud"], list) else [payload["aud"]]
        authorized = payload.get("azp")
        if (len(audiences) > 1 or authorized is not None) and authorized != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("The ID token was refused: azp is another client.")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        """The ID token's claims, with the userinfo endpoint's when the provider has one (some
        put the groups in one, some in the other)."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            userinfo = super().get_userinfo(access_token, id_token, payload)
            if not isinstance(userinfo, dict) or userinfo.get("sub") != payload["sub"]:
                raise SuspiciousOperation("The userinfo answer is about another subject.")
            claims.update(userinfo)
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = self.get_userinfo(access_token, id_token, payload)
        subject = str(claims["sub"])
        access = access_for(groups_of(claims))
        issuer = settings.TRIAGE_OIDC_ISSUER
        try:
            with transaction.atomic():
                identity = (
                    ProviderIdentity.objects.select_for_update()
                    .select_related("person")
                    .filter(issuer=issuer, subject=subject)
                    .first()
                )
                person = None
                if identity is not None:
                    person = self.update_user(identity.person, claims)
                    identity.last_sign_in_at = timezone.now()
                    identity.save(update_fields=["last_sign_in_at"])
                elif not access.is_empty:
                    person = self.create_user(claims)
                    ProviderIdentity.objects.create(person=person, issuer=issuer, subject=subject)
                if person is not None:
                    access_sync(person=person, access=access)
        except IntegrityError as exc:
            # The same person's first sign-in, twice at once: the other one made the account.
            raise SuspiciousOperation(f"Concurrent first sign-in of {subject}: {exc}") from exc
        if access.is_empty:
            raise SignInRefused(subject)
        return person

    def create_user(self, claims: dict[str, Any]) -> Any:
        person = self.UserModel.objects.create_user(
            username_for(claims), email=str(claims.get("email") or "")
        )
        return self.update_user(person, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        """The email and names follow the provider's; the username stays the first one."""
        values = {
            "email": str(claims.get("email") or "")[:254],
            "first_name": str(claims.get("given_name") or "")[:150],
            "last_name": str(claims.get("family_name") or "")[:150],
        }
        changed = [name for name, value in values.items() if getattr(user, name) != value]
        for name in changed:
            setattr(user, name, values[name])
        if changed:
            user.save(update_fields=changed)
        return user

    def get_user(self, user_id: Any) -> Any:
        return PreferenceModelBackend().get_user(user_id)

    def get_user_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        return set()

    def get_group_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        return set()

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        return set()


# --- the views (mozilla_django_oidc.urls names them from settings) ---------------------------


def _provider() -> str:
    return settings.TRIAGE_OIDC_PROVIDER_NAME


def _unavailable(request: HttpRequest, problem: Exception) -> HttpResponse:
    logger.warning("OpenID Connect provider unavailable: %s", problem)
    refusal = gettext("%(provider)s did not answer. Try again in a few minutes.")
    return sign_in_refused(request, refusal=refusal % {"provider": _provider()}, status=503)


class AuthenticateView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider (404 while OpenID Connect is off)."""

    def __init__(self, **kwargs: Any) -> None:
        # mozilla-django-oidc reads the authorization endpoint here, before a request can be
        # answered; get() reads it, where a provider that does not answer becomes a page.
        View.__init__(self, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.TRIAGE_OIDC_ENABLED:
            raise Http404
        try:
            metadata = provider_metadata()
        except ProviderUnavailable as problem:
            return _unavailable(request, problem)
        self.OIDC_OP_AUTH_ENDPOINT = metadata["authorization_endpoint"]
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


class CallbackView(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back: signs the person in, or says why not."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.TRIAGE_OIDC_ENABLED:
            raise Http404
        try:
            return super().get(request)
        except SignInRefused as refused:
            logger.info("OpenID Connect sign-in refused: subject %s has no mapped group", refused)
            message = gettext(
                "Your account at %(provider)s is in no group that gives access to this desk. "
                "Ask an admin to add you to one."
            )
            return sign_in_refused(request, refusal=message % {"provider": _provider()}, status=403)
        except requests.HTTPError as problem:
            # The provider refused the code (used twice, expired) or its own answer failed.
            logger.warning("OpenID Connect sign-in failed at the provider: %s", problem)
            return self.login_failure()
        except (ProviderUnavailable, requests.RequestException) as problem:
            return _unavailable(request, problem)
        except SuspiciousOperation as problem:
            logger.warning("OpenID Connect sign-in refused: %s", problem)
            message = gettext(
                "The answer from %(provider)s did not pass the desk's checks, so you were not "
                "signed in. Try again."
            )
            return sign_in_refused(request, refusal=message % {"provider": _provider()}, status=400)

    def login_failure(self) -> HttpResponse:
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            message = gettext("Your account here is turned off. Ask an admin.")
            return sign_in_refused(self.request, refusal=message, status=403)
        message = gettext("Signing in with %(provider)s did not finish. Try again.")
        return sign_in_refused(
            self.request, refusal=message % {"provider": _provider()}, status=400
        )
