"""The README is a front page that works as written: short, and its quickstart runs, twice.

Every ```python and ```sh block of the README is either run here or named in `NOT_RUN` with the
reason (a new example fails this test until it is one or the other). The runnable ones run in
README order in one fresh directory, like a reader pasting them one after another, with no
model and no network, and then all again in the same directory: the quickstart must print what
the README says it prints, the same both times, and neither it nor the shell example stores anything twice.
"""

from __future__ import annotations

import re
from pathlib import Path

import turnkeeper
from tests.examples import Example, blocks_of, run_in_order

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

NOT_RUN = {
    "make run": "the make targets themselves",
    "pip install turnkeeper": "installs packages",
    "turnkeeper keys create --project acme": "starts the service and waits",
}


def _examples() -> list[Example]:
    return blocks_of(README, NOT_RUN)


def test_the_readme_is_a_front_page_of_at_most_400_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 400


def test_every_example_is_run_or_says_why_not() -> None:
    examples = _examples()
    skipped = [example.first_line for example in examples if example.why_not_run]
    assert len(skipped) == len(NOT_RUN), skipped  # each reason still matches a block
    assert sum(not example.why_not_run for example in examples) >= 2


def test_the_quickstart_prints_what_the_readme_shows_twice_and_stores_once(
    tmp_path: Path,
) -> None:
    runnable = [example for example in _examples() if not example.why_not_run]
    first, second = run_in_order(runnable, tmp_path, times=2)
    quickstart = next(i for i, e in enumerate(runnable) if "quickstart.db" in e.code)
    shown = re.search(r"It prints.*?```text\n(.*?)```", README.read_text(), re.DOTALL)
    assert shown is not None, "the README shows the quickstart's output"
    assert first[quickstart] == second[quickstart] == shown.group(1)
    with turnkeeper.open(f"sqlite:///{tmp_path / 'quickstart.db'}") as tk:
        stored = [(m.seq, m.role, m.id) for m in tk.history("support-42", project="acme")]
    assert stored == [
        (1, "system", "rules"),
        (2, "user", "turn-1"),
        (3, "assistant", "reply-1"),
        (4, "user", "turn-2"),
    ]
    with turnkeeper.open(f"sqlite:///{tmp_path / 'cli-quickstart.db'}") as tk:
        assert [m.id for m in tk.history("support-42")] == ["rules", "turn-1"]
