"""Who may use which URL: every URL pattern of the project, by every kind of principal.

``MATRIX`` is written by hand from the design (DESIGN.md section 6, docs/pages/
and "Sending failures"), not from the code it checks: viewers read, operators act on groups,
reconcile receipts, edit tool policies, run Quality Lab and manage alert rules and webhook
channels, reviewers decide on learning suggestions, admins do all of it and manage API keys,
tool policies and email channels; the Django admin is
for superusers; the API takes a key with the right scope (reads also a signed-in person who
holds a role), and pages never take a key.

The first two tests keep the table honest: a URL pattern the table does not list fails (a new
view needs a decision here), and so does a row whose pattern is gone. Then every (pattern,
method, principal) is one test, with real objects behind every URL so each view runs.

An outcome is what the response says about the permission check:
- ``OK``: it passed. A 2xx, a redirect that is not to a sign-in page, or a 400 form error
  (the body was read, so the permission check had already passed).
- ``SIGN_IN`` / ``ADMIN_SIGN_IN``: a 302 to the site's (or the admin's) sign-in with ``next``.
- ``E401``: the API wants credentials (none, unknown, expired or revoked).
- ``E403``: forbidden (no role, no permission, a key without the scope, no CSRF token).
- ``E404``, ``E405``: as the status says. A 5xx is never an outcome: the test fails.

Principals: anonymous; signed in with no role, viewer, operator, reviewer, admin (the role)
and superuser; API keys with the ingest scope, the read scope, both, none, and expired or
revoked ones (both scopes). The Django admin's per-model pages use a representative subset
(``ADMIN_MODEL_PRINCIPALS``). Every client enforces CSRF like a browser: everyone sends a
valid token, so a refusal is the permission check's; ``superuser-without-csrf`` sends none,
and every POST of it must be refused.

A method a URL does not answer (PUT, PATCH, DELETE, and GET or POST where the table has
none) is 405; the API asks who is calling first (401 when nobody is).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, connection
from django.db.models import ProtectedError
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone

from fixes.models import Fix
from learning import services as learning_services
from learning.models import LearningAttempt, Review, Suggestion
from organisation.roles import ensure_role_group
from qualitylab import demo
from qualitylab import services as lab
from qualitylab.models import CaseResult
from tests.factories import case_post, failure_item, receipt_item
from tests.learning.conftest import attempt_item
from triage.intake.ingest import batch_ingest
from triage.models import (
    ApiKey,
    BulkAction,
    FailureGroup,
    IngestBatch,
    Receipt,
    RetentionRun,
    ToolPolicy,
)
from triage.services import api_key_create, api_key_revoke

# --- outcomes and principals -----------------------------------------------------------------

OK = "ok"
SIGN_IN = "sign-in"
ADMIN_SIGN_IN = "admin sign-in"
E401 = "401"
E403 = "403"
E404 = "404"
E405 = "405"

ANONYMOUS = "anonymous"
NO_ROLE = "no-role"
VIEWER = "viewer"
OPERATOR = "operator"
REVIEWER = "reviewer"
ADMIN = "admin"
SUPERUSER = "superuser"
NO_CSRF = "superuser-without-csrf"  # POSTs only
KEY_INGEST = "key:ingest"
KEY_READ = "key:read"
KEY_BOTH = "key:ingest+read"
KEY_NONE = "key:no-scope"
KEY_EXPIRED = "key:expired"
KEY_REVOKED = "key:revoked"

PEOPLE = (NO_ROLE, VIEWER, OPERATOR, REVIEWER, ADMIN, SUPERUSER)
KEYS = (KEY_INGEST, KEY_READ, KEY_BOTH, KEY_NONE, KEY_EXPIRED, KEY_REVOKED)
PRINCIPALS = (ANONYMOUS, *PEOPLE, *KEYS)
# The admin's model pages let in staff only (no role is staff), whatever the roles or an
# Authorization header say: the weakest and the strongest person without staff, and a key,
# stand for the rest there, so its 79 model pages cost ~700 requests instead of ~1,800.
ADMIN_MODEL_PRINCIPALS = (ANONYMOUS, NO_ROLE, ADMIN, SUPERUSER, KEY_BOTH)

# Who may do what, by the design (not read from organisation/roles.py).
READERS = {VIEWER, OPERATOR, REVIEWER, ADMIN, SUPERUSER}
OPERATORS = {OPERATOR, ADMIN, SUPERUSER}
REVIEWERS = {REVIEWER, ADMIN, SUPERUSER}
ADMINS = {ADMIN, SUPERUSER}

Outcomes = dict[str, str]


def page(allowed: set[str]) -> Outcomes:
    """A page: sign in first (a key is not a sign-in), then the role decides."""
    outcomes = {ANONYMOUS: SIGN_IN, **dict.fromkeys(KEYS, SIGN_IN), NO_CSRF: E403}
    outcomes.update({person: OK if person in allowed else E403 for person in PEOPLE})
    return outcomes


def public() -> Outcomes:
    """Anyone, signed in or not; an Authorization header means nothing to a page."""
    return {**dict.fromkeys(PRINCIPALS, OK), NO_CSRF: E403}


def api(scope: str, *, readers: set[str] | None) -> Outcomes:
    """An API view: a valid key with the scope, or (``readers``) a signed-in person with a
    role. ``readers=None``: sessions are not credentials here at all (401)."""
    outcomes = {
        ANONYMOUS: E401,
        KEY_INGEST: OK if scope == "ingest" else E403,
        KEY_READ: OK if scope == "read" else E403,
        KEY_BOTH: OK,
        KEY_NONE: E403,
        KEY_EXPIRED: E401,
        KEY_REVOKED: E401,
        # A session is checked for its CSRF token only where sessions count at all.
        NO_CSRF: E401 if readers is None else E403,
    }
    for person in PEOPLE:
        outcomes[person] = E401 if readers is None else OK if person in readers else E403
    return outcomes


def public_api() -> Outcomes:
    """The API's description: anyone, but a bad key is refused wherever it is sent."""
    return {**public(), KEY_EXPIRED: E401, KEY_REVOKED: E401}


