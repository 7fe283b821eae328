"""The sign-in form: Django's, with a refusal each language can phrase whole.

Django's own message glues the username field's label into "Please enter a correct
%(username)s and password", which forces a particle guessed after a value in Korean
("사용자 이름와/과"); this one names the field the same way and lets the catalog order it.
"""

from __future__ import annotations

from django.contrib.auth.forms import AuthenticationForm
from django.utils.translation import gettext_lazy as _


class SignInForm(AuthenticationForm):
    """Django's sign-in form with a refusal message of the project's catalog."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": _(
            "Please enter a correct %(username)s and password. Note that both fields may be "
            "case-sensitive."
        ),
    }
