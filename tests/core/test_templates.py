"""The pages' template engine frees a page's context when the page is written, without
waiting for the garbage collector (core.templates)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import AnonymousUser
from django.template import TemplateDoesNotExist, engines
from django.test import RequestFactory

from core.templates import DjangoTemplates, Template


class Rows:
    """Something a page shows (weakly referable, as a list is not)."""

    def __init__(self) -> None:
        self.names = ["a", "b"]


@pytest.fixture
def no_collections() -> Iterator[None]:
    """Only reference counting frees anything while the test runs."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_the_pages_engine_is_this_one_under_djangos_name() -> None:
    assert isinstance(engines["django"], DjangoTemplates)


@pytest.mark.django_db
@pytest.mark.usefixtures("no_collections")
def test_a_rendered_pages_context_is_freed_without_a_garbage_collection() -> None:
    rows = Rows()
    alive = weakref.ref(rows)
    template = engines["django"].from_string("{% for name in rows.names %}{{ name }}{% endfor %}")

    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    html = template.render({"rows": rows}, request)

    assert html == "ab"
    del rows
    assert alive() is None


def test_a_render_that_fails_says_which_engine_looked() -> None:
    template = engines["django"].from_string('{% include "no/such.html" %}')

    with pytest.raises(TemplateDoesNotExist) as raised:
        template.render({})

    assert raised.value.backend is engines["django"]


def test_a_partial_of_a_page_template_is_found_through_this_engine() -> None:
    template = engines["django"].get_template("triage/triage.html#results")

    assert isinstance(template, Template)
    assert template.template.name == "results"


def test_a_missing_template_says_which_engine_looked() -> None:
    with pytest.raises(TemplateDoesNotExist) as raised:
        engines["django"].get_template("no/such/page.html")

    assert raised.value.backend is engines["django"]
