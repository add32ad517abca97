"""The HTTP wire shapes, split by purpose: what a client sends to create or change something,
and what the API shows back (public).

These are pydantic models for FastAPI's validation and the OpenAPI schema; the domain values in
`turnkeeper.types` stay plain dataclasses. Each `from_domain` classmethod is the one place a
domain value becomes its public shape. Request models forbid unknown fields, so a typo is a 422
naming the field rather than a silently ignored value.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from turnkeeper.context.conversation import ConversationContext, planner_context
from turnkeeper.records import seq_runs
from turnkeeper.server.trace_schemas import SeqRun, TracePublic
from turnkeeper.storage.search import SearchHit
from turnkeeper.turns import TurnOptions
from turnkeeper.types import (
    UNSET,
    ContextReport,
    NewMessage,
    Page,
    Phase,
    Role,
    Session,
    SessionStatus,
    StrategyName,
    Usage,
)
from turnkeeper.validation import KEY_PATTERN, MAX_WHOLE, NAME_PATTERN, window_budget

JSON = dict[str, Any]
MAX_TTL_SECONDS = 100 * 365 * 86400  # a lifetime beyond a century is a mistake (and overflows)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _FromDomain(BaseModel):
    """A response shape whose fields are those of the same names of a domain value (nested
    values too: a `Usage` becomes a `UsageModel`, a snippet part a `SnippetPartPublic`)."""

    @classmethod
    def from_domain(cls, value: object) -> Self:
        return cls.model_validate(value, from_attributes=True)


# -- sessions -------------------------------------------------------------------------------


def _ttl_seconds(description: str) -> Any:
    """A request's `ttl_seconds`: a lifetime in seconds, positive and within `MAX_TTL_SECONDS`,
    or null (never expires)."""
    return Field(None, gt=0, le=MAX_TTL_SECONDS, description=description)


def _ttl(request: BaseModel, seconds: float | None) -> Any:
    """The service's `ttl` for a request's `ttl_seconds`: `UNSET` when the client left it out
    (the configured lifetime), None for null (never expires), else the lifetime."""
    if "ttl_seconds" not in request.model_fields_set:
        return UNSET
    return None if seconds is None else timedelta(seconds=seconds)


class SessionCreate(_Request):
    """A new session. With `get_or_create`, the live session holding `key` is returned instead
    if there is one (200 rather than 201)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "key": "dev-task-F1-T3",
                    "subject": "ticket-42",
                    "kind": "dev-task",
                    "title": "Fix the leak",
                    "metadata": {"agent_id": "agent-7"},
                    "ttl_seconds": 86400,
                    "get_or_create": True,
                }
            ]
        },
    )

    key: str | None = Field(
        None,
        pattern=KEY_PATTERN,
        description="Client natural key, unique among the live sessions of the project: 1-255 "
        "letters, digits or . _ : @ + = ~ -, starting with a letter or digit (no /: the key "
        "is a segment of the session's URLs).",
    )
    project: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        description="Project (tenant). A project key may only name its own project; default: "
        "the key's project (admin keys: the configured default project).",
    )
    subject: str | None = Field(
        None, max_length=255, description="What the talk is about (a ticket, a task, a document)."
    )
    kind: str | None = Field(None, max_length=100, description="Session kind, e.g. dev-task.")
    title: str | None = Field(None, max_length=1000)
    phase: Phase | None = Field(
        None,
        description="The conversation's phase (chat, brainstorm, plan, execute, verification, chores, reflection).",
    )
    metadata: JSON | None = Field(None, description="Any JSON object.")
    ttl_seconds: float | None = _ttl_seconds(
        "Lifetime in seconds. Absent: the configured session_expiration; null: the session"
        " never expires."
    )
    get_or_create: bool = Field(False, description="Reuse the live session holding `key`.")

    def fields(self) -> dict[str, Any]:
        """The keyword arguments of `Turnkeeper.create_session` (project set by the caller)."""
        return dict(
            subject=self.subject, kind=self.kind, title=self.title, phase=self.phase,
            metadata=self.metadata, ttl=_ttl(self, self.ttl_seconds),
        )  # fmt: skip


