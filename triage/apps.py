from __future__ import annotations

from typing import Any

from django.apps import AppConfig


class TriageConfig(AppConfig):
    name = "triage"
    verbose_name = "Triage"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        user_logged_in.connect(_remember_chosen_zone, dispatch_uid="triage-person-time-zone")


def _remember_chosen_zone(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """The person's time zone rides in their session from sign-in (triage.timezones)."""
    from triage.timezones import remember_chosen_zone

    if request is not None and hasattr(request, "session"):
        remember_chosen_zone(request, user)