def django_admin(superuser: str = OK) -> Outcomes:
    """Django's admin: superusers only (no role is staff); the rest go to its sign-in."""
    outcomes = {**dict.fromkeys(PRINCIPALS, ADMIN_SIGN_IN), NO_CSRF: E403}
    outcomes[SUPERUSER] = superuser
    return outcomes


def audit_api() -> Outcomes:
    """The audit of people's actions: admins signed in; no API key, whatever its scopes."""
    outcomes = {**api("read", readers=ADMINS), KEY_READ: E403, KEY_BOTH: E403}
    return outcomes


# --- the objects behind the URLs -------------------------------------------------------------


@dataclass
class World:
    """Ids of one of everything a URL points at, and the credentials of every principal."""

    sessions: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)

    def __getattr__(self, name: str) -> int:
        try:
            return self.__dict__["ids"][name]
        except KeyError:
            raise AttributeError(name) from None


def spec_text() -> str:
    return demo.SPEC_PATH.read_text()


POLICY_POST = {
    "collection": "shop",
    "tool": "getOrder",
    "side_effect": "external_write",
    "timeout_before_send_lane": "retry_safe",
    "timeout_after_send_lane": "reconcile_first",
    "retry_max_attempts": "2",
    "retry_budget_failures": "3",
    "retry_budget_window_seconds": "300",
}
SIGN_IN_POST = {"username": "mtx-nobody-by-that-name", "password": "not-the-password"}


def _team(world: World) -> dict[str, int]:
    """A team with a member and a collection, made inside the test's transaction: a team in
    the shared world would filter every other row's page (organisation.access)."""
    from organisation.models import Membership, OwnedCollection, Team

    team, _ = Team.objects.get_or_create(name="mtx-team")
    member, _ = Membership.objects.get_or_create(
        team=team,
        person=get_user_model().objects.get(username="mtx-bystander"),
        defaults={"role": "viewer"},
    )
    owned, _ = OwnedCollection.objects.get_or_create(team=team, collection="mtx-owned")
    return {"team": team.pk, "membership": member.pk, "owned": owned.pk}


