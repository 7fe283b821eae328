"""Nothing of another team leaks: every URL pattern of the project, walked as a member of
team A, over a world whose every object belongs to team B.

The world is the URL matrix's (tests/security/test_url_matrix.py: one of everything a URL
points at). Here team B owns every collection in it, and the person walking is an admin of
team A only (every permission a team role grants, on A's collections). So:
- a URL that points at one of B's things (by id, or by a collection name in the path) answers
  404, not 403, so ids and names do not leak (403 only where the person lacks the
  permission whatever the object: keys, channels, Django's admin);
- every other page, API answer, export and htmx partial answers without naming any of B's
  collections;
- a POST that is not about one of B's things changes none of B's rows (a bulk action by
  query, say).

A new URL pattern is walked here the day it is added (the matrix makes every pattern have a
row), so a page without the team filter fails this test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import CharField
from django.test import Client

from organisation.models import Membership, OwnedCollection, Team
from tests.security import test_url_matrix as matrix
from tests.security.test_url_matrix import CSRF_SECRET, MATRIX, Row, World

# The matrix's world (built once per module) and its quiet queue, used here by name.
world = matrix.world
no_queue_and_fast_sign_in = matrix.no_queue_and_fast_sign_in

pytestmark = pytest.mark.django_db

# Rows whose permission no team role grants: a team-A admin is refused them whatever the
# object (organisation.roles.NOT_FROM_TEAMS, and Django's admin is for superusers).
NOT_FOR_TEAM_ROLES = (
    "triage:apikey-create",
    "triage:apikey-revoke",
    "triage:apikey-scope",
    "alerts:channel-create",
    "alerts:channel-edit",
    "alerts:channel-test",
    "alerts:channel-delete",
)


# Rows whose URL carries an id of something no team owns: a person's bulk action (its undo
# restores only groups the person may act on; the rows check below says it changed none of
# B's).
NOT_OWNED_BY_A_TEAM = ("triage:bulk-undo",)


def collection_columns() -> list[tuple[Any, str]]:
    """Every (model, field) that holds a collection name: the columns a team owns by."""
    from qualitylab.models import Collection

    columns: list[tuple[Any, str]] = [(Collection, "name")]
    for model in apps.get_models():
        for model_field in model._meta.concrete_fields:
            if model_field.name == "collection" and isinstance(model_field, CharField):
                columns.append((model, "collection"))
    return columns


def world_collections() -> set[str]:
    names: set[str] = set()
    for model, column in collection_columns():
        if model is OwnedCollection:
            continue
        names.update(model._default_manager.values_list(column, flat=True))
    names.discard("")
    return names


@pytest.fixture(scope="module")
def walker(world: World, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """Team B owns the world; a team-A admin walks it. Made after the world, removed first."""
    with django_db_blocker.unblock():
        names = world_collections()
        team_b = Team.objects.create(name="leaks-B")
        team_a = Team.objects.create(name="leaks-A")
        for name in names:
            OwnedCollection.objects.create(collection=name, team=team_b)
        OwnedCollection.objects.create(collection="leaks-alpha", team=team_a)
        person = get_user_model().objects.create_user("leaks-a-admin")
        Membership.objects.create(team=team_a, person=person, role="admin")
        client = Client()
        client.force_login(person)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
    yield {"names": names, "session": session}
    with django_db_blocker.unblock():
        person.delete()
        OwnedCollection.objects.filter(team__in=[team_a, team_b]).delete()
        team_a.delete()
        team_b.delete()


def points_at_b(row: Row, world: World, names: set[str]) -> bool:
    """Whether the row's URL names one of B's things: it changes with the world's ids, or it
    carries a collection name."""
    moved = World(sessions=world.sessions, keys=world.keys,
                  ids={key: value + 7_000_000 for key, value in world.ids.items()})  # fmt: skip
    url = row.url(world)
    if row.url(moved) != url:
        return True
    path, _, query = url.partition("?")
    return any(f"/{name}/" in path or f"={name}" in query for name in names)


def send_as_member(world: World, row: Row, method: str, session: str, *, htmx: bool) -> Any:
    client = Client(enforce_csrf_checks=True)
    client.cookies[settings.SESSION_COOKIE_NAME] = session
    client.cookies[settings.CSRF_COOKIE_NAME] = CSRF_SECRET
    headers = {"X-CSRFToken": CSRF_SECRET}
    if htmx:
        headers["HX-Request"] = "true"
    url = row.url(world)
    if method == "GET":
        return client.get(url, headers=headers)
    if row.json:
        return client.post(url, json.dumps(row.body(world)), content_type="application/json",
                           headers=headers)  # fmt: skip
    return client.post(url, row.body(world), headers=headers)


def b_rows(names: set[str]) -> dict[str, list[str]]:
    """B's rows of every table with a collection column, as values: what a POST by a member
    of team A may not change."""
    return {
        model._meta.label: sorted(
            map(repr, model._default_manager.filter(**{f"{column}__in": names}).values_list())
        )
        for model, column in collection_columns()
        if model is not OwnedCollection
    }


def _cases() -> list[Any]:
    cases = []
    for key, row in MATRIX.items():
        if row.kind in ("admin", "open-api") or key in ("login", "logout", "set_language"):
            continue
        if row.kind == "api" and row.get is None:
            continue  # ingest doors take keys, not people (their scope: test_keys_scope)
        for method in row.methods():
            cases.append(pytest.param(key, method, id=f"{key} {method}"))
    return cases


# Texts of the project that use a world's name as an example, not as data.
STATIC_EXAMPLES = ("QUALITYLAB_SECRET_SHOP for shop",)


def named(body: bytes, names: set[str], *, asked: str = "") -> list[str]:
    """B's names in a body, as whole names (``shop`` in ``shop_openapi.yaml``, a file name
    in a help text, is not the collection); a name the request itself asked for is left out
    where the page echoes the request (its search box, its own links, "no match for ...")."""
    text = body.decode("utf-8", "replace")
    for example in STATIC_EXAMPLES:
        text = text.replace(example, "")
    if asked:
        for echo in (f'value="{asked}"', f"={asked}", f"%3D{asked}", f'"{asked}"', f"“{asked}”"):
            text = text.replace(echo, "")
    found = []
    for name in names:
        match = re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w/-]|\.\w)", text)
        if match:
            found.append(f"{name}: ...{text[max(0, match.start() - 80) : match.end() + 40]}...")
    return sorted(found)


def fixed(url: str) -> Callable[[World], str]:
    return lambda world: url


def searched(url: str, name: str) -> list[str]:
    """The URL asking for B's name by search and by filter, over the widest window."""
    joiner = "&" if "?" in url else "?"
    return [
        f"{url}{joiner}q={name}&window=30d&status=any",
        f"{url}{joiner}collection={name}&window=30d&status=any",
    ]


