"""`json.dumps` and `json.loads`, minus their per-call Python overhead, with the same results.

`json.dumps(value)` spends more time in `JSONEncoder.iterencode` (which rebuilds closures and a
C encoder on every call) than the C encoder spends encoding a small object, and `json.loads`
goes through three Python frames before the C scanner. Both matter where a value is encoded
or decoded once per message (every append writes the metadata column, every read decodes it;
the OpenAI Agents adapter keeps each item's JSON text). The `Encoder` here calls the C encoder
directly — built per call with a fresh dict of the objects being encoded, so a cycle raises
`ValueError("Circular reference detected")` as `json.dumps` does and threads share nothing —
and `loads` calls the C scanner directly when the text is exactly one JSON value with no
surrounding whitespace, falling back to `json.loads` (and its exact errors) otherwise.
Without the C accelerator (another Python implementation) both are the plain `json` calls.

`loads_within` reads JSON that may nest deeper than a bound without ever failing for it (where
`json.loads` raises `RecursionError` at about 1,000 levels): what is nested too deep is cut off.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json import encoder as _encoder
from typing import Any

__all__ = ["Encoder", "dumps", "loads", "loads_within"]

_make_encoder: Any = getattr(_encoder, "c_make_encoder", None)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The scanner `json.loads` itself ends in (C, or `json.scanner`'s Python one without it)."""


class Encoder:
    """`json.dumps(value, ensure_ascii=…, separators=…, sort_keys=…)`'s text, faster.

    Only the options turnkeeper uses; `default` is `JSONEncoder.default` (a `TypeError` naming
    the type) and NaN and the infinities are written as `json.dumps` writes them."""

    def __init__(
        self,
        *,
        ensure_ascii: bool = True,
        separators: tuple[str, str] = (", ", ": "),
        sort_keys: bool = False,
    ) -> None:
        self._fallback = json.JSONEncoder(
            ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys
        )
        self._string = (
            _encoder.encode_basestring_ascii if ensure_ascii else _encoder.encode_basestring
        )
        item_separator, key_separator = separators
        self._options = (
            self._fallback.default,
            self._string,
            None,
            key_separator,
            item_separator,
            sort_keys,
            False,  # skipkeys
            True,  # allow_nan
        )

    def encode(self, value: Any) -> str:
        """The JSON text of `value`, exactly as `json.dumps` with these options writes it."""
        if type(value) is str:
            return self._string(value)
        if _make_encoder is None:  # pragma: no cover - no C accelerator
            return self._fallback.encode(value)
        return "".join(_make_encoder({}, *self._options)(value, 0))


_DEFAULT = Encoder()


def dumps(value: Any) -> str:
    """`json.dumps(value)` (default options)."""
    return _DEFAULT.encode(value)


def loads(text: str) -> Any:
    """`json.loads(text)` for a `str`: the same value, or the same error."""
    if text and text[0] not in " \t\n\r":
        try:
            value, end = _scan_once(text, 0)
        except StopIteration:
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text)


def loads_within(text: str, max_depth: int) -> Any:
    """`loads(text)`, with every object or array nested more than `max_depth` levels deep
    replaced by a string that says so: never a `RecursionError`, however deep the text nests.

    Text with no more brackets than `max_depth` cannot nest deeper and is read as it is (nearly
    every stored value); otherwise the value read is measured, and what nests too deep (or too
    deep for `json.loads` to read at all) is read again from the text with the deep parts cut
    out, by a scan that keeps no stack."""
    if text.count("{") + text.count("[") <= max_depth:
        return loads(text)
    try:
        value = loads(text)
    except RecursionError:
        return loads(_cut(text, max_depth))
    return loads(_cut(text, max_depth)) if _deeper_than(value, max_depth) else value


def too_deep(max_depth: int) -> str:
    """What `loads_within` puts where it cut a value off."""
    return f"[not read: nested more than {max_depth} levels deep]"


_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
"""A JSON string (skipped whole: brackets inside it are text) or a bracket."""


def _cut(text: str, max_depth: int) -> str:
    """`text` with each object or array that opens more than `max_depth` levels deep replaced
    by the JSON string `too_deep(max_depth)`."""
    marker = json.dumps(too_deep(max_depth))
    pieces: list[str] = []
    depth = 0
    copied = 0  # where the text not yet copied to `pieces` starts
    cut_from = 0
    for token in _TOKEN.finditer(text):
        first = text[token.start()]
        if first in "[{":
            depth += 1
            if depth == max_depth + 1:
                cut_from = token.start()
        elif first in "]}":
            if depth == max_depth + 1:
                pieces += (text[copied:cut_from], marker)
                copied = token.end()
            depth -= 1
    pieces.append(text[copied:])
    return "".join(pieces)


def _deeper_than(value: Any, levels: int) -> bool:
    """True when a decoded JSON value nests more than `levels` levels of objects and arrays;
    the walk never goes deeper than that."""
    if type(value) is dict:
        items: Any = value.values()
    elif type(value) is list:
        items = value
    else:
        return False
    return levels == 0 or any(_deeper_than(item, levels - 1) for item in items)
