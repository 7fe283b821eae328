from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from tests.oidc.provider import views

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("test/people", views.person_set),
    path("test/client", views.client_set),
    path("test/id-token", views.id_token_mode_set),
]
