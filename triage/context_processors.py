"""Navigation and the signed-in person's roles, for every page."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from triage.roles import user_roles

# (label, URL name). An entry whose page does not exist yet is left out, not shown dead.
NAVIGATION = (
    ("Triage", "triage:home"),
    ("Receipts", "triage:receipts"),
    ("Quality Lab", "qualitylab:home"),
    ("Learning", "learning:home"),
    ("Ingestion", "triage:ingestion"),
    ("Alerts", "alerts:home"),
)


def navigation(request: HttpRequest) -> dict[str, Any]:
    if not request.user.is_authenticated:
        return {}
    items = []
    for label, name in NAVIGATION:
        try:
            url = reverse(name)
        except NoReverseMatch:
            continue
        active = request.path == url if url == "/" else request.path.startswith(url)
        if label == "Triage" and request.path.startswith("/triage/"):
            active = True
        items.append({"label": label, "url": url, "active": active})
    return {"main_nav": items, "user_roles": user_roles(request.user)}
