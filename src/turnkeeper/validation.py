"""Checks on caller-supplied values, each failing with an error that names the field.

Validation happens before anything is written, so bad input never changes what is stored.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping
from typing import Any

from turnkeeper import jsonenc
from turnkeeper.errors import ContentTooLarge, InvalidInput, InvalidMessage
from turnkeeper.types import JSONObject, NewMessage, Phase, Role, StrategyName, Usage

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@/+=~-]{0,254}$"
"""What a name (project, subject, message id, agent, a reference to a session, …) may be: the
one definition, used by `check_name` here and by the HTTP service's schemas and parameters (so
the OpenAPI shows it). Starts with a letter or digit; at most 255 characters, none of them
blank or quoting."""

KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+=~-]{0,254}$"
"""What a new session key may be: a name without `/`. A key is a segment of the URLs that
address its session (`/v1/sessions/{key}`, the UI's `/sessions/{key}`, the MCP transcript's
`turnkeeper://sessions/{key}/transcript`), and a `/` in it (even sent as `%2F`) splits the
segment, so no URL could reach it. Keys stored before this rule stay readable: by id
everywhere, by key wherever it is not a URL path (the library, the CLI, MCP tools, the `key`
filter of a listing), and an import restores them as they were."""

_NAME = re.compile(NAME_PATTERN)
_KEY = re.compile(KEY_PATTERN)
_ROLES = ", ".join(role.value for role in Role)

MAX_JSON_DEPTH = 64
"""How many levels of objects and arrays a JSON value (metadata, tool calls) may nest: the one
bound, checked where values come in (`check_json`) and kept where stored ones are read back
(`turnkeeper.storage.codec.load_json`), so a value read is always one that could be written.