class SessionUpdate(_Request):
    """Fields to change; a field left out is not touched (metadata is replaced as a whole)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"title": "Leak found", "phase": "plan"}]},
    )

    title: str | None = Field(None, max_length=1000)
    phase: Phase | None = Field(
        None,
        description="The conversation's phase (chat, brainstorm, plan, execute, verification, chores, reflection).",
    )
    metadata: JSON | None = None
    ttl_seconds: float | None = _ttl_seconds(
        "New lifetime from now, in seconds; null: never expires."
    )

    def fields(self) -> dict[str, Any]:
        """Only what the client sent, as `Turnkeeper.update_session` keyword arguments."""
        sent = self.model_fields_set
        changes: dict[str, Any] = {
            name: getattr(self, name) for name in ("title", "phase", "metadata") if name in sent
        }
        ttl = _ttl(self, self.ttl_seconds)
        if ttl is not UNSET:
            changes["ttl"] = ttl
        return changes


class ResetRequest(_Request):
    """Reset of a session: clear the history, keep the session."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"keep_system_message": True}]}
    )

    keep_system_message: bool = Field(
        False, description="Keep the first message if it is a system message."
    )


class SessionPublic(_FromDomain):
    """A session: identity, lifecycle and running totals."""

    id: str = Field(description="Server-assigned UUID.")
    key: str | None
    project: str
    subject: str | None
    kind: str | None
    title: str | None
    phase: str | None
    status: SessionStatus = Field(description="active, archived or expired.")
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = Field(description="null: never expires.")
    message_count: int
    last_seq: int = Field(description="Seq of the newest message (0: none yet).")
    stored_tokens: int = Field(description="Tokens of all stored messages, counted at write time.")
    usage_input_tokens: int = Field(description="Prompt tokens the model reported, summed.")
    usage_output_tokens: int = Field(description="Completion tokens the model reported, summed.")
    usage_cache_read_tokens: int = Field(
        0, description="Of the prompt tokens, those the provider's prompt cache served, summed."
    )
    usage_cache_creation_tokens: int = Field(
        0, description="Of the prompt tokens, those written to the provider's prompt cache, summed."
    )
    metadata: JSON
    version: int = Field(description="Bumped by every write.")


class SessionPage(BaseModel):
    """One page of sessions, most recently updated first."""

    items: list[SessionPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: last.")

    @classmethod
    def from_domain(cls, page: Page[Session]) -> SessionPage:
        return cls(
            items=[SessionPublic.from_domain(s) for s in page.items], next_cursor=page.next_cursor
        )


# -- messages -------------------------------------------------------------------------------


class UsageModel(BaseModel):
    """Tokens the model reported for producing a message; of the input, what the provider's
    prompt cache served (`cache_read_input_tokens`) and took (`cache_creation_input_tokens`)."""

    input_tokens: int = Field(0, ge=0, le=MAX_WHOLE)
    output_tokens: int = Field(0, ge=0, le=MAX_WHOLE)
    cache_read_input_tokens: int = Field(
        0, ge=0, le=MAX_WHOLE, description="Input tokens the provider's prompt cache served."
    )
    cache_creation_input_tokens: int = Field(
        0, ge=0, le=MAX_WHOLE, description="Input tokens written to the provider's prompt cache."
    )


class MessageCreate(_Request):
    """A message to append. Appending an `id` that is already stored returns the stored one."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"role": "user", "content": "Investigate the leak", "author": "ana", "id": "m-1"}
            ]
        },
    )

    role: Role
    content: str = Field("", description="The text (may be empty for assistant tool calls).")
    author: str | None = Field(None, max_length=200, description="Agent or person who said it.")
    internal: bool = Field(False, description="Kept for audit, hidden from user-facing views.")
    id: str | None = Field(
        None, pattern=NAME_PATTERN, description="Client message id (idempotency)."
    )
    metadata: JSON | None = None
    usage: UsageModel | None = None
    tool_calls: list[JSON] | None = Field(None, description="OpenAI-style tool calls.")
    tool_call_id: str | None = Field(None, description="The call a tool message answers.")

    def to_domain(self) -> NewMessage:
        usage = None if self.usage is None else Usage(**self.usage.model_dump())
        return NewMessage(
            role=self.role, content=self.content, author=self.author, internal=self.internal,
            id=self.id, metadata=self.metadata, usage=usage,
            tool_calls=None if self.tool_calls is None else list(self.tool_calls),
            tool_call_id=self.tool_call_id,
        )  # fmt: skip


class AppendOne(MessageCreate):
    """One message, optionally guarded by `expected_last_seq` (optimistic concurrency)."""

    expected_last_seq: int | None = Field(
        None, ge=0, le=MAX_WHOLE, description="Fail with 409 unless this is the session's last seq."
    )


class AppendMany(_Request):
    """Several messages, appended atomically (all or none) in order."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "user", "content": "Hi", "id": "m-1"},
                        {"role": "assistant", "content": "Hello!", "id": "m-2"},
                    ]
                }
            ]
        },
    )

    messages: list[MessageCreate] = Field(min_length=1, max_length=1000)
    expected_last_seq: int | None = Field(None, ge=0, le=MAX_WHOLE)


