"""Collection names: one rule wherever a name enters the desk.

Failures, receipts, runner events, learning attempts, the Quality Lab forms, the tool-policy
form and the command line all check a collection name here, so a name one door accepts is
never one another door (or a page) cannot handle. Real ids look like ``checkout.v2``,
``team a`` or ``체크아웃``: any text is a name, except what cannot be stored or shown:
empty, longer than ``COLLECTION_NAME_MAX_LENGTH``, spaces at either end (``"shop "`` would
look like ``"shop"`` everywhere), control and invisible format characters (NUL, line
breaks, bidirectional overrides, zero-width characters), lone surrogates and private-use
characters. Pages put any stored name in a URL through the ``collection`` path converter
(qualitylab.converters).

Standard library only, like the rest of the vocabulary: no Django, no models, so the ingest
doors and the client can use it as it is.
"""

from __future__ import annotations

import unicodedata

COLLECTION_NAME_MAX_LENGTH = 100
# The per-item error code of the ingest API for a collection name this rule refuses.
INVALID_COLLECTION_NAME = "invalid_collection_name"
# Control, format (invisible), surrogate and private-use characters; line and paragraph
# separators. Ordinary spaces inside a name are fine.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})


class CollectionNameError(ValueError):
    """A collection name the rule refuses; the message says why without echoing it."""

    code = INVALID_COLLECTION_NAME


def gettext_noop(message: str) -> str:
    """Marks a text for the message catalog (makemessages reads this name) without Django:
    the form that shows it translates it (core/fields.py)."""
    return message


def collection_name_problem_parts(name: object) -> tuple[str, dict[str, object]] | None:
    """Why ``name`` cannot be a collection name, as a sentence to follow "the name" with
    %-placeholders and their values (so a page can translate it), or None."""
    if not isinstance(name, str):
        return gettext_noop("must be text"), {}
    if not name:
        return gettext_noop("is empty"), {}
    if len(name) > COLLECTION_NAME_MAX_LENGTH:
        return gettext_noop("is longer than %(limit)d characters"), {
            "limit": COLLECTION_NAME_MAX_LENGTH
        }
    if name != name.strip():
        return gettext_noop("starts or ends with a space"), {}
    for character in name:
        if unicodedata.category(character) in _REFUSED_CATEGORIES:
            return gettext_noop(
                "contains a control or invisible character (U+%(code)s); "
                "names are shown on pages and put in URLs"
            ), {"code": f"{ord(character):04X}"}
    return None


def collection_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a collection name (a sentence to follow "the name"), or None."""
    parts = collection_name_problem_parts(name)
    if parts is None:
        return None
    message, params = parts
    return message % params if params else message


def check_collection_name(name: object) -> str:
    """The name itself when the rule accepts it; else CollectionNameError."""
    problem = collection_name_problem(name)
    if problem is not None:
        raise CollectionNameError(f"The collection name {problem}.")
    assert isinstance(name, str)
    return name
