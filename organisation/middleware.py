"""Remembers whose request is being served, so that a change made where no service names
its actor (a role granted on the Django admin's user page) is audited as theirs."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from organisation.audit import acting_as


class ActingPersonMiddleware:
    """After authentication: ``organisation.audit.acting_person()`` is the request's user."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # The user stays lazy: a request that changes nothing audited never loads it here.
        with acting_as(getattr(request, "user", None)):
            return self.get_response(request)
