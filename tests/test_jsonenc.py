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


_STDLIB_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)
"""What `canonical` wrote before it wrote through orjson."""


def _exponent_floats(value: Any) -> bool:
    """True when the standard library writes a float in `value` with an exponent (`1e-05`,
    `1e+16`), the one place where `canonical`'s text may differ from it."""
    if isinstance(value, float):
        return "e" in repr(value)
    if isinstance(value, dict):
        return any(_exponent_floats(item) for item in value.values())
    if isinstance(value, list):
        return any(_exponent_floats(item) for item in value)
    return False


same_type_keys = st.one_of(
    st.dictionaries(st.integers(), st.integers(), max_size=5),
    st.dictionaries(st.booleans(), st.none(), max_size=2),
    st.dictionaries(st.floats(allow_nan=False), st.text(max_size=3), max_size=4),
)
"""Objects whose keys are not strings (the standard library writes them as text, in the order
of the keys themselves), one type of key each: keys of mixed types it cannot sort at all."""


@given(json_values | same_type_keys)
def test_canonical_is_the_standard_librarys_text_but_for_exponents(value: Any) -> None:
    """Stored text stays as it was: only a float the standard library writes with an exponent
    may be written otherwise, as the same number."""
    text = jsonenc.canonical(value)
    assert _same(json.loads(text), json.loads(_STDLIB_CANONICAL.encode(value)))
    if not _exponent_floats(value):
        assert text == _STDLIB_CANONICAL.encode(value)


@given(json_values)
def test_canonical_reads_back_as_the_value(value: Any) -> None:
    assert _same(json.loads(jsonenc.canonical(value)), value)


@pytest.mark.parametrize(
    "number", [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**20, -(10**40)]
)
def test_integers_past_64_bits_are_written_in_full(number: int) -> None:
    """orjson refuses an integer outside 64 bits (validation accepts any): the standard
    library writes it."""
    assert jsonenc.canonical(number) == str(number)
    assert jsonenc.canonical({"n": [number, 0.5]}) == f'{{"n":[{number},0.5]}}'


def test_non_finite_floats_are_written_as_before_not_as_null() -> None:
    """orjson writes NaN and the infinities as null; the standard library's text is kept."""
    nan, inf = float("nan"), float("inf")
    assert jsonenc.canonical([None, nan]) == "[null,NaN]"
    assert jsonenc.canonical({"b": None, "a": {"x": (inf, -inf)}}) == (
        '{"a":{"x":[Infinity,-Infinity]},"b":null}'
    )
    assert jsonenc.canonical([None, "null"]) == '[null,"null"]'


def test_small_floats_are_written_in_full() -> None:
    assert jsonenc.canonical({"p": 1e-05}) == '{"p":0.00001}'
    assert json.loads(jsonenc.canonical(1e-05)) == 1e-05
