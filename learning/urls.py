from __future__ import annotations

from django.urls import URLPattern, path

import qualitylab.converters  # noqa: F401 (registers the `collection` path converter)
from learning import views

app_name = "learning"

urlpatterns: list[URLPattern] = [
    path("", views.review_page, name="home"),
    path("suggestions/<int:suggestion_id>/", views.suggestion_page, name="suggestion"),
    path(
        "suggestions/<int:suggestion_id>/approve",
        views.suggestion_approve_view,
        name="suggestion-approve",
    ),
    path(
        "suggestions/<int:suggestion_id>/reject",
        views.suggestion_reject_view,
        name="suggestion-reject",
    ),
    path(
        "suggestions/<int:suggestion_id>/demote",
        views.suggestion_demote_view,
        name="suggestion-demote",
    ),
    path(
        "suggestions/<int:suggestion_id>/reopen",
        views.suggestion_reopen_view,
        name="suggestion-reopen",
    ),
    path("collections/<collection:name>/policy", views.collection_policy_view, name="policy"),
]
