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


def test_a_tool_in_several_collections_is_named_once_with_how_many() -> None:
    from types import SimpleNamespace

    from triage.templatetags.desk import _group_names, _row_texts

    groups = [
        SimpleNamespace(tool="getDelivery", collection=name) for name in ("shop", "eu", "us")
    ] + [SimpleNamespace(tool=tool, collection="shop") for tool in ("a", "b")]
    html = str(_group_names(groups, _row_texts()))
    several = '<span title="shop, eu, us">getDelivery \u00d73</span>'
    assert html == f'{several}, <span title="shop">a</span> +1 more'


def test_a_group_address_is_the_one_reverse_writes_under_any_prefix() -> None:
    """The rows write each group's address from one reverse() (group_url_writer)."""
    from django.urls import clear_script_prefix, reverse, set_script_prefix

    from triage.templatetags.desk import group_url_writer

    try:
        for prefix in ("/", "/desk/"):
            set_script_prefix(prefix)
            write = group_url_writer()
            for pk in (1, 7, 10, 123456789, 2**62):
                assert write(pk) == reverse("triage:group", args=[pk])
    finally:
        clear_script_prefix()
