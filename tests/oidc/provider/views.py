"""What a test changes at the provider while it runs: a person and their groups, the
desk's redirect URI, and how the next ID tokens are spoilt. Loopback only, and only with the
control token the fixture gave at start."""

from __future__ import annotations

import json
import os
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oauth2_provider.models import get_application_model

from tests.oidc.provider.validator import ID_TOKEN_MODES, id_token_mode_path


def _controlled(view: Any) -> Any:
    @csrf_exempt
    @require_POST
    def checked(request: HttpRequest) -> HttpResponse:
        if request.headers.get("X-Test-Control") != os.environ["OIDC_PROVIDER_CONTROL_TOKEN"]:
            return JsonResponse({"error": "control token"}, status=403)
        return view(json.loads(request.body))

    return checked


@_controlled
def person_set(body: dict[str, Any]) -> HttpResponse:
    person, _ = get_user_model().objects.get_or_create(username=body["username"])
    person.set_password(body["password"])
    person.email = body.get("email", "")
    person.first_name = body.get("given_name", "")
    person.save()
    person.groups.set([Group.objects.get_or_create(name=name)[0] for name in body["groups"]])
    return JsonResponse({"sub": str(person.pk)})


@_controlled
def client_set(body: dict[str, Any]) -> HttpResponse:
    get_application_model().objects.filter(client_id=body["client_id"]).update(
        redirect_uris=body["redirect_uri"]
    )
    return JsonResponse({})


@_controlled
def id_token_mode_set(body: dict[str, Any]) -> HttpResponse:
    if body["mode"] not in ID_TOKEN_MODES:
        return JsonResponse({"error": "mode"}, status=400)
    id_token_mode_path().write_text(body["mode"])
    return JsonResponse({})
