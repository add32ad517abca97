"""Adapters that let agent frameworks keep their memory in turnkeeper.

Each framework is an optional extra, imported only when its adapter is first used, so
`import turnkeeper` never needs them:

- `TurnkeeperSession` — the OpenAI Agents SDK's `Session` (`pip install 'turnkeeper[openai-agents]'`);
- `TurnkeeperMiddleware` — agent middleware for LangChain v1's `create_agent`, and
  `TurnkeeperChatMessageHistory` — LangChain's `BaseChatMessageHistory`
  (`pip install 'turnkeeper[langchain]'`).

Both store each framework item as one turnkeeper message that reads well in the audit trail
(role, text, tool calls) and carries the framework's own serialization in its metadata, from
which the item comes back exactly.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turnkeeper.adapters.langchain import TurnkeeperChatMessageHistory
    from turnkeeper.adapters.langchain_agents import TurnkeeperMiddleware
    from turnkeeper.adapters.openai_agents import TurnkeeperSession

__all__ = [
    "MissingExtra",
    "TurnkeeperChatMessageHistory",
    "TurnkeeperMiddleware",
    "TurnkeeperSession",
]

_LAZY = {
    "TurnkeeperSession": "turnkeeper.adapters.openai_agents",
    "TurnkeeperChatMessageHistory": "turnkeeper.adapters.langchain",
    "TurnkeeperMiddleware": "turnkeeper.adapters.langchain_agents",
}


class MissingExtra(ImportError):
    """An adapter's framework is not installed; the message names the extra to install."""

    def __init__(self, framework: str, extra: str) -> None:
        super().__init__(f"{framework} is not installed: pip install 'turnkeeper[{extra}]'")
        self.extra = extra


def __getattr__(name: str) -> Any:
    """Import an adapter (and so its framework) on first use only."""
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
