"""docker-compose.yml, the stack operators run, checked in the suite (issues 6 and 18).

`docker compose config` parses it where the docker CLI has its compose plugin (skipped,
with the reason, where it has not). The structural checks always run: the YAML parses,
the seven services are there and wired to each other (the pools, worker and beat start
after the one-shot migrate), every environment variable the app services set is one
config/settings.py reads (a misspelt name would be silently ignored),
the settings start under exactly that environment, and every command names a real
management command, WSGI module or Celery app.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import dj_database_url
import pytest
import yaml
from celery import Celery
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
APP_SERVICES = ("web", "ingest", "worker", "beat")
SECRET = "compose-check-" + "k" * 50  # what an operator exports before `up`


@cache
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(document, dict), "docker-compose.yml is not a mapping"
    return document


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's `${NAME}`, `${NAME:-default}` and `${NAME:?error}` (enough for this file)."""

    def replace(match: re.Match[str]) -> str:
        name, operator, argument = match.group(1), match.group(2) or "", match.group(3) or ""
        if env.get(name):
            return env[name]
        if operator == ":?":
            raise AssertionError(f"compose refuses to start without {name}: {argument}")
        return argument if operator == ":-" else ""

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:[-?])?([^}]*)\}", replace, value)


def _environment(service: str, env: dict[str, str] | None = None) -> dict[str, str]:
    raw = compose()["services"][service].get("environment") or {}
    if isinstance(raw, list):  # the KEY=value form
        raw = dict(item.split("=", 1) for item in raw)
    given = {"DJANGO_SECRET_KEY": SECRET} if env is None else env
    return {str(name): _interpolate(str(value), given) for name, value in raw.items()}


def _command(service: str) -> list[str]:
    command = compose()["services"][service].get("command")
    if command is None:
        return []
    words = shlex.split(command) if isinstance(command, str) else [str(w) for w in command]
    if words[:2] == ["sh", "-c"]:
        words = shlex.split(" ".join(words[2:]))
    return words


