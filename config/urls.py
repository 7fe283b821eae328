from __future__ import annotations

from csp.constants import UNSAFE_INLINE
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.decorators.http import require_http_methods, require_safe
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from config.login import SignInView
from contracts.api import ContractsApi
from fixes.api import FixesApi
from learning.api_urls import urlpatterns as learning_api_urls
from organisation.api import AuditListApi
from triage.intake.otlp import OtlpTracesApi
from triage.language import language_choose_view
from triage.urls import api_urlpatterns


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness with a database round trip, for load balancers and the demo launcher."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        return JsonResponse({"status": "database_unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Django's sign-in view takes PUT as a POST: it answers GET and POST only.
    path(
        "accounts/login/",
        require_http_methods(["GET", "POST"])(SignInView.as_view()),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # OpenID Connect sign-in (config/oidc.py): 404 while it is off.
    path("oidc/", include("mozilla_django_oidc.urls")),
    # The header's language switch (Django's set_language, remembered per person).
    path("i18n/setlang/", language_choose_view, name="set_language"),
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_urlpatterns, "api"))),
    # OTLP/HTTP's fixed path: OTel exporters append it to OTEL_EXPORTER_OTLP_ENDPOINT.
    path("v1/traces", OtlpTracesApi.as_view(), name="otlp-traces"),
    path("api/v1/learning/", include((learning_api_urls, "learning-api"))),
    path("api/v1/contracts", ContractsApi.as_view(), name="api-contracts"),
    path("api/v1/fixes", FixesApi.as_view(), name="api-fixes"),
    path("api/v1/audit", AuditListApi.as_view(), name="api-audit"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        # Swagger UI's script comes from a URL of its own (the split view), as the CSP wants;
        # the UI still sets inline styles and data: images, allowed on this page only.
        csp_update({"style-src": [UNSAFE_INLINE], "img-src": ["data:"]})(
            SpectacularSwaggerSplitView.as_view(url_name="api-schema")
        ),
        name="api-docs",
    ),
    path("qualitylab/", include("qualitylab.urls")),
    path("learning/", include("learning.urls")),
    path("alerts/", include("alerts.urls")),
    path("contracts/", include("contracts.urls")),
    path("fixes/", include("fixes.urls")),
    path("organisation/", include("organisation.urls")),
    path("", include("triage.urls")),
]
