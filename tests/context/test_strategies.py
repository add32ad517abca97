"""Each strategy's rules: what is kept, where the marker goes, what happens at the budget's edge."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tests.context.helpers import (
    APPROX,
    build,
    call,
    chat,
    contents,
    draft,
    long_chat,
    msg,
    seqs,
)
from turnkeeper.context.selection import SUMMARY_PREFIX
from turnkeeper.errors import ContextBudgetExceeded
from turnkeeper.tokens import REPLY_PRIMING, TokenCounter
from turnkeeper.types import ContextWindow, Message, Role, StrategyName

ALL = list(StrategyName)
SLIDING_NOTE = "[Note: {} older messages truncated to stay within token limit]"


def need_of(messages: Sequence[Message]) -> int:
    return REPLY_PRIMING + sum(m.tokens for m in messages)


def marker_tokens(text: str) -> int:
    return APPROX.count_message("system", text)


def assert_sane(window: ContextWindow) -> None:
    assert window.report.tokens_used == REPLY_PRIMING + sum(m.tokens for m in window.messages)
    assert window.report.tokens_used <= window.report.budget


# -- every strategy -----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL)
def test_short_history_is_sent_whole_without_a_marker(strategy: StrategyName) -> None:
    history = long_chat(4)
    window = build(history, strategy)
    assert contents(window) == [m.content for m in history]
    assert not window.report.truncated
    assert window.report.markers == ()
    assert window.report.messages_included == 5
    assert window.report.tokens_used == need_of(history)


@pytest.mark.parametrize("strategy", ALL)
def test_fits_when_budget_equals_exactly_what_the_history_needs(strategy: StrategyName) -> None:
    history = long_chat(6)
    window = build(history, strategy, budget=need_of(history))
    assert contents(window) == [m.content for m in history]
    assert window.report.tokens_used == window.report.budget


@pytest.mark.parametrize("strategy", ALL)
def test_empty_history_with_a_pending_turn_sends_just_that_turn(strategy: StrategyName) -> None:
    window = build([], strategy, pending=draft("Hello?"))
    assert contents(window) == ["Hello?"]
    assert window.messages[0].kind == "pending"
    assert window.report.messages_in_store == 0
    assert not window.report.truncated


@pytest.mark.parametrize("strategy", ALL)
def test_single_stored_message_is_its_own_trigger(strategy: StrategyName) -> None:
    window = build(chat(("system", "You are terse.")), strategy)
    assert contents(window) == ["You are terse."]
    assert window.report.messages_included == 1


@pytest.mark.parametrize("strategy", ALL)
def test_trigger_that_cannot_fit_alone_is_an_error(strategy: StrategyName) -> None:
    history = chat(("user", "hi"), ("user", "x" * 400))
    with pytest.raises(ContextBudgetExceeded) as raised:
        build(history, strategy, budget=need_of(history[-1:]) - 1)
    assert raised.value.needed > raised.value.budget


@pytest.mark.parametrize("strategy", ALL)
def test_pending_with_the_id_of_the_newest_stored_message_appears_once(
    strategy: StrategyName,
) -> None:
    history = [*long_chat(4), msg(6, "user", "What about Lisbon?", id="turn-6")]
    window = build(history, strategy, pending=draft("What about Lisbon?", id="turn-6"))
    assert contents(window).count("What about Lisbon?") == 1
    assert window.messages[-1].seq == 6
    assert window.messages[-1].kind == "message"


@pytest.mark.parametrize("strategy", ALL)
def test_pending_not_stored_yet_is_appended_once_after_the_history(strategy: StrategyName) -> None:
    history = long_chat(4)
    window = build(history, strategy, pending=draft("What about Lisbon?", id="new"))
    assert contents(window) == [*(m.content for m in history), "What about Lisbon?"]
    assert window.messages[-1].kind == "pending"
    assert window.messages[-1].message_id == "new"


# -- full ---------------------------------------------------------------------------------------


def test_full_refuses_a_history_one_token_over_budget() -> None:
    history = long_chat(6)
    with pytest.raises(ContextBudgetExceeded) as raised:
        build(history, "full", budget=need_of(history) - 1)
    assert raised.value.what == "the full history"
    assert raised.value.needed == need_of(history)


def test_full_leaves_out_orphaned_tool_results_and_says_so() -> None:
    history = [*chat(("user", "a"), ("assistant", "b")), msg(3, "tool", "x", tool_call_id="c9")]
    history.append(msg(4, "user", "c"))
    window = build(history, "full")
    assert contents(window) == [
        "[Note: 1 tool results without their tool call left out]",
        "a",
        "b",
        "c",
    ]
    assert list(window.report.dropped_seqs) == [3]


# -- sliding_window -----------------------------------------------------------------------------


def test_sliding_window_keeps_system_message_and_newest_with_a_counting_note() -> None:
    history = long_chat(60)
    window = build(history, "sliding_window", budget=200)
    report = window.report
    assert window.messages[0].content == "You are terse."
    assert window.messages[1].content == SLIDING_NOTE.format(report.messages_dropped)
    assert window.messages[1].kind == "marker"
    assert report.markers == (window.messages[1].content,)
    kept = seqs(window)[2:]
    assert kept == list(range(62 - len(kept), 62))
    assert report.messages_dropped == 61 - report.messages_included
    assert_sane(window)


def test_sliding_window_one_token_short_drops_the_oldest_turns_and_adds_the_note() -> None:
    history = long_chat(6)
    window = build(history, "sliding_window", budget=need_of(history) - 1)
    dropped = window.report.messages_dropped
    assert dropped >= 1
    assert contents(window)[:2] == ["You are terse.", SLIDING_NOTE.format(dropped)]
    assert seqs(window)[2:] == list(range(2 + dropped, 8))
    assert_sane(window)


def test_keeps_newest_message_when_budget_is_tiny() -> None:
    history = long_chat(20)
    note = SLIDING_NOTE.format(20)
    budget = need_of(history[-1:]) + marker_tokens(note)
    window = build(history, "sliding_window", budget=budget)
    assert contents(window) == [note, history[-1].content]
    assert 1 in window.report.dropped_seqs  # the system message gave way to the trigger


def test_sliding_window_without_a_system_message_starts_with_the_note() -> None:
    history = long_chat(30, system=None)
    window = build(history, "sliding_window", budget=150)
    assert window.messages[0].kind == "marker"
    assert window.messages[-1].seq == 30


def test_boundary_inside_a_tool_unit_drops_call_and_results_together() -> None:
    lookup = call("c1", arguments='{"query": "' + "long argument " * 20 + '"}')
    history = [
        msg(1, "system", "You are terse."),
        msg(2, "user", "find it"),
        msg(3, "assistant", tool_calls=[lookup]),
        msg(4, "tool", "found", tool_call_id="c1"),
        msg(5, "assistant", "It is found."),
        msg(6, "user", "thanks"),
    ]
    note = SLIDING_NOTE.format(3)
    # Room for the tool result but not for its call: a per-message cut would start with it.
    budget = need_of([history[0], *history[3:]]) + marker_tokens(note)
    assert budget < need_of([history[0], *history[2:]]) + marker_tokens(note)
    window = build(history, "sliding_window", budget=budget)
    assert contents(window) == ["You are terse.", note, "It is found.", "thanks"]
    assert window.report.messages_dropped == 3
    assert list(window.report.dropped_seqs) == [2, 3, 4]  # seq 2 was never read, and is named


def test_orphaned_tool_result_is_never_sent_unless_it_is_the_trigger() -> None:
    history = [
        msg(1, "user", "go"),
        msg(2, "tool", "stray", tool_call_id="c0"),
        msg(3, "assistant", "ok"),
        msg(4, "tool", "late", tool_call_id="c7"),
    ]
    window = build(history, "sliding_window")
    assert contents(window) == [SLIDING_NOTE.format(1), "go", "ok", "late"]
    assert list(window.report.dropped_seqs) == [2]


def test_pending_tool_result_travels_with_the_stored_call_it_answers() -> None:
    history = [
        *long_chat(10, system=None),
        msg(11, "assistant", tool_calls=[call("c1")]),
    ]
    pending = draft("42", role=Role.TOOL, tool_call_id="c1")
    unit = need_of(history[-1:]) + APPROX.count_message("tool", "42", tool_call_id="c1")
    budget = unit + marker_tokens(SLIDING_NOTE.format(10))
    window = build(history, "sliding_window", budget=budget, pending=pending)
    assert [m.kind for m in window.messages] == ["marker", "message", "pending"]
    assert seqs(window)[1] == 11


# -- truncate -----------------------------------------------------------------------------------


def test_truncate_keeps_the_opener_whatever_its_role_and_marks_the_gap() -> None:
    history = long_chat(60, system=None)
    window = build(history, "truncate", budget=200)
    assert window.messages[0].seq == 1
    assert window.messages[0].role is Role.USER
    assert window.messages[1].content == "[Earlier messages truncated]"
    assert window.messages[-1].seq == 60
    assert window.report.markers == ("[Earlier messages truncated]",)
    assert_sane(window)


def test_truncate_caps_the_messages_it_includes() -> None:
    history = long_chat(60)
    window = build(history, "truncate", max_messages=5)
    assert seqs(window) == [1, None, 58, 59, 60, 61]
    assert window.report.messages_included == 5
    assert window.report.messages_dropped == 56
    assert window.report.messages_loaded < 10


def test_truncate_one_token_short_marks_the_gap() -> None:
    history = long_chat(6)
    window = build(history, "truncate", budget=need_of(history) - 1)
    assert contents(window)[:2] == ["You are terse.", "[Earlier messages truncated]"]
    assert window.messages[-1].seq == 7


# -- recent -------------------------------------------------------------------------------------


def test_recent_keeps_the_last_n_and_counts_the_rest() -> None:
    history = long_chat(20, system=None)
    window = build(history, "recent", keep_recent=4)
    assert contents(window)[0] == "[Note: 16 older messages not shown]"
    assert seqs(window)[1:] == [17, 18, 19, 20]


def test_recent_shows_the_pending_turn_after_the_last_n_stored_messages() -> None:
    history = long_chat(20, system=None)
    window = build(history, "recent", keep_recent=2, pending=draft("new"))
    assert seqs(window) == [None, 19, 20, None]
    assert window.messages[0].content == "[Note: 18 older messages not shown]"


def test_recent_trims_further_from_the_oldest_when_over_budget() -> None:
    history = long_chat(20, system=None)
    budget = need_of(history[-2:]) + marker_tokens("[Note: 18 older messages not shown]")
    window = build(history, "recent", budget=budget, keep_recent=10)
    assert contents(window)[0] == "[Note: 18 older messages not shown]"
    assert seqs(window)[1:] == [19, 20]
    assert window.report.tokens_used == budget


# -- summarize ----------------------------------------------------------------------------------


def test_summarize_puts_a_summary_after_the_system_message_and_keeps_the_last_k() -> None:
    history = long_chat(40)
    window = build(history, "summarize", budget=400, keep_recent=4)
    summary = window.messages[1]
    assert window.messages[0].content == "You are terse."
    assert summary.kind == "summary"
    assert summary.role is Role.SYSTEM
    assert summary.content.startswith(SUMMARY_PREFIX)
    assert seqs(window)[2:] == [38, 39, 40, 41]
    report = window.report
    assert (report.messages_summarized, report.messages_dropped) == (36, 0)
    assert list(report.summarized_seqs) == list(range(2, 38))
    assert report.markers == ()
    assert_sane(window)


def test_summarize_puts_what_the_budget_cannot_keep_verbatim_into_the_summary() -> None:
    history = long_chat(40)
    window = build(history, "summarize", budget=120, keep_recent=10)
    verbatim = [s for s in seqs(window) if s is not None and s > 1]
    assert 0 < len(verbatim) < 10
    assert window.report.messages_summarized == 40 - len(verbatim)
    assert_sane(window)


class Fixed:
    """A summarizer that ignores its limit, recording the limits it was given."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.limits: list[int] = []

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        self.limits.append(max_tokens)
        return self.text


