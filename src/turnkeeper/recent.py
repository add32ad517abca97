"""A bounded, thread-safe map of the most recently used keys.

Several per-process memos keep something per session or per key for the sessions in use now
(remembered windows and tails, referenced ids, verified API keys); each is bounded so that a
long-running service does not grow with every session it ever served, and each is shared by
the service's request threads. This is that one mechanism.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class RecentlyUsed(Generic[K, V]):
    """The values of the `size` most recently used keys (the least recently used forgotten
    first). Thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value of `key` (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> None:
        """Remember `value` for `key` as the most recently used."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, key: K) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def change(self, key: K, changed: Callable[[V], V | None]) -> None:
        """Replace the value of `key`, if there is one, by `changed(value)` in one step (None:
        forget it); its place in the order stays."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return
            new = changed(found)
            if new is None:
                del self._entries[key]
            else:
                self._entries[key] = new

    def __contains__(self, key: object) -> bool:
        """Whether `key` is remembered (without the lock: a hint, for skipping work)."""
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
