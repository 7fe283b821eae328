"""The desk's form renderer (settings.FORM_RENDERER): Django's, except that inputs and selects
are written in Python, exactly as Django's widget templates write them (input.html and the
templates that only include it, select.html, select_option.html and attrs.html).

A page's filter bar of a dozen selects and some sixty options rendered each option through
its template include: a tenth of the triage page. Every other widget (textareas, radios,
checkbox lists, date parts...) is rendered by Django's templates, as before.
tests/core/test_widgets.py compares both ways for every widget written here, so a Django
upgrade that changes those templates fails there rather than on a page.
"""

from __future__ import annotations

from typing import Any

from django.forms.renderers import DjangoTemplates
from django.utils.html import conditional_escape

_SELECT = "django/forms/widgets/select.html"
_OPTION = "django/forms/widgets/select_option.html"
# input.html, and the widget templates that only include it.
INPUT_TEMPLATES = frozenset(
    f"django/forms/widgets/{name}.html"
    for name in (
        "input", "text", "number", "email", "url", "password", "tel", "search", "color",
        "date", "datetime", "time", "hidden", "checkbox", "file",
    )
)  # fmt: skip


class PythonWidgets(DjangoTemplates):
    def render(self, template_name: str, context: dict[str, Any], request: Any = None) -> str:
        if template_name in INPUT_TEMPLATES:
            widget = context["widget"]
            value = widget["value"]
            shown = "" if value is None else f' value="{_escaped(value)}"'
            return (
                f'<input type="{_escaped(widget["type"])}" name="{_escaped(widget["name"])}"'
                f"{shown}{_attributes(widget['attrs'])}>"
            )
        if template_name == _SELECT and all(
            option["template_name"] == _OPTION
            for _name, options, _index in context["widget"]["optgroups"]
            for option in options
        ):
            return _select(context["widget"])
        return super().render(template_name, context, request)


def _select(widget: dict[str, Any]) -> str:
    html = [f'<select name="{_escaped(widget["name"])}"{_attributes(widget["attrs"])}>']
    for group_name, options, _index in widget["optgroups"]:
        if group_name:
            html.append(f'\n  <optgroup label="{_escaped(group_name)}">')
        html += [
            f'\n  <option value="{_escaped(option["value"])}"{_attributes(option["attrs"])}>'
            f"{_escaped(option['label'])}</option>\n"
            for option in options
        ]
        if group_name:
            html.append("\n  </optgroup>")
    html.append("\n</select>")
    return "".join(html)


def _attributes(attrs: dict[str, Any]) -> str:
    """What attrs.html writes: ' name="value"', a bare ' name' for True, nothing for False."""
    return "".join(
        f" {_escaped(name)}" if value is True else f' {_escaped(name)}="{_escaped(value)}"'
        for name, value in attrs.items()
        if value is not False
    )


def _escaped(value: Any) -> str:
    """As a template writes a value: as it is when it is safe, else escaped."""
    return str(conditional_escape(value))
