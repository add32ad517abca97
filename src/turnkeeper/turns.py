"""One chat turn against an upstream model: store the new turns, build the window, ask the
model, store the reply. The `/chat` route and the OpenAI-compatible proxy both run this; neither
holds any of the logic.

Order matters, and is chosen so that nothing is lost and nothing is doubled:

1. The new turns (the user's message, or whatever a proxied request adds) are appended first,
   idempotently by id. If the model then fails or times out, what the user said is already in
   the audit trail, and a retry with the same id stores nothing twice.
2. The window is built from the stored history alone, whose newest message is now the new
   turn. The turn is therefore in the window exactly once by construction: it is never also
   passed as a pending message and never appended again (seed 001's duplication trap).
3. The reply is stored with an id derived from the turn's id. A retry of a turn that was already
   answered finds that reply and returns it without calling the model again (`replayed`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from turnkeeper.context.formats import to_openai
from turnkeeper.errors import InvalidInput, SessionNotFound, UpstreamError
from turnkeeper.llm import ChatStream, LLMClient, Reply
from turnkeeper.service import Turnkeeper
from turnkeeper.types import (
    ContextWindow,
    Message,
    NewMessage,
    Role,
    Session,
    SessionStatus,
    StrategyName,
)

StoredHook = Callable[[Session, bool, Sequence[Message]], None]
"""Told `(session, created, messages newly stored)` after each write of a turn (for metrics)."""

_REPLAY_LOOKAHEAD = 20


def _nothing(session: Session, created: bool, messages: Sequence[Message]) -> None:
    """The default hook."""


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """How the window of a turn is built (None: the configured default)."""

    strategy: StrategyName | str | None = None
    max_tokens: int | None = None
    reserved_tokens: int | None = None
    keep_recent: int | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    """A turn whose new messages are stored and whose upstream request is ready.

    `replay` is the reply already stored for this turn when it is a retry of an answered one:
    then there is nothing to ask the model.
    """

    session: Session
    created: bool
    turns: tuple[Message, ...]
    window: ContextWindow | None
    request: dict[str, Any]
    reply_id: str
    replay: Message | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    """A finished turn: the stored reply, and the upstream's answer as it sent it (rebuilt
    from the stored reply when the turn was replayed)."""

    prepared: PreparedTurn
    reply: Message
    completion: dict[str, Any]

    @property
    def replayed(self) -> bool:
        return self.prepared.replay is not None


def reply_id_for(turn_id: str) -> str:
    """The id the reply to a turn is stored under (ids are limited to 255 characters)."""
    candidate = f"{turn_id}.reply"
    if len(candidate) <= 255:
        return candidate
    return f"reply.{hashlib.sha256(turn_id.encode()).hexdigest()}"


class ChatTurns:
    """Runs chat turns over a `Turnkeeper` and an upstream model."""

    def __init__(self, tk: Turnkeeper, llm: LLMClient, *, on_stored: StoredHook = _nothing) -> None:
        self.tk = tk
        self.llm = llm
        self._on_stored = on_stored

    def model_for(self, options: TurnOptions) -> str:
        """The model a `/chat` turn asks for: the request's, else `llm_model`, else `model`."""
        settings = self.tk.settings
        return options.model or settings.llm_model or settings.model

    def session_for(self, ref: str, *, project: str | None, create: bool) -> tuple[Session, bool]:
        """The session `ref` names (id or key). With `create`, a key that names no live session
        gets a new one. Returns the session and whether it was created."""
        try:
            session = self.tk.get_session(ref, project=project)
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
    ) -> PreparedTurn:
        """Store `new` (the last one is the turn being answered) and build the upstream
        request: `request`'s fields (model, temperature, tools, …) with the window as its
        `messages`. `options.model` also picks the tokenizer and context window."""
        if not new:
            raise InvalidInput("messages", "a turn needs at least one new message")
        with_ids = [
            message if message.id else dataclasses.replace(message, id=str(uuid.uuid4()))
            for message in new
        ]
        stored = self.tk.append_many(session, with_ids)
        fresh = [message for message in stored if message.seq > session.last_seq]
        self._on_stored(session, created, fresh)
        reply_id = reply_id_for(stored[-1].id)
        if not fresh and (replay := self._stored_reply(session, stored[-1], reply_id)):
            return PreparedTurn(session, created, tuple(stored), None, {}, reply_id, replay)
        model = self.model_for(options)
        window = self.tk.context(
            session,
            strategy=options.strategy,
            max_tokens=options.max_tokens,
            reserved_tokens=options.reserved_tokens,
            keep_recent=options.keep_recent,
            model=model,
        )
        body = {"model": model, **(request or {}), "messages": to_openai(window)}
        return PreparedTurn(session, created, tuple(stored), window, body, reply_id)

    def _stored_reply(self, session: Session, turn: Message, reply_id: str) -> Message | None:
        later = self.tk.history(session, from_seq=turn.seq + 1, limit=_REPLAY_LOOKAHEAD)
        return next((message for message in later if message.id == reply_id), None)

    def complete(self, prepared: PreparedTurn) -> TurnResult:
        """Ask the model (unless the turn was already answered) and store its reply."""
        if prepared.replay is not None:
            completion = completion_from_message(prepared.replay)
            return TurnResult(prepared, prepared.replay, completion)
        completion = self.llm.complete(prepared.request)
        return TurnResult(
            prepared, self.finish(prepared, Reply.from_completion(completion)), completion
        )

    def stream(self, prepared: PreparedTurn) -> TurnStream:
        """Open a streaming answer (raises here if the model refuses or cannot be reached)."""
        if prepared.replay is not None:
            return TurnStream(self, prepared, None)
        return TurnStream(self, prepared, self.llm.stream(prepared.request))

    def finish(self, prepared: PreparedTurn, reply: Reply) -> Message:
        """Store the model's reply (with its usage) as the session's next assistant message."""
        if not reply.content.strip() and not reply.tool_calls:
            raise UpstreamError("the upstream model's reply was empty")
        message = NewMessage(
            role=Role.ASSISTANT,
            content=reply.content,
            id=prepared.reply_id,
            usage=reply.usage,
            tool_calls=list[Mapping[str, Any]](reply.tool_calls) or None,
            metadata={"model": reply.model} if reply.model else None,
        )
        (stored,) = self.tk.append_many(prepared.session, [message])
        self._on_stored(prepared.session, False, [stored])
        return stored


class TurnStream:
    """A streaming answer: iterate for the upstream's chunks as it sends them; once the
    iteration ends, `reply` is the stored reply. A failure part-way raises from the iteration
    (the new turns stay stored, the partial reply is not)."""

    def __init__(
        self, turns: ChatTurns, prepared: PreparedTurn, upstream: ChatStream | None
    ) -> None:
        self.prepared = prepared
        self.reply: Message | None = prepared.replay
        self._turns = turns
        self._upstream = upstream

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._upstream is None:
            return
        gathered = Reply()
        for chunk in self._upstream:
            gathered.add_chunk(chunk)
            yield chunk
        self.reply = self._turns.finish(self.prepared, gathered)

    def close(self) -> None:
        if self._upstream is not None:
            self._upstream.close()


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
        "usage": None
        if usage is None
        else {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }


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
