from __future__ import annotations

from django.apps import AppConfig


class OrganisationConfig(AppConfig):
    name = "organisation"
    verbose_name = "Organisation"
