"""Path converters: `collection` carries any stored collection name as one URL segment;
`text` is any other free-text id (a case id).

Names may hold spaces, dots, Hangul, '%' or even '/' (a name stored before the one rule of
core.collection_names, or one it accepts). Django's `reverse` percent-encodes the segment
but leaves '/' as it is, and browsers resolve "." and ".." segments (also when written
%2E), so those two are escaped once more here and unescaped when the URL comes back:
'%' -> %25, '/' -> %2F, and a name of dots only -> %2E per dot.
"""

from __future__ import annotations

from urllib.parse import unquote

from django.urls import register_converter


class CollectionNameConverter:
    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        name = unquote(value)
        if "\x00" in name:
            raise ValueError("no database stores NUL in text")  # -> 404, not a database error
        return name

    def to_url(self, value: str) -> str:
        name = str(value)
        escaped = name.replace("%", "%25").replace("/", "%2F")
        if escaped and set(escaped) == {"."}:
            escaped = escaped.replace(".", "%2E")
        return escaped


class TextSegmentConverter:
    """Like `str` (any one segment), except NUL, which no database column holds: a 404
    instead of a query PostgreSQL refuses."""

    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        if "\x00" in value:
            raise ValueError("no database stores NUL in text")
        return value

    def to_url(self, value: str) -> str:
        return str(value)


register_converter(CollectionNameConverter, "collection")
register_converter(TextSegmentConverter, "text")
