from __future__ import annotations

from django.urls import path

from organisation import views

app_name = "organisation"

urlpatterns = [
    path("teams/", views.teams_page, name="teams"),
    path("teams/new", views.team_create_view, name="team-create"),
    path("teams/<int:team_id>/", views.team_page, name="team"),
    path("teams/<int:team_id>/rename", views.team_rename_view, name="team-rename"),
    path("teams/<int:team_id>/delete", views.team_delete_view, name="team-delete"),
    path("teams/<int:team_id>/members", views.member_set_view, name="member-set"),
    path(
        "teams/<int:team_id>/members/<int:membership_id>/remove",
        views.member_remove_view,
        name="member-remove",
    ),
    path("teams/<int:team_id>/collections", views.collection_give_view, name="collection-give"),
    path(
        "teams/<int:team_id>/collections/<int:owned_id>/remove",
        views.collection_take_view,
        name="collection-take",
    ),
    path("audit/", views.audit_page, name="audit"),
]
