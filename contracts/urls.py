from __future__ import annotations

from django.urls import URLPattern, path

from contracts import views

app_name = "contracts"
urlpatterns: list[URLPattern] = [
    path("", views.contracts_page, name="home"),
    path("findings", views.findings_page, name="findings"),
]
