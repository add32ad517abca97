"""The `relevant` strategy through the public API: older turns relevant to the question are
recalled whole (a tool call with its result), within the budget, the system message first and
the question last, with one note; the newest turns start at the same message turn after turn
(a prefix a provider caches); a retriever of one's own plugs in. On SQLite, PostgreSQL and
PostgreSQL+Redis (`tk`), and on `memory://`."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import turnkeeper
from turnkeeper.service import Turnkeeper
from turnkeeper.types import ContextWindow, Session

FILLER = "We talked about the weather in town number {n} and the colour of boat {n}."


def converse(tk: Turnkeeper, *, turns: int = 60) -> Session:
    """A system prompt, a tool call planting a fact, many turns of filler, then a question
    about the fact worded like it (not yet stored: the caller asks it)."""
    session = tk.create_session()
    tk.append(session, "system", "You are a careful assistant.")
    tk.append(session, "user", "Please look up the vault for me.")
    call = {
        "id": "call-vault",
        "type": "function",
        "function": {"name": "vault", "arguments": "{}"},
    }
    tk.append(session, "assistant", "", tool_calls=[call])
    tk.append(session, "tool", "The vault combination is 7-31-9921.", tool_call_id="call-vault")
    tk.append(session, "assistant", "Done, I looked it up.")
    for n in range(turns):
        tk.append(session, "user", FILLER.format(n=n))
        tk.append(session, "assistant", f"Noted about town {n}.")
    return session


def ask(tk: Turnkeeper, session: Session, question: str, budget: int = 400) -> ContextWindow:
    tk.append(session, "user", question)
    return tk.context(session, strategy="relevant", budget_tokens=budget)


def check_recall(window: ContextWindow, question: str, budget: int = 400) -> None:
    entries = window.messages
    assert window.report.strategy == "relevant"
    assert window.report.tokens_used <= budget
    assert entries[0].content == "You are a careful assistant."
    assert entries[-1].content == question
    contents = [entry.content for entry in entries]
    assert "The vault combination is 7-31-9921." in contents
    result = contents.index("The vault combination is 7-31-9921.")
    assert entries[result - 1].tool_calls and entries[result - 1].tool_calls[0]["id"] == (
        "call-vault"
    )  # the call right before its result
    (note,) = [entry for entry in entries if entry.kind == "marker"]
    assert note.content.endswith("older ones below recalled as relevant to this turn]")
    assert entries.index(note) < result - 1  # the note comes before what it recalled
    assert window.report.markers == (note.content,)


def test_an_older_turn_is_recalled_whole_with_its_tool_call(tk: Turnkeeper) -> None:
    session = converse(tk)
    question = "What was the vault combination?"
    check_recall(ask(tk, session, question), question)


def test_memory_recalls_the_same_turns() -> None:
    with turnkeeper.open("memory://") as tk:
        session = converse(tk)
        question = "What was the vault combination?"
        window = ask(tk, session, question)
        check_recall(window, question)


def test_the_newest_turns_keep_their_start_while_they_fit(tk: Turnkeeper) -> None:
    """Turn after turn the part before the note stays the start of the next window (what a
    provider bills as a cached prefix), except when the newest turns outgrow their share."""
    session = converse(tk, turns=40)
    kept = 0
    previous: tuple[object, ...] | None = None
    for n in range(30):
        window = ask(tk, session, f"And what about town {n} and its boat?", budget=600)
        entries = window.messages
        note = next(i for i, entry in enumerate(entries) if entry.kind == "marker")
        stable = tuple((entry.seq, entry.content) for entry in entries[:note])
        now = tuple((entry.seq, entry.content) for entry in entries)
        if previous is not None and now[: len(previous)] == previous:
            kept += 1
        previous = stable
        tk.append(session, "assistant", f"Town {n} is quiet.")
    assert kept >= 20, kept


def test_a_retriever_of_ones_own_is_asked_and_never_trusted(tk: Turnkeeper) -> None:
    session = converse(tk)
    asked: list[tuple[str, str, int]] = []

    def retriever(of: Session, query: str, limit: int) -> Sequence[int]:
        asked.append((of.id, query, limit))
        newest = of.last_seq
        # the tool result (its call comes along), then seqs that are no older turn of it
        return [4, 0, -3, newest, newest + 50, 4, 1]

    strategy = turnkeeper.Relevant(retriever)
    assert isinstance(retriever, turnkeeper.Retriever)
    question = tk.append(session, "user", "Which number was it?")
    windows = [tk.context(session, strategy=strategy, budget_tokens=400) for _ in range(2)]
    assert len(asked) == 2  # its answers may change: a window is not remembered
    assert asked[0][:2] == (session.id, "Which number was it?")
    for window in windows:
        recalled = [entry.seq for entry in window.messages if entry.seq in (3, 4)]
        assert recalled == [3, 4]
        seqs = [entry.seq for entry in window.messages if entry.seq is not None]
        assert len(seqs) == len(set(seqs)) and seqs[0] == 1 and seqs[-1] == question.seq


def test_a_build_reads_no_more_than_its_window_and_candidates(tk: Turnkeeper) -> None:
    session = converse(tk, turns=300)
    window = ask(tk, session, "What was the vault combination?")
    assert window.report.messages_in_store == 606
    assert window.report.messages_loaded < 120


def test_the_whole_history_when_it_fits(tk: Turnkeeper) -> None:
    session = converse(tk, turns=2)
    window = ask(tk, session, "What was the vault combination?", budget=4000)
    assert [entry.seq for entry in window.messages] == list(range(1, 11))
    assert window.report.markers == ()


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"recent_share": 1.5}, "recent_share"),
        ({"recall_share": 0}, "recall_share"),
        ({"candidates": 0}, "candidates"),
        ({"retriever": "full-text"}, "retriever"),
    ],
)
def test_bad_settings_name_their_field(arguments: dict[str, object], field: str) -> None:
    with pytest.raises(turnkeeper.InvalidInput, match=field):
        turnkeeper.Relevant(**arguments)  # type: ignore[arg-type]
