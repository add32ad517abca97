"""`Turnkeeper`: every operation turnkeeper offers, over any `Store`, behind one object.

The CLI, the HTTP API, the UI and the framework adapters are thin shells over it: they parse
input, call one method and format the result. Validation, token counting at write time,
session-reference resolution (id or key), expiry rules and context building all live behind
it, so every interface behaves the same.

The object is assembled from capabilities, one module each:

- flat on `tk` (what every app calls): sessions (`sessions.py`), the message log
  (`messages.py`), context windows (`windows.py`), and the conversation digest (`digest.py`);
- `tk.agents` (`agents.py`): agent states, phase changes, hand-offs, responding;
- `tk.transfer` (`transfer.py`): JSONL export and import, the expiry sweep;
- `tk.keys`: API keys (`turnkeeper.apikeys`), on the service's clock.

The multi-agent and transfer operations were once flat on `tk`; those names still work and
warn (`DeprecationWarning`) with the new one.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import Any

from turnkeeper.apikeys import ApiKeys
from turnkeeper.config import Settings
from turnkeeper.context.checkpoints import SessionLocks
from turnkeeper.context.summarizer import Summarizer
from turnkeeper.jsonl import ImportReport
from turnkeeper.service.agents import Agents
from turnkeeper.service.branches import Branches
from turnkeeper.service.core import default_summarizer, utcnow
from turnkeeper.service.digest import Digest, ReferenceMemo
from turnkeeper.service.search import Search
from turnkeeper.service.transfer import Transfer
from turnkeeper.service.windows import WindowMemo, Windows
from turnkeeper.storage.base import Store
from turnkeeper.types import AgentState, ExpiryReport, Message


class Turnkeeper(Branches, Windows, Digest, Search):
    """Conversation memory over a store. Open one with `turnkeeper.open()`.

    Usable as a context manager; `close()` releases the store.
    """

    agents: Agents
    """Multi-agent conversations: agent states, phases, hand-offs, responding."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self._clock = clock
        self._summarizer = summarizer or default_summarizer(settings)
        self._locks = SessionLocks()
        self._references = ReferenceMemo()
        self._windows = WindowMemo() if settings.lru_size else None
        self.encoding = store.meta("token_encoding", settings.token_encoding)
        """Encoding the stored token counts were made with (fixed when the database was made)."""
        self.agents = Agents(self)
        self.transfer = Transfer(self)
        """JSONL export and import, and the expiry sweep."""

    @cached_property
    def keys(self) -> ApiKeys:
        """API keys of the HTTP API, stamped with this service's clock; verified keys are
        remembered for `api_key_cache`."""
        return ApiKeys(self.store, clock=self._clock, cache=self.settings.api_key_cache)

    def __enter__(self) -> Turnkeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    # -- moved: the old flat names, kept working with a warning -----------------------------

    def set_phase(self, *args: Any, **kwargs: Any) -> Message:
        """Deprecated: use `tk.agents.set_phase`."""
        _moved("set_phase", "agents.set_phase")
        return self.agents.set_phase(*args, **kwargs)

    def handoff(self, *args: Any, **kwargs: Any) -> Message:
        """Deprecated: use `tk.agents.handoff`."""
        _moved("handoff", "agents.handoff")
        return self.agents.handoff(*args, **kwargs)

    def agent_state(self, *args: Any, **kwargs: Any) -> AgentState:
        """Deprecated: use `tk.agents.state`."""
        _moved("agent_state", "agents.state")
        return self.agents.state(*args, **kwargs)

    def agent_states(self, *args: Any, **kwargs: Any) -> list[AgentState]:
        """Deprecated: use `tk.agents.states`."""
        _moved("agent_states", "agents.states")
        return self.agents.states(*args, **kwargs)

    def update_agent_state(self, *args: Any, **kwargs: Any) -> AgentState:
        """Deprecated: use `tk.agents.update_state`."""
        _moved("update_agent_state", "agents.update_state")
        return self.agents.update_state(*args, **kwargs)

    def agent_responded(self, *args: Any, **kwargs: Any) -> AgentState:
        """Deprecated: use `tk.agents.responded`."""
        _moved("agent_responded", "agents.responded")
        return self.agents.responded(*args, **kwargs)

    def export_sessions(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        """Deprecated: use `tk.transfer.export_sessions`."""
        _moved("export_sessions", "transfer.export_sessions")
        return self.transfer.export_sessions(*args, **kwargs)

    def import_sessions(self, *args: Any, **kwargs: Any) -> ImportReport:
        """Deprecated: use `tk.transfer.import_sessions`."""
        _moved("import_sessions", "transfer.import_sessions")
        return self.transfer.import_sessions(*args, **kwargs)

    def expire(self, *args: Any, **kwargs: Any) -> ExpiryReport:
        """Deprecated: use `tk.transfer.expire`."""
        _moved("expire", "transfer.expire")
        return self.transfer.expire(*args, **kwargs)


def _moved(old: str, new: str) -> None:
    warnings.warn(f"Turnkeeper.{old} is deprecated; use tk.{new}", DeprecationWarning, stacklevel=3)
