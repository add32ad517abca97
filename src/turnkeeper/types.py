"""Domain values: sessions, messages and context windows.

These are plain frozen dataclasses with no storage flags and no settings lookups, so every
layer (store, context builder, CLI, HTTP) can pass them around freely. Wire shapes (JSONL,
HTTP schemas) are declared elsewhere and converted at the edges.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Generic, TypeVar

JSONObject = Mapping[str, Any]
T = TypeVar("T")


class Role(enum.StrEnum):
    """Who speaks a message, in the OpenAI chat vocabulary."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class SessionStatus(enum.StrEnum):
    """Lifecycle of a session. Only `active` sessions are live (served, appendable)."""

    ACTIVE = "active"
    ARCHIVED = "archived"
    EXPIRED = "expired"


class Phase(enum.StrEnum):
    """What a multi-agent conversation is doing (the multi-agent phases)."""

    CHAT = "chat"
    BRAINSTORM = "brainstorm"
    PLAN = "plan"
    EXECUTE = "execute"
    VERIFICATION = "verification"
    CHORES = "chores"
    REFLECTION = "reflection"


class StrategyName(enum.StrEnum):
    """The context strategies (see the architecture's strategy table)."""

    FULL = "full"
    RECENT = "recent"
    SLIDING_WINDOW = "sliding_window"
    TRUNCATE = "truncate"
    SUMMARIZE = "summarize"
    RELEVANT = "relevant"


class CutMode(enum.StrEnum):
    """How a strategy that leaves older turns out chooses where its window starts."""

    STABLE = "stable"
    """At the session's stored cut point, which moves only when the window overflows: the
    window's prefix stays the same from turn to turn (a provider bills it as cached)."""
    SLIDE = "slide"
    """At the oldest turn that fits, chosen again for every build: the most history the
    budget holds, a start that moves by a turn or so every turn."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens the model reported for producing a message (input = prompt, output = completion).

    Of the input, `cache_read_input_tokens` came from the provider's prompt cache (OpenAI's
    `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`: billed at a
    fraction) and `cache_creation_input_tokens` were written to it (Anthropic's: billed at a
    premium); both are part of `input_tokens`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def counts(self) -> dict[str, int]:
        """The counts by name, the cache's only when the upstream reported some (as traces and
        the HTTP API show them)."""
        counts = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        for name in ("cache_read_input_tokens", "cache_creation_input_tokens"):
            if getattr(self, name):
                counts[name] = getattr(self, name)
        return counts


@dataclass(frozen=True, slots=True)
class Session:
    """A conversation: its identity, lifecycle and running totals."""

    id: str
    project: str
    status: SessionStatus
    created_at: datetime
    updated_at: datetime
    key: str | None = None
    subject: str | None = None
    kind: str | None = None
    title: str | None = None
    phase: str | None = None
    expires_at: datetime | None = None
    message_count: int = 0
    last_seq: int = 0
    stored_tokens: int = 0
    usage_input_tokens: int = 0
    usage_output_tokens: int = 0
    usage_cache_read_tokens: int = 0
    usage_cache_creation_tokens: int = 0
    metadata: JSONObject = field(default_factory=dict)
    version: int = 0
    cut_seq: int = 0
    """The session's cut point: the seq the windows of strategies that leave older turns out
    start from (0: none yet). It stays put while the window fits and moves when it overflows
    (`docs/concepts/strategies.md`), so the window's prefix, and a provider's prompt cache of
    it, stays the same from turn to turn; kept here so every process agrees on it."""

    def is_expired_at(self, now: datetime) -> bool:
        """True when the session is marked expired or is past its `expires_at`."""
        if self.status is SessionStatus.EXPIRED:
            return True
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True, slots=True)
class Message:
    """One stored turn. `seq` is gapless per session; `tokens` was counted once, at write time."""

    id: str
    session_id: str
    seq: int
    role: Role
    content: str
    created_at: datetime
    tokens: int
    author: str | None = None
    internal: bool = False
    usage: Usage | None = None
    tool_calls: tuple[JSONObject, ...] | None = None
    tool_call_id: str | None = None
    metadata: JSONObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message a caller wants to append (or to use as the pending turn of a context build).

    `id` is optional: when given, appending the same id twice stores it once.
    """

    role: Role | str
    content: str = ""
    author: str | None = None
    internal: bool = False
    id: str | None = None
    usage: Usage | None = None
    tool_calls: tuple[JSONObject, ...] | list[JSONObject] | None = None
    tool_call_id: str | None = None
    metadata: JSONObject | None = None


