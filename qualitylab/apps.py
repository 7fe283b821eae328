from __future__ import annotations

from django.apps import AppConfig


class QualityLabConfig(AppConfig):
    name = "qualitylab"
    verbose_name = "Quality Lab"
