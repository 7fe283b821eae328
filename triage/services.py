"""Writes other than ingest: API keys (more join as the pages grow)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from triage.models import ApiKey, ApiKeyScope


class ApiKeyError(ValueError):
    pass


def api_key_create(
    *, name: str, scopes: list[str], owner: str = "", expires_days: int | None = None
) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret, which is shown once and never stored."""
    unknown = sorted(set(scopes) - set(ApiKeyScope.values))
    if unknown or not scopes:
        allowed = ", ".join(ApiKeyScope.values)
        raise ApiKeyError(f"Scopes must be among {allowed}; got {', '.join(scopes) or 'none'}.")
    if ApiKey.objects.filter(name=name).exists():
        raise ApiKeyError(f"An API key named {name!r} already exists.")
    if expires_days is not None and expires_days < 1:
        raise ApiKeyError("expires_days must be at least 1.")
    full_key, lookup_id, secret_hash = ApiKey.new_key_material()
    api_key = ApiKey.objects.create(
        name=name,
        owner=owner or name,
        lookup_id=lookup_id,
        secret_hash=secret_hash,
        scopes=sorted(set(scopes)),
        expires_at=timezone.now() + timedelta(days=expires_days) if expires_days else None,
    )
    return api_key, full_key


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key
