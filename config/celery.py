"""The Celery application; settings come from Django settings prefixed CELERY_."""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("triage_desk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def ensure_filesystem_broker_folders() -> None:
    """The embedded broker is a folder; kombu expects it to exist before anyone connects."""
    if not str(app.conf.broker_url).startswith("filesystem://"):
        return
    options = app.conf.broker_transport_options
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)


ensure_filesystem_broker_folders()