class MessagePublic(_FromDomain):
    """A stored message."""

    id: str
    session_id: str
    seq: int = Field(description="Gapless position in the session, from 1.")
    role: Role
    content: str
    created_at: datetime
    tokens: int = Field(description="Tokens, counted once at write time (chat overhead included).")
    author: str | None
    internal: bool
    usage: UsageModel | None
    tool_calls: list[JSON] | None
    tool_call_id: str | None
    metadata: JSON


class MessagePage(BaseModel):
    """A page of stored messages. When the page is full, `next_from_seq` (ascending) or
    `next_to_seq` (newest first) continues it."""

    items: list[MessagePublic]
    next_from_seq: int | None = None
    next_to_seq: int | None = None


# -- context and statistics -----------------------------------------------------------------

WindowFormat = Literal["openai", "anthropic", "turnkeeper"]


class ContextReportPublic(BaseModel):
    """What a context build did (the numbers of the `conversation_context_loaded` event)."""

    strategy: StrategyName
    session_id: str
    messages_in_store: int
    messages_loaded: int
    messages_included: int
    messages_dropped: int
    messages_summarized: int
    tokens_used: int = Field(description="Tokens of the window, reply priming included.")
    budget: int
    encoding: str
    truncated: bool = Field(description="True when anything stored was left out or summarized.")
    markers: list[str]
    dropped_seqs: list[SeqRun] = Field(
        description="Every dropped message, as runs of seqs `[first, last]` (inclusive): "
        "they add up to `messages_dropped`, older messages the build never read included."
    )
    summarized_seqs: list[SeqRun] = Field(
        description="Every summarized message, as runs of seqs (`messages_summarized` of them)."
    )
    loaded_seqs: list[SeqRun] = Field(
        description="The messages the build read, as runs of seqs (`messages_loaded` of them)."
    )
    cut_seq: int | None = Field(
        None,
        description="The session's cut point the window is held at: stored messages before it "
        "are left out, the head aside (0: none; null: the strategy holds none).",
    )

    @classmethod
    def from_domain(cls, report: ContextReport) -> ContextReportPublic:
        return cls(
            strategy=report.strategy, session_id=report.session_id,
            messages_in_store=report.messages_in_store, messages_loaded=report.messages_loaded,
            messages_included=report.messages_included, messages_dropped=report.messages_dropped,
            messages_summarized=report.messages_summarized, tokens_used=report.tokens_used,
            budget=report.budget, encoding=report.encoding, truncated=report.truncated,
            markers=list(report.markers), dropped_seqs=seq_runs(report.dropped_seqs),
            summarized_seqs=seq_runs(report.summarized_seqs),
            loaded_seqs=seq_runs(report.loaded_seqs), cut_seq=report.cut_seq,
        )  # fmt: skip


class ContextResponse(BaseModel):
    """The window a model would see for the next turn, in the requested format."""

    format: WindowFormat
    system: str | None = Field(None, description="Anthropic format only: the system text.")
    messages: list[JSON] = Field(description="The window's messages in the requested format.")
    report: ContextReportPublic


class SessionStatsPublic(_FromDomain):
    """Per-session statistics (user-facing vs internal messages)."""

    session_id: str
    message_count: int
    user_facing_messages: int
    internal_messages: int
    messages_by_role: dict[str, int]
    stored_tokens: int
    usage_input_tokens: int
    usage_output_tokens: int
    first_message_at: datetime | None
    last_message_at: datetime | None
    execution_ms: int = Field(0, description="Time agents reported spending on their turns.")
    usage_cache_read_tokens: int = Field(
        0, description="Of the input, tokens the upstream served from its prompt cache, summed."
    )
    usage_cache_creation_tokens: int = Field(
        0, description="Of the input, tokens the upstream wrote to its prompt cache, summed."
    )


