from tests.oidc.fixtures import oidc_on, provider

__all__ = ["oidc_on", "provider"]
