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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _encoder
from typing import Any

__all__ = ["Encoder", "dumps", "loads"]

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
