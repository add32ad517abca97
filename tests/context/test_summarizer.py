"""The extractive summarizer: one line per message, earliest request and newest lines first."""

from __future__ import annotations

import pytest

from tests.context.helpers import call, chat, msg
from turnkeeper.context.summarizer import ExtractiveSummarizer
from turnkeeper.tokens import counter_for

EXACT = counter_for("cl100k_base")
SUMMARIZER = ExtractiveSummarizer()


def test_writes_one_line_per_message_with_its_first_sentence() -> None:
    messages = [
        msg(1, "user", "Book a flight to Lisbon. Window seat please.", author="ana"),
        msg(2, "assistant", "Which dates?\nI can do May."),
        msg(3, "assistant", tool_calls=[call("c1", "search_flights")]),
    ]
    summary = SUMMARIZER.summarize(messages, max_tokens=500, counter=EXACT)
    assert (
        summary
        == "ana: Book a flight to Lisbon.\nassistant: Which dates?\nassistant: called search_flights"
    )


def test_cuts_long_sentences() -> None:
    summary = SUMMARIZER.summarize([msg(1, "user", "a" * 500)], max_tokens=500, counter=EXACT)
    assert summary == "user: " + "a" * 199 + "…"


def test_empty_input_gives_an_empty_summary() -> None:
    assert SUMMARIZER.summarize([], max_tokens=100, counter=EXACT) == ""


@pytest.mark.parametrize("max_tokens", [1, 2, 5, 13, 40, 77, 150])
def test_never_exceeds_max_tokens(max_tokens: int) -> None:
    messages = chat(*[("user", f"Question {i}: what about item {i}? More.") for i in range(40)])
    summary = SUMMARIZER.summarize(messages, max_tokens=max_tokens, counter=EXACT)
    assert EXACT.count_text(summary) <= max_tokens


def test_keeps_the_first_request_and_the_newest_lines_when_short_of_room() -> None:
    messages = chat(
        ("assistant", "Hello, how can I help?"),
        ("user", "Plan my trip to Kyoto."),
        *[("assistant", f"Detail {i}.") for i in range(30)],
    )
    summary = SUMMARIZER.summarize(messages, max_tokens=30, counter=EXACT)
    lines = summary.splitlines()
    assert lines[0] == "user: Plan my trip to Kyoto."
    assert lines[-1] == "assistant: Detail 29."
    assert "assistant: Detail 0." not in lines


def test_folds_in_a_previous_summary_first() -> None:
    summary = SUMMARIZER.summarize(
        chat(("user", "And then?")), max_tokens=100, counter=EXACT, previous="user: Start."
    )
    assert summary == "user: Start.\nuser: And then?"


def test_is_deterministic() -> None:
    messages = chat(*[("user", f"Point {i}.") for i in range(50)])
    runs = {SUMMARIZER.summarize(messages, max_tokens=60, counter=EXACT) for _ in range(3)}
    assert len(runs) == 1
