"""Finding the older turns relevant to the turn being answered, for the `relevant` strategy.

A `Retriever` (exported as `turnkeeper.Retriever`) is any callable that, given the session, the
query text (the turn being answered) and a limit, returns the seqs of the session's messages
most relevant to the query, best first. The strategy asks it once per build, keeps what it can
fit whole (a tool call with its results), and never trusts it further: a seq that is not an
older message of the session is simply not recalled.

The default, `FullTextRetriever`, needs nothing installed: it asks the store's own full-text
index (SQLite FTS5, PostgreSQL `tsvector`, the in-memory store's word index; the
`WordMatchStore` capability) which messages hold each of the query's words, one indexed query
with a limit per word, and ranks them here, the same on every backend: each message scores
the inverse document frequency of the query words it holds (BM25's idf), so a rare word — a
name, a number, an identifier — outweighs many common ones. Words that carry no meaning on
their own (`the`, `what`, `did`…) are not looked up. Embeddings plug in as another callable
(see docs/concepts/strategies.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from turnkeeper.storage.base import Store, require
from turnkeeper.storage.search import WordMatchStore, words_of
from turnkeeper.types import Session


@runtime_checkable
class Retriever(Protocol):
    """Finds a session's messages relevant to a query (`turnkeeper.Retriever`)."""

    def __call__(self, session: Session, query: str, limit: int) -> Sequence[int]:
        """At most `limit` seqs of `session`'s messages, the most relevant to `query` first."""
        ...


MAX_QUERY_WORDS = 24
"""The most distinct words of a query looked up (each is one indexed query)."""
MATCHES_PER_WORD = 200
"""The newest messages read per word: a word held by more is common enough to weigh little."""
_ENGLISH_STOP_WORDS = """a about above after again all am an and any are as at be been before being below between
    both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours yourself yourselves s t ll re ve d m"""
STOP_WORDS = frozenset(_ENGLISH_STOP_WORDS.split())
"""English words too common to tell one message from another."""


def query_words(text: str) -> list[str]:
    """The distinct words of `text` worth looking up, in order (at most `MAX_QUERY_WORDS`)."""
    wanted = [word for word in words_of(text) if word not in STOP_WORDS]
    return list(dict.fromkeys(wanted))[:MAX_QUERY_WORDS]


def rank(matches: Mapping[str, Sequence[int]], *, messages: int) -> list[int]:
    """The seqs of `matches` (each word's messages), best first: the sum of the idf of the
    words each holds, ties to the newest."""
    scores: dict[int, float] = {}
    total = max(messages, 1)
    for seqs in matches.values():
        held = len(seqs)
        if not held:
            continue
        idf = math.log(1 + (total - held + 0.5) / (held + 0.5))
        for seq in seqs:
            scores[seq] = scores.get(seq, 0.0) + idf
    return sorted(scores, key=lambda seq: (-scores[seq], -seq))


class FullTextRetriever:
    """The default `Retriever`: the store's full-text index, ranked by `rank`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, session: Session, query: str, limit: int) -> list[int]:
        words = query_words(query)
        if not words or limit <= 0:
            return []
        index = require(self.store, WordMatchStore, "the relevant strategy's full-text recall")
        matches = index.messages_with_words(session.id, words, limit=max(MATCHES_PER_WORD, limit))
        return rank(matches, messages=session.message_count)[:limit]

    def __repr__(self) -> str:
        return f"<FullTextRetriever on {type(self.store).__name__}>"
