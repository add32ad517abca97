"""`turnkeeper.jsonenc` writes and reads exactly what `json.dumps` / `json.loads` do: the stored
metadata text and the OpenAI Agents adapter's item text must not change by a byte."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnkeeper import jsonenc
from turnkeeper.storage.codec import dump_json, load_json

OPTIONS: list[dict[str, Any]] = [
    {},
    {"ensure_ascii": False, "separators": (",", ":"), "sort_keys": True},
    {"separators": (",", ":")},
    {"ensure_ascii": False},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)

SAMPLES: list[Any] = [
    {"role": "user", "content": 'héllo \u2028 \ud83d\ude00 "quoted" \\ \n\t'},
    {"b": 1, "a": [1.5, -0.0, 1e300, None, True, False, "x"], "c": {}},
    [float("nan"), float("inf"), -float("inf")],
    "a lone surrogate \ud800",
    12345678901234567890,
    (1, 2),
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key"},
    [],
    {},
]


def _outcome(encode: Any, value: Any) -> tuple[str, str]:
    """The text, or the error's type and message."""
    try:
        return "text", encode(value)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("value", SAMPLES)
def test_the_text_is_json_dumps_text(value: Any, options: dict[str, Any]) -> None:
    """The same text, or (sorting keys of mixed types) the same error."""
    ours = _outcome(jsonenc.Encoder(**options).encode, value)
    assert ours == _outcome(lambda v: json.dumps(v, **options), value)


@given(json_values)
def test_any_json_value_encodes_as_json_dumps_does(value: Any) -> None:
    for options in OPTIONS:
        assert jsonenc.Encoder(**options).encode(value) == json.dumps(value, **options)
    assert jsonenc.dumps(value) == json.dumps(value)


@given(json_values)
def test_any_json_text_decodes_as_json_loads_does(value: Any) -> None:
    text = json.dumps(value)
    assert _same(jsonenc.loads(text), json.loads(text))
    assert _same(load_json(dump_json(value)), json.loads(dump_json(value)))


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included (NaN != NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_a_cycle_raises_as_json_dumps_does_and_leaves_nothing_behind() -> None:
    looped: list[Any] = []
    looped.append(looped)
    mapping: dict[str, Any] = {}
    mapping["self"] = mapping
    for value in (looped, mapping, {"deep": [mapping]}):
        with pytest.raises(ValueError, match="Circular reference detected"):
            json.dumps(value)
        with pytest.raises(ValueError, match="Circular reference detected"):
            jsonenc.dumps(value)
        with pytest.raises(ValueError, match="Circular reference detected"):
            dump_json(value)
    # The same object again, now without a cycle, encodes: no state is kept between calls.
    shared = {"a": 1}
    assert jsonenc.dumps([shared, shared]) == json.dumps([shared, shared])


def test_what_json_cannot_encode_fails_with_json_dumps_error() -> None:
    for value in ({"when": object()}, [b"bytes"], {("tuple", "key"): 1}):
        with pytest.raises(TypeError) as ours:
            jsonenc.dumps(value)
        with pytest.raises(TypeError) as theirs:
            json.dumps(value)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "text",
    [" {}", "{} ", "\n[1]\n", "{} x", "", "{", "[1,]", "NaN", "-Infinity", '"\\ud800"', "1e5"],
)
def test_any_text_decodes_or_fails_as_json_loads_does(text: str) -> None:
    try:
        expected = json.loads(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(json.JSONDecodeError) as ours:
            jsonenc.loads(text)
        assert str(ours.value) == str(exc)
    else:
        assert _same(jsonenc.loads(text), expected)


@given(st.text(max_size=8), st.text())
def test_one_text_under_one_key_is_written_as_the_encoder_writes_it(key: str, text: str) -> None:
    """`dump_json`'s shortcut for `{key: text}` (the OpenAI Agents adapter's metadata on every
    message it stores) writes the canonical encoder's very text."""
    canonical = json.dumps({key: text}, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert dump_json({key: text}) == canonical


def test_the_shortcut_leaves_other_single_entries_to_the_encoder() -> None:
    class Text(str):
        pass

    for value in ({"k": 1}, {"k": None}, {"k": ["a"]}, {"k": Text("a")}, {'é\n"': "\x01\ud800"}):
        canonical = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        assert dump_json(value) == canonical
