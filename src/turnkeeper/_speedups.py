"""The few tricks that earn their place: each buys at least 20% on a figure the README reports
(measured side by side against the plain path, `bench/results/`), and each is tested against
the plain path (`tests/test_speedups.py`). Everything else in turnkeeper is plain code.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from typing import Any

__all__ = ["environment_snapshot", "without_python_ranks"]


def environment_snapshot() -> Hashable:
    """A hashable value that changes exactly when `os.environ` changes: what settings built
    before are remembered by (`config.load_settings`, on every `turnkeeper.open()`).

    The plain path is `frozenset(os.environ.items())`, which decodes every name and value
    (about 2 µs a variable, so 0.1 ms of a 0.1 ms open on a typical environment: the `open`
    row of the README's SQLite table). `os.environ` keeps the same entries undecoded in a
    mapping of its own (`_data`, private: bytes on POSIX), updated by every change made
    through `os.environ`; read without decoding it costs a tenth. Where it is missing (another
    Python), the plain path."""
    raw = getattr(os.environ, "_data", None)
    if isinstance(raw, dict):
        return frozenset(raw.items())
    return frozenset(os.environ.items())


def without_python_ranks(encoding: Any) -> Any:
    """`encoding` (a `tiktoken.Encoding`) without the Python copy of its rank table.

    The encoder counts with its Rust copy of the ranks; tiktoken keeps a Python dict too (a
    bytes object and an int per token), used only to pickle the encoding, and that dict is
    ~27 MiB of a server's resident memory with o200k_base (the RSS column of the HTTP
    benchmark; `bench/memory_stages.py`). It is a private attribute of tiktoken: when a
    tiktoken release no longer has it, nothing is dropped and everything still works. Pickling
    an encoding without it fails loudly instead."""
    if hasattr(encoding, "_mergeable_ranks"):
        del encoding._mergeable_ranks
    return encoding