def _build_world() -> World:
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    world = World()
    ids = world.ids
    users = get_user_model().objects
    people: dict[str, Any] = {NO_ROLE: users.create_user("mtx-no-role")}
    for role in (VIEWER, OPERATOR, REVIEWER, ADMIN):
        people[role] = users.create_user(f"mtx-{role}")
        people[role].groups.add(ensure_role_group(role))
    people[SUPERUSER] = users.create_superuser("mtx-superuser", "root@example.invalid", None)
    for principal, user in people.items():
        client = Client()
        client.force_login(user)
        world.sessions[principal] = client.cookies[settings.SESSION_COOKIE_NAME].value
    world.sessions[NO_CSRF] = world.sessions[SUPERUSER]
    ids["bystander"] = users.create_user("mtx-bystander").pk
    ids["bystander_group"] = Group.objects.create(name="mtx-bystanders").pk

    for principal, scopes in ((KEY_INGEST, ["ingest"]), (KEY_READ, ["read"]),
                              (KEY_BOTH, ["ingest", "read"]), (KEY_NONE, ["read"]),
                              (KEY_EXPIRED, ["ingest", "read"]),
                              (KEY_REVOKED, ["ingest", "read"])):  # fmt: skip
        api_key, world.keys[principal] = api_key_create(name=f"mtx-{principal[4:]}", scopes=scopes)
        if principal == KEY_NONE:  # the service refuses no scope; an edited row may have none
            ApiKey.objects.filter(pk=api_key.pk).update(scopes=[])
        elif principal == KEY_EXPIRED:
            ApiKey.objects.filter(pk=api_key.pk).update(
                expires_at=timezone.now() - timedelta(seconds=1)
            )
        elif principal == KEY_REVOKED:
            api_key_revoke(api_key=api_key)
    ids["key"] = api_key_create(name="mtx-target", scopes=["ingest"])[0].pk

    # Quality Lab: a built collection, two search cases (one fails), a suite, a finished run
    # with results and a queued one. The worker's tasks are run here or not at all.
    with mock.patch("qualitylab.services._send"):
        collection, version = lab.collection_create(name="shop", spec_text=spec_text())
        ids["collection"] = collection.pk
        lab.version_build(version_id=version.pk)
        collection.refresh_from_db()
        cases = [case for case in demo.load_case_data()
                 if case["id"] in {"search-coupons-en", "search-money-back-none"}]  # fmt: skip
        assert lab.cases_import(collection=collection, documents=cases).errors == []
        lab.suite_save(collection=collection, name="smoke", case_ids=["search-coupons-en"])
        finished = lab.run_start(collection=collection)
        lab.run_execute(run_id=finished.pk)
        ids["finished_run"] = finished.pk
        ids["queued_run"] = lab.run_start(collection=collection).pk
    result = CaseResult.objects.filter(run_id=finished.pk).first()
    assert result is not None
    ids["result"] = result.pk

    # Triage: a group, a receipt waiting for reconciliation, a bulk action, a tool policy.
    batch_ingest(
        owner="mtx",
        items=[
            failure_item("mtx-f1", occurred_at=timezone.now().isoformat()),
            receipt_item("mtx-r1", result="uncertain", execution_state="started_unknown"),
        ],
    )
    ids["group"] = FailureGroup.objects.get(reason="http_5xx").pk
    ids["fix"] = Fix.objects.create(group_id=ids["group"], kind="other").pk
    ids["receipt"] = Receipt.objects.get().pk
    ids["bulk"] = BulkAction.objects.create(action="acknowledge", group_count=0, previous={}).pk
    ids["group_action"] = BulkAction.objects.create(
        action="acknowledge", group_count=1, previous={str(ids["group"]): {}}
    ).pk
    ids["policy"] = ToolPolicy.objects.create(collection="shop", tool="getOrder").pk
    ids["batch"] = IngestBatch.objects.filter(owner="mtx").get().pk
    ids["policy_type"] = ContentType.objects.get_for_model(ToolPolicy).pk
    ids["retention_run"] = RetentionRun.objects.create(
        channel="cli", days=30, cutoff=timezone.now(), batch_size=1000
    ).pk

    # Learning: two successful attempts make a promotable suggestion; a rejected one leaves
    # a review row.
    def derive(*, kwargs: dict[str, Any], retry: bool) -> None:
        learning_services.suggestions_derive(**kwargs)

    with mock.patch("learning.tasks.derive_suggestions.apply_async", side_effect=derive):
        batch_ingest(owner="mtx", items=[attempt_item("mtx-a1"), attempt_item("mtx-a2")])
    ids["suggestion"] = Suggestion.objects.get(type="target_preference").pk
    learning_services.suggestion_reject(
        suggestion=Suggestion.objects.get(type="plan_path"),
        reviewer=people[REVIEWER],
        reason="unstable_target",
        note="two paths",
    )
    ids["review"] = Review.objects.get().pk
    first_attempt = LearningAttempt.objects.first()
    assert first_attempt is not None
    ids["attempt"] = first_attempt.pk

    # Alerts: an email channel (no address to resolve) and a rule sending to it; a webhook
    # whose test is refused before anything is sent (a loopback port nothing listens on).
    from alerts import services as alert_services
    from alerts.models import Channel

    channel, _ = alert_services.channel_create(
        name="mtx-mail", kind="email", target="oncall@example.com"
    )
    ids["alert_channel"] = channel.pk
    ids["alert_webhook"] = Channel.objects.create(
        name="mtx-hook", kind="webhook", target="http://127.0.0.1:9/mtx",
        signing_secret=Channel.new_signing_secret(),
    ).pk  # fmt: skip
    ids["alert_rule"] = alert_services.rule_create(
        name="mtx-new", kind="new_group", channels=[channel]
    ).pk

    # Sign-in records for the admin's axes pages.
    ids["access_attempt"] = AccessAttempt.objects.create(
        username="mtx", ip_address="127.0.0.1", user_agent="pytest", path_info="/accounts/login/",
        get_data="", post_data="", http_accept="*/*", failures_since_start=1,
    ).pk  # fmt: skip
    ids["access_log"] = AccessLog.objects.create(
        username="mtx", ip_address="127.0.0.1", user_agent="pytest", path_info="/accounts/login/",
        http_accept="*/*",
    ).pk  # fmt: skip
    ids["access_failure_log"] = AccessFailureLog.objects.create(
        username="mtx", ip_address="127.0.0.1", user_agent="pytest", path_info="/accounts/login/",
        http_accept="*/*",
    ).pk  # fmt: skip
    return world


def _row_ids() -> dict[Any, set[Any]]:
    tables = set(connection.introspection.table_names())
    return {
        model: set(model._default_manager.values_list("pk", flat=True))
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy and model._meta.db_table in tables
    }


def _delete_rows_since(before: dict[Any, set[Any]]) -> None:
    """Delete every row the world added, in whatever order the foreign keys allow."""
    for _ in range(10):
        left = False
        for model, kept in before.items():
            added = model._default_manager.exclude(pk__in=kept)
            if not added.exists():
                continue
            try:
                added.delete()
            except (ProtectedError, IntegrityError):
                left = True
        if not left:
            return
    raise AssertionError("the URL matrix could not delete the rows it added")


@pytest.fixture(scope="module")
def world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[World]:
    """Built once and committed; every test runs in a transaction that is rolled back, so a
    POST that is allowed changes nothing the next test sees."""
    with django_db_blocker.unblock():
        before = _row_ids()
        try:
            built = _build_world()
        except BaseException:
            _delete_rows_since(before)
            raise
    yield built
    with django_db_blocker.unblock():
        _delete_rows_since(before)


@pytest.fixture(scope="module", autouse=True)
def no_queue_and_fast_sign_in() -> Iterator[None]:
    """An allowed POST may queue a task: it is not sent anywhere. A failed sign-in still
    hashes the password (against timing attacks): with the fastest hasher here."""
    with (
        mock.patch("qualitylab.services._send"),
        mock.patch("learning.tasks.derive_suggestions.apply_async"),
        override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]),
    ):
        yield