class ProjectStatsPublic(_FromDomain):
    """Per-project totals over all its sessions, whatever their status."""

    project: str
    sessions_by_status: dict[str, int]
    message_count: int
    stored_tokens: int
    usage_input_tokens: int
    usage_output_tokens: int
    usage_cache_read_tokens: int = Field(
        0, description="Of the input, tokens the upstream served from its prompt cache, summed."
    )
    usage_cache_creation_tokens: int = Field(
        0, description="Of the input, tokens the upstream wrote to its prompt cache, summed."
    )


# -- the chat turn --------------------------------------------------------------------------


class ChatRequest(_Request):
    """One user turn to answer with the configured upstream model."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"content": "What did we find so far?", "id": "turn-7", "create": True},
                {"content": "Summarize", "stream": True, "strategy": "truncate"},
            ]
        },
    )

    content: str = Field(min_length=1, description="The user's message.")
    id: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        description="Client message id: a retry with it stores nothing twice.",
    )
    author: str | None = Field(None, max_length=200)
    metadata: JSON | None = None
    create: bool = Field(False, description="Create the session if the key names none.")
    stream: bool = Field(False, description="Answer as server-sent events.")
    strategy: StrategyName | None = None
    budget_tokens: int | None = Field(
        None,
        gt=0,
        le=MAX_WHOLE,
        description="Token budget of the context window sent to the "
        "model (default: the configured one). Not the reply's limit: see max_output_tokens.",
    )
    max_tokens: int | None = Field(
        None,
        gt=0,
        le=MAX_WHOLE,
        json_schema_extra={"deprecated": True},  # in the schema only: reading it must not warn
        description="Old name of budget_tokens (the window budget, not the reply's limit); "
        "still accepted.",
    )
    reserved_tokens: int | None = Field(None, ge=0, le=MAX_WHOLE)
    keep_recent: int | None = Field(None, gt=0, le=MAX_WHOLE)
    model: str | None = Field(None, description="Upstream model (default: llm_model).")
    temperature: float | None = Field(None, ge=0, le=2)
    max_output_tokens: int | None = Field(
        None,
        gt=0,
        le=MAX_WHOLE,
        description="The reply's length limit, sent to the model as its max_tokens.",
    )

    def to_message(self) -> NewMessage:
        return NewMessage(
            role=Role.USER, content=self.content, id=self.id, author=self.author,
            metadata=self.metadata,
        )  # fmt: skip

    def options(self) -> TurnOptions:
        return TurnOptions(
            strategy=self.strategy, budget_tokens=window_budget(self.budget_tokens, self.max_tokens),
            reserved_tokens=self.reserved_tokens, keep_recent=self.keep_recent, model=self.model,
        )  # fmt: skip

    def upstream_fields(self) -> dict[str, Any]:
        """Request fields passed on to the upstream model as they are."""
        fields: dict[str, Any] = {
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
            # ask for the usage chunk, so a streamed reply is stored with its usage too
            "stream_options": {"include_usage": True} if self.stream else None,
        }
        return {name: value for name, value in fields.items() if value is not None}


class ChatResponse(BaseModel):
    """The answered turn: the stored user message, the stored reply, and the window report."""

    session: SessionPublic
    created: bool = Field(description="True when this turn created the session.")
    message: MessagePublic = Field(description="The user's message as stored.")
    reply: MessagePublic = Field(description="The model's reply as stored (with its usage).")
    replayed: bool = Field(description="True when the turn was already answered (a retry).")
    context: ContextReportPublic | None = Field(description="null when replayed.")
    trace: TracePublic | None = Field(
        None, description="What the model saw for this reply (null when replayed)."
    )


class ProxyRequest(BaseModel):
    """An OpenAI chat completion request, passed on as sent (unknown fields included). Name a
    session with the `X-Turnkeeper-Session` header or `metadata.session_id` to give it memory."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "model": "gpt-4o-mini",
                    "messages": [{"role": "user", "content": "What did I ask you before?"}],
                    "metadata": {"session_id": "support-42"},
                }
            ]
        },
    )

    model: str = Field(min_length=1)
    messages: list[JSON] = Field(min_length=1)
    stream: bool = False
    metadata: dict[str, str] | None = Field(
        None, description="`session_id` names the session (removed before forwarding)."
    )

    def session_and_body(self, header: str | None) -> tuple[str | None, dict[str, Any]]:
        """The session the request names (header first) and the body to forward without it."""
        body = self.model_dump(exclude_unset=True)
        metadata = dict(self.metadata or {})
        ref = metadata.pop("session_id", None)
        if metadata:
            body["metadata"] = metadata
        else:
            body.pop("metadata", None)
        return header or ref, body


