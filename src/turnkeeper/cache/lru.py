"""The in-process cache: the most recently used sessions ("cache recent 100 sessions").

Entries are grouped by session and tagged with the session's version; within a session each
has a slot (a hashable name of the read, e.g. `("messages", query)`). A lookup with a newer
version drops the session's old entries at once, so memory holds at most `max_sessions` sessions
and only their current version. `advance` carries a session's entries over one write this
process made and knows the effect of (an append), instead of dropping them. Thread-safe: one
lock around plain dict operations.

A count of sessions alone bounds nothing when a message may be a megabyte: 100 sessions of
pages of large messages held gigabytes. So the cache is bounded by size as well: each entry is
weighed (`weigh`: the text it holds, plus a fixed overhead per object) and the least recently
used sessions are dropped until the total is under `max_bytes`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

ENTRIES_PER_SESSION = 64
"""Most distinct reads (pages, counts, stats) kept per session; enough for any window build."""


OVERHEAD = 256
"""Bytes counted for each cached object besides its text (object headers, dict slots)."""


def weigh(value: Any) -> int:
    """About how many bytes `value` (a message page, a count, a statistics record) holds."""
    if isinstance(value, str | bytes):
        return OVERHEAD + len(value)
    if isinstance(value, tuple | list):
        return OVERHEAD + sum(map(weigh, value))
    content = getattr(value, "content", None)
    if isinstance(content, str):
        return OVERHEAD + len(content) + _metadata_weight(getattr(value, "metadata", None))
    return OVERHEAD


def _metadata_weight(metadata: Any) -> int:
    """About the length of `str(metadata)` without building it: the keys and the string
    values counted by length, other values by their text. `str()` of metadata holding a long
    string (the OpenAI Agents adapter's item text) re-escaped all of it, for every message of
    every page cached."""
    if not metadata:
        return 0
    if type(metadata) is not dict:
        return len(str(metadata))
    total = 0
    for key, item in metadata.items():
        total += len(key) + (len(item) if type(item) is str else len(str(item)))
    return total


@dataclass(frozen=True, slots=True)
class Carried:
    """An entry's value after a write it is carried over (`SessionLRU.advance`), with what the
    write added to it and took from it (the items of a page): the entry's weight changes by
    theirs, so carrying a long page over an append weighs the append, not the page again.
    A carry that rebuilt the value whole says so with `added=(new,)`, `removed=(old,)`."""

    value: Any
    added: Sequence[Any] = ()
    removed: Sequence[Any] = ()


@dataclass
class _Session:
    version: int
    entries: OrderedDict[Hashable, Any] = field(default_factory=OrderedDict)
    weights: dict[Hashable, int] = field(default_factory=dict)

    @property
    def weight(self) -> int:
        return sum(self.weights.values())


class SessionLRU:
    """Values by (session, version, slot), for the `max_sessions` most recently used sessions."""

    def __init__(self, max_sessions: int, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self.weight = 0  # bytes held, as `weigh` counts them
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, version: int, key: Hashable) -> Any | None:
        with self._lock:
            held = self._sessions.get(session_id)
            if held is None or held.version != version or key not in held.entries:
                return None
            self._sessions.move_to_end(session_id)
            held.entries.move_to_end(key)
            return held.entries[key]

    def put(self, session_id: str, version: int, key: Hashable, value: Any) -> None:
        size = weigh(value)
        if size > self.max_bytes:
            return  # larger than the whole cache: not worth evicting everything for
        with self._lock:
            held = self._sessions.get(session_id)
            if held is None or held.version < version:
                if held is not None:
                    self.weight -= held.weight
                held = self._sessions[session_id] = _Session(version)
            elif held.version > version:
                return  # a slower reader of an older version: keep the newer entries
            self.weight += size - held.weights.get(key, 0)
            held.entries[key], held.weights[key] = value, size
            held.entries.move_to_end(key)
            if len(held.entries) > ENTRIES_PER_SESSION:
                oldest, _ = held.entries.popitem(last=False)
                self.weight -= held.weights.pop(oldest)
            self._sessions.move_to_end(session_id)
            self._evict()

    def advance(
        self,
        session_id: str,
        before: int,
        after: int,
        carry: Callable[[Hashable, Any], Carried | None],
    ) -> None:
        """Move the session's entries from version `before` to `after`, each through
        `carry(slot, value)`: its value at `after` (`Carried`), or None to drop it. The caller
        vouches that one write it knows took the session from `before` to `after`; entries of
        any other version are left alone (a newer reader's are newer still, older ones are of
        no use)."""
        with self._lock:
            held = self._sessions.get(session_id)
            if held is None or held.version != before:
                return
            moved = _Session(after)
            for slot, value in held.entries.items():
                carried = carry(slot, value)
                if carried is not None:
                    change = sum(map(weigh, carried.added)) - sum(map(weigh, carried.removed))
                    moved.entries[slot] = carried.value
                    moved.weights[slot] = held.weights[slot] + change
            self.weight += moved.weight - held.weight
            self._sessions[session_id] = moved
            self._sessions.move_to_end(session_id)
            self._evict()

    def forget(self, session_id: str) -> None:
        """Drop everything held of the session (it was erased)."""
        with self._lock:
            dropped = self._sessions.pop(session_id, None)
            if dropped is not None:
                self.weight -= dropped.weight

    def _evict(self) -> None:
        """Drop the least recently used sessions until both bounds hold (under the lock)."""
        while len(self._sessions) > self.max_sessions or self.weight > self.max_bytes:
            _, dropped = self._sessions.popitem(last=False)
            self.weight -= dropped.weight

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
