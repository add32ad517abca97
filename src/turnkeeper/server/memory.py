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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import anyio.to_thread

M_ARENA_MAX = -8
"""glibc's `mallopt` parameter number for the arena cap (malloc.h)."""


def limit_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas at `arenas` (0: leave glibc's default). True if it was set;
    False on a C library without `mallopt` (musl, macOS), where there is nothing to cap."""
    if arenas <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))


def limit_threads(threads: int) -> None:
    """At most `threads` sync routes run at once (the rest wait for a thread); call it from
    inside the event loop, e.g. in the app's lifespan."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = threads
