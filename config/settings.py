"""Settings for Triage Desk, read from the environment.

``DJANGO_DEBUG`` defaults to off: then a secret key and allowed hosts are required, so a
server started with nothing set refuses to start instead of serving debug pages.
``make demo``, ``make test`` and the suite (pyproject's pytest ``env``) set
``DJANGO_DEBUG=1``: the development settings, on SQLite and Celery's filesystem transport
under ``var/`` unless ``DATABASE_URL`` and ``REDIS_URL`` say otherwise.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
import yaml
from csp.constants import NONE as CSP_NONE
from csp.constants import SELF as CSP_SELF
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int, env_list, env_str
from core.outbound import PrivateAllowance
from qualitylab.credentials import CredentialRules
from triage.vocabulary import taxonomy

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("TRIAGE_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", False)
if DEBUG:
    SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me-for-anything-real")
    ALLOWED_HOSTS = env_list(
        "DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"]
    )
else:
    SECRET_KEY = env_str("DJANGO_SECRET_KEY")
    if len(SECRET_KEY) < 50 or SECRET_KEY.startswith("dev-only"):
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be a random value of 50+ characters.")
    ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", [])
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("Set DJANGO_ALLOWED_HOSTS when DJANGO_DEBUG is off.")

# Key for hashing raw identifiers (user ids, session ids) and item bodies. Separate from
# SECRET_KEY so rotating the session secret does not change every stored hash.
TRIAGE_HASH_KEY = env_str("TRIAGE_HASH_KEY", SECRET_KEY).encode()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "axes",
    "csp",
    "organisation",
    "triage",
    "learning",
    "qualitylab",
    "alerts",
    "contracts",
    "fixes",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language: the language cookie (the header switch), else Accept-Language...
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before the CSRF check, which reads the form: an over-long page body is refused unread.
    "config.request_limits.PageBodyLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: changes audited where no service names the actor (the Django
    # admin's role edits) are credited to the request's person (organisation/audit.py).
    "organisation.middleware.ActingPersonMiddleware",
    # ...and for a signed-in person, the language they chose (triage/language.py).
    "triage.language.PreferredLanguageMiddleware",
    # After authentication: the person's time zone is their preference, or their browser's.
    "triage.middleware.PersonTimeZoneMiddleware",
    # After authentication: a signed-in person's pages may read the replica (core/replica.py).
    "core.replica.ReplicaReadsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout response.
    "axes.middleware.AxesMiddleware",
]

# Which pool this process serves (docker-compose.yml runs both from one image): "web" serves
# everything, the pages and the API (ingest too, when a proxy sends it there); "ingest" serves
# only the ingest doors and /healthz, at a lower CPU priority (config/wsgi.py).
TRIAGE_POOL = env_str("TRIAGE_POOL", "web")
if TRIAGE_POOL not in ("web", "ingest"):
    raise ImproperlyConfigured(f"TRIAGE_POOL must be web or ingest, got {TRIAGE_POOL!r}.")
ROOT_URLCONF = "config.urls_ingest" if TRIAGE_POOL == "ingest" else "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        # Django's engine, freeing a page's context once the page is written (core.templates).
        "BACKEND": "core.templates.DjangoTemplates",
        "NAME": "django",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "triage.pages.context_processors.navigation",
                "triage.pages.context_processors.time_zone",
                "core.replica.page_reads",
            ],
        },
    }
]

# Django's form renderer, with inputs and selects written in Python (core.widgets).
FORM_RENDERER = "core.widgets.PythonWidgets"

_DEFAULT_DATABASE_URL = f"sqlite:///{VAR_DIR / 'triage.sqlite3'}"
DATABASE_URL = env_str("DATABASE_URL", _DEFAULT_DATABASE_URL)
try:
    _database = dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
if _database["ENGINE"] == "django.db.backends.sqlite3":
    _database["CONN_MAX_AGE"] = 0
    # IMMEDIATE transactions and WAL let the web process and the worker write to one
    # file without "database is locked" surprises.
    _database["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    if _database["ENGINE"] == "django.db.backends.postgresql":
        _database["ENGINE"] = "config.postgresql"  # Django's, reading timestamps faster
    _database.setdefault("OPTIONS", {})
    _database["OPTIONS"].setdefault("connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 3))
DATABASES = {"default": _database}
# Workers PostgreSQL may start for one statement of the desk (config/postgresql/base.py):
# none unless set, since a page's statement ran slower with them. Retention's drop of a
# day, which reads the whole day, has its own number (PostgreSQL's default, 2). PostgreSQL
# refuses more than 1024.
DATABASE_PARALLEL_WORKERS = env_int("DATABASE_PARALLEL_WORKERS", 0, maximum=1024)
DATABASE_UPKEEP_PARALLEL_WORKERS = env_int("DATABASE_UPKEEP_PARALLEL_WORKERS", 2, maximum=1024)
# Indexes with included columns are PostgreSQL's; on SQLite they are indexes of their key
# columns alone, which is what the embedded desk needs (triage.models.FailureRecord).
SILENCED_SYSTEM_CHECKS = ["models.W040"]
# A streaming replica of DATABASE_URL that signed-in people's pages read from, when it answers
# and is at most TRIAGE_REPLICA_MAX_LAG_SECONDS behind (core/replica.py); everything else, and
# every page when it is unset, reads the primary.
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL", "")
if DATABASE_REPLICA_URL:
    if _database["ENGINE"] != "config.postgresql":
        raise ImproperlyConfigured("DATABASE_REPLICA_URL needs a PostgreSQL DATABASE_URL.")
    try:
        _replica = dj_database_url.parse(
            DATABASE_REPLICA_URL, conn_max_age=60, conn_health_checks=True
        )
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_REPLICA_URL is not a database URL: {exc}") from None
    if _replica["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_REPLICA_URL must be a postgres:// URL.")
    _replica["ENGINE"] = "config.postgresql"
    _replica.setdefault("OPTIONS", {})
    # Short: a page waits this long at most for a replica that does not answer, once per
    # process every few seconds, then reads the primary.
    _replica["OPTIONS"].setdefault(
        "connect_timeout", env_int("DATABASE_REPLICA_CONNECT_TIMEOUT", 2, minimum=1)
    )
    # The test runner creates no database on the replica: it reads the primary's.
    _replica["TEST"] = {"MIRROR": "default"}
    DATABASES["replica"] = _replica
DATABASE_ROUTERS = ["core.replica.ReplicaRouter"]
# A busy page runs some of its statements on a second connection while it goes on
# (core/side_reads.py); this many side threads per process, each with its own connection.
TRIAGE_SIDE_READS = env_bool("TRIAGE_SIDE_READS", True)
TRIAGE_SIDE_READ_THREADS = env_int("TRIAGE_SIDE_READ_THREADS", 4, minimum=1)
TRIAGE_REPLICA_MAX_LAG_SECONDS = env_float("TRIAGE_REPLICA_MAX_LAG_SECONDS", 5.0)
if TRIAGE_REPLICA_MAX_LAG_SECONDS <= 0:
    raise ImproperlyConfigured("TRIAGE_REPLICA_MAX_LAG_SECONDS must be more than 0.")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend, loading the person's preference with the user (one query); it
    # refuses passwords while TRIAGE_LOCAL_LOGIN is off, but the break-glass admin's.
    "config.login.LocalPasswordBackend",
]
# Teams (organisation.access): the team whose members also see the collections no team owns
# ("" for admins only).
TRIAGE_UNOWNED_COLLECTIONS_TEAM = env_str("TRIAGE_UNOWNED_COLLECTIONS_TEAM", "")
# Failed logins: 5 per username and address, then a 15-minute pause.
AXES_FAILURE_LIMIT = env_int("TRIAGE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("TRIAGE_LOGIN_COOLOFF_HOURS", 0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

# --- Sign-in: local passwords and OpenID Connect (docs/sign-in.md) -------------------------
# Passwords (config/login.py): with 0, only the break-glass admin (`manage.py
# break_glass_admin`) may sign in with one, and the sign-in page offers the provider only.
TRIAGE_LOCAL_LOGIN = env_bool("TRIAGE_LOCAL_LOGIN", True)


def _oidc_names(setting: str, part: str, text: str, what: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not names or any(not name or any(c in name for c in ";=") for name in names):
        raise ImproperlyConfigured(
            f"{setting}: in {part!r}, {what} must be names separated by commas, none empty."
        )
    return names


def env_oidc_role_groups(name: str) -> dict[str, tuple[str, ...]]:
    """The provider's groups that give each desk role: "admin=desk-admins;operator=desk-ops,sre"
    (a role, "=", its groups separated by commas; entries separated by semicolons)."""
    from organisation.roles import ROLES

    table: dict[str, tuple[str, ...]] = {}
    for part in filter(None, (part.strip() for part in env_str(name, "").split(";"))):
        role, equals, groups = (piece.strip() for piece in part.partition("="))
        if not equals:
            raise ImproperlyConfigured(f"{name}: {part!r} must read role=group,group.")
        if role not in ROLES:
            raise ImproperlyConfigured(
                f"{name}: in {part!r}, {role!r} is not a role ({', '.join(ROLES)})."
            )
        if role in table:
            raise ImproperlyConfigured(f"{name}: the role {role!r} is named twice.")
        table[role] = _oidc_names(name, part, groups, "the groups")
    return table


def env_oidc_team_groups(name: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """The provider's groups that make a person a member of a team, with a role there:
    "checkout:operator=checkout-ops;search:viewer=search-all,search-ops". A person in groups
    of several entries for one team gets the role of the first such entry."""
    from organisation.roles import ROLES

    entries = []
    for part in filter(None, (part.strip() for part in env_str(name, "").split(";"))):
        target, equals, groups = (piece.strip() for piece in part.partition("="))
        team, colon, role = (piece.strip() for piece in target.rpartition(":"))
        if not equals or not colon:
            raise ImproperlyConfigured(f"{name}: {part!r} must read team:role=group,group.")
        if not team or len(team) > 100 or any(c in team for c in ",;="):
            raise ImproperlyConfigured(
                f"{name}: in {part!r}, the team name must be 1-100 characters without , ; =."
            )
        if role not in ROLES:
            raise ImproperlyConfigured(
                f"{name}: in {part!r}, {role!r} is not a role ({', '.join(ROLES)})."
            )
        entries.append((team, role, _oidc_names(name, part, groups, "the groups")))
    return tuple(entries)


# OpenID Connect (config/oidc.py, with mozilla-django-oidc): on when an issuer and a client id
# are set. The provider's endpoints and keys come from <issuer>/.well-known/openid-configuration,
# fetched at the first sign-in (not at start) and kept for an hour.
TRIAGE_OIDC_ISSUER = env_str("TRIAGE_OIDC_ISSUER", "").strip().rstrip("/")
TRIAGE_OIDC_CLIENT_ID = env_str("TRIAGE_OIDC_CLIENT_ID", "").strip()
TRIAGE_OIDC_ENABLED = bool(TRIAGE_OIDC_ISSUER or TRIAGE_OIDC_CLIENT_ID)
TRIAGE_OIDC_CLIENT_SECRET = env_str(
    "TRIAGE_OIDC_CLIENT_SECRET", None if TRIAGE_OIDC_ENABLED else ""
)
# Scopes asked for; add "groups" for providers that release the groups claim under it (Okta).
TRIAGE_OIDC_SCOPES = " ".join(env_str("TRIAGE_OIDC_SCOPES", "openid email profile").split())
# The claim (of the ID token or the userinfo answer) listing the person's groups.
TRIAGE_OIDC_GROUPS_CLAIM = env_str("TRIAGE_OIDC_GROUPS_CLAIM", "groups").strip()
TRIAGE_OIDC_ROLE_GROUPS = env_oidc_role_groups("TRIAGE_OIDC_ROLE_GROUPS")
TRIAGE_OIDC_TEAM_GROUPS = env_oidc_team_groups("TRIAGE_OIDC_TEAM_GROUPS")
if TRIAGE_OIDC_ENABLED:
    _issuer = urlsplit(TRIAGE_OIDC_ISSUER)
    if not (TRIAGE_OIDC_ISSUER and TRIAGE_OIDC_CLIENT_ID):
        raise ImproperlyConfigured("Set both TRIAGE_OIDC_ISSUER and TRIAGE_OIDC_CLIENT_ID.")
    if not TRIAGE_OIDC_CLIENT_SECRET:
        raise ImproperlyConfigured("Set TRIAGE_OIDC_CLIENT_SECRET (the provider gives it).")
    # Plain HTTP only on this machine (a provider in a test); a query has no place in one.
    loopback = _issuer.hostname in ("127.0.0.1", "localhost", "::1")
    if not (_issuer.scheme == "https" or (_issuer.scheme == "http" and loopback)) or (
        not _issuer.hostname or _issuer.query or _issuer.fragment
    ):
        raise ImproperlyConfigured(
            f"TRIAGE_OIDC_ISSUER must be an https:// URL without query, got {TRIAGE_OIDC_ISSUER!r}."
        )
    if "openid" not in TRIAGE_OIDC_SCOPES.split():
        raise ImproperlyConfigured("TRIAGE_OIDC_SCOPES must include openid.")
    if not TRIAGE_OIDC_GROUPS_CLAIM:
        raise ImproperlyConfigured("TRIAGE_OIDC_GROUPS_CLAIM must name a claim.")
    if not (TRIAGE_OIDC_ROLE_GROUPS or TRIAGE_OIDC_TEAM_GROUPS):
        raise ImproperlyConfigured(
            "Set TRIAGE_OIDC_ROLE_GROUPS or TRIAGE_OIDC_TEAM_GROUPS: with neither, no one could "
            "sign in with the provider."
        )
    AUTHENTICATION_BACKENDS.append("config.oidc.ProviderBackend")
elif not TRIAGE_LOCAL_LOGIN:
    raise ImproperlyConfigured(
        "TRIAGE_LOCAL_LOGIN=0 needs OpenID Connect (TRIAGE_OIDC_ISSUER, TRIAGE_OIDC_CLIENT_ID)."
    )
# What the sign-in button names ("Sign in with Okta"); the issuer's host when unset.
TRIAGE_OIDC_PROVIDER_NAME = env_str("TRIAGE_OIDC_PROVIDER_NAME", "").strip() or (
    urlsplit(TRIAGE_OIDC_ISSUER).hostname or ""
)
# mozilla-django-oidc reads these. Its views are config.oidc's (answering 404 while OpenID
# Connect is off); the ID token is RS256, checked against the provider's JWKS, and state,
# nonce and PKCE (S256) are always used.
OIDC_RP_CLIENT_ID = TRIAGE_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = TRIAGE_OIDC_CLIENT_SECRET
OIDC_RP_SCOPES = TRIAGE_OIDC_SCOPES
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
OIDC_ALLOW_UNSECURED_JWT = False
OIDC_TIMEOUT = 10
OIDC_AUTHENTICATE_CLASS = "config.oidc.AuthenticateView"
OIDC_CALLBACK_CLASS = "config.oidc.CallbackView"

# English and Korean. Codes (stages, reasons, lanes, execution states, API error codes) are
# the same in both; the interface and the catalog's texts are translated (locale/).
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ko", "한국어")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Dates, times and numbers in each language's own way (config/formats/<language>/).
FORMAT_MODULE_PATH = ["config.formats"]
TIME_ZONE = env_str("TRIAGE_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# In development WhiteNoise serves straight from the app folders; production collects.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

# The ingest endpoint reads and limits its own body; these guard every other view.
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# --- production hardening (manage.py check --deploy passes with DJANGO_DEBUG=0) ----------
# HTTPS only unless told otherwise. DJANGO_PLAIN_HTTP=1 is the one switch for serving plain
# HTTP (a local docker compose stack without a TLS proxy): no redirect, no secure-only
# cookies, no HSTS. The finer variables below still override each part.
PLAIN_HTTP = env_bool("DJANGO_PLAIN_HTTP", DEBUG)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", not PLAIN_HTTP)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not PLAIN_HTTP)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 0 if PLAIN_HTTP else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not PLAIN_HTTP
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", not PLAIN_HTTP)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): the pages load their script (htmx, static/js) and
# CSS from this site and use no inline script, style or event handler; no frames, no
# plugins, forms post here only. /api/docs/ adds inline styles for Swagger UI (config/urls.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [CSP_SELF],
        "script-src": [CSP_SELF],
        "style-src": [CSP_SELF],
        "img-src": [CSP_SELF],
        "font-src": [CSP_SELF],
        "connect-src": [CSP_SELF],
        "object-src": [CSP_NONE],
        "base-uri": [CSP_NONE],
        "form-action": [CSP_SELF],
        "frame-ancestors": [CSP_NONE],
    }
}
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- API -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "triage.intake.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "triage.intake.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Triage Desk API",
    "DESCRIPTION": (
        "Batch ingest of failure records, runner events, receipts and audit events, "
        "and read access to normalized failures and their groups."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Celery --------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "")
CELERY_FILESYSTEM_DIR = VAR_DIR / "celery"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # A message a killed worker never acknowledged comes back after this long.
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT_SECONDS", 3600, minimum=1)
    }
else:
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_FILESYSTEM_DIR / "queue"),
        "data_folder_out": str(CELERY_FILESYSTEM_DIR / "queue"),
        "processed_folder": str(CELERY_FILESYSTEM_DIR / "processed"),
        "control_folder": str(CELERY_FILESYSTEM_DIR / "control"),
        "store_processed": False,
        # The worker lists the queue folder this often (kombu's default is every second):
        # a run started from the page begins within a tenth of a second.
        "polling_interval": 0.1,
    }
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_BEAT_SCHEDULE = {
    "requeue-stale-quality-lab-runs": {
        "task": "qualitylab.tasks.requeue_stale_runs",
        "schedule": 60.0,
    },
    "unmute-expired-groups": {"task": "triage.tasks.unmute_expired_groups", "schedule": 60.0},
    # Alerts: the counter-read rule kinds, batches the broker missed and lost deliveries.
    "evaluate-alert-rules": {"task": "alerts.tasks.evaluate_rules", "schedule": 60.0},
    # Retention: does nothing while TRIAGE_RETENTION_DAYS is 0.
    "prune-old-records": {"task": "triage.tasks.prune_old_records", "schedule": 3600.0},
    # PostgreSQL: the records' day partitions for the retention window and the days ahead.
    "keep-record-partitions": {
        "task": "triage.tasks.keep_record_partitions",
        "schedule": 3600.0,
    },
    # Contracts: counts what arrived for the contracts page (seed 004's rollout plan).
    "scan-contracts": {"task": "contracts.tasks.scan_contracts", "schedule": 60.0},
    # Fixes: measures whether each fix of the last week held (and tracks promotions).
    "measure-fixes": {"task": "fixes.tasks.measure_fixes", "schedule": 300.0},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("CELERY_BROKER_CONNECTION_TIMEOUT", 3.0)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 660)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
# Starting a run with the broker down must fail fast with a clear message, not hang.
CELERY_TASK_PUBLISH_RETRY = False
CELERY_ACCEPT_CONTENT = ["json"]

# --- Triage Desk ---------------------------------------------------------------------------
TRIAGE_INGEST_MAX_BODY_BYTES = env_int("TRIAGE_INGEST_MAX_BODY_BYTES", 5 * 1024 * 1024, minimum=1)
TRIAGE_INGEST_MAX_ITEMS = env_int("TRIAGE_INGEST_MAX_ITEMS", 1000, minimum=1)
# Arrays and objects nested deeper than this are refused wherever JSON (or a YAML spec) is
# read: the ingest API and command, case and spec imports, the case form.
TRIAGE_JSON_MAX_DEPTH = env_int("TRIAGE_JSON_MAX_DEPTH", 64, minimum=1)
# Batches one pool (the workers of one gunicorn master) works on at once, whichever workers
# hold the connections; a request that finds every slot taken for this long is answered 503
# ingest_busy with Retry-After instead of queueing without bound. About the cores given to it.
TRIAGE_INGEST_CONCURRENT_BATCHES = env_int("TRIAGE_INGEST_CONCURRENT_BATCHES", 2, minimum=1)
TRIAGE_INGEST_SLOT_WAIT_SECONDS = env_float("TRIAGE_INGEST_SLOT_WAIT_SECONDS", 2.0)
if TRIAGE_INGEST_SLOT_WAIT_SECONDS < 0:
    raise ImproperlyConfigured("TRIAGE_INGEST_SLOT_WAIT_SECONDS must be 0 or more.")
# The ingest pool's processes run at this niceness (0-19), so the pages win the CPU.
TRIAGE_INGEST_NICE = env_int("TRIAGE_INGEST_NICE", 10, minimum=0)
if TRIAGE_INGEST_NICE > 19:
    raise ImproperlyConfigured("TRIAGE_INGEST_NICE must be between 0 and 19.")
# Items per API key per minute; a key may override it.
TRIAGE_INGEST_QUOTA_PER_MINUTE = env_int("TRIAGE_INGEST_QUOTA_PER_MINUTE", 600_000, minimum=1)
# Decompressed body bytes per API key per minute: scrubbing costs CPU in proportion to size.
TRIAGE_INGEST_QUOTA_BYTES_PER_MINUTE = env_int(
    "TRIAGE_INGEST_QUOTA_BYTES_PER_MINUTE", 256 * 1024 * 1024, minimum=1
)


def env_envelope_codes(name: str) -> dict[str, str]:
    """Operators' envelope codes (triage/intake/envelope.py): {"CODE": "desk_reason", ...},
    given inline as a JSON object or as the path of a JSON or YAML file holding one. Each
    code is 1-100 letters, digits, '_', '.', ':' or '-'; each reason one the taxonomy knows
    (a code mapped to an unknown reason would stay unmapped, so it is refused here)."""
    value = env_str(name, "").strip()
    if not value:
        return {}
    if value.startswith("{"):
        source, text, is_yaml = "its JSON", value, False
    else:
        path = Path(value)
        if path.suffix.lower() not in (".json", ".yaml", ".yml"):
            raise ImproperlyConfigured(
                f"{name} must be a JSON object or the path of a .json, .yaml or .yml file."
            )
        try:
            source, text = str(path), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ImproperlyConfigured(f"{name}: cannot read {path} ({exc}).") from None
        is_yaml = path.suffix.lower() != ".json"
    try:
        table = yaml.safe_load(text) if is_yaml else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ImproperlyConfigured(f"{name}: {source} does not parse ({exc}).") from None
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ImproperlyConfigured(f"{name}: {source} must hold an object of code: reason.")
    for code, reason in table.items():
        if not isinstance(code, str) or not re.fullmatch(r"[A-Za-z0-9_.:\-]{1,100}", code):
            raise ImproperlyConfigured(
                f"{name}: the code {code!r} must be 1-100 letters, digits, '_', '.', ':' or '-'."
            )
        if not isinstance(reason, str) or reason not in taxonomy.REASONS:
            raise ImproperlyConfigured(
                f"{name}: {code} maps to {reason!r}, which is not a reason of the taxonomy "
                "(GET /api/v1/taxonomy lists them)."
            )
    return dict(table)


# Envelope codes (seed 004's `code`) the operators map to desk reasons, beside the built-in
# table; theirs win. See env_envelope_codes for the format.
TRIAGE_ENVELOPE_CODES = env_envelope_codes("TRIAGE_ENVELOPE_CODES")
# A running run whose worker has not reported for this long is taken over by a redelivery.
QUALITYLAB_STALE_RUN_SECONDS = env_int("QUALITYLAB_STALE_RUN_SECONDS", 60, minimum=1)
# A ceiling for each execute-case call (redirects and body included): a case's timeout_sec
# may lower it, never raise it.
QUALITYLAB_EXECUTE_TIMEOUT_SECONDS = env_float("QUALITYLAB_EXECUTE_TIMEOUT_SECONDS", 30.0)
if not 0 < QUALITYLAB_EXECUTE_TIMEOUT_SECONDS <= 300:
    raise ImproperlyConfigured("QUALITYLAB_EXECUTE_TIMEOUT_SECONDS must be in (0, 300].")
# Execute cases read at most this much of an answer; a bigger one fails the case.
QUALITYLAB_MAX_RESPONSE_BYTES = env_int(
    "QUALITYLAB_MAX_RESPONSE_BYTES", 10 * 1024 * 1024, minimum=1024
)
# Non-public hosts, addresses and networks (CIDR) execute cases may call (loopback, private,
# link-local... are refused otherwise): "host:port" ("[v6]:port") allows one port, e.g.
# "127.0.0.1:8090" for the demo sandbox; a bare host allows every port of it.
QUALITYLAB_ALLOWED_PRIVATE_HOSTS = env_list("QUALITYLAB_ALLOWED_PRIVATE_HOSTS", [])
# Which worker environment variables a collection's auth profile may name (qualitylab/
# credentials.py): <prefix><COLLECTION>[__<SESSION>], and explicit COLLECTION:VARIABLE pairs.
QUALITYLAB_CREDENTIAL_ENV_PREFIX = env_str("QUALITYLAB_CREDENTIAL_ENV_PREFIX", "QUALITYLAB_SECRET_")
QUALITYLAB_CREDENTIAL_ENVS = env_list("QUALITYLAB_CREDENTIAL_ENVS", [])
try:
    PrivateAllowance.parse(QUALITYLAB_ALLOWED_PRIVATE_HOSTS)
except ValueError as exc:
    raise ImproperlyConfigured(f"QUALITYLAB_ALLOWED_PRIVATE_HOSTS: {exc}.") from None
try:
    CredentialRules.parse(
        prefix=QUALITYLAB_CREDENTIAL_ENV_PREFIX, declared=QUALITYLAB_CREDENTIAL_ENVS
    )
except ValueError as exc:
    raise ImproperlyConfigured(f"Quality Lab credentials: {exc}.") from None
# The largest OpenAPI spec an import takes (upload, paste, CLI): refused before it is read.
# The default takes the largest public descriptions (GitHub's 13 MB, the cloud providers').
QUALITYLAB_MAX_SPEC_BYTES = env_int("QUALITYLAB_MAX_SPEC_BYTES", 64 * 1024 * 1024, minimum=1)
TRIAGE_DATABASE_RETRY_AFTER_SECONDS = env_int("TRIAGE_DATABASE_RETRY_AFTER_SECONDS", 5, minimum=1)
# Retention (triage/upkeep/retention.py): failure records that occurred more than this many days ago
# are pruned every hour by beat (and by `manage.py prune_records`); 0 keeps them forever.
TRIAGE_RETENTION_DAYS = env_int("TRIAGE_RETENTION_DAYS", 90, minimum=0)
# Records per batch; each batch is one short transaction holding its groups' locks.
TRIAGE_RETENTION_BATCH_SIZE = env_int("TRIAGE_RETENTION_BATCH_SIZE", 2000, minimum=1)
# The beat task starts no batch after this long (the next run goes on); it must end within
# the task's soft time limit.
TRIAGE_RETENTION_MAX_SECONDS = env_int(
    "TRIAGE_RETENTION_MAX_SECONDS", max(1, min(300, CELERY_TASK_SOFT_TIME_LIMIT // 2)), minimum=1
)
if TRIAGE_RETENTION_MAX_SECONDS >= CELERY_TASK_SOFT_TIME_LIMIT:
    raise ImproperlyConfigured(
        "TRIAGE_RETENTION_MAX_SECONDS must be below CELERY_TASK_SOFT_TIME_LIMIT "
        f"({CELERY_TASK_SOFT_TIME_LIMIT})."
    )
# The longest window a page may show (a custom window on the triage page): the retention
# period (nothing older is kept), at least the 30-day preset; 400 days when nothing is pruned.
TRIAGE_MAX_WINDOW_DAYS = env_int(
    "TRIAGE_MAX_WINDOW_DAYS", max(TRIAGE_RETENTION_DAYS, 30) if TRIAGE_RETENTION_DAYS else 400,
    minimum=30,
)  # fmt: skip
# Learning review: the promotion gate (learning/gate.py). A suggestion becomes promotable
# after this many distinct successful observations of its query family (runtime sessions
# plus Quality Lab cases: repetitions of one case count once), when at most this share of
# the recent attempts with its target failed and this share of the family's recent
# successes chose the same target.
LEARNING_MIN_SUCCESS_OBSERVATIONS = env_int("LEARNING_MIN_SUCCESS_OBSERVATIONS", 2, minimum=1)
LEARNING_MAX_RECENT_FAILURE_RATIO = env_float("LEARNING_MAX_RECENT_FAILURE_RATIO", 0.5)
LEARNING_MIN_TARGET_AGREEMENT = env_float("LEARNING_MIN_TARGET_AGREEMENT", 0.8)
# "Recent": the newest attempts of a query family the gate looks at.
LEARNING_RECENT_ATTEMPTS = env_int("LEARNING_RECENT_ATTEMPTS", 20, minimum=1)
# Policy promotes promotable suggestions of read-only collections in "promoted" mode;
# write-capable collections always wait for a reviewer.
LEARNING_AUTO_PROMOTE = env_bool("LEARNING_AUTO_PROMOTE", True)
if not 0.0 <= LEARNING_MAX_RECENT_FAILURE_RATIO <= 1.0:
    raise ImproperlyConfigured("LEARNING_MAX_RECENT_FAILURE_RATIO must be between 0 and 1.")
if not 0.0 <= LEARNING_MIN_TARGET_AGREEMENT <= 1.0:
    raise ImproperlyConfigured("LEARNING_MIN_TARGET_AGREEMENT must be between 0 and 1.")

# --- Alerts (alerts/) -----------------------------------------------------------------------
# Links in notifications are absolute: the address people open the desk at.
DESK_BASE_URL = env_str(
    "DESK_BASE_URL",
    "http://127.0.0.1:8000"
    if DEBUG
    else next((f"https://{host}" for host in ALLOWED_HOSTS if host and "*" not in host
               and not host.startswith(".")), "http://localhost"),
)  # fmt: skip
if not DESK_BASE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("DESK_BASE_URL must be an absolute http(s) URL.")
# Webhooks go to public addresses only; these non-public hosts, addresses and networks
# (CIDR) are allowed too (a receiver on the local network, the demo's on 127.0.0.1:8091),
# each on one port as "host:port" ("[v6]:port") or, bare, on every port.
ALERTS_ALLOWED_HOSTS = env_list("ALERTS_ALLOWED_HOSTS", [])
try:
    PrivateAllowance.parse(ALERTS_ALLOWED_HOSTS)
except ValueError as exc:
    raise ImproperlyConfigured(f"ALERTS_ALLOWED_HOSTS: {exc}.") from None
# One webhook call (redirects and the answer included), and the most of an answer it reads.
ALERTS_TIMEOUT_SECONDS = env_float("ALERTS_TIMEOUT_SECONDS", 10.0)
if not 0 < ALERTS_TIMEOUT_SECONDS <= 60:
    raise ImproperlyConfigured("ALERTS_TIMEOUT_SECONDS must be in (0, 60].")
ALERTS_MAX_RESPONSE_BYTES = env_int("ALERTS_MAX_RESPONSE_BYTES", 64 * 1024, minimum=1024)
# A delivery a worker claimed is taken over after the timeout plus this margin (it died).
ALERTS_LEASE_MARGIN_SECONDS = env_int("ALERTS_LEASE_MARGIN_SECONDS", 30, minimum=1)
# Attempts per delivery (the first included) before it is logged as failed.
ALERTS_DELIVERY_ATTEMPTS = env_int("ALERTS_DELIVERY_ATTEMPTS", 5, minimum=1)
# One evaluation of a rule matching more subjects than this sends one digest instead.
ALERTS_DIGEST_THRESHOLD = env_int("ALERTS_DIGEST_THRESHOLD", 20, minimum=1)
# Email goes through Django's mail backend: SMTP, set from the environment.
EMAIL_BACKEND = env_str("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("Set at most one of EMAIL_USE_TLS and EMAIL_USE_SSL.")
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0)
ALERTS_FROM_EMAIL = env_str("ALERTS_FROM_EMAIL", "triage-desk@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"scrub": {"()": "triage.scrub.ScrubLogFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["scrub"]},
    },
    "root": {"handlers": ["console"], "level": env_str("TRIAGE_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
    },
}
