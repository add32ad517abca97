"""Built windows, remembered per session under the session's `version` (the cache's one rule).

The one memo above the store's page cache that stays, because it pays on a figure the README
reports: asking again for the same window of an unchanged session (a UI refreshing, a retried
request, agents re-reading) hands out the window built for that version instead of building it
again — `bench/bench_sqlite.py`, "Open and warm build": a warm build of an unchanged session
is several times cheaper than building it again from cached pages (see
`bench/results/r26-service.md` for the side-by-side run that kept it).

Beside the window it keeps the entries that build rendered (`Rendered`: each stored message
read, as a window entry counted with the build's encoding). A build of the same version for
other arguments (another budget, another strategy) reuses them instead of making each entry
again, which was most of the cost of such a rebuild (`bench/results/r26-window-speed.md`).
An entry is a function of the stored message and the encoding only, so the version and the
encoding are all it must match. They are the messages the build read, so they cost little more
memory than the window itself: its entries, and the rest of the last page it read.

Every write to a session moves its version, and a build reads the session row first, so a
remembered window is handed out only while the session is exactly as it was when the window
was built, on any replica. Only windows that are a function of the stored messages and the
build's arguments are remembered: no pending turn, no agent perspective, no strategy that
may call a model or write checkpoints (`Strategy.uses_checkpoints`), and none that asks
something outside the store (`Strategy.window_per_version` False: `relevant` with a retriever of
the caller's). `relevant`'s own window depends on its query, the last user message, which is
part of the version (or a pending turn, which is never remembered), and on the store's
full-text index of that version: remembered like the others.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from turnkeeper import metrics
from turnkeeper.recent import RecentlyUsed
from turnkeeper.types import ContextMessage, ContextWindow

REMEMBERED_WINDOWS = 64
"""Sessions whose newest window a service remembers (one window each)."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """The window entries one build rendered, by seq, at a session version and encoding."""

    version: int
    encoding: str
    entries: Mapping[int, ContextMessage] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Remembered:
    key: Hashable
    window: ContextWindow
    rendered: Rendered | None


class WindowCache:
    """The last window built per session, under a key that holds the session's `version` and
    every argument of the build, with the entries it rendered. Thread-safe, bounded to the
    `size` most recently used sessions."""

    def __init__(self, size: int = REMEMBERED_WINDOWS) -> None:
        self._entries: RecentlyUsed[str, _Remembered] = RecentlyUsed(size)

    def get(self, session_id: str, key: Hashable) -> ContextWindow | None:
        """The window remembered under `key`, counted as a hit (`layer="window"`), or None."""
        found = self._entries.get(session_id)
        if found is None or found.key != key:
            return None
        metrics.CACHE_HITS.labels("window").inc()
        return found.window

    def rendered(
        self, session_id: str, version: int, encoding: str
    ) -> Mapping[int, ContextMessage]:
        """The entries the remembered build of `session_id` rendered, if it was built at
        `version` with `encoding`; else none."""
        found = self._entries.get(session_id)
        if found is None or found.rendered is None:
            return {}
        if found.rendered.version != version or found.rendered.encoding != encoding:
            return {}
        return found.rendered.entries

    def put(
        self,
        session_id: str,
        key: Hashable,
        window: ContextWindow,
        rendered: Rendered | None = None,
    ) -> None:
        self._entries.put(session_id, _Remembered(key, window, rendered))

    def forget(self, session_id: str) -> None:
        """Drop the session's window and rendered entries (it was erased)."""
        self._entries.forget(session_id)
