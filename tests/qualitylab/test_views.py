"""Quality Lab pages: collections and builds, cases and suites, runs, results, permissions."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any, cast
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from kombu.exceptions import OperationalError as BrokerError

from qualitylab import demo, services
from qualitylab.models import (
    BuildStatus,
    CaseResult,
    CaseRun,
    Collection,
    CollectionVersion,
    QualityCase,
    RunStatus,
    Suite,
)
from tests.factories import case_post, failure_item
from tests.qualitylab.specs import LIST_PULLS_CASE, slash_spec_text
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
SEARCH_CASES = [case for case in demo.load_case_data() if case["mode"] == "search"]
SEARCH_FAILURES = {  # the demo's search cases that fail on purpose
    "search-money-back-none",
    "search-package-where-miss",
    "search-receipt-en-miss",
    "search-tax-invoice-weak",
}


def templates_of(response: Any) -> list[str]:
    return [template.name for template in response.templates if template.name]


def make_collection(
    name: str = "shop", capture: Any = None, *, build: bool = True, **fields: Any
) -> Collection:
    """The demo spec through the service, its build run here instead of by a worker."""
    with capture():
        collection, version = services.collection_create(
            name=name, spec_text=demo.SPEC_PATH.read_text(), **fields
        )
    if build:
        services.version_build(version_id=version.pk)
    collection.refresh_from_db()
    return collection


def start_run(collection: Collection, capture: Any, **options: Any) -> CaseRun:
    """A queued run; its enqueue callback is captured, not sent."""
    with capture() as callbacks:
        run = services.run_start(collection=collection, **options)
    assert len(callbacks) == 1
    return run


def execute(run: CaseRun) -> CaseRun:
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


@pytest.fixture
def capture(django_capture_on_commit_callbacks: Any) -> Any:
    return django_capture_on_commit_callbacks


@pytest.fixture
def shop(capture: Any) -> Collection:
    collection = make_collection("shop", capture)
    report = services.cases_import(collection=collection, documents=SEARCH_CASES)
    assert report.errors == [] and report.created == len(SEARCH_CASES)
    return collection


@pytest.fixture
def finished_run(shop: Collection, capture: Any) -> CaseRun:
    return execute(start_run(shop, capture))


@pytest.fixture
def operator(client_as: Callable[..., Client]) -> Client:
    return client_as("operator")


@pytest.fixture
def viewer(client_as: Callable[..., Client]) -> Client:
    return client_as("viewer")


# --- pages, partials and polling ------------------------------------------------------------


def test_anonymous_people_are_sent_to_sign_in(client: Client, finished_run: CaseRun) -> None:
    result = finished_run.results.first()
    assert result is not None
    for url in (
        "/qualitylab/",
        "/qualitylab/shop/",
        f"/qualitylab/runs/{finished_run.pk}/",
        f"/qualitylab/results/{result.pk}/",
    ):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_quality_lab_is_in_the_main_navigation(viewer: Client) -> None:
    assert 'href="/qualitylab/"' in viewer.get("/").content.decode()


def test_home_lists_each_collection_with_readiness_cases_and_last_run(
    viewer: Client, finished_run: CaseRun
) -> None:
    QualityCase.objects.filter(case_id="search-coupons-en").update(active=False)
    response = viewer.get("/qualitylab/")
    assert response.status_code == 200
    assert "qualitylab/home.html" in templates_of(response)
    content = response.content.decode()
    assert '<a href="/qualitylab/shop/" class="code">shop</a>' in content
    assert 'v1 <span class="build-ready">ready</span>' in content
    assert "6 warning" in content and "13 info" in content
    assert "10 / 11" in content  # active / total cases
    assert f'href="/qualitylab/runs/{finished_run.pk}/">64% passed' in content
    assert "Add a collection" not in content  # a viewer may not add one


def test_home_offers_the_add_form_to_operators_and_explains_the_secret(operator: Client) -> None:
    content = operator.get("/qualitylab/").content.decode()
    assert "No collection yet" in content
    assert 'name="spec_file"' in content and 'name="auth_secret_env"' in content
    assert "never the secret" in content


def test_adding_the_demo_spec_redirects_to_the_collection_where_the_build_shows(
    operator: Client, capture: Any
) -> None:
    upload = SimpleUploadedFile("shop.yaml", demo.SPEC_PATH.read_bytes(), "application/yaml")
    with capture() as callbacks:
        response = operator.post(
            "/qualitylab/collections/new",
            {
                "name": "shop",
                "title": "Demo shop",
                "spec_file": upload,
                "base_url": "http://127.0.0.1:8090",
                "auth_header": "Authorization",
                "auth_scheme": "Bearer",
                "auth_secret_env": "QUALITYLAB_SECRET_SHOP",
            },
        )
    assert response.status_code == 302 and response["Location"] == "/qualitylab/shop/"
    assert len(callbacks) == 1  # the build is enqueued after commit
    collection = Collection.objects.get(name="shop")
    assert collection.allowed_hosts == ["127.0.0.1"]
    assert collection.auth_profile == {
        "header_names": ["Authorization"],
        "scheme": "Bearer",
        "secret_env": "QUALITYLAB_SECRET_SHOP",
    }
    version = collection.versions.get()
    assert version.status == BuildStatus.QUEUED and version.created_by is not None
    content = operator.get("/qualitylab/shop/").content.decode()
    assert 'hx-trigger="every 2s"' in content and "queued" in content
    assert 'role="progressbar"' in content


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openapi: 3.0.0\npaths: {\n  /x: [", "invalid YAML at line 3, column"),
        ('{"openapi": "3.0.0", "paths": {"/x": }', "invalid JSON at line 1, column 38"),
        ("just: a mapping\n", "OpenAPI"),
    ],
)
def test_a_spec_that_does_not_parse_shows_its_error_in_the_form(
    operator: Client, spec: str, message: str
) -> None:
    response = operator.post("/qualitylab/collections/new", {"name": "bad", "spec_paste": spec})
    assert response.status_code == 400
    content = response.content.decode()
    assert "This is not a usable OpenAPI spec" in content and message in content
    assert not Collection.objects.exists()


def test_an_uploaded_spec_that_is_not_utf8_or_too_big_is_refused(
    operator: Client, settings: Any
) -> None:
    upload = SimpleUploadedFile("x.yaml", b"\xff\xfe openapi", "application/yaml")
    response = operator.post("/qualitylab/collections/new", {"name": "x", "spec_file": upload})
    assert response.status_code == 400 and "not UTF-8 text" in response.content.decode()
    settings.QUALITYLAB_MAX_SPEC_BYTES = 1024
    upload = SimpleUploadedFile("x.yaml", demo.SPEC_PATH.read_bytes(), "application/yaml")
    response = operator.post("/qualitylab/collections/new", {"name": "x", "spec_file": upload})
    content = response.content.decode()
    assert response.status_code == 400
    assert "is larger than the 1 KiB limit" in content and "QUALITYLAB_MAX_SPEC_BYTES" in content
    assert not Collection.objects.exists()


class _UnreadBody(io.BytesIO):
    """A request body that counts what the server read of it."""

    bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        type(self).bytes_read += len(data)
        return data

    def readline(self, size: int | None = -1) -> bytes:
        data = super().readline(size)
        type(self).bytes_read += len(data)
        return data


@pytest.mark.parametrize("url", ["/qualitylab/collections/new", "/qualitylab/shop/spec"])
def test_a_spec_whose_declared_size_cannot_fit_is_refused_before_its_body_is_read(
    operator: Client, shop: Collection, settings: Any, url: str
) -> None:
    settings.QUALITYLAB_MAX_SPEC_BYTES = 100_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = b"x" * 400_000
    _UnreadBody.bytes_read = 0
    response = operator.post(
        url,
        data=body,
        content_type="multipart/form-data; boundary=BoUnDaRy",
        **cast(dict[str, Any], {"wsgi.input": _UnreadBody(body), "CONTENT_LENGTH": str(len(body))}),
    )
    content = response.content.decode()
    assert response.status_code == 413
    assert "The spec (390.6 KiB) is larger than the 97.7 KiB limit; nothing was read." in content
    assert _UnreadBody.bytes_read == 0
    assert list(Collection.objects.values_list("name", flat=True)) == ["shop"]
    assert shop.versions.count() == 1


@pytest.mark.parametrize("url", ["/qualitylab/collections/new", "/qualitylab/shop/spec"])
def test_a_pasted_spec_over_the_form_size_is_a_form_error_not_a_bare_400(
    operator: Client, shop: Collection, settings: Any, url: str
) -> None:
    """Django refuses form fields over DATA_UPLOAD_MAX_MEMORY_SIZE with its own 400 page
    (RequestDataTooBig); the page says what to do instead."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    pasted = demo.SPEC_PATH.read_text(encoding="utf-8") + "#" * 20_000
    response = operator.post(url, {"name": "pasted", "spec_paste": pasted})
    content = response.content.decode()
    assert response.status_code == 413
    assert response.templates  # the page itself, with the form
    assert "The pasted text is larger than 9.8 KiB" in content
    assert "Upload the spec as a file instead (up to 64 MiB)" in content
    assert list(Collection.objects.values_list("name", flat=True)) == ["shop"]
    assert shop.versions.count() == 1


