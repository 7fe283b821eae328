"""The tools and collections of a reason row: at most two names and a count of the rest;
a wrapped line never starts with a comma (each name keeps its comma)."""

from __future__ import annotations

from triage.templatetags.desk import _LONG_NAME, _first_two


def test_each_name_keeps_its_comma_so_no_line_starts_with_one() -> None:
    html = str(_first_two(["shop-orders", "shop-members", "shop-logistics"], _LONG_NAME))
    first, second = html.split('<span class="nowrap">')[1:]
    assert first.endswith(",</span> ")
    assert second.startswith('<span class="code truncate" title="shop-members">shop-members')
    assert ", <span" not in html and html.count(",") == 1
    assert html.endswith('<span class="muted">+1</span>')


def test_one_name_has_no_comma_and_names_are_escaped() -> None:
    assert str(_first_two(["a<b"])) == '<span class="nowrap">a&lt;b</span>'
