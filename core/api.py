"""What the read APIs share."""

from __future__ import annotations

from django import forms
from rest_framework.exceptions import ValidationError


def form_refusal(form: forms.Form) -> ValidationError:
    """A 400 naming the first refused parameter, its message and its stable code."""
    field, errors = next(iter(form.errors.as_data().items()))
    error = errors[0]
    message = error.message % error.params if error.params else error.message
    return ValidationError({field: [str(message)]}, code=error.code or "invalid")
