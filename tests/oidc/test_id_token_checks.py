"""The ID token checks, one at a time: tokens really signed with the test provider's key and
checked against its real JWKS, each wrong in one way. Removing any one check (signature,
issuer, audience, expiry, nonce, the algorithm) makes one of these fail."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import SuspiciousOperation

from config.oidc import ProviderBackend
from tests.oidc.fixtures import CLIENT_ID, Provider
from tests.oidc.provider.tokens import spoil

NONCE = "nonce-of-this-sign-in"


@pytest.fixture
def backend(oidc_on: Provider) -> ProviderBackend:
    loaded = ProviderBackend()
    loaded.load_provider()
    return loaded


@pytest.fixture
def kid(oidc_on: Provider) -> str:
    keys = requests.get(f"{oidc_on.issuer}/.well-known/jwks.json", timeout=10).json()["keys"]
    return str(keys[0]["kid"])


def token(provider: Provider, kid: str, *, key: Any = None, algorithm: str = "RS256",
          **changes: Any) -> str:  # fmt: skip
    """An ID token for the desk, signed with the provider's key unless told otherwise."""
    now = int(time.time())
    claims = {"iss": provider.issuer, "aud": CLIENT_ID, "sub": "7", "iat": now,
              "exp": now + 300, "nonce": NONCE, **changes}  # fmt: skip
    claims = {name: value for name, value in claims.items() if value is not None}
    key = provider.private_key_pem if key is None else key
    return jwt.encode(claims, key, algorithm=algorithm,
                      headers={"kid": kid})  # fmt: skip


def refused(backend: ProviderBackend, id_token: str, *, nonce: str = NONCE) -> str:
    with pytest.raises(SuspiciousOperation) as refusal:
        backend.verify_token(id_token, nonce=nonce)
    return str(refusal.value)


def test_a_token_the_provider_signed_for_the_desk_is_taken(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    claims = backend.verify_token(token(oidc_on, kid), nonce=NONCE)
    assert claims["sub"] == "7" and claims["iss"] == oidc_on.issuer


def test_a_token_for_another_audience_is_refused(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    assert "Audience doesn't match" in refused(backend, token(oidc_on, kid, aud="another-app"))


def test_a_token_for_several_audiences_must_name_the_desk_as_its_party(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    both = [CLIENT_ID, "another-app"]
    assert "azp" in refused(backend, token(oidc_on, kid, aud=both, azp="another-app"))
    assert "azp" in refused(backend, token(oidc_on, kid, aud=both))
    assert backend.verify_token(token(oidc_on, kid, aud=both, azp=CLIENT_ID), nonce=NONCE)


def test_a_token_from_another_issuer_is_refused(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    other = token(oidc_on, kid, iss="https://idp.example.com")
    assert "Invalid issuer" in refused(backend, other)


def test_an_expired_token_is_refused(backend: ProviderBackend, oidc_on: Provider, kid: str) -> None:
    now = int(time.time())
    expired = token(oidc_on, kid, iat=now - 3600, exp=now - 120)
    assert "Signature has expired" in refused(backend, expired)


def test_a_token_without_expiry_is_refused(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    assert 'missing the "exp" claim' in refused(backend, token(oidc_on, kid, exp=None))


def test_a_tampered_signature_is_refused(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    tampered = spoil(token(oidc_on, kid), "tampered", private_key_pem=oidc_on.private_key_pem)
    assert "Signature verification failed" in refused(backend, tampered)


def test_a_token_signed_by_another_key_under_the_providers_kid_is_refused(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = stranger.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())  # fmt: skip
    assert "Signature verification failed" in refused(backend, token(oidc_on, kid, key=pem))


def test_a_token_signed_with_the_client_secret_is_refused(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    from tests.oidc.fixtures import CLIENT_SECRET

    hs256 = token(oidc_on, kid, key=CLIENT_SECRET, algorithm="HS256")
    assert "JWKS" in refused(backend, hs256)


def test_an_unsigned_token_is_refused(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    refused(backend, token(oidc_on, kid, key="", algorithm="none"))


def test_a_token_of_another_sign_in_is_refused(
    backend: ProviderBackend, oidc_on: Provider, kid: str
) -> None:
    assert "Nonce" in refused(backend, token(oidc_on, kid), nonce="nonce-of-another-sign-in")
