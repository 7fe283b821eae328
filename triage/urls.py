from __future__ import annotations

from django.urls import path

from triage import api

app_name = "triage"

api_urlpatterns = [
    path("ingest", api.IngestApi.as_view(), name="api-ingest"),
    path("failures", api.FailureListApi.as_view(), name="api-failures"),
    path("groups", api.GroupListApi.as_view(), name="api-groups"),
]
