"""A tiny OpenID Connect provider for the tests: django-oauth-toolkit, in a process of its
own (tests/oidc/provider/serve.py), with its own SQLite database and RS256 key in the folder
OIDC_PROVIDER_DIR names. Never the desk's settings: nothing here is shared with it."""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR = Path(os.environ["OIDC_PROVIDER_DIR"])
HERE = Path(__file__).resolve().parent

SECRET_KEY = "test-provider-only-" + "x" * 40
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc.provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": STATE_DIR / "provider.sqlite3"}
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
# Browsers keep cookies per host, not per port: the provider's must not be the desk's.
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrf"
LOGIN_URL = "/accounts/login/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (STATE_DIR / "key.pem").read_text(),
    "PKCE_REQUIRED": True,
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc.provider.validator.GroupsValidator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "Email address",
        "profile": "Name and username",
        "groups": "Groups",
    },
}
