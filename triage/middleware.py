"""Every request is read and shown in the person's time zone (triage.timezones)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from triage.timezones import zone_for_request


class PersonTimeZoneMiddleware:
    """Activates the person's zone for the request: templates' dates and the times people
    type into forms (a mute until 19:03, a custom window) are in it. After authentication,
    which it needs to find the person's preference."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        person_zone = zone_for_request(request)
        request.person_zone = person_zone  # type: ignore[attr-defined]
        timezone.activate(person_zone.zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
