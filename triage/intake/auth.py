"""API-key authentication (`Authorization: Bearer td_<id>_<secret>`) and scope checks."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from triage.models import ApiKey


class ApiKeyPrincipal:
    """The `request.user` of an API-key request: a runtime, not a person."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, api_key: ApiKey) -> None:
        self.api_key = api_key
        self.username = f"api-key:{api_key.name}"
        self.pk = None

    def __str__(self) -> str:
        return self.username

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return False


class ApiKeyAuthentication(BaseAuthentication):
    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[ApiKeyPrincipal, ApiKey] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Send exactly one key: Authorization: Bearer <key>.", code="invalid_api_key"
            )
        try:
            prefix, lookup_id, secret = header[1].decode("ascii").split("_", 2)
        except (UnicodeDecodeError, ValueError):
            raise exceptions.AuthenticationFailed(
                "This is not a Triage Desk API key.", code="invalid_api_key"
            ) from None
        if prefix != ApiKey.KEY_PREFIX:
            raise exceptions.AuthenticationFailed(
                "This is not a Triage Desk API key.", code="invalid_api_key"
            )
        api_key = ApiKey.objects.filter(lookup_id=lookup_id).first()
        if api_key is None or not api_key.secret_matches(secret):
            raise exceptions.AuthenticationFailed("Unknown API key.", code="invalid_api_key")
        if api_key.revoked_at is not None:
            raise exceptions.AuthenticationFailed(
                "This API key was revoked.", code="revoked_api_key"
            )
        if not api_key.is_active(now=timezone.now()):
            raise exceptions.AuthenticationFailed(
                "This API key has expired.", code="expired_api_key"
            )
        return ApiKeyPrincipal(api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="triage-desk"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """Documents the API key in the OpenAPI schema."""

    target_class = ApiKeyAuthentication
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from `manage.py create_api_key` (td_<id>_<secret>).",
        }


class _ScopePermission(BasePermission):
    scope = ""
    # Signed-in people may use read endpoints from their browser, with the permission the
    # view names in `session_permission` (as its page asks); writes need a key.
    allow_session_users = False

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(request.auth, ApiKey):
            if request.auth.has_scope(self.scope):
                return True
            raise exceptions.PermissionDenied(
                f"This API key lacks the '{self.scope}' scope.", code="missing_scope"
            )
        user = request.user
        if user is None or not user.is_authenticated:
            raise exceptions.NotAuthenticated(
                "Send an API key: Authorization: Bearer <key>.", code="missing_api_key"
            )
        if not self.allow_session_users:
            raise exceptions.PermissionDenied(
                f"This endpoint needs an API key with the '{self.scope}' scope.",
                code="missing_scope",
            )
        permission = getattr(view, "session_permission", "")
        if permission and user.has_perm(permission):
            return True
        raise exceptions.PermissionDenied(
            "Your account has no role that may read this.", code="missing_role"
        )


class HasIngestScope(_ScopePermission):
    scope = "ingest"


class HasReadScope(_ScopePermission):
    scope = "read"
    allow_session_users = True
