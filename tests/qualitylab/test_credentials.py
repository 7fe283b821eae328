"""Which environment variables a collection may send as its credential, at the form, the
CLI and the run; and base URLs checked against the address rules at the form and the CLI."""

from __future__ import annotations

import io
import ipaddress
import json
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from core import outbound
from qualitylab import demo, engine, services
from qualitylab.credentials import CredentialRules
from qualitylab.models import Collection
from qualitylab.sandbox import SandboxServer

DESK_VARIABLES = ["DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "TRIAGE_HASH_KEY"]
RULES = CredentialRules.parse(prefix="QUALITYLAB_SECRET_", declared=["billing:BILLING_API_KEY"])


@pytest.mark.parametrize("variable", [*DESK_VARIABLES, "HOME", "AWS_SECRET_ACCESS_KEY"])
def test_the_desks_own_and_undeclared_variables_are_refused(variable: str) -> None:
    refusal = RULES.refusal(variable=variable, collection="shop", segment_owner="shop")
    assert refusal is not None
    assert ("desk's own settings" in refusal) == (variable in DESK_VARIABLES)


@pytest.mark.parametrize(
    ("variable", "collection", "allowed"),
    [
        ("QUALITYLAB_SECRET_SHOP", "shop", True),
        ("QUALITYLAB_SECRET_SHOP__EXPIRED", "shop", True),
        ("QUALITYLAB_SECRET_CHECKOUT_V2", "checkout.v2", True),
        ("QUALITYLAB_SECRET_PAYMENTS", "shop", False),  # another collection's
        ("QUALITYLAB_SECRET_SHOP_EXPIRED", "shop", False),  # collection shop-expired's
        ("QUALITYLAB_SECRET_", "shop", False),
        ("BILLING_API_KEY", "billing", True),  # listed for billing
        ("BILLING_API_KEY", "shop", False),
    ],
)
def test_declared_variables_belong_to_one_collection(
    variable: str, collection: str, allowed: bool
) -> None:
    refusal = RULES.refusal(variable=variable, collection=collection, segment_owner=collection)
    assert (refusal is None) == allowed, refusal


def test_a_newer_collection_with_the_same_segment_cannot_take_the_variable() -> None:
    refusal = RULES.refusal(
        variable="QUALITYLAB_SECRET_SHOP", collection="Shop", segment_owner="shop"
    )
    assert refusal is not None and "belongs to collection shop" in refusal


@pytest.mark.parametrize(
    ("prefix", "declared", "problem"),
    [
        ("DJANGO_", [], "desk's own settings"),
        ("QUALITYLAB_", [], "desk's own settings"),
        ("X", [], "at least 4 characters"),
        ("QUALITYLAB_SECRET_", ["shop:DATABASE_URL"], "desk's own settings"),
        ("QUALITYLAB_SECRET_", ["SHOP_TOKEN"], "not COLLECTION:VARIABLE"),
    ],
)
def test_bad_declarations_stop_start_up(prefix: str, declared: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        CredentialRules.parse(prefix=prefix, declared=declared)


# --- form, CLI, run (the database: PostgreSQL in CI) -----------------------------------------


def _collection(name: str, **fields: Any) -> Collection:
    with mock.patch("qualitylab.tasks.build_collection_version.apply_async"):
        collection, _ = services.collection_create(
            name=name, spec_text=demo.SPEC_PATH.read_text(encoding="utf-8"), **fields
        )
    return collection


@pytest.mark.django_db
@pytest.mark.parametrize("variable", [*DESK_VARIABLES, "SHOP_API_TOKEN"])
def test_the_settings_form_refuses_an_undeclared_variable(
    client_as: Callable[..., Client], variable: str
) -> None:
    _collection("shop")
    response = client_as("operator").post(
        "/qualitylab/shop/settings",
        {"auth_header": "Authorization", "auth_scheme": "Bearer", "auth_secret_env": variable},
    )
    assert response.status_code == 400
    assert variable in response.context["form"].errors["auth_secret_env"][0]
    assert Collection.objects.get(name="shop").auth_profile == {}


@pytest.mark.django_db
def test_the_create_form_refuses_another_collections_variable_and_takes_its_own(
    client_as: Callable[..., Client], django_capture_on_commit_callbacks: Any
) -> None:
    _collection("payments")
    client = client_as("operator")
    fields = {"name": "shop", "spec_paste": demo.SPEC_PATH.read_text(encoding="utf-8")}
    fields.update({"auth_header": "Authorization", "auth_scheme": "Bearer"})
    refused = client.post(
        "/qualitylab/collections/new", {**fields, "auth_secret_env": "QUALITYLAB_SECRET_PAYMENTS"}
    )
    assert refused.status_code == 400
    assert "belongs to another collection" in refused.context["form"].errors["auth_secret_env"][0]
    with (
        mock.patch("qualitylab.tasks.build_collection_version.apply_async"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        saved = client.post(
            "/qualitylab/collections/new", {**fields, "auth_secret_env": "QUALITYLAB_SECRET_SHOP"}
        )
    assert saved.status_code == 302
    assert (
        Collection.objects.get(name="shop").auth_profile["secret_env"] == "QUALITYLAB_SECRET_SHOP"
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("base_url", "problem"),
    [
        ("http://169.254.169.254/latest", "link-local"),
        ("http://[::1]:5432", "loopback"),
        ("http://localhost:6379", "loopback"),
        ("http://10.0.0.8", "private"),
    ],
)
def test_the_settings_form_refuses_internal_base_urls(
    client_as: Callable[..., Client], settings: Any, base_url: str, problem: str
) -> None:
    settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS = []
    _collection("shop")
    response = client_as("operator").post("/qualitylab/shop/settings", {"base_url": base_url})
    assert response.status_code == 400
    error = response.context["form"].errors["base_url"][0]
    assert problem in error and "QUALITYLAB_ALLOWED_PRIVATE_HOSTS" in error


@pytest.mark.django_db
@pytest.mark.parametrize(
    "options",
    [
        ["--auth-secret-env", "DJANGO_SECRET_KEY"],
        ["--auth-secret-env", "SOME_TOKEN"],
        ["--base-url", "http://169.254.169.254/latest"],
    ],
)
def test_the_cli_refuses_what_the_form_refuses(
    tmp_path: Any, settings: Any, options: list[str]
) -> None:
    settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS = []
    with pytest.raises(CommandError) as refused:
        call_command(
            "qualitylab",
            "import-collection",
            "shop",
            str(demo.SPEC_PATH),
            *options,
            stdout=io.StringIO(),
        )
    assert options[1] in str(refused.value) or "link-local" in str(refused.value)
    assert not Collection.objects.exists()


def _compose_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sandbox`` resolves as a compose service name does: to a private address."""
    system_resolver = outbound.system_resolver

    def resolve(host: str, port: int) -> list[Any]:
        if host == "sandbox":
            return [ipaddress.ip_address("172.18.0.5")]
        return system_resolver(host, port)

    monkeypatch.setattr(outbound, "system_resolver", resolve)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("allowed", "saved"),
    [
        ([], False),
        (["sandbox:9999"], False),  # another port of it
        (["127.0.0.1:8090"], False),  # another address
        (["sandbox:8090"], True),
        (["172.18.0.0/16:8090"], True),
        (["sandbox"], True),  # every port: the broad form
    ],
)
def test_the_settings_form_judges_a_single_label_host_by_its_address(
    client_as: Callable[..., Client],
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    allowed: list[str],
    saved: bool,
) -> None:
    _compose_dns(monkeypatch)
    settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS = allowed
    _collection("shop")
    response = client_as("operator").post(
        "/qualitylab/shop/settings",
        {"base_url": "http://sandbox:8090", "allowed_hosts": "sandbox:8090"},
    )
    collection = Collection.objects.get(name="shop")
    if saved:
        assert response.status_code == 302
        assert (collection.base_url, collection.allowed_hosts) == (
            "http://sandbox:8090",
            ["sandbox:8090"],
        )
        return
    assert response.status_code == 400
    error = response.context["form"].errors["base_url"][0]
    assert "resolves to 172.18.0.5, a private address" in error
    assert "QUALITYLAB_ALLOWED_PRIVATE_HOSTS" in error
    assert collection.base_url == ""


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("base_url", "said"),
    [
        ("http://-sandbox:8090", "not a valid host name"),
        ("http://sand box:8090", "no spaces"),
        ("ftp://sandbox/", "only http and https"),
    ],
)
def test_the_settings_form_refuses_a_malformed_base_url(
    client_as: Callable[..., Client], base_url: str, said: str
) -> None:
    _collection("shop")
    response = client_as("operator").post("/qualitylab/shop/settings", {"base_url": base_url})
    assert response.status_code == 400
    assert said in response.context["form"].errors["base_url"][0]


@pytest.mark.django_db
def test_the_cli_judges_a_single_label_host_by_its_address(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _compose_dns(monkeypatch)
    settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS = ["sandbox:9999"]
    command = ["qualitylab", "import-collection", "shop", str(demo.SPEC_PATH)]
    with pytest.raises(CommandError, match=r"resolves to 172\.18\.0\.5, a private address"):
        call_command(*command, "--base-url", "http://sandbox:8090", stdout=io.StringIO())
    with pytest.raises(CommandError, match="not a valid host name"):
        call_command(*command, "--base-url", "http://-sandbox:8090", stdout=io.StringIO())
    assert not Collection.objects.exists()
    settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS = ["sandbox:8090"]
    with mock.patch("qualitylab.tasks.build_collection_version.apply_async"):
        call_command(*command, "--base-url", "http://sandbox:8090", stdout=io.StringIO())
    collection = Collection.objects.get()
    assert (collection.base_url, collection.allowed_hosts) == ("http://sandbox:8090", ["sandbox"])


@pytest.mark.django_db
def test_the_cli_takes_a_declared_variable(settings: Any) -> None:
    settings.QUALITYLAB_CREDENTIAL_ENVS = ["shop:SHOP_API_TOKEN"]
    with mock.patch("qualitylab.tasks.build_collection_version.apply_async"):
        call_command(
            "qualitylab",
            "import-collection",
            "shop",
            str(demo.SPEC_PATH),
            "--auth-secret-env",
            "SHOP_API_TOKEN",
            stdout=io.StringIO(),
        )
    assert Collection.objects.get().auth_profile["secret_env"] == "SHOP_API_TOKEN"


@pytest.mark.django_db
@pytest.mark.parametrize("variable", ["DATABASE_URL", "QUALITYLAB_SECRET_PAYMENTS"])
def test_a_run_never_sends_a_variable_stored_before_the_rule(
    variable: str,
    monkeypatch: pytest.MonkeyPatch,
    sandbox: SandboxServer,
    demo_collection: engine.LoadedCollection,
) -> None:
    monkeypatch.setenv("QUALITYLAB_SECRET_PAYMENTS", "payments-secret")
    shop = _collection("shop", base_url=sandbox.base_url)
    _collection("payments")
    # Saved before the rule existed (or by hand): the worker checks again when it reads it.
    Collection.objects.filter(pk=shop.pk).update(
        auth_profile={"header_names": ["Authorization"], "scheme": "Bearer", "secret_env": variable}
    )
    shop.refresh_from_db()
    context = services.execution_context(shop)
    assert context is not None and context.auth_headers is None
    assert variable in context.credential_refusals["default"]
    outcome = engine.run_case(
        demo_collection,
        engine.CaseSpec.from_json(
            {
                "id": "points",
                "mode": "execute",
                "query": "회원 포인트 잔액 알려줘",
                "expected_target": "getMemberPoints",
                "provided_entities": {"memberNo": "M-100"},
            }
        ),
        execution=context,
    )
    assert outcome.failure is not None
    assert (outcome.failure["stage"], outcome.failure["reason"]) == (
        "auth_preflight",
        "auth_header_resolution_failed",
    )
    assert variable in outcome.failure["message"]
    assert outcome.execute is not None and outcome.execute["calls"] == []
    assert "payments-secret" not in json.dumps(outcome.to_dict())


@pytest.mark.django_db
def test_a_run_sends_a_declared_variable(
    monkeypatch: pytest.MonkeyPatch, sandbox: SandboxServer
) -> None:
    monkeypatch.setenv("QUALITYLAB_SECRET_SHOP", "demo-token")
    shop = _collection(
        "shop",
        base_url=sandbox.base_url,
        auth_profile={"header_names": ["Authorization"], "secret_env": "QUALITYLAB_SECRET_SHOP"},
    )
    context = services.execution_context(shop)
    assert context is not None and context.credential_refusals == {}
    assert context.auth_headers == {"Authorization": "Bearer demo-token"}
