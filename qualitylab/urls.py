from __future__ import annotations

from django.urls import URLPattern, path

import qualitylab.converters  # noqa: F401 (registers the `collection` path converter)
from qualitylab import views

app_name = "qualitylab"

# Fixed prefixes first: a collection may be named "runs" or "cases" too.
urlpatterns: list[URLPattern] = [
    path("", views.home, name="home"),
    path("collections/new", views.collection_create, name="collection-create"),
    path("cases/new", views.case_from_group, name="case-from-group"),
    path("runs/<int:run_id>/", views.run_page, name="run"),
    path("runs/<int:run_id>/cancel", views.run_cancel, name="run-cancel"),
    path("runs/<int:run_id>/rerun-failed", views.run_rerun_failed, name="run-rerun-failed"),
    path("results/<int:result_id>/", views.result_page, name="result"),
    path("<collection:name>/", views.collection_page, name="collection"),
    path("<collection:name>/rebuild", views.collection_rebuild, name="collection-rebuild"),
    path("<collection:name>/spec", views.collection_spec, name="collection-spec"),
    path("<collection:name>/settings", views.collection_settings, name="collection-settings"),
    path("<collection:name>/runs/start", views.run_start, name="run-start"),
    path("<collection:name>/cases/new", views.case_create, name="case-create"),
    path("<collection:name>/cases/import", views.cases_import, name="cases-import"),
    path("<collection:name>/cases/export.json", views.cases_export, name="cases-export"),
    path("<collection:name>/cases/<text:case_id>/edit", views.case_edit, name="case-edit"),
    path(
        "<collection:name>/cases/<text:case_id>/active",
        views.case_toggle_active,
        name="case-active",
    ),
    path("<collection:name>/suites/new", views.suite_create, name="suite-create"),
    path("<collection:name>/suites/<slug:suite_name>/edit", views.suite_edit, name="suite-edit"),
]
