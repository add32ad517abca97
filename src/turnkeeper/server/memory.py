"""Bounds on the server's native memory, which Python's own accounting does not see.

Under load a server process grew to about a gigabyte of anonymous memory while the Python heap
stayed small. Three things held it, and each has a bound:

- The in-process cache held pages of large messages by session count only; it is now bounded by
  bytes too (`lru_max_bytes`, see `turnkeeper.cache.lru`).
- glibc gives every thread that allocates an arena of its own (up to 8 per core) and seldom
  hands freed arena memory back. Each of the request threads tokenizes and decodes message
  text, so each arena grows to its thread's largest request and stays there. `limit_arenas`
  caps their number (`malloc_arenas`), the same as `MALLOC_ARENA_MAX`, but set by the process
  itself so no deployment can forget it.
- The request thread pool is the other multiplier: `server_threads` threads, each with its
  stack and tokenizer scratch space (`limit_threads`).
- What a burst of large requests freed stays mapped: glibc returns heap memory to the system
  only from the top of the heap. `Trimmer` calls `malloc_trim` every few seconds, which hands
  back every free page, so the process shrinks again when the load passes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from typing import Any

import anyio.to_thread

M_ARENA_MAX = -8
"""glibc's `mallopt` parameter number for the arena cap (malloc.h)."""


def _libc() -> Any | None:
    """glibc, or None on another C library (musl, macOS) where none of this applies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas at `arenas` (0: leave glibc's default). True if it was set;
    False on a C library without `mallopt` (musl, macOS), where there is nothing to cap."""
    libc = _libc() if arenas > 0 else None
    return libc is not None and bool(libc.mallopt(M_ARENA_MAX, arenas))


class Trimmer:
    """A daemon thread that gives freed heap memory back to the system every `interval`
    seconds (`malloc_trim(0)`); a no-op without glibc."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="turnkeeper-trim", daemon=True)
        self._libc = _libc()

    def start(self) -> None:
        if self._libc is not None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        libc = self._libc
        while libc is not None and not self._stop.wait(self.interval):
            libc.malloc_trim(0)


def limit_threads(threads: int) -> None:
    """At most `threads` sync routes run at once (the rest wait for a thread); call it from
    inside the event loop, e.g. in the app's lifespan."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = threads
