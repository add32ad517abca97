"""Built windows, remembered per session under the session's `version` (the cache's one rule).

The one memo above the store's page cache that stays, because it pays on a figure the README
reports: asking again for the same window of an unchanged session (a UI refreshing, a retried
request, agents re-reading) hands out the window built for that version instead of building it
again — `bench/bench_sqlite.py`, "Open and warm build": a warm build of an unchanged session
is several times cheaper than building it again from cached pages (see
`bench/results/r26-service.md` for the side-by-side run that kept it).

Every write to a session moves its version, and a build reads the session row first, so a
remembered window is handed out only while the session is exactly as it was when the window
was built, on any replica. Only windows that are a function of the stored messages and the
build's arguments are remembered: no pending turn, no agent perspective, and no strategy that
may call a model or write checkpoints (`Strategy.uses_checkpoints`).
"""

from __future__ import annotations

from collections.abc import Hashable

from turnkeeper import metrics
from turnkeeper.recent import RecentlyUsed
from turnkeeper.types import ContextWindow

REMEMBERED_WINDOWS = 64
"""Sessions whose newest window a service remembers (one window each)."""


class WindowCache:
    """The last window built per session, under a key that holds the session's `version` and
    every argument of the build. Thread-safe, bounded to the `size` most recently used
    sessions."""

    def __init__(self, size: int = REMEMBERED_WINDOWS) -> None:
        self._entries: RecentlyUsed[str, tuple[Hashable, ContextWindow]] = RecentlyUsed(size)

    def get(self, session_id: str, key: Hashable) -> ContextWindow | None:
        """The window remembered under `key`, counted as a hit (`layer="window"`), or None."""
        found = self._entries.get(session_id)
        if found is None or found[0] != key:
            return None
        metrics.CACHE_HITS.labels("window").inc()
        return found[1]

    def put(self, session_id: str, key: Hashable, window: ContextWindow) -> None:
        self._entries.put(session_id, (key, window))
