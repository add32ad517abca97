"""Building a sliding window costs what the window costs, not what the conversation costs."""

from __future__ import annotations

from collections.abc import Iterator

from tests.context.helpers import APPROX, msg
from turnkeeper.context.builder import ContextBuilder
from turnkeeper.context.history import ListHistory
from turnkeeper.types import Message, StrategyName


class SpyHistory(ListHistory):
    """A history that counts the messages `newest_first` handed out and the counts it was asked."""

    def __init__(self, messages: list[Message]) -> None:
        super().__init__(messages)
        self.yielded = 0
        self.chronological_calls = 0

    def newest_first(self) -> Iterator[Message]:
        for message in super().newest_first():
            self.yielded += 1
            yield message

    def chronological(self) -> list[Message]:
        self.chronological_calls += 1
        return super().chronological()


def test_sliding_window_over_ten_thousand_messages_reads_only_the_tail() -> None:
    messages = [msg(1, "system", "You are terse.")]
    messages += [
        msg(seq, "user" if seq % 2 else "assistant", f"turn {seq} " + "word " * 8)
        for seq in range(2, 10_001)
    ]
    history = SpyHistory(messages)
    builder = ContextBuilder(APPROX, stored_encoding=APPROX.encoding)
    window = builder.build(
        "s1", history, strategy=StrategyName.SLIDING_WINDOW, budget=1_000, keep_recent=10
    )
    assert history.yielded < 200
    assert history.chronological_calls == 0
    assert window.report.messages_loaded < 200
    assert window.report.messages_dropped == 10_000 - window.report.messages_included
    assert window.messages[1].content == (
        f"[Note: {window.report.messages_dropped} older messages truncated to stay within token limit]"
    )
