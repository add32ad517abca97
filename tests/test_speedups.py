"""Each trick in `turnkeeper._speedups` gives exactly what the plain path gives."""

from __future__ import annotations

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
