"""Each trick in `turnkeeper._speedups` gives exactly what the plain path gives."""

from __future__ import annotations

import os

import pytest
import tiktoken
from tiktoken_ext import openai_public

from tests.test_tokens import SAMPLES, _corpus
from turnkeeper import _speedups
from turnkeeper.tokens import EXACT_ENCODINGS, _offline, counter_for


@pytest.mark.parametrize("encoding", EXACT_ENCODINGS)
def test_counts_are_those_of_the_encoding_with_its_python_rank_table_kept(encoding: str) -> None:
    """The counter's encoding drops tiktoken's Python rank table once built (its memory): it
    counts exactly as the same encoding built from the same shipped files with the table kept."""
    counter = counter_for(encoding)
    assert not hasattr(counter._encoder, "_mergeable_ranks")  # type: ignore[attr-defined]
    kept = tiktoken.Encoding(**_offline(openai_public.ENCODING_CONSTRUCTORS[encoding])())
    assert len(kept._mergeable_ranks) > 100_000
    corpus = [*SAMPLES, *_corpus()]
    assert [counter.count_text(t) for t in corpus] == [len(kept.encode_ordinary(t)) for t in corpus]
    assert counter._encoder.n_vocab == kept.n_vocab  # type: ignore[attr-defined]


def test_an_encoding_without_the_python_table_is_left_as_it_is() -> None:
    """A tiktoken release that no longer keeps the table: nothing to drop, nothing fails."""

    class Bare:
        pass

    bare = Bare()
    assert _speedups.without_python_ranks(bare) is bare


def test_the_environment_snapshot_changes_exactly_when_the_plain_one_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Settings are remembered by the snapshot: it must tell environments apart exactly as
    `frozenset(os.environ.items())` does, whatever changed (set, changed, removed)."""

    def both() -> tuple[object, frozenset[tuple[str, str]]]:
        return _speedups.environment_snapshot(), frozenset(os.environ.items())

    first = both()
    assert both() == first
    monkeypatch.setenv("TURNKEEPER_SPEEDUPS_PROBE", "1")
    set_once = both()
    assert set_once[0] != first[0] and set_once[1] != first[1]
    monkeypatch.setenv("TURNKEEPER_SPEEDUPS_PROBE", "2")
    changed = both()
    assert changed[0] != set_once[0] and changed[1] != set_once[1]
    monkeypatch.delenv("TURNKEEPER_SPEEDUPS_PROBE")
    assert both() == first
    hash(first[0])
