"""One chat turn against an upstream model: store the new turns, build the window, ask the
model, store the reply. The `/chat` route and the OpenAI-compatible proxy both run this; neither
holds any of the logic.

Order matters, and is chosen so that nothing is lost and nothing is doubled:

1. The new turns (the user's message, or whatever a proxied request adds) are appended first,
   idempotently by id. If the model then fails or times out, what the user said is already in
   the audit trail, and a retry with the same id stores nothing twice.
2. The window is built from the stored history alone, whose newest message is now the new
   turn. The turn is therefore in the window exactly once by construction: it is never also
   passed as a pending message and never appended again (the duplication trap:
   the pending turn appearing twice).
3. The reply is stored with an id derived from the turn's id. A retry of a turn that was already
   answered finds that reply and returns it without calling the model again (`replayed`).
4. The reply's trace (`turnkeeper.traces`: the window exactly as sent) is stored by the same
   append as the reply, in one transaction, so no crash leaves a reply without its trace.

Exactly once, whatever the client: a retry is recognised by the turn's client id, by an
`Idempotency-Key` (the ids of the new turns are derived from it; reused for other messages it
is refused, `IdempotencyKeyReused`), or, when neither is given,
by content: new turns identical to the session's unanswered tail (stored, with no assistant
reply after them) *are* that tail, so a retry stores nothing and is answered like a retry by id.
A client that says it is retrying (`Attempt.retry`, e.g. the `x-stainless-retry-count` header of
the OpenAI SDKs) and repeats the turn just answered gets that answer again.

And the model is asked once per turn, even when the retry comes while the first request is still
waiting for it: the request that asks the model holds the turn (`turnkeeper.attempts`, shared by
every process on the store), and a retry waits for its reply (or its error) instead of asking
again. A streamed answer is read from the model by a thread of its own, so it is stored even
when its client stops reading (a client that timed out and retries gets it).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import hashlib
import queue
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol, TypeVar

from turnkeeper import metrics
from turnkeeper.attempts import HeldTurn, TurnAttempts
from turnkeeper.context.formats import to_openai
from turnkeeper.errors import (
    Conflict,
    IdempotencyKeyReused,
    InvalidInput,
    SessionErased,
    SessionNotFound,
    UpstreamError,
)
from turnkeeper.llm import ChatStream, LLMClient, Reply, delta_text
from turnkeeper.service import SessionRef, Turnkeeper, utcnow
from turnkeeper.service.aio import AsyncTurnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.tokens import counter_for
from turnkeeper.traces import TurnTrace, encode
from turnkeeper.types import (
    ContextMessage,
    ContextWindow,
    Message,
    MessageQuery,
    NewMessage,
    Role,
    Session,
    SessionStatus,
    StrategyName,
    Usage,
)
from turnkeeper.validation import check_message, window_budget

T = TypeVar("T")

StoredHook = Callable[[Session, bool, Sequence[Message]], None]
"""Told `(session, created, messages newly stored)` after each write of a turn (the writes are
counted in `turnkeeper.metrics` either way)."""


def _nothing(session: Session, created: bool, messages: Sequence[Message]) -> None:
    """The default hook."""


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """How the window of a turn is built (None: the configured default). `budget_tokens` is
    the window's budget; `max_tokens` its old name (deprecated: the model's `max_tokens` is the
    reply's limit)."""

    strategy: StrategyName | str | None = None
    budget_tokens: int | None = None
    reserved_tokens: int | None = None
    keep_recent: int | None = None
    model: str | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens is not None:  # the old name: one budget, under the new one
            budget = window_budget(self.budget_tokens, self.max_tokens, warn_as="TurnOptions")
            object.__setattr__(self, "budget_tokens", budget)
            object.__setattr__(self, "max_tokens", None)


