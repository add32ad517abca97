"""Property tests: the invariants every strategy keeps, over random conversations and budgets.

Whatever the conversation (tool units, orphans, internal messages filtered out, a pending turn
or not) and whatever the budget, a build either fails with `ContextBudgetExceeded` because the
trigger (or, for `full`, everything) really cannot fit, or returns a window that is ordered,
ends with the trigger exactly once, keeps tool units whole, puts notes only at the top, stays
within budget as recounted here, and reports counts that add up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.context.helpers import T0, call, msg
from turnkeeper.context.builder import ContextBuilder
from turnkeeper.context.formats import wire_name
from turnkeeper.context.history import ListHistory
from turnkeeper.context.relevant import relevant_marker
from turnkeeper.context.selection import (
    full_marker,
    recent_marker,
    sliding_window_marker,
    truncate_marker,
)
from turnkeeper.errors import ContextBudgetExceeded
from turnkeeper.tokens import REPLY_PRIMING, TokenCounter, counter_for
from turnkeeper.types import ContextMessage, ContextWindow, Message, MessageDraft, Role
from turnkeeper.types import StrategyName as S

APPROX = counter_for("approx_chars4")
EXACT = counter_for("cl100k_base")
MARKERS = {
    S.FULL: full_marker,
    S.RECENT: recent_marker,
    S.SLIDING_WINDOW: sliding_window_marker,
    S.TRUNCATE: truncate_marker,
    S.SUMMARIZE: sliding_window_marker,
    S.RELEVANT: lambda left_out: relevant_marker(left_out, 0),  # recalled turns go first
}
texts = st.one_of(
    st.text(alphabet="abcde fgh.?!\n", max_size=120),
    st.text(max_size=30),
)
authors = st.sampled_from([None, None, "alice", "Dr. Bob"])


@dataclass
class Case:
    stored: list[Message]  # everything in the store
    history: list[Message]  # what the builder is given (internal ones maybe filtered out)
    pending: MessageDraft | None
    strategy: S
    budget: int
    keep_recent: int
    max_messages: int | None


@st.composite
def stored_messages(draw: st.DrawFn, counter: TokenCounter, min_size: int = 0) -> list[Message]:
    out: list[Message] = []

    def add(role: str, **fields: Any) -> None:
        fields.setdefault("content", draw(texts))
        out.append(msg(len(out) + 1, role, counter=counter, internal=draw(st.booleans()), **fields))

    blocks = st.lists(st.sampled_from("suuaaUo"), min_size=min_size, max_size=min_size + 30)
    for block in draw(blocks):
        if block in "sua":
            role = {"s": "system", "u": "user", "a": "assistant"}[block]
            add(role, author=draw(authors))
        elif block == "U":  # an assistant calling tools, then some of their results
            ids = [f"c{len(out)}-{i}" for i in range(draw(st.integers(1, 3)))]
            add(
                "assistant",
                tool_calls=[call(i) for i in ids],
                content=draw(st.sampled_from(["", "hm"])),
            )
            for answer in draw(st.lists(st.sampled_from([*ids, "stray"]), max_size=4)):
                add("tool", tool_call_id=answer)
        else:  # a tool result out of nowhere
            add("tool", tool_call_id="ghost")
    return out


@st.composite
def cases(draw: st.DrawFn, counter: TokenCounter, *, long: bool = False) -> Case:
    stored = draw(stored_messages(counter, min_size=30 if long else 0))
    filtered = draw(st.booleans())
    history = [m for m in stored if not (filtered and m.internal)]
    pending = None
    kind = draw(st.sampled_from(["none", "fresh", "stored", "tool"]))
    if kind == "stored" and history:
        newest = history[-1]
        pending = MessageDraft(
            newest.id, newest.role, newest.content, newest.tokens, T0,
            tool_calls=newest.tool_calls, tool_call_id=newest.tool_call_id,
        )  # fmt: skip
    elif kind == "tool" and history and history[-1].tool_calls:
        answer = str(history[-1].tool_calls[0]["id"])
        pending = MessageDraft("p1", Role.TOOL, draw(texts), -1, T0, tool_call_id=answer)
    elif kind != "none":
        pending = MessageDraft("p1", Role.USER, draw(texts), -1, T0, author=draw(authors))
    total = REPLY_PRIMING + sum(m.tokens for m in history) + 40
    budgets = [st.integers(total // 4, total)]
    if not long:
        budgets += [st.integers(1, 60), st.integers(1, total)]
    budget = draw(st.one_of(*budgets))
    return Case(
        stored=stored,
        history=history,
        pending=pending,
        strategy=draw(st.sampled_from(list(S))),
        budget=budget,
        keep_recent=draw(st.integers(1, 8)),
        max_messages=draw(st.one_of(st.none(), st.integers(1, 10))),
    )


def pending_entry(case: Case) -> MessageDraft | None:
    """The pending turn, unless it is the newest stored message already."""
    if case.pending is None or (case.history and case.history[-1].id == case.pending.id):
        return None
    return case.pending


def count(counter: TokenCounter, m: ContextMessage | Message | MessageDraft) -> int:
    return counter.count_message(
        m.role,
        m.content,
        name=wire_name(m.role, m.author),
        tool_calls=m.tool_calls,
        tool_call_id=m.tool_call_id,
    )


def calls_of(m: ContextMessage | Message | MessageDraft) -> set[str]:
    if m.role is not Role.ASSISTANT or not m.tool_calls:
        return set()
    return {str(c["id"]) for c in m.tool_calls}


def results_following(sequence: Sequence[Message | MessageDraft], index: int) -> list[str]:
    """Ids of the messages answering the call at `index`: the tool results right after it."""
    calls = calls_of(sequence[index])
    answers = []
    for later in sequence[index + 1 :]:
        if later.role is not Role.TOOL:
            break
        if later.tool_call_id in calls:
            answers.append(later.id)
    return answers


def trigger_unit(case: Case) -> list[Message | MessageDraft]:
    """The trigger and, if it answers a call right before it, that call and its results."""
    sequence: list[Message | MessageDraft] = list(case.history)
    extra = pending_entry(case)
    if extra is not None:
        sequence.append(extra)
    trigger = sequence[-1]
    if trigger.role is Role.TOOL:
        index = len(sequence) - 2
        while index >= 0 and sequence[index].role is Role.TOOL:
            index -= 1
        if index >= 0 and trigger.tool_call_id in calls_of(sequence[index]):
            members = {sequence[index].id, *results_following(sequence, index)}
            return [m for m in sequence if m.id in members]
    return [trigger]


def check_failure(case: Case, error: ContextBudgetExceeded, counter: TokenCounter) -> None:
    assert error.budget == case.budget
    assert error.needed > case.budget
    if error.what == "the full history":
        assert case.strategy is S.FULL
        return
    assert error.what == "the triggering message"
    unit = REPLY_PRIMING + sum(count(counter, m) for m in trigger_unit(case))
    widest_note = counter.count_message("system", MARKERS[case.strategy](len(case.history)))
    assert unit > case.budget or (len(case.history) > 0 and unit + widest_note > case.budget)


def check_window(case: Case, window: ContextWindow, counter: TokenCounter) -> None:
    entries = window.messages
    report = window.report
    stored_seqs = [m.seq for m in entries if m.seq is not None]
    by_seq = {m.seq: m for m in case.history}
    extra = pending_entry(case)

    notes = [i for i, m in enumerate(entries) if m.kind in ("marker", "summary")]
    # (1) chronological (`relevant`: before its note, and after it: recalled turns, then the
    # turn being answered)
    parts = [entries] if case.strategy is not S.RELEVANT or not notes else (
        entries[: notes[0]], entries[notes[0] + 1 :]
    )  # fmt: skip
    for part in parts:
        seqs = [m.seq for m in part if m.seq is not None]
        assert seqs == sorted(set(seqs))
    assert len(stored_seqs) == len(set(stored_seqs))
    # (2) trigger exactly once, last
    if extra is not None:
        assert entries[-1].kind == "pending"
        assert entries[-1].message_id == extra.id
        assert [m.kind for m in entries].count("pending") == 1
    else:
        assert entries[-1].seq == case.history[-1].seq
        assert "pending" not in [m.kind for m in entries]
    # (3) tool units whole; no tool result without its call (except the trigger)
    sequence: list[Message | MessageDraft] = [*case.history, *([extra] if extra else [])]
    position = {m.id: i for i, m in enumerate(sequence)}
    ids_in_window = [m.message_id for m in entries]
    for i, entry in enumerate(entries):
        if entry.role is Role.TOOL and i != len(entries) - 1:
            j = i - 1
            while j >= 0 and entries[j].role is Role.TOOL:
                j -= 1
            assert j >= 0 and entry.tool_call_id in calls_of(entries[j]), "orphan sent"
        if entry.kind in ("message", "pending") and calls_of(entry):
            expected = results_following(sequence, position[entry.message_id])
            assert ids_in_window[i + 1 : i + 1 + len(expected)] == expected
    # (4) at most one note, at the top: right after the session's opening message when the
    # window starts with it (always, when that message is a system message), else first;
    # `relevant`'s after the newest turns, before what it recalled
    assert len(notes) <= 1
    if notes:
        opening = case.history[0]
        if opening.role is Role.SYSTEM and opening.seq in stored_seqs:
            assert entries[0].seq == opening.seq
        if case.strategy is not S.RELEVANT:
            assert notes[0] == (1 if entries[0].seq == opening.seq else 0)
        assert entries[notes[0]].role is Role.SYSTEM
    # (5) within budget, as recounted here
    assert report.tokens_used <= case.budget
    assert report.tokens_used == REPLY_PRIMING + sum(count(counter, m) for m in entries)
    # (6) a note exactly when something was left out
    assert bool(notes) == (report.messages_dropped + report.messages_summarized > 0)
    assert report.markers == tuple(m.content for m in entries if m.kind == "marker")
    # (7) the report adds up
    assert report.messages_in_store == len(case.stored)
    assert report.messages_included == len(stored_seqs)
    left_out = report.messages_dropped + report.messages_summarized
    assert report.messages_included + left_out == len(case.history)
    assert report.messages_dropped >= 0
    assert len(report.summarized_seqs) == report.messages_summarized
    listed = [*stored_seqs, *report.dropped_seqs, *report.summarized_seqs]
    assert len(listed) == len(set(listed)) and set(listed) <= set(by_seq)
    assert len(report.dropped_seqs) == report.messages_dropped  # every one named
    if case.strategy is S.FULL:
        assert all(by_seq[s].role is Role.TOOL for s in report.dropped_seqs)
    if case.strategy is S.TRUNCATE and case.max_messages is not None:
        required = sum(1 for m in trigger_unit(case) if isinstance(m, Message))
        assert report.messages_included <= max(case.max_messages, required)
    if case.strategy is S.RECENT:
        required = sum(1 for m in trigger_unit(case) if isinstance(m, Message))
        assert report.messages_included <= max(case.keep_recent, required)


def run(case: Case, counter: TokenCounter, stored_encoding: str) -> None:
    builder = ContextBuilder(counter, stored_encoding=stored_encoding)

    def build() -> ContextWindow:
        return builder.build(
            "s1",
            ListHistory(case.history, messages_in_store=len(case.stored)),
            strategy=case.strategy,
            budget=case.budget,
            keep_recent=case.keep_recent,
            max_messages=case.max_messages,
            pending=case.pending,
        )

    if not case.history and case.pending is None:
        assert build().messages == ()
        return
    try:
        window = build()
    except ContextBudgetExceeded as error:
        check_failure(case, error, counter)
    else:
        check_window(case, window, counter)


FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(cases(APPROX))
def test_every_strategy_keeps_the_invariants_with_the_approximate_counter(case: Case) -> None:
    run(case, APPROX, APPROX.encoding)


@FAST
@given(cases(EXACT))
def test_every_strategy_keeps_the_invariants_with_the_exact_counter(case: Case) -> None:
    run(case, EXACT, EXACT.encoding)


@FAST
@given(cases(APPROX))
def test_invariants_hold_when_stored_counts_are_recounted_for_another_encoding(
    case: Case,
) -> None:
    run(case, EXACT, APPROX.encoding)


@FAST
@given(cases(APPROX, long=True))
def test_long_conversations_under_moderate_budgets_keep_the_invariants(case: Case) -> None:
    run(case, APPROX, APPROX.encoding)
