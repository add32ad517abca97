"""The ten ways the window promise broke through the public API (issue "Trust the window").

Each test drives `turnkeeper.open()` with its default configuration on every backend, the way a
new user would, and failed before its fix.
"""

from __future__ import annotations

import pytest

from tests.promise.recount import openai_tokens
from turnkeeper.cache import keys
from turnkeeper.context.formats import to_openai
from turnkeeper.context.strategies import Truncate
from turnkeeper.errors import Conflict, ContextBudgetExceeded, InvalidInput, InvalidMessage
from turnkeeper.service import Turnkeeper
from turnkeeper.types import MessageQuery, NewMessage


def words(i: int, n: int = 25) -> str:
    return f"turn {i}: " + " ".join(f"word{j}" for j in range(n))


def chat(tk: Turnkeeper, turns: int, *, system: str | None = "You are a travel agent.") -> str:
    session = tk.create_session()
    if system is not None:
        tk.append(session, "system", system)
    tk.append_many(
        session,
        [NewMessage("user" if i % 2 == 0 else "assistant", words(i)) for i in range(turns)],
    )
    return session.id


# -- 1, 2: a page key that confused "to seq 0" with "no bound" -------------------------------


def test_cache_keys_tell_a_bound_of_zero_from_no_bound() -> None:
    def page(to_seq: int | None) -> str:
        return keys.messages("ns", "s", 1, MessageQuery(to_seq=to_seq, newest_first=True, limit=16))

    assert page(0) != page(None)
    assert keys.count("ns", "s", 1, before_seq=0, include_internal=True) != keys.count(
        "ns", "s", 1, before_seq=None, include_internal=True
    )
    assert keys.summary("ns", "s", 1, upto_seq=0) != keys.summary("ns", "s", 1, upto_seq=None)


def test_a_full_build_that_cannot_fit_fails_instead_of_paging_forever(opened: Turnkeeper) -> None:
    session_id = chat(opened, 16, system=None)
    with pytest.raises(ContextBudgetExceeded):
        opened.context(session_id, strategy="full", budget_tokens=300)


def test_a_small_window_after_a_full_read_is_not_served_empty(opened: Turnkeeper) -> None:
    # A `full` read pages newest first: 32 messages, then pages of 16 down to seq 1, then one
    # more page "to seq 0", which is empty. Under the old key that empty page was cached as
    # "no bound, 16 messages": the first page of the next build sized 16.
    session_id = chat(opened, 47)
    session = opened.get_session(session_id)
    average = session.stored_tokens / session.message_count
    with pytest.raises(ContextBudgetExceeded):
        opened.context(session_id, strategy="full", budget_tokens=int(27 * average))
    window = opened.context(session_id, strategy="sliding_window", budget_tokens=int(10 * average))
    assert window.messages[-1].content == words(46)
    assert window.report.messages_included >= 2
    assert window.report.messages_dropped == 48 - window.report.messages_included
    assert window.messages[1].kind == "marker"


# -- 6: the marker follows the system message under every strategy ----------------------------


@pytest.mark.parametrize("strategy", ["full", "recent"])
def test_the_marker_follows_the_system_message(opened: Turnkeeper, strategy: str) -> None:
    session = opened.create_session()
    opened.append(session, "system", "You are a travel agent.")
    opened.append(session, "tool", "a result nobody asked for", tool_call_id="ghost")
    opened.append(session, "user", "Where to?")
    opened.append(session, "assistant", "Lisbon.")
    window = opened.context(session, strategy=strategy, keep_recent=10, include_internal=True)
    assert [m.kind for m in window.messages] == ["message", "marker", "message", "message"]
    assert window.messages[0].content == "You are a travel agent."


# -- 4: a pending turn already stored, with something stored after it -------------------------


@pytest.mark.parametrize("strategy", ["full", "recent", "sliding_window", "truncate", "summarize"])
def test_a_stored_pending_turn_appears_once_when_something_follows_it(
    opened: Turnkeeper, strategy: str
) -> None:
    session_id = chat(opened, 4)
    opened.append(session_id, "user", "What about Lisbon?", id="turn-7")
    opened.append(session_id, "system", "routing note", internal=True)
    pending = NewMessage("user", "What about Lisbon?", id="turn-7")
    window = opened.context(session_id, strategy=strategy, new_message=pending)
    contents = [m.content for m in window.messages]
    assert contents.count("What about Lisbon?") == 1
    assert "pending" not in [m.kind for m in window.messages]


