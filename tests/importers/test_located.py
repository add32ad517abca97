"""The line-aware JSON reader gives each array element the line it starts on."""

from __future__ import annotations

import json

import pytest

from turnkeeper.importers.located import load

TEXT = '{\n  "id": "s",\n  "messages": [\n    {"a": 1},\n\n    {\n      "b": [2, 3]\n    }\n  ],\n  "n": null\n}\n'


def test_elements_of_the_named_array_know_their_lines() -> None:
    document = load(TEXT, ["messages"])
    assert document.value == json.loads(TEXT)
    assert document.array_key == "messages"
    assert [(e.line, e.value) for e in document.elements] == [(4, {"a": 1}), (6, {"b": [2, 3]})]


def test_a_bare_array_is_located_too() -> None:
    document = load("[1,\n 2]", ["messages"])
    assert (document.array_key, [e.line for e in document.elements]) == (None, [1, 2])


def test_a_document_without_the_array_has_no_elements() -> None:
    document = load('{"entries": "text", "x": []}', ["entries"])
    assert (document.value, document.elements, document.array_key) == (
        {"entries": "text", "x": []}, (), None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "line"),
    [('{\n "messages": [\n  {"a": }\n ]\n}', 3), ("[1]\n[2]", 2), ('{"a" 1}', 1), ("", 1)],
)
def test_invalid_json_raises_with_its_line(text: str, line: int) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        load(text, ["messages"])
    assert caught.value.lineno == line
