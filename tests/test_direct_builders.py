"""`build_message`, `build_draft` and `build_new_message` (the direct constructors used on the
append and read paths) make exactly what the dataclasses' own constructors make."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from turnkeeper.types import (
    Message,
    MessageDraft,
    NewMessage,
    Role,
    Usage,
    build_draft,
    build_message,
    build_new_message,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
CALLS = ({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},)

CASES: list[tuple[type[Any], Any, dict[str, Any]]] = [
    (
        Message,
        build_message,
        {
            "id": "m1", "session_id": "s", "seq": 7, "role": Role.ASSISTANT, "content": "hi",
            "created_at": NOW, "tokens": 12, "author": "bot", "internal": True,
            "usage": Usage(3, 4), "tool_calls": CALLS, "tool_call_id": None,
            "metadata": {"k": "v"},
        },
    ),
    (
        MessageDraft,
        build_draft,
        {
            "id": "m1", "role": Role.TOOL, "content": "out", "tokens": 5, "created_at": NOW,
            "author": None, "internal": False, "usage": None, "tool_calls": None,
            "tool_call_id": "c1", "metadata": {}, "trace": '{"t":1}',
        },
    ),
    (
        NewMessage,
        build_new_message,
        {
            "role": Role.USER, "content": "q", "author": None, "internal": False, "id": None,
            "usage": None, "tool_calls": [dict(CALLS[0])], "tool_call_id": None,
            "metadata": {"a": [1]},
        },
    ),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "build", "values"), CASES)
def test_a_direct_build_equals_the_constructor(cls: type[Any], build: Any, values: Any) -> None:
    built = build(**values)
    made = cls(**values)
    assert type(built) is cls
    assert built == made and hash(built.id) == hash(made.id)
    assert repr(built) == repr(made)
    assert dataclasses.asdict(built) == dataclasses.asdict(made)


@pytest.mark.parametrize(("cls", "build", "values"), CASES)
def test_a_direct_build_is_frozen_and_needs_every_field(
    cls: type[Any], build: Any, values: Any
) -> None:
    built = build(**values)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.content = "changed"
    missing = dict(values)
    missing.pop("content")
    with pytest.raises(TypeError, match="content"):
        build(**missing)
    with pytest.raises(TypeError):
        build(**values, unknown=1)
