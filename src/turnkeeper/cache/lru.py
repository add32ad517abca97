"""The in-process cache: the most recently used sessions (seed 000: "cache recent 100 sessions").

Entries are grouped by session and tagged with the session's version. A lookup with a newer
version drops the session's old entries at once, so memory holds at most `max_sessions` sessions
and only their current version. Thread-safe: one lock around plain dict operations.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

ENTRIES_PER_SESSION = 64
"""Most distinct reads (pages, counts, stats) kept per session; enough for any window build."""


@dataclass
class _Session:
    version: int
    entries: OrderedDict[str, Any] = field(default_factory=OrderedDict)


class SessionLRU:
    """Values by (session, version, key), for the `max_sessions` most recently used sessions."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, version: int, key: str) -> Any | None:
        with self._lock:
            held = self._sessions.get(session_id)
            if held is None or held.version != version or key not in held.entries:
                return None
            self._sessions.move_to_end(session_id)
            held.entries.move_to_end(key)
            return held.entries[key]

    def put(self, session_id: str, version: int, key: str, value: Any) -> None:
        with self._lock:
            held = self._sessions.get(session_id)
            if held is None or held.version < version:
                held = self._sessions[session_id] = _Session(version)
            elif held.version > version:
                return  # a slower reader of an older version: keep the newer entries
            held.entries[key] = value
            held.entries.move_to_end(key)
            if len(held.entries) > ENTRIES_PER_SESSION:
                held.entries.popitem(last=False)
            self._sessions.move_to_end(session_id)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