@dataclass(frozen=True, slots=True)
class MessageDraft:
    """A validated message with its token count, ready for a store to persist."""

    id: str
    role: Role
    content: str
    tokens: int
    created_at: datetime
    author: str | None = None
    internal: bool = False
    usage: Usage | None = None
    tool_calls: tuple[JSONObject, ...] | None = None
    tool_call_id: str | None = None
    metadata: JSONObject = field(default_factory=dict)
    trace: str | None = None
    """The turn trace (a JSON document, `turnkeeper.traces`) of this reply, stored by the same
    append, in the same transaction: a reply is never stored without the record of what the
    model saw. Not stored again when the id is (an idempotent retry keeps the first trace)."""

    def stored_as(self, session_id: str, seq: int) -> Message:
        """The message this draft is once stored at `seq` of `session_id` (its trace is kept
        beside it, not in it)."""
        return Message(
            id=self.id,
            session_id=session_id,
            seq=seq,
            role=self.role,
            content=self.content,
            created_at=self.created_at,
            tokens=self.tokens,
            author=self.author,
            internal=self.internal,
            usage=self.usage,
            tool_calls=self.tool_calls,
            tool_call_id=self.tool_call_id,
            metadata=self.metadata,
        )


@dataclass(frozen=True, slots=True)
class NewSession:
    """Fields a caller may set when a session is created."""

    project: str
    key: str | None = None
    subject: str | None = None
    kind: str | None = None
    title: str | None = None
    phase: str | None = None
    expires_at: datetime | None = None
    metadata: JSONObject = field(default_factory=dict)

    def created_as(self, session_id: str, now: datetime) -> Session:
        """The session this creates with id `session_id` at `now`: active, with zero totals and
        `version` 0, as `Store.create_session` stores it."""
        given = {name: getattr(self, name) for name in _NEW_SESSION_FIELDS}
        return Session(
            id=session_id, status=SessionStatus.ACTIVE, created_at=now, updated_at=now, **given
        )


_NEW_SESSION_FIELDS = tuple(f.name for f in fields(NewSession))

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class SessionPatch:
    """Fields to change on a session; a field left as `UNSET` is not touched."""

    title: str | None = _UNSET
    phase: str | None = _UNSET
    metadata: JSONObject = _UNSET
    expires_at: datetime | None = _UNSET

    def changes(self) -> dict[str, Any]:
        """The fields that were set, by name."""
        return {
            name: getattr(self, name)
            for name in ("title", "phase", "metadata", "expires_at")
            if getattr(self, name) is not _UNSET
        }


UNSET: Any = _UNSET


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Which sessions `list_sessions` returns. `None` means "any"."""

    project: str | None = None
    subject: str | None = None
    kind: str | None = None
    status: SessionStatus | None = None
    key: str | None = None
    updated_since: datetime | None = None
    phase: str | None = None
    search: str | None = None
    """Text that key, subject or title contains (case-insensitive) — what a person types in a
    search box, as opposed to the exact-match fields above."""


@dataclass(frozen=True, slots=True)
class MessageQuery:
    """Which messages of a session a page read (`Store.read_messages` and its versioned
    forms) returns, and in which order.

    One value rather than five keyword arguments, so the contract, every backend and the cache
    (which keys pages by it) name a page the same way. The default is every message, oldest
    first."""

    from_seq: int | None = None
    """The lowest seq returned (inclusive); None: from the first."""
    to_seq: int | None = None
    """The highest seq returned (inclusive); None: up to the last."""
    include_internal: bool = True
    """False leaves internal messages out, before `limit` applies."""
    newest_first: bool = False
    """Order by descending seq."""
    limit: int | None = None
    """At most this many, taken from the start of the order; None: no limit."""

    def selects(self, message: Message) -> bool:
        """Whether `message` is within the bounds and visibility (order and limit aside)."""
        return (
            (self.from_seq is None or message.seq >= self.from_seq)
            and (self.to_seq is None or message.seq <= self.to_seq)
            and (self.include_internal or not message.internal)
        )

    def page(self, messages: Iterable[Message]) -> list[Message]:
        """The page this query reads from `messages` (any order): what every store returns."""
        ordered = sorted(messages, key=lambda m: m.seq, reverse=self.newest_first)
        chosen = [m for m in ordered if self.selects(m)]
        return chosen if self.limit is None else chosen[: self.limit]


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; pass `next_cursor` back to get the next page (None = last page)."""

    items: tuple[T, ...]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class ExpiryReport:
    """What one `expire()` run did."""

    expired: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    archive_path: str | None = None
    """The JSONL file the deleted sessions were archived to, if any."""
    retention_deleted: tuple[str, ...] = ()
    """Sessions deleted (whole) because they outlived their project's `retention`."""
    held: tuple[str, ...] = ()
    """Sessions past their retention (whole, or with messages past it) that a legal hold
    kept."""
    messages_deleted: Mapping[str, int] = field(default_factory=dict)
    """Messages deleted because they outlived their project's `retention`, by the id of the
    session that lives on without them (sessions deleted whole are not in it)."""


