"""ID tokens spoilt one way each, still signed with the provider's own key (but the tampered
one): what the desk must refuse. Plain PyJWT, so the desk's tests use it too."""

from __future__ import annotations

import base64
import time

import jwt

# "valid" leaves the provider's token alone.
ID_TOKEN_MODES = ("valid", "wrong-audience", "wrong-issuer", "expired", "tampered")


def spoil(token: str, mode: str, *, private_key_pem: str) -> str:
    if mode == "valid":
        return token
    if mode == "tampered":
        header, payload, signature = token.split(".")
        raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
        raw[len(raw) // 2] ^= 0x01
        flipped = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
        return f"{header}.{payload}.{flipped}"
    claims = jwt.decode(token, options={"verify_signature": False})
    kid = jwt.get_unverified_header(token)["kid"]
    if mode == "wrong-audience":
        claims["aud"] = "another-client"
    elif mode == "wrong-issuer":
        claims["iss"] = "http://127.0.0.1:9/o"
    elif mode == "expired":
        now = int(time.time())
        claims.update(iat=now - 3600, exp=now - 600, auth_time=now - 3600)
    else:
        raise ValueError(mode)
    return jwt.encode(claims, private_key_pem, algorithm="RS256", headers={"kid": kid})
