"""Cut points: a window that leaves older turns out keeps its start, its marker and so its
prefix while it fits, and moves its start only when it overflows, freeing the low watermark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import turnkeeper
from tests.conftest import Clock
from tests.context.helpers import APPROX, build, long_chat
from turnkeeper.config import Settings
from turnkeeper.context.builder import ContextBuilder
from turnkeeper.context.formats import to_anthropic, to_openai
from turnkeeper.context.history import ListHistory
from turnkeeper.context.selection import CutRule
from turnkeeper.context.strategies import Recent, SlidingWindow
from turnkeeper.errors import InvalidConfig, InvalidInput
from turnkeeper.storage.base import CutPointStore, Store
from turnkeeper.types import ContextWindow, CutMode

BUDGET = 300


def stable(seq: int = 0) -> CutRule:
    return CutRule(CutMode.STABLE, seq)


def turn_by_turn(
    turns: int, strategy: str = "sliding_window", *, budget: int = BUDGET, **options: int
) -> list[ContextWindow]:
    """The window of each turn of a growing chat, each built from the cut point the one
    before it moved to, as a service stores it."""
    history = long_chat(turns)
    windows, cut = [], 0
    for end in range(2, len(history) + 1):
        window = build(history[:end], strategy, budget, cut=stable(cut), **options)  # type: ignore[arg-type]
        windows.append(window)
        cut = window.report.cut_seq or 0
    return windows


def sent(window: ContextWindow) -> str:
    return json.dumps(to_openai(window))


def test_the_window_keeps_its_start_and_marker_until_it_overflows_then_frees_half() -> None:
    windows = turn_by_turn(60)
    cuts = [w.report.cut_seq for w in windows]
    moves = [i for i in range(1, len(cuts)) if cuts[i] != cuts[i - 1]]
    assert len(moves) >= 2, cuts  # it did overflow, more than once
    for i in range(1, len(windows)):
        before, now = windows[i - 1], windows[i]
        if i in moves:
            assert (now.report.cut_seq or 0) > (before.report.cut_seq or 0)
            assert now.report.tokens_used <= BUDGET * 0.5  # the low watermark: half free
            continue
        # held: the same marker, and the previous window minus its trigger is a prefix
        assert now.report.markers == before.report.markers
        previous = to_openai(before)
        assert to_openai(now)[: len(previous)] == previous
    assert all(w.report.tokens_used <= BUDGET for w in windows)


def test_the_marker_names_what_the_cut_left_out_and_stays_while_it_holds() -> None:
    windows = turn_by_turn(60)
    cuts = [w.report.cut_seq for w in windows if w.report.cut_seq]
    longest = max(set(cuts), key=cuts.count)
    held = [w for w in windows if w.report.cut_seq == longest]
    assert len(held) > 3
    assert {w.report.markers for w in held} == {held[0].report.markers}
    count = held[0].report.messages_dropped
    assert held[0].report.markers == (
        f"[Note: {count} older messages truncated to stay within token limit]",
    )


def test_slide_mode_moves_the_start_with_nearly_every_turn() -> None:
    history = long_chat(60)
    starts = []
    for end in range(40, len(history) + 1):
        window = build(history[:end], "sliding_window", BUDGET)
        assert window.report.cut_seq is None  # slide mode holds no cut point
        starts.append(next(m.seq for m in window.messages[2:]))
    assert len(set(starts)) > len(starts) // 2


def test_a_larger_budget_takes_older_turns_back_only_within_the_low_watermark() -> None:
    history = long_chat(60)
    small = build(history, "sliding_window", BUDGET, cut=stable())
    cut = small.report.cut_seq or 0
    again = build(history, "sliding_window", BUDGET, cut=stable(cut))
    assert again.messages == small.messages  # built from where it moved: the same window
    larger = build(history, "sliding_window", 4 * BUDGET, cut=stable(cut))
    assert (larger.report.cut_seq or 0) < cut
    assert larger.report.tokens_used <= 4 * BUDGET * 0.5


def test_a_history_that_fits_keeps_no_cut_point() -> None:
    history = long_chat(6)
    window = build(history, "sliding_window", 10_000, cut=stable())
    assert window.report.cut_seq == 0 and not window.report.truncated


def test_recent_keeps_the_last_n_unless_told_to_hold_a_cut_point() -> None:
    builder = ContextBuilder(APPROX, stored_encoding=APPROX.encoding)
    history = long_chat(40)

    def recent(strategy: Recent) -> ContextWindow:
        return builder.build(
            "s1", ListHistory(history), strategy=strategy, budget=10_000, keep_recent=10,
            cut=stable(),
        )  # fmt: skip

    assert recent(Recent()).report.messages_included == 10  # slides: the last N, always
    assert recent(Recent()).report.cut_seq is None
    held = recent(Recent(cut="stable"))
    assert held.report.cut_seq and held.report.messages_included <= 5  # moved to the low mark


def test_a_message_limit_has_watermarks_too() -> None:
    limit = 10
    windows = turn_by_turn(60, "truncate", budget=10_000, max_messages=limit)
    sizes = [w.report.messages_included for w in windows[20:]]
    assert max(sizes) <= limit and min(sizes) <= limit // 2 + 1
    cuts = [w.report.cut_seq for w in windows[20:]]
    assert len(set(cuts)) < len(cuts) // 3  # held for several turns at a time


def test_summarize_holds_its_summary_while_the_cut_holds() -> None:
    windows = turn_by_turn(60, "summarize", budget=BUDGET, keep_recent=8)
    summarized = [w for w in windows if w.report.messages_summarized]
    assert summarized
    by_cut: dict[int | None, set[str]] = {}
    for window in summarized:
        summary = next(m.content for m in window.messages if m.kind == "summary")
        by_cut.setdefault(window.report.cut_seq, set()).add(summary)
    assert all(len(texts) == 1 for texts in by_cut.values())  # one text per cut point
    assert len(by_cut) < len(summarized)


def test_a_strategy_object_says_its_own_cut_mode_and_refuses_an_unknown_one() -> None:
    builder = ContextBuilder(APPROX, stored_encoding=APPROX.encoding)
    window = builder.build(
        "s1", ListHistory(long_chat(60)), strategy=SlidingWindow(cut="slide"), budget=BUDGET,
        keep_recent=10, cut=stable(),
    )  # fmt: skip
    assert window.report.cut_seq is None and window.report.truncated  # slid, whatever the rule
    with pytest.raises(InvalidInput, match="cut"):
        SlidingWindow(cut="sometimes")


# -- through the service ------------------------------------------------------------------------


def _chat(tk: turnkeeper.Turnkeeper, session: str, turns: int) -> list[ContextWindow]:
    windows = []
    for i in range(turns):
        tk.append(session, "user", f"question {i} " + "about the trip " * 8)
        windows.append(tk.context(session, budget_tokens=BUDGET))
        tk.append(session, "assistant", f"answer {i} " + "with some detail " * 8)
    return windows


def test_the_service_stores_the_cut_point_and_a_restart_builds_the_same_bytes(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'cut.db'}"
    with turnkeeper.open(url) as tk:
        session = tk.create_session(key="trip").id
        tk.append(session, "system", "You plan trips.")
        windows = _chat(tk, session, 30)
        last = windows[-1]
        assert tk.get_session(session).cut_seq == last.report.cut_seq > 0
        preview = tk.context(session, budget_tokens=BUDGET // 3, preview=True)
        assert (preview.report.cut_seq or 0) > (last.report.cut_seq or 0)
        assert tk.get_session(session).cut_seq == last.report.cut_seq  # a preview moves nothing
        before = tk.context(session, budget_tokens=BUDGET)
    with turnkeeper.open(url) as restarted:
        after = restarted.context(session, budget_tokens=BUDGET)
    assert sent(after) == sent(before)
    assert json.dumps(to_anthropic(after, cache=True)) == json.dumps(
        to_anthropic(before, cache=True)
    )


def test_slide_is_a_setting(tmp_path: Path) -> None:
    with turnkeeper.open(f"sqlite:///{tmp_path / 'slide.db'}", window_cut="slide") as tk:
        session = tk.create_session().id
        windows = _chat(tk, session, 20)
        assert {w.report.cut_seq for w in windows} == {None}
        assert tk.get_session(session).cut_seq == 0


def test_watermarks_out_of_order_are_refused_naming_them() -> None:
    with pytest.raises(InvalidConfig, match="cut_low_watermark"):
        turnkeeper.open("memory://", cut_low_watermark=0.9, cut_high_watermark=0.8)


def test_replicas_build_from_the_cut_point_another_one_moved(
    store: Store, settings: Settings, clock: Clock
) -> None:
    """Two services on one database (and cache): each remembers its own windows, keyed by the
    session's version and cut point, so a move by one is seen by the other at once."""
    first, second = (turnkeeper.Turnkeeper(store, settings, clock=clock) for _ in range(2))
    session = first.create_session(key="replicas").id
    first.append(session, "system", "You plan trips.")
    for i in range(40):
        first.append(session, "user" if i % 2 == 0 else "assistant", f"turn {i} " + "word " * 12)
    seen_before = second.context(session, budget_tokens=BUDGET, preview=True)
    moved = first.context(session, budget_tokens=BUDGET)
    assert first.get_session(session).cut_seq == moved.report.cut_seq == seen_before.report.cut_seq
    again = second.context(session, budget_tokens=BUDGET)
    assert sent(again) == sent(moved)
    stale = store.get_session(session)
    first.append(session, "user", "one more")
    assert isinstance(store, CutPointStore)
    assert not store.move_cut_point(session, 2, version=stale.version)  # a build of the past
    assert second.get_session(session).cut_seq == moved.report.cut_seq