# --- the matrix ------------------------------------------------------------------------------

Body = Callable[[World], dict[str, Any]]


@dataclass(frozen=True)
class Row:
    """One URL pattern: a concrete URL, and per method it answers, the outcome by principal.
    ``kind`` says how it refuses a method it does not answer (see the last test)."""

    url: Callable[[World], str]
    get: Outcomes | None = None
    post: Outcomes | None = None
    body: Body = lambda world: {}
    json: bool = False
    # page | api | open-api (the schema and its docs) | admin (Django's: its methods are its own)
    kind: str = "page"
    principals: tuple[str, ...] = PRINCIPALS

    def methods(self) -> dict[str, Outcomes]:
        answered = {"GET": self.get, "POST": self.post}
        return {method: outcomes for method, outcomes in answered.items() if outcomes}


def _upload(name: str, content: Any) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, json.dumps(content).encode(), "application/json")


# One failing tool call in OTLP's JSON mapping (POST /v1/traces).
OTLP_SPAN = {"resourceSpans": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "mtx"}}]},
    "scopeSpans": [{"spans": [{
        "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
        "name": "execute_tool getOrder", "status": {"code": 2, "message": "HTTP 503"},
        "attributes": [{"key": "http.response.status_code", "value": {"intValue": "503"}}],
    }]}],
}]}  # fmt: skip