def test_a_spec_over_the_limit_without_a_usable_length_stops_being_kept_at_the_limit(
    operator: Client, shop: Collection, settings: Any
) -> None:
    # Within the length allowance (the form's other fields), so the body is parsed: the
    # upload handler stops keeping the file once it passes the limit.
    settings.QUALITYLAB_MAX_SPEC_BYTES = 2048
    upload = SimpleUploadedFile("big.yaml", b"openapi: 3.0.0\n" + b"#" * 4096, "application/yaml")
    response = operator.post("/qualitylab/shop/spec", {"spec_file": upload})
    assert response.status_code == 400
    assert "The spec is larger than the 2 KiB limit" in response.content.decode()
    assert shop.versions.count() == 1


@pytest.mark.parametrize(
    ("fields", "field_error"),
    [
        ({}, "Upload the spec or paste it."),
        ({"spec_paste": "openapi: 3.0.0"}, "not both"),  # with a file too
        ({"auth_secret_env": "Bearer sk-live-123"}, "not the secret itself"),
        ({"base_url": "https://api.example.com", "allowed_hosts": "other.example.com"},
         "is not in the list"),
        ({"allowed_hosts": "https://api.example.com/v1"}, "not URLs"),
    ],
)  # fmt: skip
def test_the_add_form_explains_what_is_wrong(
    operator: Client, fields: dict[str, str], field_error: str
) -> None:
    data: dict[str, Any] = {"name": "shop", **fields}
    if fields and "spec_paste" not in fields:
        data["spec_paste"] = demo.SPEC_PATH.read_text()
    if fields.get("spec_paste"):
        data["spec_file"] = SimpleUploadedFile("s.yaml", demo.SPEC_PATH.read_bytes())
    response = operator.post("/qualitylab/collections/new", data)
    assert response.status_code == 400
    assert field_error in response.content.decode()
    assert not Collection.objects.exists()


def test_a_second_collection_with_the_same_name_is_a_form_error(
    operator: Client, shop: Collection
) -> None:
    response = operator.post(
        "/qualitylab/collections/new", {"name": "shop", "spec_paste": demo.SPEC_PATH.read_text()}
    )
    assert response.status_code == 400 and "already exists" in response.content.decode()


def test_the_collection_page_shows_readiness_versions_metrics_cases_and_suites(
    viewer: Client, finished_run: CaseRun, shop: Collection
) -> None:
    services.suite_save(collection=shop, name="smoke", case_ids=["search-coupons-en"])
    response = viewer.get("/qualitylab/shop/")
    assert response.status_code == 200
    assert "qualitylab/collection.html" in templates_of(response)
    content = response.content.decode()
    assert "Readiness of v1" in content and "auth_required" in content
    assert 'hx-trigger="every 2s"' not in content  # nothing is building
    assert content.count('class="rate-chart"') == 3  # pass rate, hit@K and top-1
    assert "not measured yet" in content  # plan and execute metrics: no such case ran
    assert "search-receipt-en-miss" in content and "retrieve" not in content.split("Cases")[0]
    assert "not_retrieved" in content  # the last result of a failing case
    assert "smoke" in content
    # A viewer sees no way to change anything.
    for action in ("Start run", "Rebuild", "New case", "Import JSON", "New suite", "deactivate"):
        assert action not in content
    assert "Export JSON" in content


def test_htmx_polls_only_the_build_region_and_it_stops_with_286_when_ready(
    viewer: Client, shop: Collection
) -> None:
    response = viewer.get("/qualitylab/shop/", headers=HTMX)
    assert response.status_code == 286
    content = response.content.decode().strip()
    assert content.startswith('<section id="build"') and content.endswith("</section>")
    assert 'id="cases"' not in content and "<html" not in content
    assert "HX-Refresh" not in response


