"""Bad input gets a clear error naming the field, and nothing stored changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from turnkeeper.errors import InvalidInput, InvalidMessage
from turnkeeper.service import Turnkeeper
from turnkeeper.types import NewMessage


def _snapshot(tk: Turnkeeper, session_id: str) -> tuple[Any, ...]:
    return tk.get_session(session_id), tuple(tk.history(session_id))


def _cycle() -> dict[str, Any]:
    """Metadata that contains itself: no JSON encodes it."""
    looped: dict[str, Any] = {"items": []}
    looped["items"].append(looped)
    return looped


@pytest.fixture
def seeded(tk: Turnkeeper) -> str:
    session = tk.create_session(key="seeded", metadata={"keep": True})
    tk.append(session, "system", "You are helpful.")
    tk.append(session, "user", "hello")
    return session.id


@pytest.mark.parametrize(
    ("kwargs", "field", "problem"),
    [
        ({"role": "wizard", "content": "x"}, "role", "unknown role 'wizard'"),
        ({"role": "user", "content": 42}, "content", "must be text"),
        ({"role": "user", "content": ["a"]}, "content", "must be text"),
        ({"role": "user", "content": "   "}, "content", "must not be empty for a user message"),
        ({"role": "system", "content": ""}, "content", "must not be empty for a system message"),
        ({"role": "assistant", "content": ""}, "content", "must not be empty"),
        ({"role": "user", "content": "x" * (1024 * 1024 + 1)}, "content", "the limit is 1048576"),
        ({"role": "user", "content": "x", "metadata": ["a"]}, "metadata", "JSON object"),
        ({"role": "user", "content": "x", "metadata": "{}"}, "metadata", "JSON object"),
        ({"role": "user", "content": "x", "metadata": {"f": object()}}, "metadata", "JSON"),
        ({"role": "user", "content": "x", "metadata": {"f": [float("nan")]}}, "metadata", "float"),
        ({"role": "user", "content": "x", "metadata": _cycle()}, "metadata", "Circular"),
        ({"role": "tool", "content": "42"}, "tool_call_id", "must name the call"),
        ({"role": "user", "content": "x", "tool_call_id": "c"}, "tool_call_id", "only tool"),
        ({"role": "user", "content": "x", "tool_calls": [{"id": "c"}]}, "tool_calls", "assistant"),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
            "tool_calls[0]",
            "name",
        ),
        ({"role": "user", "content": "x", "id": "bad id with spaces"}, "id", "not a valid id"),
    ],
)
def test_bad_message_is_rejected_naming_the_field_and_nothing_changes(
    tk: Turnkeeper, seeded: str, kwargs: dict[str, Any], field: str, problem: str
) -> None:
    before = _snapshot(tk, seeded)
    with pytest.raises(InvalidMessage) as info:
        tk.append_many(seeded, [NewMessage(**kwargs)])
    assert info.value.field.startswith(field)
    assert problem in str(info.value)
    assert _snapshot(tk, seeded) == before


def test_a_bad_message_inside_a_batch_names_its_index_and_stores_none(
    tk: Turnkeeper, seeded: str
) -> None:
    before = _snapshot(tk, seeded)
    with pytest.raises(InvalidMessage, match=r"messages\[1\]\.role"):
        tk.append_many(seeded, [NewMessage("user", "fine"), NewMessage("robot", "no")])
    assert _snapshot(tk, seeded) == before


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda tk: tk.create_session(key="has space"), "key"),
        (lambda tk: tk.create_session(key=""), "key"),
        (lambda tk: tk.create_session(key="x" * 300), "key"),
        (lambda tk: tk.create_session(project="../etc"), "project"),
        (lambda tk: tk.create_session(metadata=[1, 2]), "metadata"),
        (lambda tk: tk.get_or_create_session("bad key!"), "key"),
        (lambda tk: tk.update_session("seeded", metadata="nope"), "metadata"),
        (lambda tk: tk.context("seeded", strategy="magic"), "strategy"),
        (lambda tk: tk.context("seeded", budget_tokens=0), "budget_tokens"),
        (lambda tk: tk.context("seeded", budget_tokens=-100), "budget_tokens"),
        (
            lambda tk: tk.context("seeded", budget_tokens=100, reserved_tokens=100),
            "reserved_tokens",
        ),
        (lambda tk: tk.context("seeded", reserved_tokens=-1), "reserved_tokens"),
        (lambda tk: tk.context("seeded", keep_recent=0), "keep_recent"),
        (lambda tk: tk.history("seeded", limit=0), "limit"),
        (lambda tk: tk.list_sessions(status="gone"), "status"),
        (lambda tk: tk.list_sessions(limit=1001), "limit"),
        (lambda tk: tk.update_session("seeded", ttl=timedelta(0)), "ttl"),
        (lambda tk: tk.list_sessions(cursor="not-a-cursor"), "cursor"),
        (lambda tk: tk.append("seeded", "user", "x", expected_last_seq=-1), "expected_last_seq"),
    ],
)
def test_bad_arguments_are_rejected_naming_the_field(
    tk: Turnkeeper, seeded: str, call: Any, field: str
) -> None:
    before = _snapshot(tk, seeded)
    sessions_before = tk.list_sessions().items
    with pytest.raises(InvalidInput) as info:
        call(tk)
    assert info.value.field == field
    assert _snapshot(tk, seeded) == before
    assert tk.list_sessions().items == sessions_before