SITE: dict[str, Row] = {
    "healthz": Row(lambda w: "/healthz", get=public()),
    "login": Row(lambda w: "/accounts/login/", get=public(), post=public(),
                 body=lambda w: SIGN_IN_POST),
    "logout": Row(lambda w: "/accounts/logout/", post=public()),
    # OpenID Connect sign-in (config/oidc.py): anyone while it is on (tests/oidc/); off here,
    # where its two doors are 404. Its sign-out is the site's, reached by POST.
    "oidc_authentication_init": Row(lambda w: "/oidc/authenticate/",
                                    get=dict.fromkeys(PRINCIPALS, E404)),
    "oidc_authentication_callback": Row(lambda w: "/oidc/callback/?code=mtx&state=mtx",
                                        get=dict.fromkeys(PRINCIPALS, E404)),
    "oidc_logout": Row(lambda w: "/oidc/logout/", post=public()),
    # The header's language switch: anyone (a signed-in person's choice is also stored).
    "set_language": Row(lambda w: "/i18n/setlang/", post=public(),
                        body=lambda w: {"language": "ko", "next": "/"}),
    "api-schema": Row(lambda w: "/api/schema/", get=public_api(), kind="open-api"),
    "api-docs": Row(lambda w: "/api/docs/", get=public_api(), kind="open-api"),
    "api:api-ingest": Row(lambda w: "/api/v1/ingest", post=api("ingest", readers=None),
                          body=lambda w: {"items": [failure_item("mtx-ingest-1")]}, json=True,
                          kind="api"),
    # Runtimes and CI declare a deployment with the key they ingest with.
    "api:api-releases": Row(lambda w: "/api/v1/releases", post=api("ingest", readers=None),
                            body=lambda w: {"collection": "mtx", "version": "1.0",
                                            "deployed_at": "2026-03-02T09:00:00Z"},
                            json=True, kind="api"),
    "otlp-traces": Row(lambda w: "/v1/traces", post=api("ingest", readers=None),
                       body=lambda w: OTLP_SPAN, json=True, kind="api"),
    "api:api-failures": Row(lambda w: "/api/v1/failures", get=api("read", readers=READERS),
                            kind="api"),
    "api:api-groups": Row(lambda w: "/api/v1/groups", get=api("read", readers=READERS),
                          kind="api"),
    # The vocabulary runtimes classify with: their ingest key reads it too.
    "api:api-taxonomy": Row(lambda w: "/api/v1/taxonomy",
                            get={**api("read", readers=READERS), KEY_INGEST: OK}, kind="api"),
    "api:api-tool-policies": Row(lambda w: "/api/v1/tool-policies?collection=shop",
                                 get={**api("read", readers=READERS), KEY_INGEST: OK},
                                 kind="api"),
    "api-contracts": Row(lambda w: "/api/v1/contracts", get=api("read", readers=READERS),
                         kind="api"),
    "api-fixes": Row(lambda w: "/api/v1/fixes", get=api("read", readers=READERS), kind="api"),
    "api-audit": Row(lambda w: "/api/v1/audit", get=audit_api(), kind="api"),
    "learning-api:suggestions": Row(lambda w: "/api/v1/learning/suggestions?collection=bo-dev",
                                    get=api("read", readers=READERS), kind="api"),
    # Triage
    "triage:home": Row(lambda w: "/", get=page(READERS)),
    "triage:group": Row(lambda w: f"/triage/groups/{w.group}/", get=page(READERS)),
    "triage:group-act": Row(lambda w: f"/triage/groups/{w.group}/act", post=page(OPERATORS),
                            body=lambda w: {"action": "acknowledge"}),
    "triage:group-runbook": Row(lambda w: f"/triage/groups/{w.group}/runbook",
                                post=page(OPERATORS),
                                body=lambda w: {"subject": "reason",
                                                "url": "https://wiki.example.com/5xx"}),
    "triage:bulk": Row(lambda w: "/triage/bulk", post=page(OPERATORS),
                       body=lambda w: {"action": "acknowledge", "confirm_count": "1",
                                       "query": "window=24h"}),
    "triage:bulk-undo": Row(lambda w: f"/triage/bulk/{w.bulk}/undo", post=page(OPERATORS)),
    "triage:group-undo": Row(lambda w: f"/triage/groups/{w.group}/undo/{w.group_action}",
                             post=page(OPERATORS)),
    "triage:receipts": Row(lambda w: "/receipts/", get=page(READERS)),
    "contracts:home": Row(lambda w: "/contracts/", get=page(READERS)),
    "fixes:home": Row(lambda w: "/fixes/", get=page(READERS)),
    "fixes:resolve": Row(lambda w: f"/fixes/resolve/{w.group}", post=page(OPERATORS),
                         body=lambda w: {"action": "resolve", "fix_kind": "other"}),
    "fixes:verify": Row(lambda w: f"/fixes/{w.fix}/verify", post=page(OPERATORS)),
    "contracts:findings": Row(lambda w: "/contracts/findings", get=page(READERS)),
    "triage:receipt-reconcile": Row(lambda w: f"/receipts/{w.receipt}/reconcile",
                                    post=page(OPERATORS),
                                    body=lambda w: {"finding": "applied", "note": "in the log"}),
    "triage:ingestion": Row(lambda w: "/ingestion/", get=page(READERS)),
    "triage:apikey-create": Row(lambda w: "/ingestion/keys/new", post=page(ADMINS),
                                body=lambda w: {"name": "mtx-new", "scopes": "ingest"}),
    "triage:apikey-revoke": Row(lambda w: f"/ingestion/keys/{w.key}/revoke", post=page(ADMINS)),
    "triage:apikey-scope": Row(lambda w: f"/ingestion/keys/{w.key}/scope", post=page(ADMINS),
                               body=lambda w: {"collections": "shop"}),
    "triage:preferences": Row(lambda w: "/preferences/", get=page(READERS), post=page(READERS),
                              body=lambda w: {"time_zone": "Asia/Seoul"}),
    "triage:policies": Row(lambda w: "/policies/", get=page(READERS)),
    "triage:policy-create": Row(lambda w: "/policies/new", get=page(ADMINS), post=page(ADMINS),
                                body=lambda w: {**POLICY_POST, "tool": "mtxNewTool"}),
    "triage:policy-edit": Row(lambda w: f"/policies/{w.policy}/edit", get=page(OPERATORS),
                              post=page(OPERATORS), body=lambda w: POLICY_POST),
    # Quality Lab
    "qualitylab:home": Row(lambda w: "/qualitylab/", get=page(READERS)),
    "qualitylab:collection-create": Row(lambda w: "/qualitylab/collections/new",
                                        post=page(OPERATORS),
                                        body=lambda w: {"name": "another",
                                                        "spec_paste": spec_text()}),
    "qualitylab:case-from-group": Row(lambda w: f"/qualitylab/cases/new?group={w.group}",
                                      get=page(OPERATORS), post=page(OPERATORS),
                                      body=lambda w: {**case_post(), "group": w.group,
                                                      "collection": "shop"}),
    "qualitylab:run": Row(lambda w: f"/qualitylab/runs/{w.finished_run}/", get=page(READERS)),
    "qualitylab:run-cancel": Row(lambda w: f"/qualitylab/runs/{w.queued_run}/cancel",
                                 post=page(OPERATORS)),
    "qualitylab:run-rerun-failed": Row(lambda w: f"/qualitylab/runs/{w.finished_run}/rerun-failed",
                                       post=page(OPERATORS)),
    "qualitylab:result": Row(lambda w: f"/qualitylab/results/{w.result}/", get=page(READERS)),
    "qualitylab:collection": Row(lambda w: "/qualitylab/shop/", get=page(READERS)),
    "qualitylab:collection-rebuild": Row(lambda w: "/qualitylab/shop/rebuild",
                                         post=page(OPERATORS)),
    "qualitylab:collection-spec": Row(lambda w: "/qualitylab/shop/spec", get=page(OPERATORS),
                                      post=page(OPERATORS),
                                      body=lambda w: {"spec_paste": spec_text()}),
    "qualitylab:collection-settings": Row(lambda w: "/qualitylab/shop/settings",
                                          get=page(OPERATORS), post=page(OPERATORS),
                                          body=lambda w: {"title": "Shop"}),
    "qualitylab:run-start": Row(lambda w: "/qualitylab/shop/runs/start", post=page(OPERATORS),
                                body=lambda w: {"repeat": "1"}),
    "qualitylab:case-create": Row(lambda w: "/qualitylab/shop/cases/new", get=page(OPERATORS),
                                  post=page(OPERATORS), body=lambda w: case_post()),
    "qualitylab:cases-import": Row(lambda w: "/qualitylab/shop/cases/import",
                                   get=page(OPERATORS), post=page(OPERATORS),
                                   body=lambda w: {"cases_file": _upload("cases.json", [
                                       {"id": "x", "mode": "search", "query": "orders"}])}),
    "qualitylab:cases-export": Row(lambda w: "/qualitylab/shop/cases/export.json",
                                   get=page(READERS)),
    "qualitylab:case-edit": Row(lambda w: "/qualitylab/shop/cases/search-coupons-en/edit",
                                get=page(OPERATORS), post=page(OPERATORS),
                                body=lambda w: {**case_post(), "case_id": "search-coupons-en",
                                                "mode": "search", "assertions": "",
                                                "provided_entities": ""}),
    "qualitylab:case-active": Row(lambda w: "/qualitylab/shop/cases/search-coupons-en/active",
                                  post=page(OPERATORS)),
    "qualitylab:suite-create": Row(lambda w: "/qualitylab/shop/suites/new", get=page(OPERATORS),
                                   post=page(OPERATORS),
                                   body=lambda w: {"name": "new-suite",
                                                   "cases": ["search-coupons-en"]}),
    "qualitylab:suite-edit": Row(lambda w: "/qualitylab/shop/suites/smoke/edit",
                                 get=page(OPERATORS), post=page(OPERATORS),
                                 body=lambda w: {"name": "smoke", "cases": []}),
    # Alerts: everyone reads; operators edit rules and create, edit, test and delete webhook
    # channels; email channels are admins' (EMAIL_CHANNEL below). An operator posting an email
    # channel passes the permission check and gets a form error (400).
    "alerts:home": Row(lambda w: "/alerts/", get=page(READERS)),
    "alerts:rule-create": Row(lambda w: "/alerts/rules/new", post=page(OPERATORS),
                              body=lambda w: {"name": "mtx-rule", "kind": "new_group",
                                              "channels": [w.alert_channel],
                                              "min_interval_minutes": "60"}),
    "alerts:rule-edit": Row(lambda w: f"/alerts/rules/{w.alert_rule}/edit", get=page(OPERATORS),
                            post=page(OPERATORS),
                            body=lambda w: {"name": "mtx-new", "kind": "regression",
                                            "channels": [w.alert_channel],
                                            "min_interval_minutes": "30"}),
    "alerts:rule-delete": Row(lambda w: f"/alerts/rules/{w.alert_rule}/delete",
                              post=page(OPERATORS)),
    "alerts:channel-create": Row(lambda w: "/alerts/channels/new", post=page(OPERATORS),
                                 body=lambda w: {"name": "mtx-hook-2",
                                                 "target": "https://93.184.215.14/hook"}),
    "alerts:channel-edit": Row(lambda w: f"/alerts/channels/{w.alert_webhook}/edit",
                               get=page(OPERATORS), post=page(OPERATORS),
                               body=lambda w: {"target": "https://93.184.215.14/other"}),
    "alerts:channel-test": Row(lambda w: f"/alerts/channels/{w.alert_webhook}/test",
                               post=page(OPERATORS)),
    "alerts:channel-delete": Row(lambda w: f"/alerts/channels/{w.alert_webhook}/delete",
                                 post=page(OPERATORS)),
    # Learning: reviewers decide; a collection's learning policy is a collection setting.
    "learning:home": Row(lambda w: "/learning/", get=page(READERS)),
    "learning:suggestion": Row(lambda w: f"/learning/suggestions/{w.suggestion}/",
                               get=page(READERS)),
    "learning:suggestion-approve": Row(lambda w: f"/learning/suggestions/{w.suggestion}/approve",
                                       post=page(REVIEWERS),
                                       body=lambda w: {"reason": "wins every run"}),
    "learning:suggestion-reject": Row(lambda w: f"/learning/suggestions/{w.suggestion}/reject",
                                      post=page(REVIEWERS),
                                      body=lambda w: {"reason": "unstable_target",
                                                      "note": "two paths"}),
    "learning:suggestion-demote": Row(lambda w: f"/learning/suggestions/{w.suggestion}/demote",
                                      post=page(REVIEWERS),
                                      body=lambda w: {"reason": "hides the new endpoint"}),
    "learning:suggestion-reopen": Row(lambda w: f"/learning/suggestions/{w.suggestion}/reopen",
                                      post=page(REVIEWERS),
                                      body=lambda w: {"reason": "the target is stable now"}),
    "learning:policy": Row(lambda w: "/learning/collections/shop/policy", post=page(OPERATORS),
                           body=lambda w: {"learning_mode": "shadow"}),
    # Teams and the audit of people's actions: admins (the role outside teams) only.
    "organisation:teams": Row(lambda w: "/organisation/teams/", get=page(ADMINS)),
    "organisation:team-create": Row(lambda w: "/organisation/teams/new", post=page(ADMINS),
                                    body=lambda w: {"name": "mtx-new-team"}),
    "organisation:team": Row(lambda w: f"/organisation/teams/{_team(w)['team']}/",
                             get=page(ADMINS)),
    "organisation:team-rename": Row(lambda w: f"/organisation/teams/{_team(w)['team']}/rename",
                                    post=page(ADMINS), body=lambda w: {"name": "mtx-renamed"}),
    "organisation:team-delete": Row(lambda w: f"/organisation/teams/{_team(w)['team']}/delete",
                                    post=page(ADMINS)),
    "organisation:member-set": Row(lambda w: f"/organisation/teams/{_team(w)['team']}/members",
                                   post=page(ADMINS),
                                   body=lambda w: {"username": "mtx-no-role", "role": "viewer"}),
    "organisation:member-remove": Row(
        lambda w: "/organisation/teams/{team}/members/{membership}/remove".format(**_team(w)),
        post=page(ADMINS)),
    "organisation:collection-give": Row(
        lambda w: f"/organisation/teams/{_team(w)['team']}/collections", post=page(ADMINS),
        body=lambda w: {"collection": "mtx-given"}),
    "organisation:collection-take": Row(
        lambda w: "/organisation/teams/{team}/collections/{owned}/remove".format(**_team(w)),
        post=page(ADMINS)),
    "organisation:audit": Row(lambda w: "/organisation/audit/", get=page(ADMINS)),
}  # fmt: skip

