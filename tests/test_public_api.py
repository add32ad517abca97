"""The public surface is explicit and pinned: adding or removing a name is a decision."""

from __future__ import annotations

import turnkeeper


def test_public_names_are_pinned() -> None:
    assert sorted(turnkeeper.__all__) == sorted(
        [
            "BackendUnavailable", "Conflict", "ContentTooLarge", "ContextBudgetExceeded", "ContextMessage",
            "ContextReport", "ContextWindow", "ExpiryReport", "ExtractiveSummarizer", "Forbidden",
            "IdempotencyKeyReused", "InvalidConfig", "InvalidInput", "InvalidMessage", "Message",
            "NewMessage",
            "NotFound", "Page", "ProjectStats", "Role", "SeqConflict", "SeqRanges", "Session",
            "SessionExpired", "SessionHeld", "SessionNotFound", "SessionStats", "SessionStatus",
            "Settings", "Store", "StrategyName", "Summarizer", "Turnkeeper", "TurnkeeperError",
            "Unauthenticated", "UpstreamError", "UpstreamTimeout", "Usage",
            "__version__", "load_settings", "to_anthropic", "to_openai",
            # multi-agent conversations and durable summaries
            "AgentState", "ConversationContext", "LLMSummarizer", "Phase", "SummaryCheckpoint",
            # the turn helper and its traces
            "AsyncChatTurns", "Attempt", "ChatTurns", "TraceEntry", "TurnOptions", "TurnResult",
            "TurnTrace", "WindowDiff", "trace_of", "window_diff", "TurnInProgress",
            # conversation branches
            "Branch",
            # the async face
            "AsyncTurnkeeper", "open_async",
            # custom context strategies; `relevant` with a retriever of one's own
            "Strategy", "Relevant", "Retriever",
            # the store contract's page reads (for third-party backends)
            "MessageQuery",
            # encryption at rest: a session whose data key is gone or not configured
            "KeyUnavailable",
            # erasure, tombstones and legal holds
            "ErasureReceipt", "LegalHold", "SessionErased",
        ]
    )  # fmt: skip
    for name in turnkeeper.__all__:
        assert hasattr(turnkeeper, name), name
    assert callable(turnkeeper.open)  # public, but called qualified


def test_star_import_shadows_no_builtin() -> None:
    import builtins

    namespace: dict[str, object] = {}
    exec("from turnkeeper import *", namespace)
    shadowed = sorted(set(namespace) & set(dir(builtins)) - {"__builtins__"})
    assert shadowed == []


def test_every_error_is_a_turnkeeper_error() -> None:
    exceptions = [
        value
        for value in (getattr(turnkeeper, name) for name in turnkeeper.__all__)
        if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert len(exceptions) == 21
    for error in exceptions:
        assert issubclass(error, turnkeeper.TurnkeeperError), error


def test_the_version_is_written_once() -> None:
    from importlib.metadata import version

    assert turnkeeper.__version__ == version("turnkeeper")
