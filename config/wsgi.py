"""WSGI entry point (gunicorn config.wsgi)."""

from __future__ import annotations

import gc
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from config.priority import give_way

# How many allocations (less deallocations) the garbage collector lets pass between young
# collections in a web or ingest worker (Python's default: 700). See below.
YOUNG_COLLECTION_ALLOCATIONS = 20_000

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# Load every view module now instead of at the first request, then take everything loaded
# so far out of the garbage collector's full collections: it lives as long as the process,
# and scanning its ~100,000 objects added about 45 ms to one request in ten of a busy page
# (the default triage page at a million records, requested in a loop: p95 about 90 ms
# before, about 60 ms after, p50 unchanged at about 45 ms).
get_resolver().url_patterns  # noqa: B018
gc.freeze()
# A page request allocates some 100,000 objects (a busy triage page's rows), nearly all of
# them freed when it ends. At Python's default of a young collection every 700 allocations,
# each request ran 17 of them, 1.6 of the middle generation and one full collection in seven
# requests (about 11 ms each, scanning what the requests had pushed into the old generation):
# 7.0 ms of collection a request on average, 39 ms at worst, measured with gc.callbacks on
# the default triage page at a million records. A young collection every 20,000 allocations
# runs about one in three requests: 3.1 ms a request, 21 ms at worst, no full collection in
# 60 requests. What it costs is that much more memory held by garbage between collections.
# Since then the pages' template engine frees a page's context when the page is written
# (core.templates): the busy triage page's rows no longer wait for a collection, which now
# runs about one request in twenty (0.3 ms a request on average instead of 4.5).
gc.set_threshold(YOUNG_COLLECTION_ALLOCATIONS, *gc.get_threshold()[1:])

# The workers of one master share its batch slots (triage/intake/capacity.py): a batch takes any
# free slot of the pool, whichever worker holds its connection.
from triage.intake.capacity import share_with_pool  # noqa: E402 (needs the apps loaded above)

share_with_pool(os.getppid())

# The ingest pool gives way to the pages for CPU: its worker runs at a lower priority. Set
# here, in the worker's main thread before its request threads start, so they inherit it.
if settings.TRIAGE_POOL == "ingest" and settings.TRIAGE_INGEST_NICE:
    give_way(settings.TRIAGE_INGEST_NICE)