# Django's admin, for superusers. Its own pages first, with what Django does for them.
ADMIN_SITE: dict[str, Row] = {
    "admin:index": Row(lambda w: "/admin/", get=django_admin()),
    # Its sign-in page is open; a signed-in superuser is sent on to the index.
    "admin:login": Row(lambda w: "/admin/login/", get=public(), post=public(),
                       body=lambda w: SIGN_IN_POST),
    # Signing out of the admin: people who are not staff are sent to its index.
    "admin:logout": Row(lambda w: "/admin/logout/", post=public()),
    "admin:password_change": Row(lambda w: "/admin/password_change/", get=django_admin(),
                                 post=django_admin()),
    "admin:password_change_done": Row(lambda w: "/admin/password_change/done/",
                                      get=django_admin()),
    # No model admin has autocomplete fields: Django refuses every lookup, even a superuser's.
    "admin:autocomplete": Row(lambda w: "/admin/autocomplete/", get=django_admin(E403)),
    "admin:jsi18n": Row(lambda w: "/admin/jsi18n/", get=django_admin()),
    # No model has a public URL of its own to redirect to.
    "admin:view_on_site": Row(lambda w: f"/admin/r/{w.policy_type}/{w.policy}/",
                              get=django_admin(E404)),
    "admin:app_list": Row(lambda w: "/admin/triage/", get=django_admin()),
    "admin/(?P<url>.*)$": Row(lambda w: "/admin/no-such-page/", get=django_admin(E404)),
}  # fmt: skip