def test_a_running_build_keeps_polling_and_the_first_finished_one_reloads_the_page(
    viewer: Client, capture: Any
) -> None:
    collection = make_collection("fresh", capture, build=False)
    response = viewer.get("/qualitylab/fresh/?first_build=1", headers=HTMX)
    assert response.status_code == 200
    assert 'hx-trigger="every 2s"' in response.content.decode()
    version = collection.versions.get()
    services.version_build(version_id=version.pk)
    response = viewer.get("/qualitylab/fresh/?first_build=1", headers=HTMX)
    assert response.status_code == 286 and response["HX-Refresh"] == "true"
    assert "Readiness of v1" in response.content.decode()


def test_a_failed_build_shows_its_error_and_stops_polling(viewer: Client, capture: Any) -> None:
    collection = make_collection("broken", capture, build=False)
    CollectionVersion.objects.filter(collection=collection).update(
        status=BuildStatus.FAILED, error="The build failed (KeyError); see the worker log."
    )
    response = viewer.get("/qualitylab/broken/", headers=HTMX)
    assert response.status_code == 286
    assert "The build failed (KeyError)" in response.content.decode()


def test_unknown_collections_runs_and_results_are_404(viewer: Client) -> None:
    for url in ("/qualitylab/nope/", "/qualitylab/runs/999/", "/qualitylab/results/999/"):
        assert viewer.get(url).status_code == 404


def test_rebuild_queues_a_new_version_of_the_same_spec(operator: Client, shop: Collection) -> None:
    with mock.patch("qualitylab.tasks.build_collection_version.apply_async"):
        response = operator.post("/qualitylab/shop/rebuild")
    assert response.status_code == 302 and response["Location"] == "/qualitylab/shop/#build"
    newest = shop.versions.order_by("-number").first()
    assert newest is not None and newest.number == 2 and newest.status == BuildStatus.QUEUED
    assert newest.spec_source == demo.SPEC_PATH.read_text()
    content = operator.get("/qualitylab/shop/").content.decode()
    assert "v2" in content and 'hx-trigger="every 2s"' in content and "Readiness of v1" in content


def test_uploading_a_new_spec_that_does_not_parse_shows_the_error(
    operator: Client, shop: Collection
) -> None:
    page = operator.get("/qualitylab/shop/spec")
    assert page.status_code == 200 and "qualitylab/spec_form.html" in templates_of(page)
    response = operator.post("/qualitylab/shop/spec", {"spec_paste": "openapi: [1,"})
    assert response.status_code == 400 and "invalid YAML at line" in response.content.decode()
    assert shop.versions.count() == 1
    spec = demo.SPEC_PATH.read_text().replace("Demo Shop API", "Demo Shop API v2")
    response = operator.post("/qualitylab/shop/spec", {"spec_paste": spec})
    assert response.status_code == 302 and shop.versions.count() == 2


# --- cases ------------------------------------------------------------------------------------


def test_a_case_is_created_from_the_form_in_the_documented_schema(
    operator: Client, shop: Collection
) -> None:
    page = operator.get("/qualitylab/shop/cases/new")
    assert page.status_code == 200 and "qualitylab/case_form.html" in templates_of(page)
    response = operator.post("/qualitylab/shop/cases/new", case_post(description="why"))
    assert response.status_code == 302 and response["Location"] == "/qualitylab/shop/#cases"
    case = shop.cases.get(case_id="plan-order-detail")
    assert services.case_to_json(case) == {
        "id": "plan-order-detail",
        "mode": "plan",
        "query": "show me the order detail",
        "expected_target": "getOrderDetail",
        "expected_top_k": 5,
        "provided_entities": {"orderNo": "ORD-1001"},
        "mutation_safety": "read_only",
        "timeout_sec": 10.0,
        "assertions": [{"type": "selected_target", "equals": "getOrderDetail"}],
        "description": "why",
    }


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"assertions": "[{"}, "assertions", "Not JSON: line 1, column 3"),
        ({"provided_entities": "[1, 2]"}, "provided_entities", "provided_entities: must be"),
        ({"assertions": '[{"type": "nope"}]'}, "assertions", "assertions[0].type"),
        ({"mode": "search", "assertions": '[{"type": "http_status", "equals": 200}]'},
         "assertions", "assertions[0]"),
        ({"cleanup": '[{"tool": "cancelRefund"}]'}, "cleanup", "cleanup: only execute"),
        ({"case_id": "has space"}, "case_id", "id: must be letters, digits and '_.:-' only"),
        ({"provided_entities": '{"orderNo": NaN}'}, "provided_entities",
         "provided_entities.orderNo: is NaN or Infinity, which cannot be stored"),
        ({"mode": "execute", "mutation_safety": "mutating",
          "cleanup": '[{"tool": "cancelRefund", "args": {"amount": 1e999}}]'},
         "cleanup", "cleanup[0].args.amount: is NaN or Infinity"),
        ({"expected_target": "not\ta tool"}, "expected_target", "expected_target: must be"),
        (
            {"expected_target": "getOrderDetial"},
            "expected_target",
            "expected_target: 'getOrderDetial' is not an operation of this collection; "
            "the closest: getOrderDetail",
        ),
    ],
)  # fmt: skip
def test_case_form_errors_name_the_field(
    operator: Client, shop: Collection, changes: dict[str, str], field: str, message: str
) -> None:
    response = operator.post("/qualitylab/shop/cases/new", case_post(**changes))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors, errors
    assert any(message in error for error in errors[field]), errors[field]
    assert not shop.cases.filter(case_id="plan-order-detail").exists()


def test_a_new_case_may_not_silently_replace_an_existing_one(
    operator: Client, shop: Collection
) -> None:
    response = operator.post(
        "/qualitylab/shop/cases/new", case_post(case_id="search-coupons-en", mode="search",
                                               assertions="")
    )  # fmt: skip
    assert response.status_code == 400 and "edit that one" in response.content.decode()
    assert shop.cases.get(case_id="search-coupons-en").query == "list the coupons of a member"


def test_editing_a_case_keeps_its_id_and_saves_the_rest(operator: Client, shop: Collection) -> None:
    url = "/qualitylab/shop/cases/search-coupons-en/edit"
    page = operator.get(url)
    assert page.status_code == 200
    assert page.context["form"]["query"].value() == "list the coupons of a member"
    response = operator.post(
        url,
        case_post(case_id="renamed", mode="search", query="coupons of a member", assertions="",
                  expected_target="listMemberCoupons", provided_entities=""),
    )  # fmt: skip
    assert response.status_code == 302
    case = shop.cases.get(case_id="search-coupons-en")
    assert case.query == "coupons of a member" and case.expected_top_k == 5
    assert not shop.cases.filter(case_id="renamed").exists()


