from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.utils import translation

from triage.vocabulary import taxonomy


class TriageConfig(AppConfig):
    name = "triage"
    verbose_name = "Triage"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        user_logged_in.connect(_remember_chosen_zone, dispatch_uid="triage-person-time-zone")
        taxonomy.use_message_catalog(_DjangoCatalog())


def _remember_chosen_zone(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """The person's time zone rides in their session from sign-in (triage.timezones)."""
    from triage.timezones import remember_chosen_zone

    if request is not None and hasattr(request, "session"):
        remember_chosen_zone(request, user)


class _DjangoCatalog(taxonomy.MessageCatalog):
    """The taxonomy's texts from Django's message catalogs (locale/), in any language."""

    def text(self, message: str, language: str) -> str:
        if not message:
            return ""
        with translation.override(language):
            return str(translation.gettext(message))
