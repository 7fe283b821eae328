from __future__ import annotations

from django.urls import URLPattern, path

from fixes import views

app_name = "fixes"
urlpatterns: list[URLPattern] = [
    path("", views.fixes_page, name="home"),
    path("resolve/<int:group_id>", views.resolve_view, name="resolve"),
    path("<int:fix_id>/verify", views.verify_view, name="verify"),
]
