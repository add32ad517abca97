"""Context building: what the model sees of a conversation, under a token budget.

The store keeps every turn; this package only shapes what is sent. `ContextBuilder` runs a
strategy (`strategies`: an object per strategy; `registry`: registered by name) over a lazily read
`History` and returns a `ContextWindow` with its report; `to_openai` and `to_anthropic` put the
window in each API's shape.
"""

from turnkeeper.context.builder import ContextBuilder, EventLogger
from turnkeeper.context.formats import to_anthropic, to_openai
from turnkeeper.context.history import History, ListHistory, StoreHistory
from turnkeeper.context.registry import Strategies
from turnkeeper.context.selection import Selection
from turnkeeper.context.strategies import (
    Build,
    Full,
    Recent,
    SlidingWindow,
    Strategy,
    Summarize,
    Truncate,
    newest_that_fit,
)
from turnkeeper.context.summarizer import ExtractiveSummarizer, Summarizer
from turnkeeper.context.units import Turns, Unit, group_newest_first

__all__ = [
    "Build",
    "ContextBuilder",
    "EventLogger",
    "ExtractiveSummarizer",
    "Full",
    "History",
    "ListHistory",
    "Recent",
    "Selection",
    "SlidingWindow",
    "StoreHistory",
    "Strategies",
    "Strategy",
    "Summarize",
    "Summarizer",
    "Truncate",
    "Turns",
    "Unit",
    "group_newest_first",
    "newest_that_fit",
    "to_anthropic",
    "to_openai",
]
