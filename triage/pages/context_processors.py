"""Navigation and the signed-in person's roles, for every page."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext, gettext_lazy

from organisation.roles import ROLE_LABELS, team_only_roles, user_roles
from triage.timezones import SERVER, abbreviation

# (label, URL name). An entry whose page does not exist yet is left out, not shown dead.
NAVIGATION = (
    (gettext_lazy("Triage"), "triage:home"),
    (gettext_lazy("Receipts"), "triage:receipts"),
    (gettext_lazy("Contracts"), "contracts:home"),
    (gettext_lazy("Fixes"), "fixes:home"),
    (gettext_lazy("Quality Lab"), "qualitylab:home"),
    (gettext_lazy("Learning"), "learning:home"),
    (gettext_lazy("Ingestion"), "triage:ingestion"),
    (gettext_lazy("Alerts"), "alerts:home"),
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
        if name == "triage:home" and request.path.startswith("/triage/"):
            active = True
        items.append({"label": label, "url": url, "active": active})
    roles = [str(ROLE_LABELS[role]) for role in user_roles(request.user)]
    # A role held in teams only applies to their collections, and the header says so.
    roles += [
        gettext("%(role)s in teams") % {"role": ROLE_LABELS[role]}
        for role in team_only_roles(request.user)
    ]
    return {"main_nav": items, "user_roles": roles}


def time_zone(request: HttpRequest) -> dict[str, Any]:
    """The zone the page's times are in, for the label in the top bar and for desk.js, which
    sends the browser's zone when the person chose none."""
    person_zone = getattr(request, "person_zone", None)
    return {
        "time_zone": {
            "name": person_zone.name if person_zone else "",
            "source": person_zone.source if person_zone else SERVER,
            "abbreviation": abbreviation(),
            # Reloading shows a page in the browser's zone at once; only a page a GET
            # showed may be reloaded, and only a person's (a sign-in page shows no times).
            "reloadable": request.method == "GET" and request.user.is_authenticated,
        }
    }