Real metadata nests a few levels; 64 leaves room for any document a program builds, and stays
well below what the readers on the way out handle (pydantic's serializer, which every HTTP
answer passes, stops at about 250 levels; Python's json module at about 1,000), with room for
the envelope an answer wraps around the value."""

MAX_TRACE_DEPTH = MAX_JSON_DEPTH + 16
"""The same bound for a turn trace (`turnkeeper.traces`), which holds its window's tool calls
a few levels down (trace → window → entry → tool calls)."""


def _unstorable(text: str) -> str | None:
    """Why `text` cannot be stored as is on every backend, or None if it can."""
    nul = text.find("\x00")
    if nul >= 0:
        return f"contains a NUL character (U+0000) at position {nul}, which no backend stores"
    if text.isascii():  # most text: nothing to encode
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        return (
            f"contains a lone surrogate (U+{code:04X}) at position {exc.start}:"
            " text must be valid Unicode (UTF-8)"
        )
    return None


def check_storable(field: str, value: Any, *, error: type[InvalidInput] = InvalidInput) -> None:
    """Every string in `value` (nested in objects and lists too, keys included) is valid Unicode
    without NUL characters: one rule for every backend, so an export moves between them.

    SQLite would store both; PostgreSQL refuses NUL, and a lone surrogate (legal in JSON as
    `"\ud800"`) cannot be encoded at all, so both are refused before anything is written."""
    if isinstance(value, str):
        problem = _unstorable(value)
        if problem is not None:
            raise error(field, problem)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_storable(f"{field}.{key}", key, error=error)
            check_storable(f"{field}.{key}", item, error=error)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_storable(f"{field}[{index}]", item, error=error)


def check_name(
    field: str, value: str | None, *, error: type[InvalidInput] = InvalidInput
) -> str | None:
    """Projects, client message ids, agents and references to sessions: 1–255 characters of
    letters, digits and `. _ : @ / + = ~ -`, starting with a letter or digit (safe in paths and
    logs)."""
    return _check_pattern(field, value, _NAME, ". _ : @ / + = ~ -", error)


def check_key(field: str, value: str | None) -> str | None:
    """A new session's key: a name without `/` (see `KEY_PATTERN`)."""
    return _check_pattern(field, value, _KEY, ". _ : @ + = ~ - (no /)", InvalidInput)


def _check_pattern(
    field: str, value: str | None, pattern: re.Pattern[str], others: str, error: type[InvalidInput]
) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not pattern.match(value):
        raise error(
            field,
            f"{value!r} is not a valid {field}: use 1-255 letters, digits or {others},"
            " starting with a letter or digit",
        )
    return value


def check_text(field: str, value: str | None, *, max_length: int = 1000) -> str | None:
    """Short optional labels (title, phase, subject, kind, author)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be text, got {type(value).__name__}")
    if len(value) > max_length:
        raise InvalidInput(field, f"is {len(value)} characters; the limit is {max_length}")
    check_storable(field, value)
    return value


def check_metadata(
    field: str, value: Any, *, max_bytes: int, error: type[InvalidInput] = InvalidInput
) -> dict[str, Any]:
    """A JSON object (dict with string keys), within the limits of `check_json`."""
    if value is None:
        return {}
    if type(value) is dict:  # nearly all metadata, and then `_size_bound` is the whole check
        try:
            if _size_bound(value, MAX_JSON_DEPTH, []) <= max_bytes:  # every key a string too
                return dict(value)
        except _Unfit:
            pass  # named below, after what is checked first
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise error(field, f"must be a JSON object, got {type(value).__name__}")
    check_json(field, value, max_bytes=max_bytes, error=error)
    return dict(value)


def check_json(
    field: str,
    value: Any,
    *,
    max_bytes: int,
    max_depth: int = MAX_JSON_DEPTH,
    error: type[InvalidInput] = InvalidInput,
) -> None:
    """`value` is a JSON value every backend stores and every interface hands back: at most
    `max_depth` levels of objects and arrays, no cycle, nothing JSON cannot encode (NaN, a
    set, an object), every string storable (`check_storable`), and at most `max_bytes` as
    compact UTF-8 JSON text (a `ContentTooLarge`: the cure is a smaller value).

    One walk (`_size_bound`) checks the depth — first, and stopping at the limit: the encoder
    and `check_storable` recurse, and would fail on a value nested thousands of levels deep —
    and bounds the size. Most values (metadata of a few keys, an item's text, tool calls) are
    plain JSON well under the limit, and the walk is then the whole check: the JSON text is
    made once, where the value is stored. Otherwise the value is encoded to find its exact size
    or what JSON cannot encode, `_key_problem` names a key that is not text (the encoder would
    write `1` as `"1"`, and could not sort `1` beside `"a"` for the stored form), and
    `check_storable` names a string no backend stores."""
    try:
        bound = _size_bound(value, max_depth, [])
    except _Unfit as exc:
        raise error(field, exc.problem) from None
    if bound <= max_bytes:
        return
    problem = _key_problem(value)
    if problem is not None:
        raise error(field, problem)
    try:
        text = jsonenc.strict(value)
    except (TypeError, ValueError) as exc:
        raise error(field, f"must be JSON: {exc}") from None
    check_storable(field, value, error=error)
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise ContentTooLarge(field, f"is {size} bytes as JSON; the limit is {max_bytes} bytes")


def _key_problem(value: Any) -> str | None:
    """Why `value` holds an object key that is not a string, or None (JSON's keys are text; the
    value has passed `_size_bound`, so it nests within bounds and holds no cycle)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"has a key that is not text: {key!r} (JSON object keys are strings)"
            problem = _key_problem(item)
            if problem is not None:
                return problem
    elif isinstance(value, list | tuple):
        for item in value:
            problem = _key_problem(item)
            if problem is not None:
                return problem
    return None


def parse_json(text: str, *, levels: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads(text)` for JSON from outside (a command-line option, a line of an import)
    that is to hold values of at most `levels` levels, without ever failing on how deep it
    nests: what lies more than `levels + 1` deep is cut off (`jsonenc.loads_within`), so a value
    nested too deep is still too deep once read, and its check (`check_json`) names its field.
    Raises `ValueError` (`json.JSONDecodeError`) for text that is not JSON."""
    return jsonenc.loads_within(text, levels + 1)


class _Unfit(Exception):
    """What `_size_bound` found that makes a value no JSON of the levels allowed."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


_UNSURE = math.inf
"""`_size_bound` of what only the encoder can tell about: a type JSON does not write as it is
(a set, an object, a mapping other than a dict: the encoder refuses it, or a subclass, which
it may write otherwise), NaN or an infinity, an integer past 20 digits, a string no backend
stores. Any sum with it stays unsure, so one such part sends the value to the precise checks."""

_LARGEST = 10**20
"""An integer between `-_LARGEST` and `_LARGEST` takes at most 20 characters of JSON."""

_NUMBER_SIZE = 25
"""The most characters JSON takes for true, false, null, a finite float (its `repr`: at most
24, as in -1.7976931348623157e+308) or an integer of at most 20 digits."""


def _size_bound(value: Any, levels: int, enclosing: list[int]) -> float:
    """The most bytes `value` can take as compact UTF-8 JSON text, or `_UNSURE`; `_Unfit` when
    it cannot be JSON of at most `levels` levels of objects and arrays (it contains itself, or
    nests deeper). `enclosing` holds the ids of the containers the walk is in: it never goes
    more than `levels` deep, and it walks the whole value, so a value nested too deep is
    refused as that even where an earlier part is one the encoder would refuse.

    A string is counted at 6 bytes a character: a `\\u00XX` escape is the longest a
    character is written (a character outside ASCII takes at most 4 bytes of UTF-8)."""
    kind = type(value)
    if kind is str:
        return _string_bound(value)
    size: float = 2  # the brackets
    if kind is dict or kind is list or kind is tuple:  # nearly every container
        mapping = kind is dict
    elif kind is bool or value is None:
        return _NUMBER_SIZE
    elif kind is int:
        return _NUMBER_SIZE if -_LARGEST < value < _LARGEST else _UNSURE
    elif kind is float:
        return _NUMBER_SIZE if math.isfinite(value) else _UNSURE
    elif isinstance(value, Mapping | list | tuple):  # only the encoder can tell its text
        mapping, size = isinstance(value, Mapping), _UNSURE
    else:
        return _UNSURE
    if id(value) in enclosing:
        raise _Unfit("must be JSON: Circular reference detected (it contains itself)")
    if len(enclosing) == levels:
        raise _Unfit(f"nests objects and arrays more than {levels} levels deep")
    enclosing.append(id(value))
    # A string, the most common part (every key, most values), is measured here, not by a
    # call of this function: metadata is walked on every append.
    if mapping:
        for key, item in value.items():
            size += (
                (_string_bound(key) if type(key) is str else _UNSURE)
                + (
                    _string_bound(item)
                    if type(item) is str
                    else _size_bound(item, levels, enclosing)
                )
                + 2  # the colon, a comma
            )
    else:
        for item in value:
            size += (
                _string_bound(item) if type(item) is str else _size_bound(item, levels, enclosing)
            ) + 1  # a comma
    enclosing.pop()
    return size


def _string_bound(text: str) -> float:
    """`_size_bound` of a string: 6 bytes a character, `_UNSURE` for one no backend stores."""
    return _UNSURE if _unstorable(text) else 6 * len(text) + 2


def check_strategy(value: StrategyName | str) -> StrategyName:
    try:
        return StrategyName(value)
    except ValueError:
        names = ", ".join(name.value for name in StrategyName)
        raise InvalidInput(
            "strategy", f"unknown strategy {value!r}; choose one of {names}"
        ) from None


def check_phase(value: Phase | str | None) -> Phase | None:
    """One of the multi-agent conversation phases (None: no phase)."""
    if value is None:
        return None
    try:
        return Phase(value)
    except ValueError:
        names = ", ".join(phase.value for phase in Phase)
        raise InvalidInput("phase", f"unknown phase {value!r}; choose one of {names}") from None


def check_role(value: Role | str) -> Role:
    if type(value) is Role:
        return value
    try:
        return Role(value)
    except ValueError:
        raise InvalidMessage("role", f"unknown role {value!r}; choose one of {_ROLES}") from None


def _check_tool_calls(value: Any, max_bytes: int) -> tuple[JSONObject, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise InvalidMessage("tool_calls", "must be a non-empty list of tool calls")
    calls: list[JSONObject] = []
    for index, call in enumerate(value):
        where = f"tool_calls[{index}]"
        if not isinstance(call, Mapping):
            raise InvalidMessage(where, "must be an object")
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise InvalidMessage(f"{where}.id", "must be a non-empty string")
        function = call.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidMessage(f"{where}.function.name", "must be a string")
        if not isinstance(function.get("arguments", ""), str):
            raise InvalidMessage(f"{where}.function.arguments", "must be a JSON string")
        calls.append(dict(call, type=call.get("type", "function")))
    check_json("tool_calls", calls, max_bytes=max_bytes, error=InvalidMessage)
    return tuple(calls)


def check_message(
    message: NewMessage, *, max_bytes: int, max_json_bytes: int
) -> tuple[Role, tuple[JSONObject, ...] | None, dict[str, Any]]:
    """Validate one message to append: its content at most `max_bytes` (UTF-8), its tool calls
    and metadata JSON values within `check_json`'s limits (`max_json_bytes` each). Returns the
    fields that normalising changes: the role (a `Role`), the tool calls (a tuple, or None)
    and the metadata (a copy, `{}` for None).
    The other fields are valid as given; the caller builds the draft from both."""
    role = check_role(message.role)
    content = message.content
    if not isinstance(content, str):
        raise InvalidMessage("content", f"must be text, got {type(content).__name__}")
    if content.isascii():  # most text: a byte a character, and only a NUL to look for
        size = len(content)
        if "\x00" in content:
            check_storable("content", content, error=InvalidMessage)
    else:
        check_storable("content", content, error=InvalidMessage)
        size = len(content.encode("utf-8"))
    if size > max_bytes:
        raise ContentTooLarge("content", f"is {size} bytes; the limit is {max_bytes} bytes")
    tool_calls = None
    if message.tool_calls is not None:
        if role is not Role.ASSISTANT:
            raise InvalidMessage("tool_calls", "only assistant messages carry tool calls")
        tool_calls = _check_tool_calls(message.tool_calls, max_json_bytes)
    if role is Role.TOOL:
        if not message.tool_call_id:
            raise InvalidMessage("tool_call_id", "a tool message must name the call it answers")
    elif message.tool_call_id is not None:
        raise InvalidMessage("tool_call_id", "only tool messages answer a tool call")
    blank = not content or content.isspace()
    if blank and role in (Role.USER, Role.SYSTEM):
        raise InvalidMessage("content", f"must not be empty for a {role.value} message")
    if blank and role is Role.ASSISTANT and not tool_calls:
        raise InvalidMessage(
            "content", "must not be empty for an assistant message without tool calls"
        )
    if message.author is not None and (
        not isinstance(message.author, str) or len(message.author) > 200
    ):
        raise InvalidMessage("author", "must be text of at most 200 characters")
    if message.author is not None:
        check_storable("author", message.author, error=InvalidMessage)
    if message.tool_call_id is not None:
        check_storable("tool_call_id", message.tool_call_id, error=InvalidMessage)
    check_name("id", message.id, error=InvalidMessage)
    if not isinstance(message.internal, bool):
        raise InvalidMessage("internal", "must be true or false")
    usage = message.usage
    if usage is not None and (
        not isinstance(usage, Usage)
        or not all(
            _whole(n)
            for n in (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_input_tokens,
                usage.cache_creation_input_tokens,
            )
        )
    ):
        raise InvalidMessage(
            "usage",
            "input_tokens, output_tokens, cache_read_input_tokens and cache_creation_input_tokens"
            f" must be whole numbers from 0 to {MAX_WHOLE}",
        )
    metadata = check_metadata(
        "metadata", message.metadata, max_bytes=max_json_bytes, error=InvalidMessage
    )
    return role, tool_calls, metadata


MAX_WHOLE = 2**63 - 1
"""The largest number a count, seq or budget may be: both backends store 64-bit integers, and
a larger one would overflow SQLite's binding (an error, not an answer)."""


def _whole(value: Any) -> bool:
    """A whole number a backend stores: 0 to `MAX_WHOLE`, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_WHOLE


def check_positive(field: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidInput(field, f"must be a positive whole number, got {value!r}")
    return _within_64_bits(field, value)


def check_non_negative(field: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidInput(field, f"must be a whole number >= 0, got {value!r}")
    return _within_64_bits(field, value)


def _within_64_bits(field: str, value: int) -> int:
    if value > MAX_WHOLE:
        raise InvalidInput(field, f"must be at most {MAX_WHOLE}, got {value}")
    return value


def window_budget(
    budget_tokens: int | None, max_tokens: int | None, *, warn_as: str | None = None
) -> int | None:
    """The token budget of a window, given as `budget_tokens` or under its old name
    `max_tokens`, still accepted but deprecated: to a model API `max_tokens` is the reply's
    limit, and one name must not mean two things. Both, and different: `InvalidInput`.
    `warn_as` names the library call taking it, for a `DeprecationWarning` to its caller."""
    if max_tokens is None:
        return budget_tokens
    if warn_as is not None:
        warnings.warn(
            f"{warn_as}(max_tokens=) is deprecated: the window budget is budget_tokens=",
            DeprecationWarning,
            stacklevel=3,
        )
    if budget_tokens is not None and budget_tokens != max_tokens:
        raise InvalidInput(
            "budget_tokens",
            f"give the window budget once: budget_tokens={budget_tokens!r} and its old name "
            f"max_tokens={max_tokens!r} disagree",
        )
    return max_tokens
