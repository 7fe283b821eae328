"""The sign-in settings are read at start and a bad one stops the desk, naming the part."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import env_oidc_role_groups, env_oidc_team_groups
from tests.oidc.fixtures import ROOT


def test_role_groups_read_role_equals_groups(monkeypatch: Any) -> None:
    monkeypatch.setenv("MAPPING", " admin = desk-admins ; operator=desk-ops, SRE team ;")
    assert env_oidc_role_groups("MAPPING") == {
        "admin": ("desk-admins",),
        "operator": ("desk-ops", "SRE team"),
    }


def test_team_groups_keep_their_order(monkeypatch: Any) -> None:
    monkeypatch.setenv(
        "MAPPING", "search:operator=search-ops;search:viewer=search-all;a:b:viewer=x"
    )
    assert env_oidc_team_groups("MAPPING") == (
        ("search", "operator", ("search-ops",)),
        ("search", "viewer", ("search-all",)),
        ("a:b", "viewer", ("x",)),
    )


@pytest.mark.parametrize(
    ("reader", "value", "named"),
    [
        (env_oidc_role_groups, "admin=desk-admins;owner=bosses", "'owner' is not a role"),
        (env_oidc_role_groups, "admin", "'admin' must read role=group,group"),
        (env_oidc_role_groups, "admin=a;admin=b", "the role 'admin' is named twice"),
        (env_oidc_role_groups, "viewer=a,,b", "in 'viewer=a,,b', the groups"),
        (env_oidc_team_groups, "checkout=ops", "'checkout=ops' must read team:role=group"),
        (env_oidc_team_groups, "checkout:boss=ops", "'boss' is not a role"),
        (env_oidc_team_groups, ":viewer=ops", "the team name"),
        (env_oidc_team_groups, "checkout:viewer=", "in 'checkout:viewer=', the groups"),
    ],
)
def test_a_bad_mapping_names_its_part(
    monkeypatch: Any, reader: Any, value: str, named: str
) -> None:
    monkeypatch.setenv("MAPPING", value)
    with pytest.raises(ImproperlyConfigured, match="MAPPING") as refusal:
        reader("MAPPING")
    assert named in str(refusal.value)


def start(**environment: str) -> subprocess.CompletedProcess[str]:
    """`manage.py check` with these variables (and none of the sign-in ones inherited)."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("TRIAGE_OIDC_", "TRIAGE_LOCAL_LOGIN"))}  # fmt: skip
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        env={**env, "DJANGO_DEBUG": "1", **environment}, timeout=120,
    )  # fmt: skip


def test_the_desk_does_not_start_with_a_bad_sign_in_setting() -> None:
    oidc = {"TRIAGE_OIDC_ISSUER": "https://idp.example.com/realms/desk",
            "TRIAGE_OIDC_CLIENT_ID": "desk", "TRIAGE_OIDC_CLIENT_SECRET": "s"}  # fmt: skip
    cases = [
        ({**oidc, "TRIAGE_OIDC_TEAM_GROUPS": "checkout:operator=ops;search=all"},
         "TRIAGE_OIDC_TEAM_GROUPS: 'search=all' must read team:role=group,group."),
        (oidc, "Set TRIAGE_OIDC_ROLE_GROUPS or TRIAGE_OIDC_TEAM_GROUPS"),
        ({**oidc, "TRIAGE_OIDC_ISSUER": "http://idp.example.com", "TRIAGE_OIDC_ROLE_GROUPS":
          "admin=a"}, "TRIAGE_OIDC_ISSUER must be an https:// URL"),
        ({"TRIAGE_LOCAL_LOGIN": "0"}, "TRIAGE_LOCAL_LOGIN=0 needs OpenID Connect"),
    ]  # fmt: skip
    for environment, message in cases:
        started = start(**environment)
        assert started.returncode != 0 and message in started.stderr, started.stderr[-800:]
    assert start(**oidc, TRIAGE_OIDC_ROLE_GROUPS="admin=a", TRIAGE_LOCAL_LOGIN="0").returncode == 0
