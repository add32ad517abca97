"""Checks on caller-supplied values, each failing with an error that names the field.

Validation happens before anything is written, so bad input never changes what is stored.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping
from typing import Any

from turnkeeper.errors import ContentTooLarge, InvalidInput, InvalidMessage
from turnkeeper.types import JSONObject, NewMessage, Phase, Role, StrategyName, Usage

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@/+=~-]{0,254}$"
"""What a name (session key, project, subject, message id, agent, …) may be: the one definition,
used by `check_name` here and by the HTTP service's schemas and parameters (so the OpenAPI shows
it). Starts with a letter or digit; at most 255 characters, none of them blank or quoting."""

_NAME = re.compile(NAME_PATTERN)
_ROLES = ", ".join(role.value for role in Role)
_STRICT_JSON = json.JSONEncoder(allow_nan=False)
"""`json.dumps(value, allow_nan=False)` without building an encoder per call."""
_PLAIN_LEAVES = (str, int, bool, type(None))


def _clean(value: Any, depth: int = 0) -> bool:
    """True when `value` is made only of dicts with string keys, lists and plain strings,
    numbers, booleans and None (exact types, finite floats, at most 32 levels deep), and every
    string in it, keys included, is storable (as `check_storable`): one walk, with no field
    names built, for the common case of good input. False means "not sure": the strict encoder
    and the precise checks then run and name the problem (a cycle shows up here as too deep)."""
    kind = type(value)
    if kind is str:
        return "\x00" not in value and (value.isascii() or _encodes(value))
    if kind in _PLAIN_LEAVES:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth >= 32:
        return False
    # Loops rather than `all(generator)`, and strings checked in line: metadata is walked on
    # every append, and it is mostly a few string keys and values.
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or "\x00" in key or not (key.isascii() or _encodes(key)):
                return False
            if type(item) is str:
                if "\x00" in item or not (item.isascii() or _encodes(item)):
                    return False
            elif not _clean(item, depth + 1):
                return False
        return True
    if kind is list:
        return all(_clean(item, depth + 1) for item in value)
    return False


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unstorable(text: str) -> str | None:
    """Why `text` cannot be stored as is on every backend, or None if it can."""
    nul = text.find("\x00")
    if nul >= 0:
        return f"contains a NUL character (U+0000) at position {nul}, which no backend stores"
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
    """Keys, projects and client message ids: 1–255 characters of letters, digits and
    `. _ : @ / + = ~ -`, starting with a letter or digit (safe in URLs, paths and logs)."""
    if value is None:
        return None
    if not isinstance(value, str) or not _NAME.match(value):
        raise error(
            field,
            f"{value!r} is not a valid {field}: use 1-255 letters, digits or . _ : @ / + = ~ -,"
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
    field: str, value: Any, *, error: type[InvalidInput] = InvalidInput
) -> dict[str, Any]:
    """A JSON object (dict with string keys whose values JSON can encode)."""
    if value is None:
        return {}
    if type(value) is dict and _clean(value):
        return dict(value)
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise error(field, f"must be a JSON object, got {type(value).__name__}")
    try:
        _STRICT_JSON.encode(value)
    except (TypeError, ValueError) as exc:
        raise error(field, f"must be a JSON object: {exc}") from None
    check_storable(field, value, error=error)
    return dict(value)


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


_ROLE_OF: dict[Any, Role] = {role.value: role for role in Role}
"""A dict lookup (a `Role` is its own value's key): far cheaper than `Role(value)`."""


def check_role(value: Role | str) -> Role:
    try:
        return _ROLE_OF[value]
    except (KeyError, TypeError):
        raise InvalidMessage("role", f"unknown role {value!r}; choose one of {_ROLES}") from None


def _check_tool_calls(value: Any) -> tuple[JSONObject, ...]:
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
    check_storable("tool_calls", calls, error=InvalidMessage)
    check_metadata("tool_calls", {"calls": calls}, error=InvalidMessage)
    return tuple(calls)


def check_message(
    message: NewMessage, *, max_bytes: int
) -> tuple[Role, tuple[JSONObject, ...] | None, dict[str, Any]]:
    """Validate one message to append; returns the fields that normalising changes: the role
    (a `Role`), the tool calls (a tuple, or None) and the metadata (a copy, `{}` for None).
    The other fields are valid as given. Not a new `NewMessage`: building one per message
    was a measurable share of a large append, and the caller reads these three anyway."""
    role = check_role(message.role)
    content = message.content
    if not isinstance(content, str):
        raise InvalidMessage("content", f"must be text, got {type(content).__name__}")
    if content.isascii():  # the common case: one byte a character, nothing to encode
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
        tool_calls = _check_tool_calls(message.tool_calls)
    if role is Role.TOOL:
        if not message.tool_call_id:
            raise InvalidMessage("tool_call_id", "a tool message must name the call it answers")
    elif message.tool_call_id is not None:
        raise InvalidMessage("tool_call_id", "only tool messages answer a tool call")
    blank = not content or content.isspace()  # `not content.strip()`, without a copy
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
        or not all(isinstance(n, int) and n >= 0 for n in (usage.input_tokens, usage.output_tokens))
    ):
        raise InvalidMessage("usage", "input_tokens and output_tokens must be whole numbers >= 0")
    return role, tool_calls, check_metadata("metadata", message.metadata, error=InvalidMessage)


MAX_WHOLE = 2**63 - 1
"""The largest number a count, seq or budget may be: both backends store 64-bit integers, and
a larger one would overflow SQLite's binding (an error, not an answer)."""


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
