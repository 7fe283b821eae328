"""A refused form keeps what the person typed: its values cross the redirect back to the
page in the session, and the page binds the form to them again, so each field shows its
error beside what was typed. Errors are said with the fields' labels, never their names."""

from __future__ import annotations

import time

from django import forms
from django.http import HttpRequest, QueryDict
from django.utils.translation import gettext as _

_SESSION_KEY = "form_draft"
# A draft is for the page the refusal sends the person back to, not for a visit much later.
DRAFT_LIFETIME_SECONDS = 600
# Never kept: the CSRF token is the page's own, and a draft is text a person typed.
_SKIPPED = {"csrfmiddlewaretoken"}


def draft_keep(
    request: HttpRequest, *, key: str, form: forms.Form, extra: dict[str, str] | None = None
) -> None:
    """Keep the values of a refused form for the page ``key`` names (the latest only);
    ``extra`` adds values of its own (which of a page's forms it was)."""
    data = form.data
    values = {
        name: data.getlist(name) if isinstance(data, QueryDict) else [str(data[name])]
        for name in data
        if name not in _SKIPPED
    }
    values.update({name: [value] for name, value in (extra or {}).items()})
    request.session[_SESSION_KEY] = {"key": key, "values": values, "at": time.time()}


def draft_take(request: HttpRequest, *, key: str) -> QueryDict | None:
    """The kept values for the page ``key`` names, once; None when there are none."""
    draft = request.session.get(_SESSION_KEY)
    if not isinstance(draft, dict) or draft.get("key") != key:
        return None
    del request.session[_SESSION_KEY]
    if time.time() - float(draft.get("at") or 0) > DRAFT_LIFETIME_SECONDS:
        return None
    values = QueryDict(mutable=True)
    for name, items in (draft.get("values") or {}).items():
        values.setlist(name, [str(item) for item in items])
    return values


def errors_in_words(form: forms.Form) -> str:
    """'Mute until: The mute must end in the future.': the label a person sees, not the
    field's name in the code."""
    parts = []
    for name, errors in form.errors.items():
        text = " ".join(str(error) for error in errors)
        if name not in form.fields:  # the form's own errors, or one about the whole form
            parts.append(text)
        else:
            parts.append(_("%(label)s: %(errors)s") % {"label": form[name].label, "errors": text})
    return " ".join(parts)
