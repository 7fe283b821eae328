"""The ingest pool's URLs (TRIAGE_POOL=ingest): the ingest doors and /healthz, nothing else.

Runtimes send here; people use the web pool, which serves these URLs too. A page asked of the
ingest pool answers 404, so a misrouted browser never makes ingest workers render pages.
"""

from __future__ import annotations

from django.urls import include, path

from config.urls import healthz
from triage.intake.otlp import OtlpTracesApi
from triage.urls import ingest_urlpatterns

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include((ingest_urlpatterns, "api"))),
    path("v1/traces", OtlpTracesApi.as_view(), name="otlp-traces"),
]
