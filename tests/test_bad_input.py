"""Bad input gets a clear error naming the field, and nothing stored changes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import Clock
from turnkeeper import jsonenc
from turnkeeper.config import load_settings
from turnkeeper.errors import ContentTooLarge, InvalidInput, InvalidMessage
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.types import NewMessage, Usage
from turnkeeper.validation import MAX_JSON_DEPTH, check_json


def _snapshot(tk: Turnkeeper, session_id: str) -> tuple[Any, ...]:
    return tk.get_session(session_id), tuple(tk.history(session_id))


def _nested(levels: int) -> dict[str, Any]:
    """Metadata of `levels` objects one in the other (built without recursion, so as deep as
    asked: no JSON text is ever made of it)."""
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return dict(value)


TOO_DEEP = f"nests objects and arrays more than {MAX_JSON_DEPTH} levels deep"
_CALL = {"id": "c", "function": {"name": "f", "arguments": "{}"}}


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
        # A key that is not text, nested: it was stored as "1", or (beside a text key) failed
        # with a bare TypeError when the stored form sorted the keys.
        ({"role": "user", "content": "x", "metadata": {"a": {1: "x"}}}, "metadata", "key"),
        ({"role": "user", "content": "x", "metadata": {"a": {1: "x", "b": 2}}}, "metadata", "1"),
        ({"role": "user", "content": "x", "metadata": {"a": [{None: 1}]}}, "metadata", "None"),
        ({"role": "tool", "content": "42"}, "tool_call_id", "must name the call"),
        ({"role": "user", "content": "x", "tool_call_id": "c"}, "tool_call_id", "only tool"),
        ({"role": "user", "content": "x", "tool_calls": [{"id": "c"}]}, "tool_calls", "assistant"),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
            "tool_calls[0]",
            "name",
        ),
        ({"role": "user", "content": "x", "id": "bad id with spaces"}, "id", "not a valid id"),
        (
            {"role": "user", "content": "x", "metadata": _nested(MAX_JSON_DEPTH + 1)},
            "metadata",
            TOO_DEEP,
        ),
        ({"role": "user", "content": "x", "metadata": _nested(100_000)}, "metadata", TOO_DEEP),
        (
            {"role": "assistant", "content": "", "tool_calls": [{**_CALL, "x": _nested(100_000)}]},
            "tool_calls",
            TOO_DEEP,
        ),
        ({"role": "user", "content": "x", "usage": Usage(2**63, 0)}, "usage", "from 0 to"),
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
        (lambda tk: tk.create_session(metadata=_nested(100_000)), "metadata"),
        (
            lambda tk: tk.get_or_create_session("new", metadata=_nested(MAX_JSON_DEPTH + 1)),
            "metadata",
        ),
        (lambda tk: tk.update_session("seeded", metadata=_nested(300)), "metadata"),
        (lambda tk: tk.create_session(metadata={"a": {1: "x", "b": "y"}}), "metadata"),
        (lambda tk: tk.update_session("seeded", metadata={"a": {2: "x"}}), "metadata"),
        (lambda tk: tk.fork("seeded", 1, metadata=_nested(300)), "metadata"),
        (lambda tk: tk.create_session(key="a/b"), "key"),
        (lambda tk: tk.get_or_create_session("a/b"), "key"),
        (lambda tk: tk.fork("seeded", 1, key="a/b"), "key"),
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


def test_a_json_value_over_the_size_limit_is_refused_naming_its_field(
    store: Store, tmp_path: Path, clock: Clock
) -> None:
    settings = load_settings(database_url=f"sqlite:///{tmp_path / 'x.db'}", max_json_bytes=100)
    tk = Turnkeeper(store, settings, clock=clock)
    session = tk.create_session(metadata={"t": "x" * 90})  # 98 bytes as JSON: fits
    with pytest.raises(ContentTooLarge) as info:
        tk.update_session(session, metadata={"t": "x" * 100})
    assert (info.value.field, info.value.problem) == (
        "metadata", "is 108 bytes as JSON; the limit is 100 bytes"
    )  # fmt: skip
    call = {**_CALL, "x": "y" * 100}
    with pytest.raises(ContentTooLarge, match="tool_calls: is "):
        tk.append(session, "assistant", "", tool_calls=[call])
    with pytest.raises(ContentTooLarge, match=r"messages\[1\]\.metadata: is 108 bytes"):
        tk.append_many(
            session, [NewMessage("user", "a"), NewMessage("user", "b", metadata={"t": "x" * 100})]
        )
    assert tk.history(session) == [] and tk.get_session(session).metadata == {"t": "x" * 90}


def test_a_json_value_exactly_at_the_depth_limit_is_stored_whole(tk: Turnkeeper) -> None:
    session = tk.create_session(metadata=_nested(MAX_JSON_DEPTH))
    stored = tk.append(session, "user", "x", metadata=_nested(MAX_JSON_DEPTH))
    assert tk.get_session(session).metadata == _nested(MAX_JSON_DEPTH)
    assert tk.history(session) == [stored] and stored.metadata == _nested(MAX_JSON_DEPTH)


def test_text_that_spells_a_nul_escape_is_stored_as_is(tk: Turnkeeper, seeded: str) -> None:
    """`check_json` looks for `\\u0000` in a value's JSON text to find a NUL; six characters
    that spell it (a backslash, then `u0000`) are text like any other, stored unchanged."""
    spelled = {"escape": "\\u0000", "key \\u0000": ["\\\\u0000"]}
    stored = tk.append(seeded, "user", "spelled", metadata=spelled)
    assert stored.metadata == spelled
    assert tk.history(seeded)[-1].metadata == spelled


_STORABLE_TEXT = st.text(st.characters(codec="utf-8", blacklist_characters="\x00"))
"""Text every backend stores: no NUL, and no lone surrogate (`codec="utf-8"`), which the size
measured below, of the JSON text's UTF-8, could not even encode."""
_STORABLE_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _STORABLE_TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_STORABLE_TEXT, inner, max_size=5),
    max_leaves=30,
)


@given(_STORABLE_JSON)
def test_a_value_is_refused_for_its_size_exactly_at_its_json_size(value: Any) -> None:
    """`check_json` accepts most values on its walk's bound of their size, without their JSON
    text: the bound is never below the size, so the limit falls exactly where the text's does."""
    size = len(jsonenc.strict(value).encode("utf-8"))
    check_json("value", value, max_bytes=size)
    with pytest.raises(ContentTooLarge, match=f"is {size} bytes as JSON"):
        check_json("value", value, max_bytes=size - 1)
