"""The language a page is read in: the person's stored choice, else the browser's.

Django's LocaleMiddleware activates the language cookie (set by the header's switch) or
Accept-Language. For a signed-in person who chose a language, that choice wins on every
request and in every browser: it lives on ``PersonPreference.language``, loaded with the
user in the same query (``PreferenceModelBackend``), so a page costs no query more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group
from django.db.models import Exists, OuterRef, Q
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.utils import translation
from django.utils.translation import gettext
from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from organisation.models import Membership
from organisation.roles import NOT_FROM_TEAMS
from triage.models import PersonPreference
from triage.services import person_language_set

# The doors machines read speak English whatever the browser says: the API's codes, field
# names, messages and OpenAPI schema are contracts, the same for every reader.
MACHINE_PATHS = ("/api/", "/v1/")


def supported_language(code: str) -> str:
    """``code`` when the desk speaks it (one of settings.LANGUAGES), else ""."""
    return code if code in dict(settings.LANGUAGES) else ""


def stored_language(user: Any) -> str:
    """The language a signed-in person chose, or "" (not chosen: the browser's applies)."""
    if not getattr(user, "is_authenticated", False):
        return ""
    try:
        preference = user.preference
    except PersonPreference.DoesNotExist:
        return ""
    return supported_language(preference.language)


class PreferenceModelBackend(ModelBackend):
    """Django's ModelBackend; the user of each request comes with their preference, and the
    permissions of their groups come with the groups' names (the roles every page shows,
    organisation.roles.user_roles), in one query."""

    def get_user(self, user_id: Any) -> Any:
        user_model = get_user_model()
        try:
            user = user_model._default_manager.select_related("preference").get(pk=user_id)
        except user_model.DoesNotExist:
            return None
        return user if self.user_can_authenticate(user) else None

    def get_group_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        """The permissions of the person's roles: those held outside teams (their groups) and
        those of their roles in teams (organisation.access), in one query. What a team role
        grants applies to that team's collections only; the pages that act check it there
        (organisation.access.has_collection_perm)."""
        if user_obj.is_superuser or obj is not None:
            return super().get_group_permissions(user_obj, obj)
        if not user_obj.is_active or user_obj.is_anonymous:
            return set()
        if not hasattr(user_obj, "_group_perm_cache"):
            held = Group.user_set.through.objects.filter(
                user_id=user_obj.pk, group_id=OuterRef("pk")
            )
            in_team = Membership.objects.filter(person_id=user_obj.pk).values("role")
            rows = list(
                Group.objects.filter(Q(Exists(held)) | Q(name__in=in_team))
                .annotate(held=Exists(held))
                .values_list(
                    "name", "held", "permissions__content_type__app_label", "permissions__codename"
                )
            )
            user_obj._group_names_cache = {name for name, held, _, _ in rows if held}
            user_obj._team_role_names_cache = {name for name, held, _, _ in rows if not held}
            user_obj._global_perm_cache = {
                f"{app}.{code}" for _, held, app, code in rows if code and held
            }
            from_teams = {
                f"{app}.{code}" for _, held, app, code in rows if code and not held
            } - NOT_FROM_TEAMS
            user_obj._group_perm_cache = user_obj._global_perm_cache | from_teams
        return set(user_obj._group_perm_cache)


class PreferredLanguageMiddleware:
    """After authentication: a signed-in person's stored language replaces the browser's,
    and the language cookie follows it, so the sign-in page after signing out reads the
    same."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.startswith(MACHINE_PATHS):
            translation.activate(settings.LANGUAGE_CODE)
            request.LANGUAGE_CODE = settings.LANGUAGE_CODE
            return self.get_response(request)
        language = stored_language(getattr(request, "user", None))
        if language and language != translation.get_language():
            translation.activate(language)
            request.LANGUAGE_CODE = language
        response = self.get_response(request)
        if language and request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) != language:
            response.set_cookie(
                settings.LANGUAGE_COOKIE_NAME,
                language,
                max_age=settings.LANGUAGE_COOKIE_AGE,
                path=settings.LANGUAGE_COOKIE_PATH,
                domain=settings.LANGUAGE_COOKIE_DOMAIN,
                secure=settings.LANGUAGE_COOKIE_SECURE,
                httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
                samesite=settings.LANGUAGE_COOKIE_SAMESITE,
            )
        return response


@require_POST
def language_choose_view(request: HttpRequest) -> HttpResponse:
    """The header's switch: Django's set_language (cookie, then back to the page), and for a
    signed-in person the choice is stored, so it follows them to other browsers."""
    language = supported_language(request.POST.get("language", ""))
    if not language:
        return HttpResponseBadRequest(gettext("Choose English or Korean."))
    if request.user.is_authenticated:
        person_language_set(user=request.user, language=language)
    return set_language(request)