@dataclass(frozen=True, slots=True)
class SessionStats:
    """Per-session statistics."""

    session_id: str
    message_count: int
    user_facing_messages: int
    internal_messages: int
    messages_by_role: Mapping[str, int]
    stored_tokens: int
    usage_input_tokens: int
    usage_output_tokens: int
    first_message_at: datetime | None
    last_message_at: datetime | None
    execution_ms: int = 0
    """Time agents reported spending on their turns, summed (the multi-agent
    runner's `executionTime`)."""
    usage_cache_read_tokens: int = 0
    """Of `usage_input_tokens`, what the upstream served from its prompt cache."""
    usage_cache_creation_tokens: int = 0
    """Of `usage_input_tokens`, what the upstream wrote to its prompt cache."""


@dataclass(frozen=True, slots=True)
class AgentState:
    """Where one agent stands in one session (the per-agent state).

    `last_processed_seq` is the last seq the agent had seen when it last answered (0: nothing
    yet); `provider_session_id` is the model provider's own conversation id (the multi-agent
    runner's `claudeSessionId`), kept until a new one is given. `execution_ms` and `turns` add up
    what the agent reported about its turns.
    """

    session_id: str
    agent: str
    last_processed_seq: int = 0
    provider_session_id: str | None = None
    execution_ms: int = 0
    turns: int = 0
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AgentStateUpdate:
    """A change to an agent's state: `None` keeps a field, the additions are added atomically."""

    last_processed_seq: int | None = None
    provider_session_id: str | None = None
    add_execution_ms: int = 0
    add_turns: int = 0


