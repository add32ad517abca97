"""Where a `relevant` window puts its recalled turns, as strategies the bench can compare
(`--strategy windows.layouts:RecalledFirst`): the library's layout puts them after the newest
turns, just before the turn being answered; this one right after the system message."""

from __future__ import annotations

from turnkeeper.context.relevant import Relevant


class RecalledFirst(Relevant):
    """`relevant` with the note and the recalled turns right after the system message."""

    name = "relevant, recalled first"

    def __init__(self) -> None:
        super().__init__(recalled_first=True)