@pytest.mark.parametrize(("key", "method"), _cases())
def test_nothing_of_team_b_leaks(
    world: World, walker: dict[str, Any], key: str, method: str
) -> None:
    row = MATRIX[key]
    names: set[str] = walker["names"]
    before = b_rows(names) if method == "POST" else None
    for htmx in (False, True) if method == "GET" else (False,):
        response = send_as_member(world, row, method, walker["session"], htmx=htmx)
        status = response.status_code
        assert status < 500, (status, response.content[:300])
        if key in NOT_FOR_TEAM_ROLES:
            assert status in (403, 404), (status, response.content[:300])
        elif points_at_b(row, world, names) and key not in NOT_OWNED_BY_A_TEAM:
            assert status == 404 or (method == "GET" and "?" in row.url(world) and status == 200), (
                status,
                response.content[:300],
            )
        if status < 300 and not getattr(response, "streaming", False):
            assert not named(response.content, names), named(response.content, names)
    if before is not None:
        assert b_rows(names) == before, "a POST by a member of team A changed team B's rows"
    if method == "GET" and not points_at_b(row, world, names):
        for name in sorted(names):
            for url in searched(row.url(world), name):
                response = send_as_member(
                    world, replace(row, url=fixed(url)), method, walker["session"], htmx=False
                )
                assert response.status_code < 500, (url, response.status_code)
                if response.status_code < 300 and not getattr(response, "streaming", False):
                    assert not named(response.content, names, asked=name), (
                        url, named(response.content, names, asked=name)
                    )  # fmt: skip


def test_the_walk_covers_the_world(walker: dict[str, Any]) -> None:
    # The walk itself: every kind of page is in it, and B owns names the pages would show.
    assert len(_cases()) > 60
    assert {"shop"} <= walker["names"]
