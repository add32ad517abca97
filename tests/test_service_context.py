"""Context building through the service: expiry, the pending turn, budgets, encodings, cost."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from tests.conftest import Clock, make_sqlite_store
from turnkeeper.config import Settings
from turnkeeper.context.formats import to_openai
from turnkeeper.errors import ContextBudgetExceeded, InvalidInput, SessionExpired
from turnkeeper.logs import capture_events
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.tokens import REPLY_PRIMING, counter_for
from turnkeeper.turns import TurnOptions
from turnkeeper.types import NewMessage, StrategyName


def _conversation(tk: Turnkeeper, turns: int, key: str = "conv") -> str:
    session = tk.create_session(key=key)
    tk.append(session, "system", "You are a travel agent.")
    tk.append_many(
        session,
        [
            NewMessage("user" if i % 2 == 0 else "assistant", f"turn {i}: " + "words " * 20)
            for i in range(turns)
        ],
    )
    return session.id


def test_an_expired_session_is_never_served_as_live(tk: Turnkeeper, clock: Clock) -> None:
    session = tk.create_session(ttl=timedelta(hours=1))
    tk.append(session, "user", "hi")
    clock.advance(timedelta(hours=1, seconds=1))
    with pytest.raises(SessionExpired):
        tk.context(session)
    tk.transfer.expire()
    with pytest.raises(SessionExpired):
        tk.context(session.id)


def test_pending_turn_appears_once_whether_or_not_it_is_stored_yet(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 4)
    pending = NewMessage("user", "What about Lisbon?", id="turn-5")
    before = to_openai(tk.context(session_id, new_message=pending))
    tk.append(session_id, "user", "What about Lisbon?", id="turn-5")
    after_with_pending = to_openai(tk.context(session_id, new_message=pending))
    after = to_openai(tk.context(session_id))
    for window in (before, after_with_pending, after):
        assert [m["content"] for m in window].count("What about Lisbon?") == 1
        assert window[-1]["content"] == "What about Lisbon?"
    assert before == after_with_pending == after


def test_truncate_defaults_to_its_own_budget(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 200)
    window = tk.context(session_id, strategy="truncate")
    assert window.report.budget == 6000 - 4500
    assert window.report.tokens_used <= 1500
    assert window.messages[1].content == "[Earlier messages truncated]"
    assert window.report.messages_included <= 50


def test_sliding_window_budget_is_a_ratio_of_the_models_window(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 2)
    assert tk.context(session_id, model="gpt-4").report.budget == int(8192 * 0.8)
    assert tk.context(session_id, model="gpt-4o").report.budget == int(128_000 * 0.8)
    assert tk.context(session_id, budget_tokens=900, reserved_tokens=100).report.budget == 800


def test_max_tokens_is_the_budgets_old_name_and_says_so(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 2)
    with pytest.warns(DeprecationWarning, match="budget_tokens="):
        assert tk.context(session_id, max_tokens=900).report.budget == 900
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInput, match="budget_tokens"):
        tk.context(session_id, budget_tokens=800, max_tokens=900)
    with pytest.warns(DeprecationWarning, match="TurnOptions"):
        assert TurnOptions(max_tokens=700).budget_tokens == 700


def test_a_model_with_another_encoding_is_counted_with_its_own_tokenizer(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 6)
    window = tk.context(session_id, strategy="full", model="gpt-4", budget_tokens=100_000)
    cl100k = counter_for("cl100k_base")
    assert window.report.encoding == "cl100k_base"
    expected = sum(
        cl100k.count_message(m["role"], m["content"], name=m.get("name")) for m in to_openai(window)
    )
    assert window.report.tokens_used == expected + REPLY_PRIMING


def test_sliding_window_reads_only_the_tail_of_a_long_session(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 3000)
    window = tk.context(session_id, strategy="sliding_window", budget_tokens=2000)
    report = window.report
    assert report.messages_in_store == 3001
    assert report.messages_loaded < 300
    assert report.messages_dropped == 3001 - report.messages_included
    assert window.messages[0].content == "You are a travel agent."
    assert window.messages[1].content == (
        f"[Note: {report.messages_dropped} older messages truncated to stay within token limit]"
    )


def test_each_build_logs_conversation_context_loaded(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 40)
    with capture_events() as logs:
        window = tk.context(session_id, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=500)
    events = [log for log in logs if log["event"] == "conversation_context_loaded"]
    assert len(events) == 1
    event = events[0]
    assert event["session_id"] == session_id
    assert event["total_messages_in_db"] == 41
    assert event["messages_loaded"] == window.report.messages_loaded
    assert event["messages_truncated"] == window.report.messages_dropped > 0
    assert event["estimated_tokens"] == window.report.tokens_used


def test_recent_leaves_out_internal_messages(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "visible question")
    tk.append(session, "assistant", "scratch work", internal=True)
    tk.append(session, "assistant", "visible answer")
    contents = [m.content for m in tk.context(session, strategy="recent").messages]
    assert contents == ["visible question", "visible answer"]


def test_trigger_too_large_for_the_budget_is_an_error_not_a_silent_drop(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "word " * 500)
    with pytest.raises(ContextBudgetExceeded) as info:
        tk.context(session, budget_tokens=100)
    assert info.value.budget == 100 and info.value.needed > 100


def _window_hits() -> float:
    return REGISTRY.get_sample_value("turnkeeper_cache_hits_total", {"layer": "window"}) or 0.0


def test_an_unchanged_session_builds_its_window_once(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 40)
    first = tk.context(session_id, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=500)
    hits = _window_hits()
    again = tk.context(session_id, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=500)
    assert again is first and _window_hits() == hits + 1
    other = tk.context(session_id, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=600)
    assert other is not first and other.report.budget == 600  # other arguments: built
    tk.append(session_id, "user", "one more question")
    moved = tk.context(session_id, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=500)
    assert moved is not first and moved.messages[-1].content == "one more question"


def test_a_build_for_other_arguments_reuses_the_entries_of_the_same_version(
    tk: Turnkeeper,
) -> None:
    """A rebuild (another budget) starts from the entries the remembered build rendered, only
    for the session version and encoding they were rendered at: each is the same message."""
    session_id = _conversation(tk, 40)

    def build(budget: int, model: str = "gpt-4o") -> dict[int | None, object]:
        window = tk.context(
            session_id, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=budget, model=model
        )
        return {entry.seq: entry for entry in window.messages if entry.seq is not None}

    first = build(500)
    again = build(501)
    shared = set(first) & set(again)
    assert shared and all(again[seq] is first[seq] for seq in shared)
    recounted = build(500, model="gpt-4")  # another encoding: rendered again, counted with it
    assert all(recounted[seq] is not first[seq] for seq in set(recounted) & set(first))
    tk.append(session_id, "user", "one more question")
    moved = build(500, model="gpt-4")  # another version: rendered again, to the same entries
    shared = set(moved) & set(recounted)
    assert shared and all(moved[seq] is not recounted[seq] for seq in shared)
    assert all(moved[seq] == recounted[seq] for seq in shared)


def test_a_remembered_window_is_logged_like_a_built_one(tk: Turnkeeper) -> None:
    session_id = _conversation(tk, 40)
    with capture_events() as logs:
        for _ in range(2):
            tk.context(session_id, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=500)
    events = [log for log in logs if log["event"] == "conversation_context_loaded"]
    assert len(events) == 2 and events[0] == events[1]


def test_a_write_through_another_service_moves_a_remembered_window_on(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    path = tmp_path / "shared.db"
    with (
        Turnkeeper(make_sqlite_store(path), settings, clock=clock) as writer,
        Turnkeeper(make_sqlite_store(path), settings, clock=clock) as reader,
    ):
        session_id = _conversation(writer, 10)
        for turn in range(3):
            reader.context(session_id, strategy=StrategyName.TRUNCATE)
            writer.append(session_id, "user", f"question {turn}")
            window = reader.context(session_id, strategy=StrategyName.TRUNCATE)
            assert window.messages[-1].content == f"question {turn}"


def test_windows_are_built_every_time_with_the_caches_off(
    store: Store, settings: Settings, clock: Clock
) -> None:
    tk = Turnkeeper(store, settings.model_copy(update={"lru_size": 0}), clock=clock)
    session_id = _conversation(tk, 10)
    first = tk.context(session_id, strategy=StrategyName.RECENT)
    again = tk.context(session_id, strategy=StrategyName.RECENT)
    assert again == first and again is not first
