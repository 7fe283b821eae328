from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from config.env import env_bool, env_int, env_list, env_str

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "x7Kq2-production-like-secret-key-with-enough-entropy-0123456789",
    "DJANGO_ALLOWED_HOSTS": "triage.example.com",
}


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_the_deploy_check() -> None:
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_without_a_secret_key_refuses_to_start() -> None:
    env = {k: v for k, v in PRODUCTION.items() if k != "DJANGO_SECRET_KEY"}
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_debug_is_off_unless_it_is_asked_for() -> None:
    """With nothing set the settings are production's: no debug pages, and no start at all
    without a secret key (the dev-only key exists only under DJANGO_DEBUG=1)."""
    unset = _manage("check", env={})
    assert unset.returncode != 0
    assert "DJANGO_SECRET_KEY" in unset.stderr
    production = {k: v for k, v in PRODUCTION.items() if k != "DJANGO_DEBUG"}
    shown = _manage(
        "shell", "-c", "from django.conf import settings; print(settings.DEBUG)", env=production
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-1] == "False"
    development = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.DEBUG)",
        env={"DJANGO_DEBUG": "1"},
    )
    assert development.stdout.strip().splitlines()[-1] == "True", development.stderr


def test_the_demo_refuses_production_settings(settings: Any) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="make demo"):
        call_command("demo", "--no-serve")


def test_a_bad_database_url_names_the_variable() -> None:
    result = _manage("check", env={"DJANGO_DEBUG": "1", "DATABASE_URL": "nonsense://"})
    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr


def test_env_helpers_fail_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_INT", "twelve")
    with pytest.raises(ImproperlyConfigured, match="SOME_INT must be an integer"):
        env_int("SOME_INT", 1)
    monkeypatch.setenv("SOME_BOOL", "maybe")
    with pytest.raises(ImproperlyConfigured, match="SOME_BOOL must be a boolean"):
        env_bool("SOME_BOOL", False)
    monkeypatch.delenv("SOME_REQUIRED", raising=False)
    with pytest.raises(ImproperlyConfigured, match="Set the environment variable SOME_REQUIRED"):
        env_str("SOME_REQUIRED")
    monkeypatch.setenv("SOME_LIST", "a, b,,c")
    assert env_list("SOME_LIST", []) == ["a", "b", "c"]
    monkeypatch.setenv("SOME_INT", "-1")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        env_int("SOME_INT", 1)
    monkeypatch.setenv("SOME_INT", "11")
    with pytest.raises(ImproperlyConfigured, match="SOME_INT must be at most 10, got 11"):
        env_int("SOME_INT", 1, maximum=10)
    monkeypatch.setenv("SOME_INT", "10")
    assert env_int("SOME_INT", 1, maximum=10) == 10


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"QUALITYLAB_CREDENTIAL_ENVS": "shop:DATABASE_URL"}, "DATABASE_URL"),
        ({"QUALITYLAB_CREDENTIAL_ENV_PREFIX": "DJANGO_"}, "DJANGO_"),
        ({"QUALITYLAB_ALLOWED_PRIVATE_HOSTS": "http://10.0.0.1/"}, "QUALITYLAB_ALLOWED_PRIVATE"),
        ({"QUALITYLAB_EXECUTE_TIMEOUT_SECONDS": "0"}, "QUALITYLAB_EXECUTE_TIMEOUT_SECONDS"),
        # PostgreSQL would refuse every connection with these.
        ({"DATABASE_PARALLEL_WORKERS": "1025"}, "DATABASE_PARALLEL_WORKERS must be at most"),
        ({"DATABASE_PARALLEL_WORKERS": "-1"}, "DATABASE_PARALLEL_WORKERS must be at least"),
        ({"DATABASE_PARALLEL_WORKERS": "two"}, "DATABASE_PARALLEL_WORKERS must be an integer"),
        ({"DATABASE_UPKEEP_PARALLEL_WORKERS": "2048"}, "DATABASE_UPKEEP_PARALLEL_WORKERS must"),
    ],
)
def test_unsafe_or_unusable_settings_stop_start_up(env: dict[str, str], named: str) -> None:
    result = _manage("check", env={"DJANGO_DEBUG": "1", **env})
    assert result.returncode != 0
    assert named in result.stderr


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (
            {"QUALITYLAB_ALLOWED_PRIVATE_HOSTS": "127.0.0.1:8090,127.0.0.1:0"},
            "QUALITYLAB_ALLOWED_PRIVATE_HOSTS: '127.0.0.1:0': the port must be between 1 and",
        ),
        (
            {"ALERTS_ALLOWED_HOSTS": "[::1]:8091,[::1]:hook"},
            "ALERTS_ALLOWED_HOSTS: '[::1]:hook' is not a host name",
        ),
    ],
)
def test_a_bad_host_port_entry_stops_start_up_naming_the_variable(
    env: dict[str, str], named: str
) -> None:
    result = _manage("check", env={"DJANGO_DEBUG": "1", **env})
    assert result.returncode != 0
    assert named in result.stderr


def test_host_port_entries_start() -> None:
    result = _manage(
        "check",
        env={
            "DJANGO_DEBUG": "1",
            "QUALITYLAB_ALLOWED_PRIVATE_HOSTS": "127.0.0.1:8090,[::1]:8090,sandbox:8090",
            "ALERTS_ALLOWED_HOSTS": "127.0.0.1:8091,receiver:8091,10.20.0.0/16",
        },
    )
    assert result.returncode == 0, result.stderr