def test_deactivating_and_activating_a_case(operator: Client, shop: Collection) -> None:
    url = "/qualitylab/shop/cases/search-coupons-en/active"
    assert operator.post(url).status_code == 302
    assert not shop.cases.get(case_id="search-coupons-en").active
    assert operator.post(url).status_code == 302
    assert shop.cases.get(case_id="search-coupons-en").active


def cases_file(documents: Any, name: str = "cases.json") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, json.dumps(documents).encode(), "application/json")


def test_an_import_with_errors_writes_nothing_and_lists_each_error(
    operator: Client, shop: Collection
) -> None:
    before = {case.case_id: case.query for case in shop.cases.all()}
    documents = [
        {"id": "ok-1", "mode": "search", "query": "list orders"},
        {"id": "bad-mode", "mode": "fly", "query": "x"},
        {"id": "search-coupons-en", "mode": "search", "query": "changed"},
        {"id": "bad-assert", "mode": "search", "query": "x", "assertions": [{"type": "nope"}]},
        "not an object",
    ]
    page = operator.get("/qualitylab/shop/cases/import")
    assert page.status_code == 200 and "qualitylab/cases_import.html" in templates_of(page)
    response = operator.post("/qualitylab/shop/cases/import", {"cases_file": cases_file(documents)})
    assert response.status_code == 400
    content = response.content.decode()
    assert "Nothing was imported: 3 cases did not pass the checks." in content
    assert "case 1 (bad-mode): mode: must be one of" in content
    assert "case 3 (bad-assert): assertions[0].type" in content
    assert "case 4: must be an object" in content
    assert {case.case_id: case.query for case in shop.cases.all()} == before


def test_an_import_of_text_the_database_cannot_store_is_refused_by_case(
    operator: Client, shop: Collection
) -> None:
    documents = [
        {"id": "nul-query", "mode": "search", "query": "list \u0000 orders"},
        {"id": "bad\ud800", "mode": "search", "query": "x"},
        {"id": "long-text", "mode": "search", "query": "x", "description": "d" * 501},
        {"id": "nan", "mode": "search", "query": "x", "provided_entities": {"n": float("nan")}},
    ]
    response = operator.post("/qualitylab/shop/cases/import", {"cases_file": cases_file(documents)})
    assert response.status_code == 400
    content = response.content.decode()
    assert "case 0 (nul-query): query: holds U+0000 (NUL) or a lone surrogate" in content
    assert "case 1 (bad\ufffd): id: " in content
    assert "case 2 (long-text): description: description is 501 characters" in content
    assert "case 3 (nan): provided_entities.n: is NaN or Infinity" in content
    assert not shop.cases.filter(case_id__in=["nul-query", "long-text"]).exists()


def test_an_import_that_is_not_a_json_list_is_a_form_error(
    operator: Client, shop: Collection
) -> None:
    upload = SimpleUploadedFile("c.json", b'{"id": "x"', "application/json")
    response = operator.post("/qualitylab/shop/cases/import", {"cases_file": upload})
    assert response.status_code == 400 and "Not JSON: line 1" in response.content.decode()
    response = operator.post("/qualitylab/shop/cases/import", {"cases_file": cases_file({})})
    assert "must hold a JSON list" in response.content.decode()


def test_export_then_import_gives_the_same_cases(operator: Client, capture: Any) -> None:
    shop = make_collection("shop", capture)
    report = services.cases_import(collection=shop, documents=demo.load_case_data())
    assert not report.errors
    QualityCase.objects.filter(case_id="plan-member-points").update(active=False)
    response = operator.get("/qualitylab/shop/cases/export.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"] == 'attachment; filename="shop-cases.json"'
    exported = json.loads(response.content)
    assert isinstance(exported, list) and len(exported) == len(demo.load_case_data())
    assert {"id", "mode", "query"} <= set(exported[0])
    other = make_collection("copy", capture)
    imported = operator.post("/qualitylab/copy/cases/import", {"cases_file": cases_file(exported)})
    assert imported.status_code == 302
    again = json.loads(operator.get("/qualitylab/copy/cases/export.json").content)
    assert again == exported
    assert not other.cases.get(case_id="plan-member-points").active


# --- suites -------------------------------------------------------------------------------------


def test_a_suite_is_made_by_choosing_cases_and_edited_later(
    operator: Client, shop: Collection
) -> None:
    page = operator.get("/qualitylab/shop/suites/new")
    assert page.status_code == 200 and "search-coupons-en" in page.content.decode()
    response = operator.post(
        "/qualitylab/shop/suites/new",
        {"name": "misses", "description": "known misses",
         "cases": ["search-receipt-en-miss", "search-package-where-miss"]},
    )  # fmt: skip
    assert response.status_code == 302
    suite = Suite.objects.get(name="misses")
    assert sorted(suite.cases.values_list("case_id", flat=True)) == [
        "search-package-where-miss",
        "search-receipt-en-miss",
    ]
    url = "/qualitylab/shop/suites/misses/edit"
    assert operator.get(url).context["form"]["cases"].value() == [
        "search-package-where-miss",
        "search-receipt-en-miss",
    ]
    response = operator.post(url, {"name": "ignored", "cases": ["search-receipt-en-miss"]})
    assert response.status_code == 302
    assert list(suite.cases.values_list("case_id", flat=True)) == ["search-receipt-en-miss"]
    assert not Suite.objects.filter(name="ignored").exists()
    assert '<td class="num">1</td>' in operator.get("/qualitylab/shop/").content.decode()


# --- runs ------------------------------------------------------------------------------------


