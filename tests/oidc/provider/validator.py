"""django-oauth-toolkit's validator with a groups claim (under the "groups" scope, as Okta
releases it) and a switch that spoils the ID tokens it issues (tokens.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings

from tests.oidc.provider.tokens import ID_TOKEN_MODES, spoil

__all__ = ["ID_TOKEN_MODES", "GroupsValidator", "id_token_mode_path"]


def id_token_mode_path() -> Path:
    return Path(os.environ["OIDC_PROVIDER_DIR"]) / "id-token-mode"


class GroupsValidator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        person = request.user
        return {
            "preferred_username": person.username,
            "email": person.email,
            "given_name": person.first_name,
            "groups": sorted(person.groups.values_list("name", flat=True)),
        }

    def finalize_id_token(self, id_token: Any, token: Any, token_handler: Any, request: Any) -> str:
        signed = super().finalize_id_token(id_token, token, token_handler, request)
        path = id_token_mode_path()
        mode = path.read_text().strip() if path.exists() else "valid"
        return spoil(signed, mode, private_key_pem=oauth2_settings.OIDC_RSA_PRIVATE_KEY)
