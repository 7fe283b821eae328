"""WSGI entry point (gunicorn config.wsgi)."""

from __future__ import annotations

import gc
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from config.priority import give_way

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# Load every view module now instead of at the first request, then take everything loaded
# so far out of the garbage collector's full collections: it lives as long as the process,
# and scanning its ~100,000 objects added about 45 ms to one request in ten of a busy page
# (the default triage page at a million records, requested in a loop: p95 about 90 ms
# before, about 60 ms after, p50 unchanged at about 45 ms).
get_resolver().url_patterns  # noqa: B018
gc.freeze()

# The workers of one master share its batch slots (triage/intake/capacity.py): a batch takes any
# free slot of the pool, whichever worker holds its connection.
from triage.intake.capacity import share_with_pool  # noqa: E402 (needs the apps loaded above)

share_with_pool(os.getppid())

# The ingest pool gives way to the pages for CPU: its worker runs at a lower priority. Set
# here, in the worker's main thread before its request threads start, so they inherit it.
if settings.TRIAGE_POOL == "ingest" and settings.TRIAGE_INGEST_NICE:
    give_way(settings.TRIAGE_INGEST_NICE)
