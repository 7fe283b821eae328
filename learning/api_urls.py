"""Mounted at /api/v1/learning/ by config/urls.py."""

from __future__ import annotations

from django.urls import URLPattern, path

from learning import api

urlpatterns: list[URLPattern] = [
    path("suggestions", api.SuggestionExportApi.as_view(), name="suggestions"),
]