# Every model in the admin, with what a superuser may do there: "edit" (Django's default),
# "no-add" (django-axes' sign-in records: looked at and cleared, never made by hand),
# "rename-only" (collections: made and set up on the Quality Lab page, renamed by an admin
# action; saving the change page changes nothing) or "read-only" (learning: decisions go
# through the review page, which keeps the history).
ADMIN_MODELS: dict[str, tuple[str, str]] = {
    "auth/group": ("bystander_group", "edit"),
    "auth/user": ("bystander", "edit"),
    "axes/accessattempt": ("access_attempt", "no-add"),
    "axes/accesslog": ("access_log", "no-add"),
    "axes/accessfailurelog": ("access_failure_log", "no-add"),
    "qualitylab/collection": ("collection", "rename-only"),
    "triage/toolpolicy": ("policy", "edit"),
    "triage/apikey": ("key", "edit"),
    "triage/failuregroup": ("group", "edit"),
    "triage/ingestbatch": ("batch", "edit"),
    "triage/retentionrun": ("retention_run", "read-only"),
    "learning/learningattempt": ("attempt", "read-only"),
    "learning/suggestion": ("suggestion", "read-only"),
    "learning/review": ("review", "read-only"),
}


def _admin_model_rows(model: str, object_key: str, access: str) -> dict[str, Row]:
    name = model.replace("/", "_")
    base = f"/admin/{model}/"
    add = OK if access == "edit" else E403
    write = E403 if access == "read-only" else OK
    delete = E403 if access in ("read-only", "rename-only") else OK

    def obj(suffix: str) -> Callable[[World], str]:
        return lambda world: f"{base}{getattr(world, object_key)}/{suffix}"

    def row(url: Callable[[World], str], **outcomes: Any) -> Row:
        return Row(url, kind="admin", principals=ADMIN_MODEL_PRINCIPALS, **outcomes)

    rows = {
        f"admin:{name}_changelist": row(lambda w: base, get=django_admin(), post=django_admin()),
        f"admin:{name}_add": row(lambda w: f"{base}add/", get=django_admin(add),
                                 post=django_admin(add)),
        f"admin:{name}_history": row(obj("history/"), get=django_admin()),
        f"admin:{name}_delete": row(obj("delete/"), get=django_admin(delete),
                                    post=django_admin(delete), body=lambda w: {"post": "yes"}),
        # A read-only model's change page shows the object; saving it is refused.
        f"admin:{name}_change": row(obj("change/"), get=django_admin(), post=django_admin(write)),
        f"admin/{model}/<path:object_id>/": row(obj(""), get=django_admin()),
    }  # fmt: skip
    if model == "auth/user":
        rows["admin:auth_user_password_change"] = row(
            obj("password/"), get=django_admin(), post=django_admin()
        )
    return rows


MATRIX: dict[str, Row] = {
    **SITE,
    **{key: replace(row, kind="admin") for key, row in ADMIN_SITE.items()},
}
for _model, (_object_key, _access) in ADMIN_MODELS.items():
    MATRIX.update(_admin_model_rows(_model, _object_key, _access))

# Patterns whose answer depends on the object they name, asked again on another object: an
# email channel is admins' where a webhook channel (MATRIX's rows) is operators' too.
EMAIL_CHANNEL: dict[str, Row] = {
    "alerts:channel-edit": Row(lambda w: f"/alerts/channels/{w.alert_channel}/edit",
                               get=page(ADMINS), post=page(ADMINS),
                               body=lambda w: {"target": "third@example.com"}),
    "alerts:channel-test": Row(lambda w: f"/alerts/channels/{w.alert_channel}/test",
                               post=page(ADMINS)),
    "alerts:channel-delete": Row(lambda w: f"/alerts/channels/{w.alert_channel}/delete",
                                 post=page(ADMINS)),
}  # fmt: skip


# --- the project's URL patterns ---------------------------------------------------------------


