"""`turnkeeper.jsonenc` and the storage codec over it: stored JSON has one canonical text, and
what is read back is what was written."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnkeeper import jsonenc
from turnkeeper.storage.codec import dump_json, load_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


def test_the_stored_text_is_compact_sorted_and_keeps_non_ascii() -> None:
    value = {"b": [1, 2.5, None], "a": "héllo 🚀", "c": {"z": True, "y": {}}}
    assert dump_json(value) == '{"a":"héllo 🚀","b":[1,2.5,null],"c":{"y":{},"z":true}}'
    assert dump_json({}) == "{}"


def test_dumps_writes_what_json_dumps_writes_by_default() -> None:
    """The OpenAI Agents adapter stores each item's text as the SDK's `SQLiteSession` does."""
    item = {"role": "user", "content": "héllo", "b": 1}
    assert jsonenc.dumps(item) == '{"role": "user", "content": "h\\u00e9llo", "b": 1}'


@given(json_values)
def test_any_json_value_reads_back_as_written(value: Any) -> None:
    assert _same(load_json(dump_json(value)), value)
    assert _same(jsonenc.loads(jsonenc.dumps(value)), value)


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included (NaN != NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_a_cycle_is_refused() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular reference detected"):
        dump_json(looped)


def test_what_json_cannot_encode_is_a_type_error_naming_the_type() -> None:
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        dump_json({"when": object()})


def test_a_column_that_is_not_text_is_returned_as_it_is() -> None:
    """PostgreSQL's `jsonb` loader hands over values already decoded."""
    assert load_json(None) is None
    assert load_json({"a": 1}) == {"a": 1}
    assert load_json('{"a": [1]}') == {"a": [1]}
    assert json.loads(dump_json([1])) == [1]
