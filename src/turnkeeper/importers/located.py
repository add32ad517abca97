"""JSON documents whose array elements know the line they start on.

A malformed message inside a 2,000-line session file is only useful to report as
`file:line`, and `json.load` forgets positions. This reads a document the same way (every value
is decoded by the standard decoder's `raw_decode`) but walks the top level itself, so the
elements of the arrays it is asked about come back with their line numbers.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Located:
    """A decoded JSON value and the (1-based) line it starts on."""

    value: Any
    line: int


@dataclass(frozen=True, slots=True)
class Document:
    """A decoded document: its top-level value, and the elements of the located array.

    `array_key` is the member the located array came from (None when the document itself is
    the array, or when it has none of the keys asked for)."""

    value: Any
    elements: tuple[Located, ...]
    array_key: str | None


class _Text:
    def __init__(self, text: str) -> None:
        self.text = text
        self.newlines = [match.start() for match in re.finditer("\n", text)]

    def line(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def skip(self, pos: int) -> int:
        match = _WHITESPACE.match(self.text, pos)
        return pos if match is None else match.end()

    def expect(self, pos: int, chars: str) -> str:
        if pos < len(self.text) and self.text[pos] in chars:
            return self.text[pos]
        wanted = " or ".join(repr(c) for c in chars)
        raise json.JSONDecodeError(f"Expecting {wanted}", self.text, pos)

    def value(self, pos: int) -> tuple[Any, int]:
        value, end = _DECODER.raw_decode(self.text, pos)
        return value, end

    def array(self, pos: int) -> tuple[list[Located], int]:
        """The elements of the array opening at `pos`, and the position after it."""
        items: list[Located] = []
        pos = self.skip(pos + 1)
        if self.text.startswith("]", pos):
            return items, pos + 1
        while True:
            value, end = self.value(pos)
            items.append(Located(value, self.line(pos)))
            pos = self.skip(end)
            if self.expect(pos, ",]") == "]":
                return items, pos + 1
            pos = self.skip(pos + 1)


def load(text: str, array_keys: Collection[str]) -> Document:
    """Decode `text`; locate the elements of the document if it is an array, else of its first
    top-level member named in `array_keys` that holds an array. Raises `json.JSONDecodeError`
    (which carries the line) for anything that is not JSON."""
    doc = _Text(text)
    pos = doc.skip(0)
    if doc.expect(pos, "[{") == "[":
        items, end = doc.array(pos)
        _end(doc, end)
        return Document([item.value for item in items], tuple(items), None)
    members: dict[str, Any] = {}
    located: tuple[Located, ...] = ()
    found: str | None = None
    pos = doc.skip(pos + 1)
    if text.startswith("}", pos):
        _end(doc, pos + 1)
        return Document(members, (), None)
    while True:
        doc.expect(pos, '"')
        name, pos = doc.value(pos)
        pos = doc.skip(pos)
        doc.expect(pos, ":")
        pos = doc.skip(pos + 1)
        if found is None and name in array_keys and text.startswith("[", pos):
            items, end = doc.array(pos)
            members[name] = [item.value for item in items]
            located, found = tuple(items), name
        else:
            members[name], end = doc.value(pos)
        pos = doc.skip(end)
        if doc.expect(pos, ",}") == "}":
            _end(doc, pos + 1)
            return Document(members, located, found)
        pos = doc.skip(pos + 1)


def _end(doc: _Text, pos: int) -> None:
    pos = doc.skip(pos)
    if pos != len(doc.text):
        raise json.JSONDecodeError("Extra data", doc.text, pos)
