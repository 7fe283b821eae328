from __future__ import annotations

from django.urls import path

from triage.api import views as api
from triage.intake import native
from triage.pages import groups, ingestion, preferences, receipts

app_name = "triage"

# The doors runtimes send to; the ingest pool (config/urls_ingest.py) serves only these.
ingest_urlpatterns = [
    path("ingest", native.IngestApi.as_view(), name="api-ingest"),
    # Read by the same runtimes, with the same key, from the address they send to.
    path("taxonomy", api.TaxonomyApi.as_view(), name="api-taxonomy"),
    path("tool-policies", api.ToolPoliciesApi.as_view(), name="api-tool-policies"),
    # Declared by runtimes and CI when they deploy, with the key they ingest with.
    path("releases", api.ReleasesApi.as_view(), name="api-releases"),
]

api_urlpatterns = [
    *ingest_urlpatterns,
    path("failures", api.FailureListApi.as_view(), name="api-failures"),
    path("groups", api.GroupListApi.as_view(), name="api-groups"),
]

urlpatterns = [
    path("", groups.triage_page, name="home"),
    path("triage/groups/<int:group_id>/", groups.group_page, name="group"),
    path("triage/groups/<int:group_id>/act", groups.group_act_view, name="group-act"),
    path(
        "triage/groups/<int:group_id>/undo/<int:action_id>",
        groups.group_undo_view,
        name="group-undo",
    ),
    path("triage/groups/<int:group_id>/runbook", groups.group_runbook_view, name="group-runbook"),
    path("triage/bulk", groups.bulk_act_view, name="bulk"),
    path("triage/bulk/<int:bulk_id>/undo", groups.bulk_undo_view, name="bulk-undo"),
    *receipts.urlpatterns,
    *ingestion.urlpatterns,
    *preferences.urlpatterns,
]
