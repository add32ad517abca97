"""Context building: what the model sees of a conversation, under a token budget.

The store keeps every turn; this package only shapes what is sent. `ContextBuilder` runs one of
the strategies over a lazily read `History` and returns a `ContextWindow` with its report;
`to_openai` and `to_anthropic` put the window in each API's shape.
"""

from turnkeeper.context.builder import ContextBuilder, EventLogger
from turnkeeper.context.formats import to_anthropic, to_openai
from turnkeeper.context.history import History, ListHistory, StoreHistory
from turnkeeper.context.strategies import (
    Full,
    Selection,
    Strategy,
    Summarize,
    Tail,
    recent,
    sliding_window,
    strategy_for,
    truncate,
)
from turnkeeper.context.summarizer import ExtractiveSummarizer, Summarizer
from turnkeeper.context.units import Turns, Unit, group_newest_first

__all__ = [
    "ContextBuilder",
    "EventLogger",
    "ExtractiveSummarizer",
    "Full",
    "History",
    "ListHistory",
    "Selection",
    "StoreHistory",
    "Strategy",
    "Summarize",
    "Summarizer",
    "Tail",
    "Turns",
    "Unit",
    "group_newest_first",
    "recent",
    "sliding_window",
    "strategy_for",
    "to_anthropic",
    "to_openai",
    "truncate",
]