@dataclass(frozen=True, slots=True)
class Attempt:
    """How this request for a turn arrived: the client's `Idempotency-Key`, whether the client
    says it is a retry, the request id (kept in the trace), and which door it came through
    (`chat`, `proxy`, `ui`, `cli`, `library`)."""

    idempotency_key: str | None = None
    retry: bool = False
    request_id: str | None = None
    source: str = "library"


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    """A turn whose new messages are stored and whose upstream request is ready.

    `replay` is the reply already stored for this turn when it is a retry of an answered one:
    then there is nothing to ask the model. Otherwise `held` is this request's hold on the turn
    (`turnkeeper.attempts`): `complete`, `stream` or `finish` ends it with the outcome.
    """

    session: Session
    created: bool
    turns: tuple[Message, ...]
    window: ContextWindow | None
    request: dict[str, Any]
    reply_id: str
    replay: Message | None = None
    attempt: Attempt = Attempt()
    model: str = ""
    held: HeldTurn | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    """A finished turn: the stored reply, and the upstream's answer as it sent it (rebuilt
    from the stored reply when the turn was replayed)."""

    prepared: PreparedTurn
    reply: Message
    completion: dict[str, Any]
    trace: TurnTrace | None = None

    @property
    def replayed(self) -> bool:
        return self.prepared.replay is not None

    @property
    def content(self) -> str:
        """The reply's text."""
        return self.reply.content


def with_instructions(
    prepared: PreparedTurn,
    instructions: str | None,
    render: Callable[[ContextWindow], Mapping[str, Any]] | None = None,
) -> PreparedTurn:
    """`prepared` with `instructions` as a system message in front of its window, sent and
    traced with it but not stored (the Responses API's `instructions`: they hold for this
    turn only), the request rendered again by `render` (the turns' `Wire.render`; default:
    chat completions). Their tokens come on top of the window's budget, as the reply's do."""
    window = prepared.window
    if not instructions or window is None:
        return prepared
    tokens = counter_for(window.report.encoding).count_message("system", instructions)
    entry = ContextMessage(Role.SYSTEM, instructions, tokens, kind="instructions")
    report = dataclasses.replace(window.report, tokens_used=window.report.tokens_used + tokens)
    framed = ContextWindow((entry, *window.messages), report)
    request = {**prepared.request, **(render or OPENAI_WIRE.render)(framed)}
    return dataclasses.replace(prepared, window=framed, request=request)


def reply_id_for(turn_id: str) -> str:
    """The id the reply to a turn is stored under (ids are limited to 255 characters)."""
    candidate = f"{turn_id}.reply"
    if len(candidate) <= 255:
        return candidate
    return f"reply.{hashlib.sha256(turn_id.encode()).hexdigest()}"


def is_turn_reply(message_id: str) -> bool:
    """Whether a stored message is a reply `ChatTurns` produced (so it may have a trace)."""
    return message_id.endswith(".reply") or message_id.startswith("reply.")


def idempotent_ids(session_id: str, key: str, count: int) -> list[str]:
    """The message ids an `Idempotency-Key` stands for: one per new message, derived from the
    session and the key, so the same key sent to two sessions names different messages."""
    digest = hashlib.sha256(f"{session_id}\n{key}".encode()).hexdigest()[:40]
    return [f"idem-{digest}" if count == 1 else f"idem-{digest}.{n}" for n in range(count)]


def with_idempotent_ids(
    store: Store, session: Session, new: Sequence[NewMessage], key: str | None
) -> list[NewMessage]:
    """`new`, each message without a client id given the one `key` stands for (see
    `idempotent_ids`); unchanged without a key.

    A key names one request's messages: reused for other messages (other content, role,
    author, metadata…, or another number of them) it raises `IdempotencyKeyReused` before
    anything is stored, found by looking up the ids the key stands for. Only what the request
    would store is compared (for a chat turn, not its model or sampling options). Two requests
    racing with one key and different messages are not told apart (each stores what the other
    lacks); a client that reuses a key only for retries never meets that race.
    """
    if key is None:
        return list(new)
    derived = idempotent_ids(session.id, key, len(new))
    keyed = {mine: message for message, mine in zip(new, derived, strict=True) if not message.id}
    family = idempotent_ids(session.id, key, 1)[0]  # the key's 1-message id; n-message: .0 …
    probes = {*derived, family, f"{family}.0", f"{family}.{len(new)}"}
    found = list(store.find_messages(session.id, sorted(probes)).values())
    if found and (
        {message.id for message in found} != set(keyed)
        or not all(_same_message(stored, keyed[stored.id]) for stored in found)
    ):
        raise IdempotencyKeyReused()
    return [
        message if message.id else dataclasses.replace(message, id=mine)
        for message, mine in zip(new, derived, strict=True)
    ]


