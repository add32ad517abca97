"""The builder: counting with the target tokenizer, the report, and the one log event."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.context.helpers import APPROX, build, long_chat, msg
from turnkeeper.context.builder import ContextBuilder
from turnkeeper.context.history import ListHistory
from turnkeeper.errors import InvalidInput
from turnkeeper.logs import capture_events
from turnkeeper.tokens import REPLY_PRIMING, counter_for
from turnkeeper.types import StrategyName

EXACT = counter_for("cl100k_base")


def test_each_build_logs_one_conversation_context_loaded_event() -> None:
    history = long_chat(40)
    with capture_events() as logs:
        window = build(history, "sliding_window", budget=200)
    assert logs == [
        {
            "event": "conversation_context_loaded",
            "log_level": "info",
            "session_id": "s1",
            "strategy": "sliding_window",
            "total_messages_in_db": 41,
            "messages_loaded": window.report.messages_loaded,
            "messages_included": window.report.messages_included,
            "messages_truncated": window.report.messages_dropped,
            "estimated_tokens": window.report.tokens_used,
            "budget": 200,
        }
    ]
    assert window.report.messages_dropped > 0


def test_stored_counts_are_used_as_is_when_the_encoding_matches() -> None:
    history = [replace(msg(1, "user", "hello"), tokens=7)]  # as if counted by the store
    window = build(history, "full")
    assert window.messages[0].tokens == 7
    assert window.report.tokens_used == 7 + REPLY_PRIMING


def test_messages_are_recounted_with_the_target_tokenizer_when_encodings_differ() -> None:
    history = long_chat(6)
    window = build(history, "full", counter=EXACT, stored_encoding=APPROX.encoding)
    expected = [EXACT.count_message(m.role, m.content) for m in history]
    assert [m.tokens for m in window.messages] == expected
    assert window.report.encoding == "cl100k_base"


def test_report_counts_what_the_store_holds_before_filtering() -> None:
    builder = ContextBuilder(APPROX, stored_encoding=APPROX.encoding)
    window = builder.build(
        "s1",
        ListHistory(long_chat(4), messages_in_store=9),
        strategy=StrategyName.RECENT,
        budget=1_000,
        keep_recent=10,
    )
    assert window.report.messages_in_store == 9
    assert window.report.messages_included == 5


@pytest.mark.parametrize("strategy", [s.value for s in StrategyName])
def test_an_empty_history_without_a_pending_turn_gives_an_empty_window(strategy: str) -> None:
    window = build([], strategy)
    assert window.messages == ()
    assert (window.report.messages_included, window.report.messages_dropped) == (0, 0)
    assert window.report.markers == ()


def test_unknown_strategy_is_invalid_input() -> None:
    builder = ContextBuilder(APPROX, stored_encoding=APPROX.encoding)
    with pytest.raises(InvalidInput) as raised:
        builder.build(
            "s1", ListHistory(long_chat(2)), strategy="everything", budget=100, keep_recent=1
        )  # type: ignore[arg-type]
    assert raised.value.field == "strategy"
