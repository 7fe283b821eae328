from __future__ import annotations

from django.urls import URLPattern

app_name = "learning"

urlpatterns: list[URLPattern] = []
