"""Signing in with a password, and the sign-in page both doors share.

The form is Django's, with a refusal each language can phrase whole: Django's own message
glues the username field's label into "Please enter a correct %(username)s and password",
which forces a particle guessed after a value in Korean ("사용자 이름와/과"); this one names
the field the same way and lets the catalog order it.

Passwords can be turned off (``TRIAGE_LOCAL_LOGIN=0``, docs/sign-in.md): the page then
offers the identity provider only, a password is refused, and only the break-glass admin
(``manage.py break_glass_admin``) may still sign in with one, at ``?break_glass=1``. The
refusal lives in the authentication backend, so the Django admin's sign-in obeys it too.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from organisation.models import BreakGlassAccount
from triage.language import PreferenceModelBackend

# The query parameter that shows the password form while passwords are off (break glass).
BREAK_GLASS_PARAMETER = "break_glass"


class SignInForm(AuthenticationForm):
    """Django's sign-in form with a refusal message of the project's catalog."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": _(
            "Please enter a correct %(username)s and password. Note that both fields may be "
            "case-sensitive."
        ),
    }


def password_allowed(user: Any) -> bool:
    """Whether this account may sign in (and stay signed in) with a password."""
    if settings.TRIAGE_LOCAL_LOGIN:
        return True
    return BreakGlassAccount.objects.filter(person_id=user.pk).exists()


class LocalPasswordBackend(PreferenceModelBackend):
    """Django's password check. While passwords are off it opens for the break-glass admin
    only, and their printed password opens once: the next time takes the command again."""

    def user_can_authenticate(self, user: Any) -> bool:
        # Also asked for every request of a session this backend opened: a person signed in
        # with a password before passwords were turned off is signed out.
        return super().user_can_authenticate(user) and password_allowed(user)

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None,
        password: str | None = None, **kwargs: Any,
    ) -> Any:  # fmt: skip
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and not settings.TRIAGE_LOCAL_LOGIN:
            # The session's hash is taken after this, from the new (unusable) password.
            user.set_unusable_password()
            user.save(update_fields=["password"])
        return user


def sign_in_context(request: HttpRequest) -> dict[str, Any]:
    """What the sign-in page offers: the provider's button, the password form, or both."""
    return {
        "oidc_enabled": settings.TRIAGE_OIDC_ENABLED,
        "provider_name": settings.TRIAGE_OIDC_PROVIDER_NAME,
        "password_form_shown": settings.TRIAGE_LOCAL_LOGIN or BREAK_GLASS_PARAMETER in request.GET,
    }


def sign_in_refused(request: HttpRequest, *, refusal: str, status: int) -> HttpResponse:
    """The sign-in page again, saying why the person was not signed in."""
    context = {**sign_in_context(request), "form": SignInForm(request), "refusal": refusal}
    return TemplateResponse(request, "registration/login.html", context, status=status)


class SignInView(LoginView):
    """Django's sign-in view. While passwords are off, a password that does not open the
    break-glass account is refused (403) whoever it names, so the page does not tell which
    account is the break-glass one."""

    authentication_form = SignInForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), **sign_in_context(self.request)}

    def form_invalid(self, form: Any) -> HttpResponse:
        if settings.TRIAGE_LOCAL_LOGIN:
            return super().form_invalid(form)
        response = self.render_to_response(
            self.get_context_data(
                form=form,
                refusal=gettext(
                    "Signing in with a password is turned off here. Sign in with %(provider)s."
                )
                % {"provider": settings.TRIAGE_OIDC_PROVIDER_NAME},
            )
        )
        response.status_code = 403
        return response