@dataclass(frozen=True, slots=True)
class Branch:
    """Where a branch came from: the session it was forked from and the last seq it shares.

    A branch's history is the source's messages with `seq <= forked_at_seq`, then its own.
    `parent_id` stays recorded when the source is deleted later (the branch keeps its history;
    it was copied, see `ForkStore`), so it may name a session that no longer exists.
    """

    session_id: str
    parent_id: str
    forked_at_seq: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class LegalHold:
    """A legal hold: while it stands, erasure (and retention) leaves the sessions it covers
    alone. On one session (`session_id`), or on every session of `project` (`session_id` None).
    """

    project: str
    session_id: str | None
    held_at: datetime


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What stays of an erased session: its id (so it cannot come back), its project (so a
    project's caller is told, and another's is not) and when it was erased. Nothing a person
    wrote or is identified by (no subject, key, title or content)."""

    session_id: str
    project: str
    erased_at: datetime


@dataclass(frozen=True, slots=True)
class ErasedSession:
    """One session an erasure removed, and how many of each of its rows went with it."""

    session_id: str
    project: str
    messages: int = 0
    summaries: int = 0
    traces: int = 0
    agent_states: int = 0
    turn_attempts: int = 0


@dataclass(frozen=True, slots=True)
class ErasureReceipt:
    """What one `erase()` did (or, with `dry_run`, would do).

    `subject`, `session` and `project` repeat what was asked; `sessions` are the erased ids
    (each now a tombstone), `held` the matching sessions a legal hold kept, `already_erased`
    the ids asked for that were tombstones before. The counts sum the erased sessions' rows.
    """

    erased_at: datetime
    sessions: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    already_erased: tuple[str, ...] = ()
    messages: int = 0
    summaries: int = 0
    traces: int = 0
    agent_states: int = 0
    subject: str | None = None
    session: str | None = None
    project: str | None = None
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class TurnAttempt:
    """The request answering a chat turn, and until when it holds the turn.

    One attempt at a time asks the model for a turn, whichever process or replica it runs in:
    it records itself here before the call, keeps `lease_until` ahead of the clock while it
    works, and ends the record once the reply is stored. A retry arriving meanwhile finds the
    record and waits for the outcome instead of asking the model again. An attempt whose call
    failed leaves its failure in `error` (text the turn helper wrote; the store keeps it as
    given) for the retries that were waiting on it. `turn_id` is the id of the turn's message.
    """

    session_id: str
    turn_id: str
    attempt_id: str
    lease_until: datetime
    error: str | None = None

    def holds_turn_at(self, now: datetime) -> bool:
        """Whether this attempt still answers the turn at `now`: it has not failed and its
        lease runs past `now` (a lapsed lease is an attempt that stopped showing signs of
        life: its process died or hangs)."""
        return self.error is None and self.lease_until > now


@dataclass(frozen=True, slots=True)
class SummaryCheckpoint:
    """A durable summary of a session's messages with `seq <= covers_to_seq`.

    Checkpoints roll: the next one folds this text and only the messages after `covers_to_seq`,
    so summarizing costs what is new, not the whole conversation. `method` names the summarizer
    (`extractive`, `llm:<model>`); `tokens` is the text's count in the store's encoding.
    """

    session_id: str
    covers_to_seq: int
    text: str
    tokens: int
    method: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ProjectStats:
    """Per-project statistics (over all sessions of the project, whatever their status)."""

    project: str
    sessions_by_status: Mapping[str, int]
    message_count: int
    stored_tokens: int
    usage_input_tokens: int
    usage_output_tokens: int
    usage_cache_read_tokens: int = 0
    """Of `usage_input_tokens`, what the upstream served from its prompt cache."""
    usage_cache_creation_tokens: int = 0
    """Of `usage_input_tokens`, what the upstream wrote to its prompt cache."""


@dataclass(frozen=True, slots=True)
class ContextMessage:
    """One entry of a built window: a role and text plus where it came from.

    `seq` is the stored message it renders (None for markers, summaries and a pending turn that
    is not stored yet). `kind` tells them apart for reports and UIs.
    """

    role: Role
    content: str
    tokens: int
    kind: str = "message"  # message | marker | summary | pending | instructions
    seq: int | None = None
    message_id: str | None = None
    author: str | None = None
    tool_calls: tuple[JSONObject, ...] | None = None
    tool_call_id: str | None = None
    internal: bool = False


@dataclass(frozen=True, slots=True)
class SeqRanges:
    """A set of message seqs, held as runs of consecutive seqs (`runs`: sorted, disjoint,
    inclusive `(first, last)` pairs), so naming every message a window left out of a
    conversation of a hundred thousand costs a pair, not a hundred thousand numbers.

    It behaves as the set it names: `len()` counts the seqs, iteration yields them in order,
    `in` tests one; `str()` reads `1–3, 7`. Build it with `SeqRanges.of(seqs)`."""

    runs: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, seqs: Iterable[int]) -> SeqRanges:
        """The runs of any seqs (in any order, repeats allowed)."""
        runs: list[list[int]] = []
        for seq in sorted(set(seqs)):
            if runs and seq == runs[-1][1] + 1:
                runs[-1][1] = seq
            else:
                runs.append([seq, seq])
        return cls(tuple((first, last) for first, last in runs))

    @classmethod
    def from_runs(cls, runs: Iterable[Sequence[int]]) -> SeqRanges:
        """Runs given as `[first, last]` pairs (the wire shape), merged where they touch."""
        merged: list[list[int]] = []
        for first, last in sorted((int(a), int(b)) for a, b in runs if a <= b):
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        return cls(tuple((first, last) for first, last in merged))

    @classmethod
    def span(cls, first: int, last: int) -> SeqRanges:
        """Every seq from `first` to `last` (none when `last` < `first`)."""
        return cls(((first, last),)) if first <= last else cls()

    def __or__(self, other: SeqRanges) -> SeqRanges:
        return SeqRanges.from_runs((*self.runs, *other.runs))

    def __sub__(self, other: SeqRanges) -> SeqRanges:
        """The seqs of this set that are not in `other`, run by run."""
        left: list[tuple[int, int]] = []
        for first, last in self.runs:
            start = first
            for cut_first, cut_last in other.runs:
                if cut_last < start or cut_first > last:
                    continue
                if cut_first > start:
                    left.append((start, cut_first - 1))
                start = max(start, cut_last + 1)
            if start <= last:
                left.append((start, last))
        return SeqRanges(tuple(left))

    def __len__(self) -> int:
        return sum(last - first + 1 for first, last in self.runs)

    def __bool__(self) -> bool:
        return bool(self.runs)

    def __iter__(self) -> Iterator[int]:
        for first, last in self.runs:
            yield from range(first, last + 1)

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and any(first <= seq <= last for first, last in self.runs)

    @property
    def last(self) -> int | None:
        """The highest seq, None when empty."""
        return self.runs[-1][1] if self.runs else None

    def __str__(self) -> str:
        return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in self.runs)


NO_SEQS = SeqRanges()


@dataclass(frozen=True, slots=True)
class ContextReport:
    """What a context build did; the numbers the `conversation_context_loaded` event logs.

    Every count has the seqs it counts beside it: `messages_dropped` = `len(dropped_seqs)`
    (every stored message left out and not summarized, including older ones the build never
    read), `messages_summarized` = `len(summarized_seqs)`, `messages_loaded` =
    `len(loaded_seqs)` (the messages the build read). `tokens_used` is what the window costs
    as a prompt (reply priming included), 0 for an empty window. `print(report)` shows it all
    in a few lines.
    """

    strategy: StrategyName | str
    """The strategy's name: a `StrategyName` for the built-ins, a custom strategy's own."""
    session_id: str
    messages_in_store: int
    messages_loaded: int
    messages_included: int
    messages_dropped: int
    messages_summarized: int
    tokens_used: int
    budget: int
    encoding: str
    markers: tuple[str, ...] = ()
    dropped_seqs: SeqRanges = NO_SEQS
    summarized_seqs: SeqRanges = NO_SEQS
    loaded_seqs: SeqRanges = NO_SEQS
    cut_seq: int | None = None
    """The cut point the window was built with: stored messages before this seq are left out
    (the head aside). None when the strategy holds no cut point (`full`, or `cut="slide"`)."""

    @property
    def truncated(self) -> bool:
        """True when anything stored was left out or summarized."""
        return self.messages_dropped > 0 or self.messages_summarized > 0

    def __str__(self) -> str:
        lines = [
            f"{self.strategy} window: {self.messages_included} of "
            f"{self.messages_in_store} stored messages, {self.tokens_used} / {self.budget} "
            f"tokens ({self.encoding})",
            f"  loaded {self.messages_loaded} · included {self.messages_included} · "
            f"dropped {self.messages_dropped} · summarized {self.messages_summarized}",
        ]
        if self.dropped_seqs:
            lines.append(f"  dropped: seq {self.dropped_seqs}")
        if self.summarized_seqs:
            lines.append(f"  summarized: seq {self.summarized_seqs}")
        if self.cut_seq is not None:
            lines.append(f"  cut point: seq {self.cut_seq}")
        lines.extend(f"  marker: {marker}" for marker in self.markers)
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """The message list the model sees, and the report of how it was built."""

    messages: tuple[ContextMessage, ...]
    report: ContextReport

    def __str__(self) -> str:
        lines = [str(self.report), ""]
        for message in self.messages:
            where = f"#{message.seq}" if message.seq is not None else message.kind
            speaker = f"{message.role}:{message.author}" if message.author else str(message.role)
            if message.internal:
                speaker += " (internal)"
            text = " ".join(message.content.split())
            text = text if len(text) <= 72 else text[:71] + "…"
            lines.append(f"{where:>8}  {speaker:<10} {message.tokens:>5}  {text}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key's public record: which project it opens, and whether it is an admin key.

    The secret itself is never part of the record: it is shown once, when the key is made,
    and only its hash is stored.
    """

    id: str
    project: str
    name: str
    admin: bool
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None
