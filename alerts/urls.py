from __future__ import annotations

from django.urls import path

from alerts import views

app_name = "alerts"

urlpatterns = [
    path("", views.alerts_page, name="home"),
    path("rules/new", views.rule_create_view, name="rule-create"),
    path("rules/<int:rule_id>/edit", views.rule_edit_view, name="rule-edit"),
    path("rules/<int:rule_id>/delete", views.rule_delete_view, name="rule-delete"),
    path("channels/new", views.channel_create_view, name="channel-create"),
    path("channels/<int:channel_id>/edit", views.channel_edit_view, name="channel-edit"),
    path("channels/<int:channel_id>/test", views.channel_test_view, name="channel-test"),
    path("channels/<int:channel_id>/delete", views.channel_delete_view, name="channel-delete"),
]
