"""The Celery application; settings come from Django settings prefixed CELERY_."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger
from django.conf import settings

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


@after_setup_logger.connect
@after_setup_task_logger.connect
def scrub_worker_logs(*, logger: logging.Logger, **kwargs: Any) -> None:
    """Put the scrubbing filter on the handlers Celery installs when a worker or beat starts:
    it replaces the root logger's handlers (and with them the filter settings.LOGGING put
    there) and gives the task logger a handler of its own. A task's stdout goes to the root
    logger, so it is covered too."""
    from triage.scrub import ScrubLogFilter

    for handler in logger.handlers:
        if not any(isinstance(existing, ScrubLogFilter) for existing in handler.filters):
            handler.addFilter(ScrubLogFilter())


# How hard a send tries to reach the broker before giving up. Left to kombu, a producer
# retries its connection 2 s apart until the connect timeout has passed: 6 s of waiting
# for a person starting a run, or for an ingest request, for the same answer.
_BROKER_CONNECT_RETRIES = 1
_BROKER_RETRY_INTERVAL_SECONDS = 0.25


def publish(task: Any, **kwargs: Any) -> None:
    """Send `task` with `kwargs`, failing within a fraction of a second when the broker is
    down (kombu's BrokerError or an OSError); callers decide what that means to them."""
    # Connect the pool's producer with a short retry first; the send below takes the same
    # producer back (the pool is last in, first out) and finds it connected.
    producers: Any = app.producer_pool
    producer = producers.acquire(block=True)
    try:
        producer.connection.ensure_connection(
            max_retries=_BROKER_CONNECT_RETRIES,
            interval_start=_BROKER_RETRY_INTERVAL_SECONDS,
            interval_step=_BROKER_RETRY_INTERVAL_SECONDS,
            timeout=settings.CELERY_BROKER_CONNECTION_TIMEOUT,
        )
    finally:
        producer.release()
    task.apply_async(kwargs=kwargs, retry=False)