@cache
def settings_variables() -> set[str]:
    """Every environment variable config/settings.py reads through config.env's helpers."""
    tree = ast.parse((ROOT / "config" / "settings.py").read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.startswith("env_")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    assert {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY"} <= names, names
    return names


# --- docker compose itself ----------------------------------------------------------------


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run(
            [docker, "compose", "version"], capture_output=True, text=True, timeout=30
        )
        if probe.returncode == 0:
            return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_docker_compose_config_parses_the_file() -> None:
    cli = _compose_cli()
    if cli is None:
        reason = (
            "the docker CLI has no compose plugin"
            if shutil.which("docker")
            else "the docker CLI is not installed"
        )
        pytest.skip(f"`docker compose config` not run: {reason} (the structural checks run)")
    result = subprocess.run(
        [*cli, "--file", str(COMPOSE_FILE), "config", "--quiet"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SECRET_KEY": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- structure (always) ---------------------------------------------------------------------


def test_the_stack_has_its_seven_services_wired_together() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "migrate", *APP_SERVICES}
    for name in ("postgres", "redis"):
        assert services[name].get("image"), f"{name} has no image"
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
    for name in APP_SERVICES:
        service = services[name]
        assert service.get("build") == ".", f"{name} is not built from this repository"
        depends = service.get("depends_on") or {}
        for needed in ("postgres", "redis"):
            assert depends.get(needed, {}).get("condition") == "service_healthy", (name, needed)
        # No pool, worker or beat before the schema: an ingest pool that started first
        # would answer its first batches with errors.
        assert depends.get("migrate", {}).get("condition") == "service_completed_successfully"
    for volume in services["postgres"].get("volumes") or []:
        named = str(volume).split(":", 1)[0]
        assert named.startswith("/") or named in (compose().get("volumes") or {}), volume


def test_the_app_services_set_only_variables_the_settings_read() -> None:
    known = settings_variables()
    for name in APP_SERVICES:
        unknown = set(_environment(name)) - known
        assert not unknown, f"{name} sets variables config/settings.py never reads: {unknown}"
        environment = _environment(name)
        assert environment.get("DJANGO_DEBUG") == "0", f"{name} must run with DJANGO_DEBUG=0"
        for required in ("DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "DATABASE_URL"):
            assert environment.get(required), f"{name} does not set {required}"
        assert environment.get("REDIS_URL"), f"{name} would fall back to the filesystem broker"


def test_the_secret_key_must_come_from_the_operator() -> None:
    with pytest.raises(AssertionError, match="DJANGO_SECRET_KEY"):
        _environment("web", env={})


def test_the_urls_point_at_the_postgres_and_redis_services() -> None:
    services = compose()["services"]
    postgres = {k: str(v) for k, v in services["postgres"]["environment"].items()}
    for name in APP_SERVICES:
        environment = _environment(name)
        database = dj_database_url.parse(environment["DATABASE_URL"])
        assert database["ENGINE"] == "django.db.backends.postgresql"
        assert database["HOST"] == "postgres" and int(database["PORT"] or 5432) == 5432
        assert database["USER"] == postgres["POSTGRES_USER"]
        assert database["PASSWORD"] == postgres["POSTGRES_PASSWORD"]
        assert database["NAME"] == postgres["POSTGRES_DB"]
        redis_url = re.fullmatch(r"redis://([^:/]+)(?::(\d+))?/(\d+)", environment["REDIS_URL"])
        assert redis_url, environment["REDIS_URL"]
        assert redis_url.group(1) == "redis" and int(redis_url.group(2) or 6379) == 6379


def test_the_settings_start_under_the_compose_environment() -> None:
    """The app services' environment, as compose resolves it, passes `manage.py check`:
    every value has the type the settings want (no database is contacted)."""
    environment = _environment("web")
    assert environment == _environment("ingest") == _environment("worker") == _environment("beat")
    clean = {k: v for k, v in os.environ.items() if k not in settings_variables()}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**clean, **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_command_names_something_that_exists() -> None:
    management = get_commands()
    seen = {"manage.py": 0, "gunicorn": 0, "celery": 0}
    for name in APP_SERVICES:
        words = _command(name)
        assert words, f"{name} has no command"
        for index, word in enumerate(words):
            if word == "manage.py":
                seen[word] += 1
                assert words[index + 1] in management, f"{name}: no command {words[index + 1]}"
            elif word == "gunicorn":
                seen[word] += 1
                module = importlib.import_module(words[index + 1])
                assert callable(getattr(module, "application", None)), words[index + 1]
                bind = words[words.index("--bind") + 1]
                ports = compose()["services"][name]["ports"]
                published = [str(port).split(":")[-1] for port in ports]
                assert bind.rsplit(":", 1)[1] in published, (bind, published)
            elif word == "celery":
                seen[word] += 1
                app = importlib.import_module(words[words.index("-A") + 1])
                assert isinstance(getattr(app, "celery_app", None), Celery)
                assert words[words.index("-A") + 2] in ("worker", "beat")
    assert seen["gunicorn"] == 2 and seen["celery"] == 2 and seen["manage.py"] >= 1, seen
    beat = _command("beat")
    assert "beat" in beat
    if "--schedule" in beat:
        # The image's only writable folder is /app/var (see the Dockerfile).
        assert beat[beat.index("--schedule") + 1].startswith("/app/var/")
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "WORKDIR /app" in dockerfile and "/app/var" in dockerfile


# --- secure by default --------------------------------------------------------------------


def _settings_under(environment: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # Nothing of this process's own DJANGO_* environment (the browser tests set
    # DJANGO_ALLOW_ASYNC_UNSAFE, which the deploy check refuses).
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in settings_variables() and not k.startswith("DJANGO_")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_compose_environment_passes_the_deploy_check() -> None:
    """HTTPS redirect, secure cookies and HSTS are on unless the operator opts out: no
    W008 (redirect), W012 (session cookie) or W016 (CSRF cookie), nor any other warning."""
    result = _settings_under(_environment("web"), "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr


def test_plain_http_is_one_documented_variable() -> None:
    environment = _environment("web", env={"DJANGO_SECRET_KEY": SECRET, "DJANGO_PLAIN_HTTP": "1"})
    assert environment["DJANGO_PLAIN_HTTP"] == "1"
    show = (
        "from django.conf import settings as s; print(s.SECURE_SSL_REDIRECT, "
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.DEBUG)"
    )
    plain = _settings_under(environment, "shell", "-c", show)
    assert plain.stdout.strip().splitlines()[-1] == "False False False 0 False", plain.stderr
    secure = _settings_under(_environment("web"), "shell", "-c", show)
    assert secure.stdout.strip().splitlines()[-1] == "True True True 31536000 False", secure.stderr
    deployment = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert "DJANGO_PLAIN_HTTP" in deployment


def test_the_image_leaves_out_history_environments_and_data() -> None:
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "var", "**/__pycache__", ".env"} <= ignored, ignored
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "DJANGO_DEBUG=0" in dockerfile


def test_migrations_run_once_in_their_own_service_before_the_others() -> None:
    migrate = compose()["services"]["migrate"]
    assert migrate.get("build") == "."
    assert _command("migrate") == ["python", "manage.py", "migrate", "--noinput"]
    assert "migrate" in get_commands()
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert str(migrate.get("restart")) == "no"  # it exits once done; it is not restarted
    assert _environment("migrate") == _environment("web")
    for name in APP_SERVICES:
        assert "migrate" not in _command(name), f"{name} migrates on its own"


def test_ingest_and_pages_run_as_separately_sized_pools_of_one_image() -> None:
    web, ingest = _command("web"), _command("ingest")
    assert compose()["services"]["ingest"].get("build") == compose()["services"]["web"].get("build")
    assert (
        "TRIAGE_POOL=ingest" in ingest and ingest[ingest.index("--env") + 1] == "TRIAGE_POOL=ingest"
    )
    assert "TRIAGE_POOL=ingest" not in web
    assert web[web.index("--workers") + 1] == "${TRIAGE_WEB_WORKERS:-3}"
    assert ingest[ingest.index("--workers") + 1] == "${TRIAGE_INGEST_WORKERS:-2}"
    assert ingest[ingest.index("--worker-class") + 1] == "gthread"  # answers 503s while busy
    # The pool ingests as many batches at once as it has workers, whichever worker holds a
    # connection (triage/intake/capacity.py), and has threads well beyond them: a request that
    # cannot get a slot within TRIAGE_INGEST_SLOT_WAIT_SECONDS is answered 503 with
    # Retry-After. With 4 threads, 40 senders' batches waited 6-9 s in gunicorn's queue and
    # none was refused.
    assert "TRIAGE_INGEST_CONCURRENT_BATCHES=${TRIAGE_INGEST_WORKERS:-2}" in ingest
    assert int(ingest[ingest.index("--threads") + 1]) >= 16
    assert "TRIAGE_INGEST_CONCURRENT_BATCHES" not in _environment("ingest")
    web_port = web[web.index("--bind") + 1].rsplit(":", 1)[1]
    ingest_port = ingest[ingest.index("--bind") + 1].rsplit(":", 1)[1]
    assert web_port != ingest_port
    # In containers the niceness orders only the ingest container's own processes: its
    # weight against the web container is its CPU share (Docker's default is 1024).
    services = compose()["services"]
    assert services["ingest"]["cpu_shares"] < 1024
    assert all("cpu_shares" not in services[name] for name in ("web", "worker", "beat"))
