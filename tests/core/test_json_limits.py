from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.json_limits import JSONTooDeep, json_depth_exceeds, loads_bounded


def _depth(value: Any) -> int:
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            depth += 1
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children)
    return deepest


_TRICKY_TEXT = st.text(alphabet='[]{}"\\ab\u00e9\U0001f600', max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(_TRICKY_TEXT, children, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(value=_JSON, limit=st.integers(min_value=0, max_value=8), ascii_only=st.booleans())
def test_depth_measure_agrees_with_the_parsed_document(value, limit, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert json_depth_exceeds(text, limit) == (_depth(value) > limit)
    assert json_depth_exceeds(text.encode(), limit) == (_depth(value) > limit)


def test_nesting_at_the_limit_parses_and_one_more_level_is_refused():
    assert loads_bounded('{"a": ' * 10 + "1" + "}" * 10, max_depth=10) is not None
    with pytest.raises(JSONTooDeep, match="deeper than 10 levels"):
        loads_bounded('{"a": ' * 11 + "1" + "}" * 11, max_depth=10)


@pytest.mark.parametrize(
    "text",
    ['{"evidence": ' * 5_000 + "1" + "}" * 5_000, "[" * 100_000 + "]" * 100_000, "[" * 100_000],
)
def test_deep_documents_are_refused_without_recursion(text):
    with pytest.raises(JSONTooDeep):
        loads_bounded(text, max_depth=100)


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"message": "[" * 500 + '\\"{' * 500, "list": [["x"]]})
    assert loads_bounded(text, max_depth=3)["list"] == [["x"]]


def test_text_that_is_not_json_is_left_to_the_parser():
    with pytest.raises(json.JSONDecodeError):
        loads_bounded("][" * 500, max_depth=10)