def test_a_pending_turn_reusing_a_stored_id_for_other_text_is_a_conflict(
    opened: Turnkeeper,
) -> None:
    session_id = chat(opened, 2)
    opened.append(session_id, "user", "What about Lisbon?", id="turn-7")
    with pytest.raises(Conflict, match="'turn-7'"):
        opened.context(session_id, new_message=NewMessage("user", "And Porto?", id="turn-7"))


# -- 3: an internal note between a tool call and its result -----------------------------------


CALL = {"id": "call-1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}


@pytest.mark.parametrize("strategy", ["full", "sliding_window", "truncate", "summarize"])
def test_an_internal_note_between_a_call_and_its_result_keeps_them_together(
    opened: Turnkeeper, strategy: str
) -> None:
    session = opened.create_session()
    opened.append(session, "system", "You are a travel agent.")
    opened.append(session, "user", "Weather in Lisbon?")
    opened.append(session, "assistant", "", tool_calls=[CALL])
    opened.append(session, "system", "tool latency 2s", internal=True)
    opened.append(session, "tool", "sunny, 24C", tool_call_id="call-1")
    opened.append(session, "user", "Pack what?")
    sent = to_openai(opened.context(session, strategy=strategy))
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "system", "assistant", "tool", "user"]
    assert sent[3]["tool_calls"][0]["id"] == sent[4]["tool_call_id"] == "call-1"
    assert sent[2]["content"] == "tool latency 2s"


# -- 5: an agent's view is counted as it is sent, names included ------------------------------


def test_an_agent_perspective_window_is_counted_with_the_names_it_sends(
    opened: Turnkeeper,
) -> None:
    session = opened.create_session()
    opened.append(session, "user", "Plan the trip to Lisbon and Porto", author="maria")
    opened.append(session, "assistant", "Trains are best between them.", author="planner")
    opened.append(session, "assistant", "Book the 9:00 Alfa Pendular.", author="booker")
    opened.append(session, "user", "And hotels?", author="maria")
    for budget in (80, 100, 120, 160, 400):
        try:
            window = opened.context(session, agent="planner", budget_tokens=budget, model="gpt-4")
        except ContextBudgetExceeded:
            continue
        sent = to_openai(window)
        assert any("name" in message for message in sent)
        assert openai_tokens(sent) == window.report.tokens_used <= budget


# -- 8: a small explicit budget with truncate -------------------------------------------------


def test_truncate_with_an_explicit_budget_reserves_nothing_unless_asked(
    opened: Turnkeeper,
) -> None:
    session_id = chat(opened, 40)
    truncate = Truncate(cut="slide")  # the budget filled, not held at a cut point
    window = opened.context(session_id, strategy=truncate, budget_tokens=400)
    assert window.report.budget == 400
    assert 300 < window.report.tokens_used <= 400
    assert window.messages[1].content == "[Earlier messages truncated]"
    reserved = opened.context(session_id, strategy=truncate, budget_tokens=400, reserved_tokens=100)
    assert reserved.report.budget == 300
    default = opened.context(session_id, strategy=truncate)
    assert default.report.budget == 6000 - 4500  # the default reserve of the default budget


# -- 7: text no backend can store ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        ({"content": "a\ud800"}, "content", "lone surrogate (U+D800)"),
        ({"content": "nul \x00 byte"}, "content", "NUL"),
        ({"content": "hi", "author": "bo\udfffb"}, "author", "lone surrogate"),
        ({"content": "hi", "metadata": {"k": ["x\x00"]}}, "metadata.k[0]", "NUL"),
        ({"content": "hi", "metadata": {"\ud83d": 1}}, "metadata.\ud83d", "lone surrogate"),
    ],
)
def test_text_no_backend_can_store_is_an_invalid_message_and_stores_nothing(
    opened: Turnkeeper, fields: dict[str, object], field: str, problem: str
) -> None:
    session = opened.create_session()
    with pytest.raises(InvalidMessage) as info:
        opened.append(session, "user", **fields)  # type: ignore[arg-type]
    assert info.value.field == field and problem in info.value.problem
    assert opened.get_session(session.id).message_count == 0
    with pytest.raises(InvalidMessage):
        opened.append_many(session, [NewMessage("user", "fine"), NewMessage("user", **fields)])  # type: ignore[arg-type]
    assert opened.history(session) == []


def test_a_session_title_with_a_lone_surrogate_is_refused(opened: Turnkeeper) -> None:
    with pytest.raises(InvalidInput, match="title"):
        opened.create_session(title="trip \ud800")