def test_starting_a_run_redirects_to_its_page(
    operator: Client, shop: Collection, capture: Any
) -> None:
    services.suite_save(collection=shop, name="misses", case_ids=sorted(SEARCH_FAILURES))
    with capture() as callbacks:
        response = operator.post(
            "/qualitylab/shop/runs/start", {"suite": "misses", "mode": "search", "repeat": "3"}
        )
    run = CaseRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/qualitylab/runs/{run.pk}/"
    assert len(callbacks) == 1
    assert run.suite is not None and run.suite.name == "misses"
    assert run.mode == "search" and run.repeat == 3 and run.total == 12
    assert run.started_by is not None and run.started_by.username == "operator-user"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"repeat": "51"}, "repeat: Ensure this value is less than or equal to 50."),
        ({"repeat": "1", "mode": "execute"}, "No active case matches"),
        ({"repeat": "1", "suite": "nope"}, "suite: Select a valid choice."),
    ],
)
def test_a_run_that_cannot_start_says_why(
    operator: Client, shop: Collection, data: dict[str, str], message: str
) -> None:
    response = operator.post("/qualitylab/shop/runs/start", data, follow=True)
    assert message in response.content.decode()
    assert not CaseRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_when_the_queue_is_unreachable_the_run_fails_with_its_message(
    client_as: Callable[..., Client],
) -> None:
    with mock.patch("qualitylab.tasks.build_collection_version.apply_async"):
        shop, version = services.collection_create(
            name="shop", spec_text=demo.SPEC_PATH.read_text()
        )
    services.version_build(version_id=version.pk)
    services.cases_import(collection=shop, documents=SEARCH_CASES)
    operator = client_as("operator")
    with mock.patch(
        "qualitylab.tasks.execute_case_run.apply_async",
        side_effect=BrokerError("Error 111 connecting to localhost:6379. Connection refused."),
    ):
        response = operator.post("/qualitylab/shop/runs/start", {"repeat": "1"})
    assert response.status_code == 302 and response["Location"] == "/qualitylab/shop/#run"
    page = operator.get(response["Location"]).content.decode()
    assert "The task queue is unreachable" in page
    run = CaseRun.objects.get()
    assert run.status == RunStatus.FAILED and run.finished_at is not None
    assert "unreachable" in run.error


