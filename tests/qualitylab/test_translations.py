"""What the catalog translates for Quality Lab: the readiness sentences are graph-tool-call's
own, word for word (an engine upgrade that adds or rewords one fails here until
qualitylab/readiness_text.py and the Korean catalog follow), and a case's schema errors stay
English for the command line and read Korean on a Korean page."""

from __future__ import annotations

import ast
import inspect

from graph_tool_call.analyze import openapi_readiness

from qualitylab.readiness_text import READINESS_TEXTS


def _library_texts() -> set[tuple[str, str, str]]:
    tree = ast.parse(inspect.getsource(openapi_readiness))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_issue":
            code, message, recommendation = node.args[1], node.args[3], node.args[5]
            assert all(isinstance(arg, ast.Constant) for arg in (code, message, recommendation))
            found.add((code.value, message.value, recommendation.value))  # type: ignore[attr-defined]
    return found


def test_the_catalog_lists_every_readiness_sentence_of_the_engine() -> None:
    assert set(READINESS_TEXTS) == _library_texts()


def test_a_case_error_is_english_for_machines_and_translated_for_a_reader() -> None:
    from django.utils.translation import gettext, override

    from qualitylab import engine

    try:
        engine.CaseSpec.from_json({"id": "c1", "mode": "fly", "query": "주문 상세를 보여줘"})
    except engine.CaseSpecError as error:
        assert str(error) == "mode: must be one of search, plan, execute"
        with override("ko"):
            assert error.translated(gettext) == "search, plan, execute 중 하나여야 합니다"
    else:
        raise AssertionError("an unknown mode must be refused")