def _same_message(stored: Message, new: NewMessage) -> bool:
    """Whether `new` is what `stored` was stored from (the fields a request sets)."""
    return (
        _same_turn(stored, new)
        and stored.author == new.author
        and stored.internal == new.internal
        and list(stored.tool_calls or []) == list(new.tool_calls or [])
        and dict(stored.metadata) == dict(new.metadata or {})
    )


def _same_turn(stored: Message, new: NewMessage) -> bool:
    """A retried turn says the same thing in the same role (ids and timestamps differ)."""
    return (
        stored.role == new.role  # a role that is no Role is not the same (and is refused later)
        and stored.content == new.content
        and stored.tool_call_id == new.tool_call_id
    )


class Gatherer(Protocol):
    """Folds a streamed answer's chunks, as they come, into the reply they make."""

    def add_chunk(self, chunk: Mapping[str, Any]) -> object: ...

    def gathered(self) -> Reply: ...


@dataclass(frozen=True, slots=True)
class Wire:
    """The provider API a `ChatTurns` speaks upstream: the request fields a window becomes
    (`render`), the reply a whole answer or a stream makes (`reply`, `gatherer`), and a stored
    reply answered again to a retry, whole or as a stream (`answer`, `answer_stream`).
    `OPENAI_WIRE`, the default, speaks chat completions; `turnkeeper.anthropic_turns` has
    Anthropic's Messages API. The turn itself (store, hold, build, ask, store) is the same."""

    render: Callable[[ContextWindow], Mapping[str, Any]]
    reply: Callable[[Mapping[str, Any]], Reply]
    gatherer: Callable[[], Gatherer]
    answer: Callable[[Message], dict[str, Any]]
    answer_stream: Callable[[Message], Iterator[dict[str, Any]]]
    cache_key: str | None = None
    """The request field that routes a request to the provider's prompt cache (OpenAI's
    `prompt_cache_key`), set to the session id unless the client set its own: every turn of a
    session then reaches the cache holding its prefix. None: the provider has no such field."""


