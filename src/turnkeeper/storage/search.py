"""Full-text search over message content: the capability, its values and its query language.

Search is an optional store capability (`SearchStore`): the SQL backends keep a full-text index
of every message's content (PostgreSQL in the write's own transaction, SQLite brought up to date
before each search: `sql/search.py`), so a search sees every message committed before it, and
answer ranked, filtered queries with highlighted snippets. A store without an index simply does not
have the method, and the service says so clearly instead of scanning.

The query language is one small, forgiving grammar for every backend (the habit of web search
boxes), parsed here once, so a query means the same on SQLite and PostgreSQL and a backend never
sees text it could fail to parse: a malformed query is an `InvalidInput` naming `q`, never a
database error.

    lisbon hotel        both words (in any order)
    "lisbon hotel"      the phrase
    lisbon OR porto     either word
    lisbon -porto       lisbon but not porto
    lisb*               words starting with "lisb"

Matching is on whole words, case-insensitive, without stemming (`ask` does not find `asked`;
`ask*` does), the same on both backends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from turnkeeper.errors import InvalidInput
from turnkeeper.types import Role

MAX_QUERY_LENGTH = 500
MAX_TERMS = 32
HIGHLIGHT_START = "\ue000"
"""Marks where a matched word starts in a snippet as the backend returns it (a private-use
character: nothing a message is expected to contain). `snippet_parts` turns it into structure."""
HIGHLIGHT_END = "\ue001"


# -- the query language -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Term:
    """Words that must appear together, in order (one word, or a quoted phrase); with `prefix`,
    a single word that the stored word starts with."""

    words: str
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Clause:
    """Any of `terms` (joined by OR); with `excluded`, none of them may appear."""

    terms: tuple[Term, ...]
    excluded: bool = False


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed query: every included clause must match and no excluded one may."""

    text: str
    clauses: tuple[Clause, ...]

    @property
    def included(self) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if not c.excluded)

    @property
    def excluded(self) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if c.excluded)


_TOKEN = re.compile(r'(-?)"([^"]*)"|(\S+)')
_WORDY = re.compile(r"[^\W_]")
_PREFIX_WORD = re.compile(r"[^\W_]+")
SYNTAX_HINT = 'use words, "a phrase", a OR b, -excluded, prefix*'


def parse_query(text: str) -> SearchQuery:
    """Parse `text` (see the module docstring); `InvalidInput("q", …)` says what is wrong."""
    if not isinstance(text, str):
        raise InvalidInput("q", f"must be text, got {type(text).__name__}")
    if len(text) > MAX_QUERY_LENGTH:
        raise InvalidInput("q", f"is {len(text)} characters; the limit is {MAX_QUERY_LENGTH}")
    if "\x00" in text:
        raise InvalidInput("q", "must not contain NUL characters")
    if text.count('"') % 2:
        raise InvalidInput("q", 'has an unclosed quote: end the phrase with "')
    clauses: list[Clause] = []
    pending_or = False
    for match in _TOKEN.finditer(text):
        phrase_sign, phrase, word = match.groups()
        if word == "OR":
            if not clauses or pending_or or clauses[-1].excluded:
                raise InvalidInput("q", f"OR needs a word on each side; {SYNTAX_HINT}")
            pending_or = True
            continue
        if phrase is not None:
            excluded = phrase_sign == "-"
            term = _term(phrase, prefix=False)
        else:
            excluded = word.startswith("-") and len(word) > 1
            body = word[1:] if excluded else word
            term = _term(body.rstrip("*"), prefix=body.endswith("*"))
        if term is None:  # punctuation only: nothing a word index can match
            if pending_or:
                raise InvalidInput("q", f"OR needs a word on each side; {SYNTAX_HINT}")
            continue
        if pending_or:
            if excluded:
                raise InvalidInput("q", "an excluded word cannot be one side of OR")
            last = clauses.pop()
            clauses.append(Clause((*last.terms, term)))
            pending_or = False
        else:
            clauses.append(Clause((term,), excluded))
    if pending_or:
        raise InvalidInput("q", f"OR needs a word on each side; {SYNTAX_HINT}")
    if sum(len(c.terms) for c in clauses) > MAX_TERMS:
        raise InvalidInput("q", f"has more than {MAX_TERMS} terms")
    query = SearchQuery(text=text, clauses=tuple(clauses))
    if not query.included:
        raise InvalidInput("q", f"has no word to look for; {SYNTAX_HINT}")
    return query


