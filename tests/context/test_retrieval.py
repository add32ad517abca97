"""The full-text retriever's ranking, without a store: which words of a question are looked up
and how the messages holding them are ordered."""

from __future__ import annotations

from turnkeeper.context.retrieval import MAX_QUERY_WORDS, query_words, rank


def test_a_question_is_looked_up_by_its_distinct_meaningful_words() -> None:
    assert query_words("What was the code for the Lisbon hotel, and the CODE again?") == [
        "code", "lisbon", "hotel",
    ]  # fmt: skip
    assert query_words("what is it?") == []
    assert query_words("über_café 東京-7") == ["über", "café", "東京", "7"]
    many = " ".join(f"word{n}" for n in range(40))
    assert query_words(many) == [f"word{n}" for n in range(MAX_QUERY_WORDS)]


def test_a_rare_word_outweighs_common_ones_and_ties_go_to_the_newest() -> None:
    matches = {
        "lisbon": [90, 40, 12],  # rare: three of a hundred messages
        "hotel": list(range(100, 0, -2)),  # common: fifty of them
        "missing": [],
    }
    ranked = rank(matches, messages=100)
    assert ranked[:3] == [90, 40, 12]  # both words beat the common word alone...
    assert ranked[3:6] == [100, 98, 96]  # ...and among the common word's, the newest first
    assert set(ranked) == {90, 40, 12, *range(2, 101, 2)}
    assert rank({"lisbon": [5]}, messages=0) == [5]  # an empty session's count does not divide
