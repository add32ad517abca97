"""turnkeeper: conversation memory for LLM products and agents.

    import turnkeeper
    with turnkeeper.open("sqlite:///chat.db") as tk:
        session, _ = tk.get_or_create_session("support-42")
        tk.append(session, "system", "You are a helpful assistant.")
        tk.append(session, "user", "Hello!")
        window = tk.context(session, strategy="sliding_window", budget_tokens=8000)
        messages = turnkeeper.to_openai(window)

`turnkeeper.open_async(url)` opens the same operations for asyncio (`AsyncTurnkeeper`).

Everything public is listed in `__all__`, except `open`: it is called as `turnkeeper.open(...)`,
and leaving it out of `__all__` keeps `from turnkeeper import *` from shadowing the builtin.
"""

from __future__ import annotations

from typing import Any

from turnkeeper.assemble import open_service
from turnkeeper.config import Settings, load_settings
from turnkeeper.context.conversation import ConversationContext
from turnkeeper.context.formats import to_anthropic, to_openai
from turnkeeper.context.relevant import Relevant
from turnkeeper.context.retrieval import Retriever
from turnkeeper.context.strategies import Strategy
from turnkeeper.context.summarizer import ExtractiveSummarizer, LLMSummarizer, Summarizer
from turnkeeper.errors import (
    BackendUnavailable,
    Conflict,
    ContentTooLarge,
    ContextBudgetExceeded,
    Forbidden,
    IdempotencyKeyReused,
    InvalidConfig,
    InvalidInput,
    InvalidMessage,
    KeyUnavailable,
    NotFound,
    SeqConflict,
    SessionErased,
    SessionExpired,
    SessionHeld,
    SessionNotFound,
    TurnInProgress,
    TurnkeeperError,
    Unauthenticated,
    UpstreamError,
    UpstreamTimeout,
)
from turnkeeper.prometheus import install_default
from turnkeeper.service import Turnkeeper
from turnkeeper.service.aio import AsyncTurnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.traces import TraceEntry, TurnTrace, WindowDiff, trace_of, window_diff
from turnkeeper.turns import AsyncChatTurns, Attempt, ChatTurns, TurnOptions, TurnResult
from turnkeeper.types import (
    AgentState,
    Branch,
    ContextMessage,
    ContextReport,
    ContextWindow,
    ErasureReceipt,
    ExpiryReport,
    LegalHold,
    Message,
    MessageQuery,
    NewMessage,
    Page,
    Phase,
    ProjectStats,
    Role,
    SeqRanges,
    Session,
    SessionStats,
    SessionStatus,
    StrategyName,
    SummaryCheckpoint,
    Usage,
)

install_default()  # metrics reach prometheus-client when it is installed

__version__ = "0.1.0"  # the one place: pyproject.toml reads it (dynamic version)

__all__ = [
    "AgentState",
    "AsyncChatTurns",
    "AsyncTurnkeeper",
    "Attempt",
    "BackendUnavailable",
    "Branch",
    "ChatTurns",
    "Conflict",
    "ContentTooLarge",
    "ContextBudgetExceeded",
    "ContextMessage",
    "ContextReport",
    "ContextWindow",
    "ConversationContext",
    "ErasureReceipt",
    "ExpiryReport",
    "ExtractiveSummarizer",
    "Forbidden",
    "IdempotencyKeyReused",
    "InvalidConfig",
    "InvalidInput",
    "InvalidMessage",
    "KeyUnavailable",
    "LLMSummarizer",
    "LegalHold",
    "Message",
    "MessageQuery",
    "NewMessage",
    "NotFound",
    "Page",
    "Phase",
    "ProjectStats",
    "Relevant",
    "Retriever",
    "Role",
    "SeqConflict",
    "SeqRanges",
    "Session",
    "SessionErased",
    "SessionExpired",
    "SessionHeld",
    "SessionNotFound",
    "SessionStats",
    "SessionStatus",
    "Settings",
    "Store",
    "Strategy",
    "StrategyName",
    "Summarizer",
    "SummaryCheckpoint",
    "TraceEntry",
    "TurnInProgress",
    "TurnOptions",
    "TurnResult",
    "TurnTrace",
    "Turnkeeper",
    "TurnkeeperError",
    "Unauthenticated",
    "UpstreamError",
    "UpstreamTimeout",
    "Usage",
    "WindowDiff",
    "__version__",
    "load_settings",
    "open_async",
    "to_anthropic",
    "to_openai",
    "trace_of",
    "window_diff",
]


def open(
    url: str | None = None, *, settings: Settings | None = None, **overrides: Any
) -> Turnkeeper:
    """Open turnkeeper on a database URL (default: the configured one, else the embedded SQLite
    file in the user's data directory). `overrides` are settings by name, e.g.
    `open(url, session_expiration=None, strategy="truncate")`. The backend, its caches and the
    service are put together by `turnkeeper.assemble`."""
    return open_service(url, settings=settings, **overrides)


def open_async(
    url: str | None = None, *, settings: Settings | None = None, **overrides: Any
) -> AsyncTurnkeeper:
    """`open`, for asyncio: the same operations, awaited (`async with open_async(url) as tk`).
    They run `open`'s code on worker threads of their own: one dedicated thread on SQLite and
    `memory://`, one per pooled connection on PostgreSQL."""
    return AsyncTurnkeeper(open(url, settings=settings, **overrides))
