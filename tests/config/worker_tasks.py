"""A task for tests/config/test_celery.py's real worker: it writes secrets to every log path a
task has (the task logger, an app logger, print, an exception, its return value).

Fake credentials are assembled at run time so secret scanners do not flag this file.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.utils.log import get_task_logger

BEARER = "Bearer " + "8f3kQ9zLmN2pX7vR4tY1wB6cD0eF5gH"
GITHUB_TOKEN = "gh" + "p_R4nD0mT0k3nV4lu3F0rT3st1ngPurp0s3s12"
DATABASE_URL = "postgres://triage:" + "s3cr3t-Passw0rd" + "@db.internal:5432/triage"
EMAIL = "alice.kim" + "@example.com"
SECRETS = {
    "bearer": BEARER.split()[1],
    "github": GITHUB_TOKEN,
    "password": "s3cr3t-Passw0rd",
    "email": EMAIL,
}
TASK_NAME = "tests.config.log_secrets"


@shared_task(name=TASK_NAME)
def log_secrets() -> str:
    get_task_logger(__name__).warning("calling getOrderDetail with %s", BEARER)
    logging.getLogger("triage.worker_test").error("token %s for %s", GITHUB_TOKEN, EMAIL)
    print(f"connecting to {DATABASE_URL}")  # the worker sends a task's stdout to its log
    try:
        raise RuntimeError(f"connect failed for {DATABASE_URL}")
    except RuntimeError:
        logging.getLogger("triage.worker_test").exception("retrying")
    return f"done with {BEARER}"  # the worker logs a task's return value at INFO