class ChatTurns:
    """Runs chat turns over a `Turnkeeper` and an upstream model: the call-store-trace loop.

    ```python
    with turnkeeper.open() as tk, ChatTurns.open(tk) as chat:
        result = chat.turn("support-42", "Where is my order?", create=True)
        print(result.content, result.trace.tokens_sent)
    ```
    `turn` does it all; `prepare` + `complete` / `stream` are the steps, for callers that
    stream the answer; `prepare` + `finish`, for callers that send the request themselves
    (until `finish`, a retry of the turn waits for them). `AsyncChatTurns` is the same for
    asyncio.
    """

    def __init__(
        self,
        tk: Turnkeeper,
        llm: LLMClient,
        *,
        on_stored: StoredHook = _nothing,
        wire: Wire | None = None,
    ) -> None:
        self.tk = tk
        self.llm = llm
        self.wire = wire or OPENAI_WIRE
        self.attempts = TurnAttempts(tk.store, tk.settings, tk.now)
        self._on_stored = on_stored

    def _stored(self, session: Session, created: bool, messages: Sequence[Message]) -> None:
        """Count a turn's writes (`turnkeeper.metrics`), then tell the caller's hook."""
        metrics.stored(session, created, messages)
        self._on_stored(session, created, messages)

    @classmethod
    def open(cls, tk: Turnkeeper) -> ChatTurns:
        """Chat turns against the upstream `tk.settings` configures (`llm_base_url`, …)."""
        return cls(tk, LLMClient.from_settings(tk.settings))

    def __enter__(self) -> ChatTurns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the upstream client (the `Turnkeeper` stays open: it is the caller's)."""
        self.llm.close()

    def turn(
        self,
        session: SessionRef,
        content: str,
        *,
        id: str | None = None,
        author: str | None = None,
        create: bool = False,
        project: str | None = None,
        options: TurnOptions = TurnOptions(),
        request: Mapping[str, Any] | None = None,
        attempt: Attempt = Attempt(),
    ) -> TurnResult:
        """One user turn, answered: store it, build the window, ask the model, store the
        reply and its trace. `create` makes a session for a key that names none; `request`
        adds upstream fields (temperature, tools, …). A retry (same `id`, same
        `attempt.idempotency_key`, or the same text while unanswered) stores nothing twice."""
        found, created = (
            (session, False)
            if isinstance(session, Session)
            else self.session_for(session, project=project, create=create)
        )
        message = NewMessage(role=Role.USER, content=content, id=id, author=author)
        prepared = self.prepare(
            found, [message], created=created, options=options, request=request, attempt=attempt
        )
        return self.complete(prepared)

    def model_for(self, options: TurnOptions) -> str:
        """The model a `/chat` turn asks for: the request's, else `llm_model`, else `model`."""
        settings = self.tk.settings
        return options.model or settings.llm_model or settings.model

    def session_for(self, ref: str, *, project: str | None, create: bool) -> tuple[Session, bool]:
        """The session `ref` names (id or key). With `create`, a key that names no live session
        gets a new one. Returns the session and whether it was created."""
        try:
            session = self.tk.get_session(ref, project=project)
        except SessionErased:
            raise  # an erased id never comes back, not even as a new session's key
        except SessionNotFound:
            if not create:
                raise
            return self.tk.get_or_create_session(ref, project=project)
        if create and session.key == ref and session.status is not SessionStatus.ACTIVE:
            return self.tk.get_or_create_session(ref, project=project)
        return session, False

    def prepare(
        self,
        session: Session,
        new: Sequence[NewMessage],
        *,
        created: bool = False,
        options: TurnOptions = TurnOptions(),
        request: Mapping[str, Any] | None = None,
        attempt: Attempt = Attempt(),
        render: Callable[[ContextWindow], Mapping[str, Any]] | None = None,
    ) -> PreparedTurn:
        """Store `new` (the last one is the turn being answered) and build the upstream
        request: `request`'s fields (model, temperature, tools, …) with the window as its
        `messages` (as `render` puts it; by default the `Wire`'s way). `options.model` also
        picks the tokenizer and context window."""
        if not new:
            raise InvalidInput("messages", "a turn needs at least one new message")
        with_ids, answered = self._identified(session, new, attempt)
        stored = self.tk.append_many(session, with_ids)
        fresh = [message for message in stored if message.seq > session.last_seq]
        self._stored(session, created, fresh)
        turn = stored[-1]
        reply_id = reply_id_for(turn.id)
        held = answered or self.attempts.hold_or_wait(
            session.id, turn.id, reply_id, answered_maybe=not fresh
        )
        if not isinstance(held, HeldTurn):  # answered: by a turn before, or while it waited
            return PreparedTurn(session, created, tuple(stored), None, {}, reply_id, held, attempt)
        try:
            model = self.model_for(options)
            window = self.tk.context(
                session,
                strategy=options.strategy,
                budget_tokens=options.budget_tokens,
                reserved_tokens=options.reserved_tokens,
                keep_recent=options.keep_recent,
                model=model,
            )
        except BaseException as exc:
            self.attempts.end(held, exc)
            raise
        body = {"model": model, **(request or {}), **(render or self.wire.render)(window)}
        if self.wire.cache_key and body.get(self.wire.cache_key) is None:
            body[self.wire.cache_key] = session.id
        return PreparedTurn(
            session, created, tuple(stored), window, body, reply_id, None, attempt,
            str(body.get("model") or model), held,
        )  # fmt: skip

    def _identified(
        self, session: Session, new: Sequence[NewMessage], attempt: Attempt
    ) -> tuple[list[NewMessage], Message | None]:
        """`new` with ids: the client's, those its `Idempotency-Key` stands for, or, for a
        retry recognised by content, the stored messages' own. Also returns the stored reply
        when the client says it retries a turn that was answered meanwhile."""
        if attempt.idempotency_key is not None:
            return with_idempotent_ids(self.tk.store, session, new, attempt.idempotency_key), None
        if all(message.id is None for message in new) and session.last_seq > 0:
            tail = self.tk.store.read_messages(
                session.id,
                MessageQuery(from_seq=max(1, session.last_seq - len(new)), limit=len(new) + 1),
            )
            answered = None
            if attempt.retry and tail and tail[-1].role is Role.ASSISTANT:
                answered, tail = tail[-1], tail[:-1]
            repeated = tail[-len(new) :]
            if len(repeated) == len(new) and all(
                stored.role is not Role.ASSISTANT and _same_turn(stored, message)
                for stored, message in zip(repeated, new, strict=True)
            ):
                return [
                    dataclasses.replace(message, id=stored.id)
                    for stored, message in zip(repeated, new, strict=True)
                ], answered
        return [
            message if message.id else dataclasses.replace(message, id=str(uuid.uuid4()))
            for message in new
        ], None

    def complete(self, prepared: PreparedTurn) -> TurnResult:
        """Ask the model (unless the turn was already answered) and store its reply."""
        if prepared.replay is not None:
            completion = self.wire.answer(prepared.replay)
            return TurnResult(prepared, prepared.replay, completion)
        started = time.perf_counter()
        completion = self._ask(prepared, self.llm.complete)
        reply, trace = self.finish(prepared, self.wire.reply(completion), started=started)
        return TurnResult(prepared, reply, completion, trace)

    def stream(self, prepared: PreparedTurn) -> TurnStream:
        """Open a streaming answer (raises here if the model refuses or cannot be reached)."""
        if prepared.replay is not None:
            return TurnStream(self, prepared, None, 0.0)
        started = time.perf_counter()
        return TurnStream(self, prepared, self._ask(prepared, self.llm.stream), started)

    def _ask(self, prepared: PreparedTurn, ask: Callable[[Mapping[str, Any]], T]) -> T:
        """`ask(prepared.request)`; if the model refuses or cannot be reached, the turn is let go
        with that error first (the requests waiting for it get it)."""
        try:
            return ask(prepared.request)
        except BaseException as exc:
            self.attempts.end(prepared.held, exc)
            raise

    def finish(
        self, prepared: PreparedTurn, reply: Reply, *, started: float, stream: bool = False
    ) -> tuple[Message, TurnTrace | None]:
        """Store the model's reply (with its usage) as the session's next assistant message,
        and its trace, and let the turn go (the requests waiting for it get this reply).
        `started` is when the model was asked (`time.perf_counter()`)."""
        try:
            stored, trace = self._store_reply(prepared, reply, started, stream)
        except BaseException as exc:
            self.attempts.end(prepared.held, exc)
            raise
        self.attempts.end(prepared.held)
        return stored, trace

    def _store_reply(
        self, prepared: PreparedTurn, reply: Reply, started: float, stream: bool
    ) -> tuple[Message, TurnTrace | None]:
        if not reply.content.strip() and not reply.tool_calls:
            raise UpstreamError("the upstream model's reply was empty", status=HTTPStatus.OK)
        message = NewMessage(
            role=Role.ASSISTANT,
            content=reply.content,
            id=prepared.reply_id,
            usage=reply.usage,
            tool_calls=list[Mapping[str, Any]](reply.tool_calls) or None,
            metadata={"model": reply.model} if reply.model else None,
        )
        try:
            settings = self.tk.settings
            check_message(
                message,
                max_bytes=settings.max_message_bytes,
                max_json_bytes=settings.max_json_bytes,
            )
        except InvalidInput as exc:  # the model's answer broke a limit, not the client's request
            raise UpstreamError(
                f"the upstream model's reply cannot be stored: {exc}", status=HTTPStatus.OK
            ) from exc
        latency_ms = round((time.perf_counter() - started) * 1000)
        if prepared.window is None:
            (stored,) = self.tk.append_many(prepared.session, [message])
            self._stored(prepared.session, False, [stored])
            return stored, None
        trace = TurnTrace.of(
            prepared.window, seq=0, turn_seq=prepared.turns[-1].seq,
            source=prepared.attempt.source, model=prepared.model, usage=reply.usage,
            latency_ms=latency_ms, created_at=utcnow(), request_id=prepared.attempt.request_id,
            stream=stream,
        )  # fmt: skip
        # One append stores the reply and its trace.
        try:
            stored = self.tk.append_traced(prepared.session, message, encode(self.tk.store, trace))
        except Conflict:
            # The reply id is taken: an attempt that took this turn over (this one's lease had
            # lapsed: it hung) stored its reply first. That reply and its trace stand.
            earlier = self.tk.store.find_messages(prepared.session.id, [prepared.reply_id])
            if prepared.reply_id not in earlier:
                raise
            return earlier[prepared.reply_id], None
        self._stored(prepared.session, False, [stored])
        return stored, dataclasses.replace(trace, seq=stored.seq)


_ENDED = object()
"""Put on a `TurnStream`'s queue once the answer has ended, well or not."""


class TurnStream:
    """A streaming answer: iterate for the upstream's chunks as it sends them; once the
    iteration ends, `reply` is the stored reply. A failure part-way raises from the iteration
    (the new turns stay stored, the partial reply is not).

    The upstream is read by a thread of its own, which stores the reply when it ends; the
    iteration relays what it reads. So a turn whose client stops reading (its connection
    closed: an SDK that timed out and retries) is still answered to its end and stored once,
    and the retry waiting for it (`turnkeeper.attempts`) gets that reply. `close` stops the
    relaying only; `cancel` stops the answer (nothing of it is stored).
    """

    def __init__(
        self, turns: ChatTurns, prepared: PreparedTurn, upstream: ChatStream | None, started: float
    ) -> None:
        self.prepared = prepared
        self.reply: Message | None = prepared.replay
        self._wire = turns.wire
        self.trace: TurnTrace | None = None
        self._upstream = upstream
        self._chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._failure: BaseException | None = None
        self._cancelled = False
        if upstream is not None:
            # in the request's context: its log fields and trace span carry over to the writes
            context = contextvars.copy_context()
            reader = threading.Thread(
                target=context.run, args=(self._answer, turns, upstream, started), daemon=True,
                name="turnkeeper-turn-stream",
            )  # fmt: skip
            reader.start()

    def _answer(self, turns: ChatTurns, upstream: ChatStream, started: float) -> None:
        """The reader thread: the whole answer, relayed and stored; a failure is kept for the
        iteration to raise."""
        try:
            self._read_and_store(turns, upstream, started)
        except Exception as exc:  # the model failed part-way, or storing the reply did
            self._failure = exc
        finally:
            self._chunks.put(_ENDED)

    def _read_and_store(self, turns: ChatTurns, upstream: ChatStream, started: float) -> None:
        gathered = turns.wire.gatherer()
        try:
            for chunk in upstream:
                if self._cancelled:
                    break
                gathered.add_chunk(chunk)
                self._chunks.put(chunk)
        except Exception as exc:
            if not self._cancelled:  # (a cancelled stream fails as it is cut off)
                turns.attempts.end(self.prepared.held, exc)
                raise
        if self._cancelled:
            turns.attempts.end(self.prepared.held)  # no outcome: the turn is free again
            return
        self.reply, self.trace = turns.finish(
            self.prepared, gathered.gathered(), started=started, stream=True
        )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._upstream is None:
            if self.reply is not None:  # a replayed turn: the stored reply, as a stream
                yield from self._wire.answer_stream(self.reply)
            return
        while (chunk := self._chunks.get()) is not _ENDED:
            yield chunk
        if self._failure is not None:
            raise self._failure

    def close(self) -> None:
        """Stop relaying: the answer is still read to its end and stored."""

    def cancel(self) -> None:
        """Stop the answer: the upstream is closed, nothing of the reply is stored, and the
        turn is free for a retry."""
        if self._upstream is not None:
            self._cancelled = True
            self._upstream.close()


class AsyncChatTurns:
    """`ChatTurns` for asyncio: the same turns, with the blocking store and upstream calls run
    in worker threads so the event loop never waits on them.

    ```python
    async with AsyncChatTurns.open(tk) as chat:
        result = await chat.turn("support-42", "Where is my order?", create=True)
        async for text in chat.stream_turn("support-42", "And the invoice?"):
            print(text, end="")
    ```
    """

    def __init__(self, turns: ChatTurns) -> None:
        self.sync = turns

    @classmethod
    def open(cls, tk: Turnkeeper | AsyncTurnkeeper) -> AsyncChatTurns:
        """Chat turns against the upstream `tk.settings` configures, over a `Turnkeeper` or
        the `Turnkeeper` an `AsyncTurnkeeper` runs. A turn waits seconds on the model, so it
        runs on asyncio's default threads, never on the `AsyncTurnkeeper`'s own workers (one
        slow model would hold SQLite's only writer thread)."""
        return cls(ChatTurns.open(tk.sync if isinstance(tk, AsyncTurnkeeper) else tk))

    async def __aenter__(self) -> AsyncChatTurns:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def turn(self, session: SessionRef, content: str, **options: Any) -> TurnResult:
        """`ChatTurns.turn`, awaited."""
        return await asyncio.to_thread(lambda: self.sync.turn(session, content, **options))

    async def stream_turn(
        self,
        session: SessionRef,
        content: str,
        *,
        id: str | None = None,
        create: bool = False,
        project: str | None = None,
        options: TurnOptions = TurnOptions(),
        attempt: Attempt = Attempt(),
    ) -> AsyncIterator[str]:
        """One user turn, its reply's text yielded as the model sends it; the reply and its
        trace are stored once the stream ends (a replayed turn yields the stored reply)."""

        def open_stream() -> TurnStream:
            found, created = self.sync.session_for(
                session if isinstance(session, str) else session.id, project=project, create=create
            )
            prepared = self.sync.prepare(
                found, [NewMessage(role=Role.USER, content=content, id=id)], created=created,
                options=options, request={"stream_options": {"include_usage": True}},
                attempt=attempt,
            )  # fmt: skip
            return self.sync.stream(prepared)

        stream = await asyncio.to_thread(open_stream)
        if stream.reply is not None:
            yield stream.reply.content
            return
        chunks = iter(stream)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                if text := delta_text(chunk):
                    yield text
        finally:
            await asyncio.to_thread(stream.close)


def completion_from_message(reply: Message) -> dict[str, Any]:
    """A stored reply in the shape of an OpenAI chat completion (for replayed turns)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [dict(call) for call in reply.tool_calls]
    usage = reply.usage
    return {
        "id": f"chatcmpl-{reply.id}",
        "object": "chat.completion",
        "created": int(reply.created_at.timestamp()),
        "model": str(reply.metadata.get("model", "")),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": None if usage is None else _openai_usage(usage),
    }


def _openai_usage(usage: Usage) -> dict[str, Any]:
    """A stored reply's usage as OpenAI counts it, with what its prompt cache served."""
    counted: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.cache_read_input_tokens:
        counted["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_input_tokens}
    return counted


def chunks_from_message(reply: Message) -> Iterator[dict[str, Any]]:
    """A stored reply as the chunks of an OpenAI stream (for replayed streamed turns): the
    whole message in one delta, then the finish reason and the usage."""
    whole = completion_from_message(reply)
    choice = whole["choices"][0]
    delta = dict(choice["message"])
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": n, **call} for n, call in enumerate(delta["tool_calls"])]
    head = {key: whole[key] for key in ("id", "created", "model")}
    chunk = {**head, "object": "chat.completion.chunk"}
    yield {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {
        **chunk,
        "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
    }
    if whole["usage"] is not None:
        yield {**chunk, "choices": [], "usage": whole["usage"]}


OPENAI_WIRE = Wire(
    render=lambda window: {"messages": to_openai(window)},
    reply=Reply.from_completion,
    gatherer=Reply,
    answer=completion_from_message,
    answer_stream=chunks_from_message,
    cache_key="prompt_cache_key",
)
"""Chat completions, as OpenAI and every server compatible with it speak them."""


_SYSTEM_ROLES = ("system", "developer")


def new_turns_from_openai(
    messages: Sequence[Mapping[str, Any]], *, session_is_empty: bool
) -> list[NewMessage]:
    """The turns an OpenAI-style request adds to a stored conversation.

    A client may send only its new turn, or (an unchanged program that keeps its own transcript)
    everything it has. The messages after the last assistant message are new: the ones before
    it were answered already, so they are stored already. A system message among the new ones
    is stored only when the session is empty (it becomes the session's system prompt); a client
    that repeats its system prompt on every call would otherwise store it on every call.
    """
    last_answer = max(
        (index for index, message in enumerate(messages) if message.get("role") == "assistant"),
        default=-1,
    )
    new = [
        _from_openai(message)
        for message in messages[last_answer + 1 :]
        if session_is_empty or message.get("role") not in _SYSTEM_ROLES
    ]
    if not new:
        raise InvalidInput("messages", "there is no new turn after the last assistant message")
    return new


def _from_openai(message: Mapping[str, Any]) -> NewMessage:
    role = message.get("role")
    return NewMessage(
        role=Role.SYSTEM if role == "developer" else str(role),
        content=_text_of(message.get("content")),
        author=message.get("name"),
        tool_calls=list(message.get("tool_calls") or []) or None,
        tool_call_id=message.get("tool_call_id"),
    )


def _text_of(content: Any) -> str:
    """OpenAI content is a string or a list of parts; the text parts are what is stored."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content)
