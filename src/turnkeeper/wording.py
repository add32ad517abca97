"""How a count reads to a person, for every interface that says one (CLI lines, the web UI):
`counted(1, "session")` is "1 session", `counted(3, "entry", "entries")` is "3 entries"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, in the plural unless the count is one."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