def test_the_run_page_polls_its_progress_until_the_run_finishes(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    run = start_run(shop, capture)
    full = viewer.get(f"/qualitylab/runs/{run.pk}/")
    assert full.status_code == 200 and "qualitylab/run.html" in templates_of(full)
    assert 'hx-trigger="every 2s"' in full.content.decode()
    polled = viewer.get(f"/qualitylab/runs/{run.pk}/", headers=HTMX)
    assert polled.status_code == 200
    content = polled.content.decode().strip()
    assert content.startswith('<section id="progress"') and content.endswith("</section>")
    assert "0 / 11" in content and "Waiting for a worker" in content
    execute(run)
    polled = viewer.get(f"/qualitylab/runs/{run.pk}/", headers=HTMX)
    assert polled.status_code == 286 and polled["HX-Refresh"] == "true"
    assert "11 / 11" in polled.content.decode()
    assert 'hx-trigger="every 2s"' not in polled.content.decode()


def test_a_finished_run_shows_counts_metrics_and_each_case_with_its_failure(
    viewer: Client, finished_run: CaseRun
) -> None:
    response = viewer.get(f"/qualitylab/runs/{finished_run.pk}/")
    content = response.content.decode()
    assert 'hx-trigger="every 2s"' not in content
    assert "64%" in content and "7 passed" in content and "4 failed" in content
    assert "hit@K" in content and "73%" in content
    lines = response.context["view"].lines
    assert {line.case.case_id for line in lines[:4]} == SEARCH_FAILURES  # failures first
    assert "retrieve / not_retrieved" in content and "retrieve / low_confidence" in content
    failed = CaseResult.objects.get(run=finished_run, case__case_id="search-receipt-en-miss")
    assert failed.failure_record is not None
    assert f'href="/triage/groups/{failed.failure_record.group_id}/"' in content
    assert f'hx-get="/qualitylab/results/{failed.pk}/"' in content
    assert "Re-run failed cases" not in content  # a viewer may not start runs
    assert "No other finished run of this collection to compare with." in content


def test_a_run_compared_with_the_previous_one_shows_regressed_and_fixed_cases(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    first = execute(start_run(shop, capture))
    # Pretend the first run saw one miss pass and one passing case fail.
    CaseResult.objects.filter(run=first, case__case_id="search-receipt-en-miss").update(passed=True)
    CaseResult.objects.filter(run=first, case__case_id="search-coupons-en").update(passed=False)
    services.cases_import(
        collection=shop,
        documents=[{"id": "search-orders-new", "mode": "search", "query": "list orders",
                    "expected_target": "listOrders"}],
    )  # fmt: skip
    second = execute(start_run(shop, capture))
    response = viewer.get(f"/qualitylab/runs/{second.pk}/")
    comparison = response.context["view"].comparison
    assert comparison.previous.pk == first.pk
    assert comparison.regressed == ["search-receipt-en-miss"]
    assert comparison.fixed == ["search-coupons-en"]
    assert sorted(comparison.still_failing) == sorted(SEARCH_FAILURES - {"search-receipt-en-miss"})
    assert comparison.new == ["search-orders-new"]
    content = response.content.decode()
    assert f'Compared with <a href="/qualitylab/runs/{first.pk}/">run #{first.pk}</a>' in content
    assert "the previous finished run of the same suite and mode" in content
    assert 'title="passed in the run compared with">regressed</span>' in content
    assert 'title="failed in the run compared with">fixed</span>' in content


def test_the_comparison_only_looks_at_runs_of_the_same_suite(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    suite = services.suite_save(collection=shop, name="one", case_ids=["search-coupons-en"])
    execute(start_run(shop, capture))
    in_suite = execute(start_run(shop, capture, suite=suite))
    response = viewer.get(f"/qualitylab/runs/{in_suite.pk}/")
    assert response.context["view"].comparison.previous is None
    # Earlier runs exist: the page says none is of this suite, and offers them.
    content = response.content.decode()
    assert "No earlier finished run of the same suite and mode; pick the other run" in content
    assert '<select id="compare-with" name="compare">' in content


def test_repetitions_show_how_many_passed_and_flaky_cases(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    run = execute(start_run(shop, capture, repeat=3, mode="search"))
    CaseResult.objects.filter(run=run, case__case_id="search-coupons-en", repetition=2).update(
        passed=False, failure_stage="retrieve", failure_reason="not_retrieved"
    )
    response = viewer.get(f"/qualitylab/runs/{run.pk}/")
    lines = {line.case.case_id: line for line in response.context["view"].lines}
    assert lines["search-coupons-en"].outcome == "flaky"
    assert lines["search-coupons-en"].passed_count == 2
    assert lines["search-receipt-en-miss"].outcome == "failed"
    content = response.content.decode()
    assert '<span class="flaky">flaky</span> <span class="small">2/3 passed</span>' in content
    assert "1 flaky" in content
    assert content.count('class="rep ') == 33


def test_cancel_stops_a_queued_run(operator: Client, shop: Collection, capture: Any) -> None:
    run = start_run(shop, capture)
    response = operator.post(f"/qualitylab/runs/{run.pk}/cancel")
    assert response.status_code == 302 and response["Location"] == f"/qualitylab/runs/{run.pk}/"
    run.refresh_from_db()
    assert run.cancel_requested and run.status == RunStatus.CANCELLED
    page = operator.get(response["Location"]).content.decode()
    assert "Cancel requested" in page and "Cancel run" not in page


def test_re_running_the_failed_cases_starts_a_run_of_just_those(
    operator: Client, finished_run: CaseRun, capture: Any
) -> None:
    page = operator.get(f"/qualitylab/runs/{finished_run.pk}/").content.decode()
    assert "Re-run failed cases" in page
    with capture() as callbacks:
        response = operator.post(f"/qualitylab/runs/{finished_run.pk}/rerun-failed")
    rerun = CaseRun.objects.exclude(pk=finished_run.pk).get()
    assert response["Location"] == f"/qualitylab/runs/{rerun.pk}/" and len(callbacks) == 1
    assert rerun.rerun_of_id == finished_run.pk and rerun.total == 4
    assert set(rerun.collection.cases.filter(pk__in=rerun.case_ids).values_list(
        "case_id", flat=True)) == SEARCH_FAILURES  # fmt: skip


def test_a_result_shows_every_stage_it_went_through(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    services.cases_import(
        collection=shop,
        documents=[
            case for case in demo.load_case_data() if case["id"] == "plan-track-llm-mismatch"
        ],
    )
    run = execute(start_run(shop, capture, mode="plan"))
    result = run.results.get()
    assert result.failure_reason == "llm_target_mismatch"
    response = viewer.get(f"/qualitylab/results/{result.pk}/")
    assert response.status_code == 200 and "qualitylab/result.html" in templates_of(response)
    content = response.content.decode()
    for heading in ("Failure record", "Assertions", "Search", "Target selector", "Plan"):
        assert f"<h4>{heading}" in content, heading
    assert "llm_target_mismatch" in content and "trackDelivery" in content
    assert result.failure_record is not None
    assert f'href="/triage/groups/{result.failure_record.group_id}/"' in content
    partial = viewer.get(f"/qualitylab/results/{result.pk}/", headers=HTMX)
    body = partial.content.decode().strip()
    assert body.startswith(f'<div class="result-detail" id="result-detail-{result.pk}">')
    assert "<html" not in body and "hide</button>" in body


def test_an_execute_result_shows_calls_auth_readiness_and_assertions(
    viewer: Client, capture: Any
) -> None:
    shop = make_collection("shop", capture, base_url="http://127.0.0.1:9")
    case = next(c for c in demo.load_case_data() if c["id"] == "exec-order-detail")
    services.cases_import(collection=shop, documents=[case])
    run = execute(start_run(shop, capture))
    result = run.results.get()
    content = viewer.get(f"/qualitylab/results/{result.pk}/").content.decode()
    assert "<h4>Execute" in content and "<h4>Auth readiness" in content
    assert "execute / network_error" in content  # nothing listens on port 9
    assert "http_status" in content and "json_path_exists" in content


# --- a case from a failure group -------------------------------------------------------------


def make_group(evidence: dict[str, Any], **body: Any) -> FailureGroup:
    item = failure_item(
        stage="retrieve",
        reason="not_retrieved",
        tool="getInvoice",
        collection="shop",
        evidence=evidence,
        **body,
    )
    outcome = batch_ingest(owner="tests", items=[item])
    assert outcome.all_stored
    return FailureGroup.objects.get(reason="not_retrieved", tool="getInvoice")


def test_a_case_from_a_group_is_prefilled_and_linked_to_the_group(
    operator: Client, shop: Collection
) -> None:
    group = make_group({"query": "give me a receipt", "returned_tool_names": ["listInvoices"]})
    group_page = operator.get(f"/triage/groups/{group.pk}/").content.decode()
    assert f'href="/qualitylab/cases/new?group={group.pk}"' in group_page
    response = operator.get(f"/qualitylab/cases/new?group={group.pk}")
    assert response.status_code == 200
    form = response.context["form"]
    assert form["collection"].value() == "shop"  # a collection has the group's name
    assert form["query"].value() == "give me a receipt"
    assert form["expected_target"].value() == "getInvoice"
    assert form["mode"].value() == "search"
    data = {
        "group": str(group.pk),
        "collection": "shop",
        "case_id": "receipt-en",
        "mode": "search",
        "query": "give me a receipt",
        "expected_target": "getInvoice",
        "expected_top_k": "5",
        "mutation_safety": "read_only",
        "assertions": form["assertions"].value(),
        "active": "on",
    }
    response = operator.post("/qualitylab/cases/new", data)
    assert response.status_code == 302 and response["Location"] == "/qualitylab/shop/#cases"
    case = shop.cases.get(case_id="receipt-en")
    assert case.failure_group_id == group.pk
    assert case.assertions == [{"type": "top_k_contains", "tool": "getInvoice", "k": 5}]


def test_a_case_from_a_plan_group_gets_the_documented_assertions(
    operator: Client, shop: Collection
) -> None:
    item = failure_item(
        stage="select_target",
        reason="selector_mismatch",
        tool="getDeliveryDetail",
        collection="elsewhere",
        evidence={"expected_target": "getDeliveryDetail"},
    )
    batch_ingest(owner="tests", items=[item])
    group = FailureGroup.objects.get(reason="selector_mismatch")
    response = operator.get(f"/qualitylab/cases/new?group={group.pk}")
    form = response.context["form"]
    assert form["mode"].value() == "plan"
    assert json.loads(form["assertions"].value()) == {
        "allowed_failure_reasons": [],
        "selected_target": "getDeliveryDetail",
    }
    assert form["query"].value() == ""
    assert "No record of this group carried the user&#x27;s query" in response.content.decode()
    # The runtime's collection id was registered by the failure itself and is preselected.
    assert form["collection"].value() == Collection.objects.get(name="elsewhere").name


def test_an_execute_group_gives_an_execute_case_and_viewers_see_no_link(
    client_as: Callable[..., Client],
) -> None:
    batch_ingest(owner="tests", items=[failure_item()])  # execute / http_5xx
    group = FailureGroup.objects.get()
    assert client_as("operator").get(f"/qualitylab/cases/new?group={group.pk}").context["form"][
        "mode"
    ].value() == "execute"  # fmt: skip
    viewer = client_as("viewer")
    assert (
        "Create a Quality Lab case"
        not in viewer.get(f"/triage/groups/{group.pk}/").content.decode()
    )
    assert viewer.get(f"/qualitylab/cases/new?group={group.pk}").status_code == 403
    assert client_as("operator").get("/qualitylab/cases/new?group=abc").status_code == 404


# --- permissions: every POST --------------------------------------------------------------------


@pytest.fixture
def world(shop: Collection, finished_run: CaseRun, capture: Any) -> dict[str, Any]:
    """One of everything the POSTs act on: a suite, a queued run, a finished one, a group."""
    services.suite_save(collection=shop, name="smoke", case_ids=["search-coupons-en"])
    queued = start_run(shop, capture)
    batch_ingest(owner="tests", items=[failure_item(collection="shop")])
    return {
        "finished": finished_run.pk,
        "queued": queued.pk,
        "group": FailureGroup.objects.get(reason="http_5xx").pk,
    }


def _posts(world: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    spec = demo.SPEC_PATH.read_text()
    return [
        ("/qualitylab/collections/new", {"name": "another", "spec_paste": spec}),
        ("/qualitylab/shop/rebuild", {}),
        ("/qualitylab/shop/spec", {"spec_paste": spec}),
        ("/qualitylab/shop/runs/start", {"repeat": "1"}),
        ("/qualitylab/shop/cases/new", case_post()),
        ("/qualitylab/shop/cases/search-coupons-en/edit",
         case_post(mode="search", assertions="", provided_entities="")),
        ("/qualitylab/shop/cases/search-coupons-en/active", {}),
        ("/qualitylab/shop/cases/import",
         {"cases_file": cases_file([{"id": "x", "mode": "search", "query": "orders"}])}),
        ("/qualitylab/shop/suites/new", {"name": "new-suite", "cases": ["search-coupons-en"]}),
        ("/qualitylab/shop/suites/smoke/edit", {"name": "smoke", "cases": []}),
        ("/qualitylab/cases/new", {**case_post(), "group": world["group"], "collection": "shop"}),
        (f"/qualitylab/runs/{world['queued']}/cancel", {}),
        (f"/qualitylab/runs/{world['finished']}/rerun-failed", {}),
    ]  # fmt: skip


POST_COUNT = 13


@pytest.fixture
def no_queue() -> Iterator[None]:
    with (
        mock.patch("qualitylab.tasks.build_collection_version.apply_async"),
        mock.patch("qualitylab.tasks.execute_case_run.apply_async"),
    ):
        yield


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_may_post_nothing(
    client_as: Callable[..., Client], world: dict[str, Any], role: str, no_queue: None
) -> None:
    client = client_as(role)
    posts = _posts(world)
    assert len(posts) == POST_COUNT
    counts = (Collection.objects.count(), QualityCase.objects.count(), CaseRun.objects.count())
    for url, data in posts:
        assert client.post(url, data).status_code == 403, url
    assert counts == (
        Collection.objects.count(),
        QualityCase.objects.count(),
        CaseRun.objects.count(),
    )
    assert CaseRun.objects.get(pk=world["queued"]).status == RunStatus.QUEUED


@pytest.mark.parametrize("role", ["operator", "admin"])
@pytest.mark.parametrize("index", range(POST_COUNT))
def test_operators_and_admins_may_post_everything(
    client_as: Callable[..., Client], world: dict[str, Any], role: str, index: int, no_queue: None
) -> None:
    url, data = _posts(world)[index]
    response = client_as(role).post(url, data)
    assert response.status_code == 302, (url, response.content.decode()[:2000])


@pytest.mark.parametrize("index", range(POST_COUNT))
def test_a_post_without_the_csrf_token_is_refused(
    client_as: Callable[..., Client], world: dict[str, Any], index: int
) -> None:
    url, data = _posts(world)[index]
    client = client_as("operator", enforce_csrf_checks=True)
    assert client.post(url, data).status_code == 403, url


def test_get_forms_need_the_same_permission_as_their_post(
    viewer: Client, world: dict[str, Any]
) -> None:
    for url in (
        "/qualitylab/shop/spec",
        "/qualitylab/shop/cases/new",
        "/qualitylab/shop/cases/search-coupons-en/edit",
        "/qualitylab/shop/cases/import",
        "/qualitylab/shop/suites/new",
        "/qualitylab/shop/suites/smoke/edit",
        f"/qualitylab/cases/new?group={world['group']}",
    ):
        assert viewer.get(url).status_code == 403, url


# --- query counts -------------------------------------------------------------------------------


def _grow(shop: Collection, capture: Any, *, runs: int) -> list[CaseRun]:
    services.cases_import(collection=shop, documents=demo.load_case_data())
    for index in range(3):
        services.suite_save(collection=shop, name=f"suite-{index}", case_ids=["search-coupons-en"])
    return [execute(start_run(shop, capture, repeat=2)) for _ in range(runs)]


HOME_QUERIES = 8
COLLECTION_QUERIES = 12  # one more when runs repeat: their pass rate by case
RUN_QUERIES = 10  # with the runs the comparison may pick from
RESULT_QUERIES = 6


@pytest.mark.parametrize("many", [False, True])
def test_the_pages_need_the_same_few_queries_for_few_or_many_rows(
    viewer: Client,
    shop: Collection,
    capture: Any,
    django_assert_max_num_queries: Any,
    many: bool,
) -> None:
    if many:
        runs = _grow(shop, capture, runs=3)
        for index in range(4):
            other = make_collection(f"other-{index}", capture)
            services.cases_import(collection=other, documents=SEARCH_CASES)
            execute(start_run(other, capture))
    else:
        runs = [execute(start_run(shop, capture, mode="search"))]
    run = runs[-1]
    result = run.results.filter(passed=False).first()
    assert result is not None
    with django_assert_max_num_queries(HOME_QUERIES):
        assert viewer.get("/qualitylab/").status_code == 200
    with django_assert_max_num_queries(COLLECTION_QUERIES):
        assert viewer.get("/qualitylab/shop/").status_code == 200
    with django_assert_max_num_queries(RUN_QUERIES):
        response = viewer.get(f"/qualitylab/runs/{run.pk}/")
        assert response.status_code == 200
    with django_assert_max_num_queries(RESULT_QUERIES):
        assert viewer.get(f"/qualitylab/results/{result.pk}/").status_code == 200
    if many:
        assert len(response.context["view"].lines) == 33


def test_an_operator_edits_where_execute_cases_call(
    client_as: Callable[..., Client], shop: Collection
) -> None:
    url = f"/qualitylab/{shop.name}/settings"
    assert client_as("viewer").get(url).status_code == 403
    client = client_as("operator")
    assert client.get(url).status_code == 200
    bad = client.post(url, {"base_url": "http://127.0.0.1:8090", "allowed_hosts": "example.com"})
    assert bad.status_code == 400 and "is not in the list" in bad.content.decode()
    response = client.post(
        url,
        {
            "title": "Shop",
            "base_url": "http://127.0.0.1:8090",
            "allowed_hosts": "127.0.0.1:8090",
            "auth_header": "Authorization",
            "auth_scheme": "Bearer",
            "auth_secret_env": "QUALITYLAB_SECRET_SHOP",
        },
    )
    assert response.status_code == 302
    shop.refresh_from_db()
    assert shop.allowed_hosts == ["127.0.0.1:8090"]
    assert shop.auth_profile == {
        "header_names": ["Authorization"],
        "scheme": "Bearer",
        "secret_env": "QUALITYLAB_SECRET_SHOP",
    }
    # Left empty, the allowed hosts are the base URL's host (the field's help says so),
    # never an empty list that would keep every execute case from calling.
    emptied = client.post(url, {"base_url": "https://api.example.com/v1", "allowed_hosts": ""})
    assert emptied.status_code == 302
    shop.refresh_from_db()
    assert shop.allowed_hosts == ["api.example.com"]
    refused = client.post(url, {"auth_header": "Authorization", "auth_secret_env": "sk-live 123"})
    assert refused.status_code == 400 and "not the secret itself" in refused.content.decode()


# --- hostile documents ---------------------------------------------------------------------

_ALIAS_BOMB = (
    "openapi: 3.0.0\ninfo: {title: t, version: '1'}\n"
    "paths: {/a: {get: {operationId: a, responses: {'200': {description: ok}}}}}\n"
    'l0: &l0 ["x","x","x","x","x","x","x","x","x"]\n'
    + "".join(f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (_ALIAS_BOMB, "aliases expand it by more than 1,000,000"),
        ('{"openapi": "3.0.0", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "deeper than 64"),
    ],
    ids=["alias-bomb", "deep-json"],
)
def test_a_hostile_spec_is_a_form_error_on_both_spec_pages(
    operator: Client, shop: Collection, spec: str, message: str
) -> None:
    response = operator.post("/qualitylab/collections/new", {"name": "bomb", "spec_paste": spec})
    assert response.status_code == 400 and message in response.content.decode()
    response = operator.post("/qualitylab/shop/spec", {"spec_paste": spec})
    assert response.status_code == 400 and message in response.content.decode()
    assert list(Collection.objects.values_list("name", flat=True)) == ["shop"]
    assert shop.versions.count() == 1


def test_a_cases_file_nested_past_the_limit_is_a_form_error(
    operator: Client, shop: Collection
) -> None:
    upload = SimpleUploadedFile(
        "c.json", ("[" * 100_000 + "]" * 100_000).encode(), "application/json"
    )
    response = operator.post("/qualitylab/shop/cases/import", {"cases_file": upload})
    assert response.status_code == 400
    assert "The file is nested deeper than 64 levels" in response.content.decode()


def test_a_case_form_json_field_nested_past_the_limit_names_the_field(
    operator: Client, shop: Collection
) -> None:
    deep = '{"a": ' * 5_000 + "1" + "}" * 5_000
    response = operator.post("/qualitylab/shop/cases/new", case_post(provided_entities=deep))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert any("nested deeper than 64 levels" in error for error in errors["provided_entities"])


def test_a_base_url_longer_than_its_column_is_a_form_error(
    client_as: Callable[..., Client], shop: Collection
) -> None:
    long_url = "https://example.com/" + "p" * 200
    response = client_as("operator").post(
        f"/qualitylab/{shop.name}/settings",
        {"base_url": long_url, "allowed_hosts": "example.com", "auth_header": "Authorization"},
    )
    assert response.status_code == 400
    assert "at most 200 characters" in response.content.decode()
    shop.refresh_from_db()
    assert shop.base_url != long_url


# --- configuration gaps and real-world specs -------------------------------------------------


@pytest.fixture
def github_like(capture: Any) -> Collection:
    """A collection whose spec has only a relative server: no base URL after its build."""
    with capture():
        collection, version = services.collection_create(name="github", spec_text=slash_spec_text())
    services.version_build(version_id=version.pk)
    collection.refresh_from_db()
    assert collection.base_url == "" and collection.current_version is not None
    return collection


def test_a_collection_without_a_base_url_shows_it_as_a_readiness_error(
    viewer: Client, github_like: Collection
) -> None:
    page = viewer.get("/qualitylab/github/").content.decode()
    assert 'id="gap-base_url_not_configured"' in page
    assert "Execute cases cannot run: the collection has no base URL" in page
    assert '<span class="sev sev-error">1 error</span>' in page
    home = viewer.get("/qualitylab/").content.decode()
    assert '<span class="sev sev-error">1 error</span>' in home
    github_like.base_url = "https://api.github.example"
    github_like.save(update_fields=["base_url"])
    page = viewer.get("/qualitylab/github/").content.decode()
    assert "gap-base_url_not_configured" not in page


def test_a_run_page_says_why_execute_cases_could_not_run(
    operator: Client, github_like: Collection, capture: Any
) -> None:
    report = services.cases_import(collection=github_like, documents=[LIST_PULLS_CASE])
    assert report.errors == []
    run = execute(start_run(github_like, capture))
    result = run.results.get()
    assert (result.failure_stage, result.failure_reason) == ("execute", "base_url_not_configured")
    assert result.failure_record is not None
    assert result.failure_record.lane == "policy_blocked"
    assert FailureGroup.objects.get(reason="base_url_not_configured").reason_mapped
    page = operator.get(f"/qualitylab/runs/{run.pk}/").content.decode()
    assert 'id="gap-base_url_not_configured"' in page
    assert "1 execute case</strong> could not run: the collection has no base URL" in page
    assert "/qualitylab/github/settings" in page


def test_case_tool_names_are_checked_against_the_collections_tools(
    operator: Client, github_like: Collection
) -> None:
    data = case_post(
        case_id="gh-pulls",
        query="list pull requests",
        expected_target="pulls/list",
        assertions='[{"type": "selected_target", "equals": "pulls/list"}]',
        provided_entities='{"owner": "octo", "repo": "hello"}',
    )
    response = operator.post("/qualitylab/github/cases/new", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert github_like.cases.get(case_id="gh-pulls").expected_target == "pulls/list"
    data = {**data, "case_id": "gh-typo", "expected_target": "pull/list"}
    response = operator.post("/qualitylab/github/cases/new", data)
    assert response.status_code == 400
    assert (
        "expected_target: &#x27;pull/list&#x27; is not an operation of this collection; "
        "the closest: pulls/list" in response.content.decode()
    )
    assert not github_like.cases.filter(case_id="gh-typo").exists()
