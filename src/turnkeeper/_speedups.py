"""The few tricks that earn their place: each buys at least 20% on a figure the README reports
(measured side by side against the plain path, `bench/results/`), and each is tested against
the plain path (`tests/test_speedups.py`). Everything else in turnkeeper is plain code.
"""

from __future__ import annotations

from typing import Any

__all__ = ["without_python_ranks"]


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
