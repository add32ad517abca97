"""A window and its report read well when printed, and the report names every message it counts:
the seqs it lists as dropped, summarized and loaded are exactly as many as its counts say, and
its marker says the same number (for every strategy, every backend, whatever the history)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnkeeper import ContextBudgetExceeded, StrategyName, Turnkeeper
from turnkeeper.types import ContextWindow, NewMessage


def _chat(tk: Turnkeeper, questions: int) -> str:
    session = tk.create_session()
    tk.append(session, "system", "Be brief.")
    for i in range(questions):
        tk.append(session, "user", f"question number {i} with some words in it to cost tokens")
    return session.id


def assert_names_what_it_counts(window: ContextWindow, history: set[int]) -> None:
    """The report of `window`, built from a history holding `history`, adds up seq by seq."""
    report = window.report
    kept = {m.seq for m in window.messages if m.seq is not None}
    dropped, summarized = set(report.dropped_seqs), set(report.summarized_seqs)
    assert len(report.dropped_seqs) == len(dropped) == report.messages_dropped
    assert len(report.summarized_seqs) == len(summarized) == report.messages_summarized
    loaded = set(report.loaded_seqs)
    assert len(report.loaded_seqs) == len(loaded) == report.messages_loaded
    assert len(kept) == report.messages_included
    assert not (kept & dropped or kept & summarized or dropped & summarized)
    assert kept | dropped | summarized == history
    assert kept | summarized <= loaded <= history
    for marker in report.markers:  # a marker that counts says what the report counts
        counted = [int(number) for number in re.findall(r"\d+", marker)]
        if counted:  # first what was left out; `relevant`'s note then says how many it recalled
            assert counted[0] == report.messages_dropped + report.messages_summarized
            assert all(recalled <= report.messages_included for recalled in counted[1:2])


def test_a_printed_report_names_every_message_it_left_out(tk: Turnkeeper) -> None:
    session_id = _chat(tk, 30)
    window = tk.context(
        session_id, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=200, reserved_tokens=0
    )
    report = window.report
    assert report.messages_dropped + report.messages_included == report.messages_in_store == 31
    assert report.messages_loaded < 31  # the older messages were never read, and still named
    first_kept = min(m.seq for m in window.messages if m.seq is not None and m.seq > 1)
    assert list(report.dropped_seqs) == list(range(2, first_kept))
    text = str(report)
    assert text.splitlines()[0] == (
        f"sliding_window window: {report.messages_included} of 31 stored messages, "
        f"{report.tokens_used} / 200 tokens (o200k_base)"
    )
    assert f"dropped {report.messages_dropped}" in text
    assert f"dropped: seq 2–{first_kept - 1}" in text
    assert f"marker: {report.markers[0]}" in text
    assert str(report.messages_dropped) in report.markers[0]
    assert "ContextReport(" not in text


def test_a_printed_window_lists_its_messages_after_the_report(tk: Turnkeeper) -> None:
    session_id = _chat(tk, 3)
    window = tk.context(session_id, strategy=StrategyName.FULL)
    lines = str(window).splitlines()
    assert lines[0].startswith("full window: 4 of 4 stored messages")
    assert lines[-1].split() == ["#4", "user", str(window.messages[-1].tokens), "question",
                                 "number", "2", "with", "some", "words", "in", "it", "to", "cost",
                                 "tokens"]  # fmt: skip


def test_a_printed_window_tags_the_internal_messages_it_sends(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "Book a table.")
    tk.append(session, "assistant", "checked availability", internal=True, author="tool")
    lines = str(tk.context(session, strategy=StrategyName.SLIDING_WINDOW)).splitlines()
    assert "assistant:tool (internal)" in lines[-1]
    assert "internal" not in lines[-2]


def test_an_empty_window_costs_no_tokens(tk: Turnkeeper) -> None:
    session = tk.create_session()
    window = tk.context(session)
    assert window.messages == ()
    assert window.report.tokens_used == 0
    assert "0 of 0 stored messages, 0 / " in str(window.report)


turns = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "user", "assistant", "system", "tool call"]),
        st.integers(1, 60),  # words
        st.booleans(),  # internal
    ),
    min_size=1,
    max_size=60,
)


def _store(tk: Turnkeeper, spec: list[tuple[str, int, bool]]) -> str:
    session = tk.create_session()
    messages = [NewMessage("system", "You plan trips.")]
    for n, (role, words, internal) in enumerate(spec):
        text = f"turn {n} " + "word " * words
        if role == "tool call":
            call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            messages += [
                NewMessage("assistant", "", tool_calls=[call], internal=internal),
                NewMessage("tool", text, tool_call_id=f"c{n}"),
            ]
        else:
            author = "planner" if role == "assistant" and n % 3 else None  # another agent
            messages.append(NewMessage(role, text, internal=internal, author=author))
    tk.append_many(session, messages)
    return session.id


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    spec=turns,
    strategy=st.sampled_from(list(StrategyName)),
    budget=st.integers(60, 2500),
    keep_recent=st.integers(1, 12),
    include_internal=st.sampled_from([None, True, False]),
    pending=st.booleans(),
    agent=st.sampled_from([None, None, "reviewer"]),
)
def test_every_strategy_names_exactly_the_messages_it_counts(
    tk: Turnkeeper,
    spec: list[tuple[str, int, bool]],
    strategy: StrategyName,
    budget: int,
    keep_recent: int,
    include_internal: bool | None,
    pending: bool,
    agent: str | None,
) -> None:
    session_id = _store(tk, spec)
    try:
        window = tk.context(
            session_id, strategy=strategy, budget_tokens=budget, reserved_tokens=0,
            keep_recent=keep_recent, include_internal=include_internal,
            new_message=NewMessage("user", "And now?") if pending else None, agent=agent,
        )  # fmt: skip
    except ContextBudgetExceeded:
        return
    sees_internal = strategy is not StrategyName.RECENT or agent is not None  # the defaults
    if include_internal is not None:
        sees_internal = include_internal
    history = {m.seq for m in tk.history(session_id) if sees_internal or not m.internal}
    assert_names_what_it_counts(window, history)


def test_a_window_without_internal_messages_names_only_the_messages_of_its_view(
    tk: Turnkeeper,
) -> None:
    """`recent` leaves internal messages out of its view: the older messages it never read
    are named without them (the store says where they sit; nothing is read)."""
    session = tk.create_session()
    tk.append(session, "system", "You plan trips.")
    for n in range(2, 61):
        tk.append(session, "user", f"turn {n}", internal=n % 5 == 0)
    window = tk.context(session, strategy=StrategyName.RECENT, keep_recent=3, budget_tokens=60)
    report = window.report
    kept = [m.seq for m in window.messages if m.seq is not None]
    assert kept == [57, 58, 59]  # 60 is internal
    view = [seq for seq in range(1, 61) if seq % 5 != 0]
    assert list(report.dropped_seqs) == view[:-3]
    assert report.messages_loaded < len(view)  # the older ones were named, not read
    assert report.markers == ("[Note: 45 older messages not shown]",)
