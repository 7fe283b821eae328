"""Model fields shared by the apps."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core import outbound
from core.collection_names import collection_name_problem_parts


def validate_collection_name(value: Any) -> None:
    """The one rule for collection names (core.collection_names), for forms and models."""
    parts = collection_name_problem_parts(value)
    if parts is not None:
        message, params = parts
        problem = gettext(message) % params if params else gettext(message)
        raise ValidationError(
            gettext("The name %(problem)s.") % {"problem": problem},
            code="invalid_collection_name",
        )


def clean_shown_link(value: str) -> str:
    """A link the desk shows to everyone (a runbook, a fix's commit): http(s), without a
    user name or password in it. Returns it stripped; "" stays ""."""
    url = (value or "").strip()
    if not url:
        return ""
    URLValidator(
        schemes=["http", "https"],
        message=_("Enter a full web address starting with https:// or http://."),
    )(url)
    authority = url.split("://", 1)[1].split("/", 1)[0]
    if "@" in authority:
        raise ValidationError(
            _("Leave the user name and password out of the link: it is shown to everyone."),
            code="credentials_in_url",
        )
    return url


def validate_outbound_url(value: Any) -> None:
    """A URL the desk may call by its form (core.outbound.url_problem): http(s), a host
    of one label (``http://sandbox:8090``) or several; where it points is judged when the
    host is resolved, not here."""
    problem = outbound.url_problem(str(value))
    if problem is not None:
        raise ValidationError(
            _("Enter an http or https URL with a valid host: %(problem)s."),
            code="invalid_url",
            params={"problem": problem},
        )


class BulkJSONField(models.JSONField):
    """A JSONField for tables written with bulk_create.

    On PostgreSQL, Django inserts several rows as one array parameter per column
    (``INSERT ... SELECT * FROM UNNEST(%s::jsonb[], ...)``); psycopg writes a jsonb[] array
    by escaping every quote of every document with a regular expression in Python, which
    made inserting a Quality Lab result (about 4 KB of JSON) take 590 µs instead of 215 µs
    with one parameter per value (``bench/qualitylab.py --profile``). A field with its own
    placeholder makes Django use plain multi-row VALUES for the whole insert.
    """

    def get_placeholder(self, value: Any, compiler: Any, connection: Any) -> str:
        return "%s"