def _term(words: str, *, prefix: bool) -> Term | None:
    words = " ".join(words.split())
    if not _WORDY.search(words):
        return None
    if prefix and not _PREFIX_WORD.fullmatch(words):
        raise InvalidInput("q", f"a prefix search takes one word of letters and digits: {words}*")
    return Term(words, prefix)


# -- filters and results ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which messages a search may return: those of `project` (None: of every project, for
    callers allowed to see them all), narrowed by the other fields. `since` is inclusive and
    `until` exclusive (message `created_at`)."""

    project: str | None
    session_id: str | None = None
    role: Role | None = None
    author: str | None = None
    kind: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    include_internal: bool = True


@dataclass(frozen=True, slots=True)
class SnippetPart:
    """A piece of a snippet: text, and whether it is a matched word (to highlight)."""

    text: str
    match: bool


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One message that matched, with where it lives and why it matched.

    `rank` orders the hits of one search (higher is better); its scale is the backend's own
    (BM25 on SQLite, cover density on PostgreSQL), so compare it only within one result."""

    session_id: str
    session_key: str | None
    session_title: str | None
    project: str
    message_id: str
    seq: int
    role: Role
    author: str | None
    created_at: datetime
    snippet: tuple[SnippetPart, ...]
    rank: float

    def marked(self, start: str = "[", end: str = "]") -> str:
        """The snippet as one string with `start`/`end` around each matched word."""
        return "".join(f"{start}{p.text}{end}" if p.match else p.text for p in self.snippet)


def snippet_parts(marked: str) -> tuple[SnippetPart, ...]:
    """Split a backend snippet (matches between `HIGHLIGHT_START` and `HIGHLIGHT_END`) into
    parts; adjacent highlighted words separated only by spaces stay separate parts."""
    parts: list[SnippetPart] = []
    for piece in re.split(f"({HIGHLIGHT_START}[^{HIGHLIGHT_END}]*{HIGHLIGHT_END})", marked):
        if piece.startswith(HIGHLIGHT_START) and piece.endswith(HIGHLIGHT_END):
            parts.append(SnippetPart(piece[1:-1], True))
        elif piece:
            clean = piece.replace(HIGHLIGHT_START, "").replace(HIGHLIGHT_END, "")
            parts.append(SnippetPart(clean, False))
    return tuple(parts)


@runtime_checkable
class SearchStore(Protocol):
    """A store with a full-text index of message content: a search answers as if every write
    committed before it had been indexed at once."""

    def search_messages(
        self, query: SearchQuery, where: SearchFilter, *, limit: int, offset: int = 0
    ) -> Sequence[SearchHit]:
        """Messages of `where.project` matching `query` and the filters, best first (ties:
        newest first), skipping `offset` and returning at most `limit`."""
        ...


# -- words, for ranking by relevance ----------------------------------------------------------


WORD = re.compile(r"[^\W_]+")
"""A word as every index splits text into them: a run of letters and digits (the underscore
and punctuation separate words)."""


def words_of(text: str) -> list[str]:
    """The lower-case words of `text`, in order, as the indexes see them."""
    return WORD.findall(text.lower())


@runtime_checkable
class WordMatchStore(Protocol):
    """A store whose full-text index can say which of a session's messages hold a word: what
    the `relevant` strategy's default retriever ranks (`context.retrieval`). Each word is one
    indexed query with a limit, so its cost does not grow with the conversation's length."""

    def messages_with_words(
        self, session_id: str, words: Sequence[str], *, limit: int
    ) -> dict[str, list[int]]:
        """For each of `words` (single lower-case words, as `words_of` makes them), the seqs of
        the session's messages whose content holds it as a whole word, newest first, at most
        `limit` of each."""
        ...
