"""JSON in and out, with turnkeeper's options in one place.

`dumps` writes what `json.dumps` writes with its defaults (the OpenAI Agents adapter stores each
item's text as the SDK's own `SQLiteSession` does); `canonical` writes the stored columns'
form (compact, keys sorted, non-ASCII kept), so the same value is always stored as the same
text; `loads` is `json.loads`.

`canonical` writes through orjson, used here and nowhere else: every stored JSON column (a
message's metadata and tool calls, on every append) is written by it, and orjson takes a
seventh of the standard library's time for a message's metadata. What orjson does not write
as the standard library would goes to the standard library (see `canonical`).

`loads_within` reads JSON that may nest deeper than a bound without ever failing for it (where
`json.loads` raises `RecursionError` at about 1,000 levels): what is nested too deep is cut off.
Values read at the door (request bodies, stored columns, traces) go through it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

__all__ = ["canonical", "dumps", "loads", "loads_within", "strict", "too_deep"]


def dumps(value: Any) -> str:
    """`json.dumps(value)` (default options)."""
    return json.dumps(value)


_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)
_STRICT = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
"""The encoders `json.dumps(value, **options)` would build, built once: `json.dumps` with
options makes a new `JSONEncoder` on every call, and that costs as much as encoding a small
value (about half of `canonical` and `strict` on a message's metadata, each written on every
append). An encoder keeps only its options, so one serves every thread."""


_ORJSON = orjson.OPT_SORT_KEYS | (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""Keys sorted; a subclass of a JSON type, a dataclass or a date refused (orjson would write
each its own way), so that the standard library writes or refuses it, as it always did."""


def canonical(value: Any) -> str:
    """The stored form of a JSON value: compact, keys sorted, non-ASCII written as itself.

    The text is the standard library's (`json.dumps(value, ensure_ascii=False,
    separators=(",", ":"), sort_keys=True)`) but for one thing: a float that the standard
    library writes with an exponent below -4 (`1e-05`) orjson writes in full (`0.00001`), the
    same number read back. orjson writes the rest; what it refuses goes to the standard library,
    which writes it as before or raises as before: an integer beyond 64 bits (which validation
    accepts), a key that is not a string (the standard library's text for it, and its order: `2`
    before `10`), a lone surrogate, a cycle, a value nested more than 255 levels, a type JSON
    does not have. orjson writes NaN and the infinities as `null`, which would read back as
    None: validation refuses them before a value is stored, but a value that has `null` in its
    text is looked through for one, and one found is written by the standard library too."""
    try:
        text: bytes | None = orjson.dumps(value, option=_ORJSON)
    except orjson.JSONEncodeError:
        text = None  # written below, outside this handler: its error, if any, is not chained
    if text is None or (b"null" in text and _has_non_finite(value)):
        return _CANONICAL.encode(value)
    return text.decode()


def _has_non_finite(value: Any) -> bool:
    """True when a value orjson wrote holds NaN or an infinity (orjson has checked that it
    nests at most 255 levels and holds no cycle)."""
    if type(value) is float:
        return not math.isfinite(value)
    if type(value) is dict:
        return any(_has_non_finite(item) for item in value.values())
    if type(value) is list or type(value) is tuple:
        return any(_has_non_finite(item) for item in value)
    return False


def strict(value: Any) -> str:
    """The compact form a value's size is measured on; NaN and the infinities, which are not
    JSON, are a `ValueError`."""
    return _STRICT.encode(value)


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`."""
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
