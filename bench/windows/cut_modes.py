"""The strategies that leave older turns out, in `slide` mode, under names of their own.

Since cut points (issue 27), `sliding_window`, `truncate`, `recent` and `summarize` hold the
session's cut point by default (`window_cut = "stable"`); these are the same strategies
choosing their start again at every build, as they all did before, so one run of
bench/bench_windows.py compares the two modes:

    python bench/bench_windows.py --strategy windows.cut_modes:SlidingWindowSlide ...
"""

from __future__ import annotations

from turnkeeper.context.strategies import Recent, SlidingWindow, Summarize, Truncate


class SlidingWindowSlide(SlidingWindow):
    name = "sliding_window (cut=slide)"

    def __init__(self) -> None:
        super().__init__(cut="slide")


class TruncateSlide(Truncate):
    name = "truncate (cut=slide)"

    def __init__(self) -> None:
        super().__init__(cut="slide")


class RecentSlide(Recent):
    name = "recent (cut=slide)"

    def __init__(self) -> None:
        super().__init__(cut="slide")


class SummarizeSlide(Summarize):
    name = "summarize (cut=slide)"

    def __init__(self) -> None:
        super().__init__(cut="slide")