class Wordy:
    """A summarizer that overshoots its limit by about a quarter."""

    def __init__(self) -> None:
        self.limits: list[int] = []

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        self.limits.append(max_tokens)
        return "word " * max_tokens


def test_summarize_asks_again_for_a_shorter_summary_when_one_overshoots() -> None:
    wordy = Wordy()
    window = build(long_chat(40), "summarize", budget=300, keep_recent=2, summarizer=wordy)
    assert window.messages[1].kind == "summary"
    assert len(wordy.limits) >= 2
    assert wordy.limits == sorted(wordy.limits, reverse=True)
    assert_sane(window)


def test_summarize_falls_back_to_the_sliding_note_when_no_summary_fits() -> None:
    stubborn = Fixed("x" * 10_000)
    window = build(long_chat(40), "summarize", budget=300, keep_recent=4, summarizer=stubborn)
    report = window.report
    assert window.messages[1].content == SLIDING_NOTE.format(report.messages_dropped)
    assert report.messages_summarized == 0
    assert stubborn.limits
    assert_sane(window)


def test_summarize_falls_back_to_the_note_when_the_summary_is_empty() -> None:
    window = build(long_chat(40), "summarize", budget=300, keep_recent=4, summarizer=Fixed(""))
    assert window.messages[1].kind == "marker"
    assert window.report.messages_dropped > 0


def test_summarize_one_token_short_summarizes_instead_of_failing() -> None:
    history = long_chat(30, words=30)
    window = build(history, "summarize", budget=need_of(history) - 1, keep_recent=4)
    assert window.messages[1].kind == "summary"
    assert window.messages[-1].seq == 31
    assert_sane(window)