def _join(prefix: str, route: str) -> str:
    return prefix + (route[1:] if route.startswith("^") else route)


def url_pattern_keys() -> list[str]:
    """Every URL pattern, as ``namespace:name``, or its full route when it has no name."""
    keys: list[str] = []

    def walk(patterns: list[Any], prefix: str, namespaces: list[str]) -> None:
        for pattern in patterns:
            route = _join(prefix, str(pattern.pattern))
            if isinstance(pattern, URLResolver):
                inner = [*namespaces, pattern.namespace] if pattern.namespace else namespaces
                walk(pattern.url_patterns, route, inner)
            elif isinstance(pattern, URLPattern):
                keys.append(":".join([*namespaces, pattern.name]) if pattern.name else route)

    walk(get_resolver().url_patterns, "", [])
    return keys


def test_every_url_pattern_has_a_row() -> None:
    keys = url_pattern_keys()
    assert len(keys) == len(set(keys)), "two patterns share a name: give each its own"
    missing = sorted(set(keys) - set(MATRIX))
    assert not missing, f"decide who may use these URL patterns, in MATRIX: {missing}"


def test_every_row_is_a_url_pattern() -> None:
    gone = sorted((set(MATRIX) | set(EMAIL_CHANNEL)) - set(url_pattern_keys()))
    assert not gone, f"these rows of MATRIX match no URL pattern any more: {gone}"


# --- requests ------------------------------------------------------------------------------------

CSRF_SECRET = "mtx" + "0" * 29  # any 32 characters from the CSRF alphabet


def client_for(world: World, principal: str) -> tuple[Client, dict[str, str]]:
    """A CSRF-enforcing client for the principal, and the headers each request carries."""
    client = Client(enforce_csrf_checks=True)
    headers: dict[str, str] = {}
    if principal in world.sessions:
        client.cookies[settings.SESSION_COOKIE_NAME] = world.sessions[principal]
    if principal in world.keys:
        headers["Authorization"] = f"Bearer {world.keys[principal]}"
    if principal != NO_CSRF:
        client.cookies[settings.CSRF_COOKIE_NAME] = CSRF_SECRET
        headers["X-CSRFToken"] = CSRF_SECRET
    return client, headers


def send(world: World, row: Row, method: str, principal: str) -> Any:
    client, headers = client_for(world, principal)
    url = row.url(world)
    if method == "GET":
        return client.get(url, headers=headers)
    if method == "POST" and row.json:
        body = json.dumps(row.body(world))
        return client.post(url, body, content_type="application/json", headers=headers)
    if method == "POST":
        return client.post(url, row.body(world), headers=headers)
    return client.generic(method, url, b"", headers=headers)


def outcome(response: Any) -> str:
    status = response.status_code
    if status in (301, 302, 303, 307, 308):
        location = response["Location"]
        if "next=" in location and location.startswith(settings.LOGIN_URL):
            return SIGN_IN
        if "next=" in location and location.startswith("/admin/login/"):
            return ADMIN_SIGN_IN
        return OK
    if 200 <= status < 300 or status == 400:
        return OK
    return {401: E401, 403: E403, 404: E404, 405: E405}.get(status, f"status {status}")


def _row(key: str, on: str) -> Row:
    return EMAIL_CHANNEL[key] if on == "email channel" else MATRIX[key]


def _cases() -> list[Any]:
    cases = []
    rows = [*((key, "") for key in MATRIX), *((key, "email channel") for key in EMAIL_CHANNEL)]
    for key, on in rows:
        row = _row(key, on)
        for method, outcomes in row.methods().items():
            principals = [*row.principals, NO_CSRF] if method == "POST" else row.principals
            for principal in principals:
                name = f"{key} ({on})" if on else key
                cases.append(pytest.param(key, on, method, principal, outcomes[principal],
                                          id=f"{name} {method} {principal}"))  # fmt: skip
    return cases


@pytest.mark.django_db
@pytest.mark.parametrize(("key", "on", "method", "principal", "expected"), _cases())
def test_who_may_use_it(
    world: World, key: str, on: str, method: str, principal: str, expected: str
) -> None:
    row = _row(key, on)
    match = resolve(row.url(world).split("?")[0])
    assert (match.view_name if match.url_name else match.route) == key, "the URL is another row's"
    response = send(world, row, method, principal)
    detail = response.content[:300] if response.status_code != 302 else response["Location"]
    assert outcome(response) == expected, (response.status_code, detail)


def _unanswered_cases() -> list[Any]:
    cases = []
    for key, row in MATRIX.items():
        if row.kind == "admin":
            continue  # Django's admin answers what Django decides; staff only, tested above
        top = KEY_BOTH if row.kind in ("api", "open-api") else SUPERUSER
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            if method in row.methods():
                continue
            for principal in (ANONYMOUS, top):
                # The API asks who is calling before it looks at the method.
                expected = E401 if row.kind == "api" and principal == ANONYMOUS else E405
                cases.append(pytest.param(key, method, principal, expected,
                                          id=f"{key} {method} {principal}"))  # fmt: skip
    return cases


@pytest.mark.django_db
@pytest.mark.parametrize(("key", "method", "principal", "expected"), _unanswered_cases())
def test_a_method_it_does_not_answer_is_refused(
    world: World, key: str, method: str, principal: str, expected: str
) -> None:
    response = send(world, MATRIX[key], method, principal)
    assert outcome(response) == expected, (response.status_code, response.content[:300])