class Problem(BaseModel):
    """An RFC 9457 problem (served as application/problem+json)."""

    type: str = Field(description="A URI naming the kind of problem.")
    title: str
    status: int
    detail: str
    instance: str = Field(description="The request path.")
    request_id: str | None = None
    errors: list[dict[str, str]] | None = Field(
        None, description="422 only: one {field, problem} per bad field."
    )


# -- multi-agent conversations, summaries, the conversation context object ---------------------


class PhaseChange(_Request):
    """Move the session to a phase; the transition is stored as a system event."""

    phase: Phase
    by: str | None = Field(None, pattern=NAME_PATTERN, description="Agent making the change.")
    summary: str | None = Field(None, description="Hand-off summary for the next phase.")


class HandoffCreate(_Request):
    """One agent hands the work to another; stored as a system event."""

    from_agent: str = Field(pattern=NAME_PATTERN)
    to_agent: str = Field(pattern=NAME_PATTERN)
    summary: str | None = Field(None, description="What the receiver needs to know.")


class AgentStateUpdatePublic(_Request):
    """Set an agent's position and/or provider session id (omitted fields are kept)."""

    last_processed_seq: int | None = Field(None, ge=0, le=MAX_WHOLE)
    provider_session_id: str | None = Field(None, max_length=255)


class AgentResponse(_Request):
    """An agent answered: its reply (stored, authored by it), then its state moves to the end
    of the history."""

    reply: str | None = Field(None, description="The agent's answer, if it is to be stored.")
    provider_session_id: str | None = Field(None, max_length=255)
    execution_ms: int | None = Field(None, ge=0, le=MAX_WHOLE, description="Time the turn took.")


class AgentStatePublic(_FromDomain):
    """Where an agent stands in a multi-agent session."""

    agent: str
    last_processed_seq: int
    provider_session_id: str | None
    execution_ms: int
    turns: int
    updated_at: datetime | None


class SummaryPublic(_FromDomain):
    """A stored summary checkpoint."""

    covers_to_seq: int = Field(description="It summarizes the messages up to this seq.")
    text: str
    tokens: int
    method: str
    created_at: datetime


class RecentMessagePublic(BaseModel):
    role: str
    text: str
    timestamp: str = Field(description="ISO 8601; empty when unknown.")


class ConversationContextPublic(BaseModel):
    """The conversation context object, plus the planner text rendered from it."""

    conversation_id: str
    message_count: int
    is_first_message: bool
    recent_messages: list[RecentMessagePublic]
    referenced_entities: list[str]
    summary: str | None
    planner_context: str

    @classmethod
    def from_domain(cls, context: ConversationContext) -> ConversationContextPublic:
        return cls(**context.as_dict(), planner_context=planner_context(context))


# -- search -----------------------------------------------------------------------------------


class SnippetPartPublic(BaseModel):
    """A piece of a snippet; `match` marks a word the query matched (to highlight)."""

    text: str
    match: bool


class SearchHitPublic(_FromDomain):
    """A message that matched a search, where it lives, and the passage that matched."""

    session_id: str
    session_key: str | None
    session_title: str | None
    project: str
    message_id: str
    seq: int
    role: Role
    author: str | None
    created_at: datetime
    snippet: list[SnippetPartPublic] = Field(
        description="The matching passage in pieces; concatenated, the plain text."
    )
    rank: float = Field(description="Higher is better; compare only within one result.")


class SearchResults(BaseModel):
    """One page of search hits, best first. The next page: the same query with `offset`
    increased by `limit` (a page shorter than `limit` is the last)."""

    query: str
    hits: list[SearchHitPublic]
    limit: int
    offset: int

    @classmethod
    def from_domain(
        cls, query: str, hits: list[SearchHit], *, limit: int, offset: int
    ) -> SearchResults:
        return cls(
            query=query,
            hits=[SearchHitPublic.from_domain(hit) for hit in hits],
            limit=limit,
            offset=offset,
        )
