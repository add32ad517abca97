"""The Responses API's operations over `ChatTurns`: which session, the turn, the response."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from turnkeeper import jsonenc
from turnkeeper.callers import resolve_session
from turnkeeper.context.formats import openai_messages, to_openai
from turnkeeper.conversations import Conversations
from turnkeeper.errors import InvalidInput, NotFound, SessionNotFound
from turnkeeper.llm import Reply
from turnkeeper.openai_items import api_items, reply_items
from turnkeeper.responses.objects import (
    PREFIX,
    ResponseNotFound,
    parse_id,
    response_id,
    response_object,
    status_of,
)
from turnkeeper.responses.request import ResponseRequest
from turnkeeper.responses.stream import ResponseStream
from turnkeeper.service import utcnow
from turnkeeper.turns import (
    Attempt,
    ChatTurns,
    PreparedTurn,
    TurnOptions,
    reply_id_for,
    with_instructions,
)
from turnkeeper.types import ContextMessage, Message, MessageQuery, NewMessage, Role, Session

SESSION_HEADER = "X-Turnkeeper-Session"


class Responses:
    """The Responses API's operations over `ChatTurns`, each in a project (None: an admin,
    any project)."""

    def __init__(self, turns: ChatTurns) -> None:
        self.turns = turns
        self.tk = turns.tk

    def parse(self, body: Mapping[str, Any]) -> ResponseRequest:
        settings = self.tk.settings
        return ResponseRequest.parse(
            body, max_bytes=settings.max_message_bytes, max_json_bytes=settings.max_json_bytes
        )

    def create(
        self,
        request: ResponseRequest,
        *,
        project: str | None,
        session: str | None,
        attempt: Attempt,
    ) -> dict[str, Any]:
        """Answer the request: the response, whole."""
        if not request.store:
            completion = self.turns.llm.complete(self._unstored_body(request, project, session))
            return self._unstored(request, Reply.from_completion(completion), _fresh_ids())
        prepared = self._prepare(request, project, session, attempt)
        result = self.turns.complete(prepared)
        finish = (result.completion.get("choices") or [{}])[0].get("finish_reason")
        return self._stored(request, prepared, result.reply, finish)

    def stream(
        self,
        request: ResponseRequest,
        *,
        project: str | None,
        session: str | None,
        attempt: Attempt,
    ) -> ResponseStream:
        """Answer the request as the Responses API's events (raises here if the model refuses
        or cannot be reached, before any event)."""
        if not request.store:
            upstream = self.turns.llm.stream(self._unstored_body(request, project, session))
            head_id, reply_id = ids = _fresh_ids()
            head = response_object(
                head_id, created_at=utcnow(), output=[], usage=None, request=request.body,
                model=self.turns.model_for(TurnOptions(model=request.model)), conversation=None,
                status="in_progress",
            )  # fmt: skip
            return ResponseStream(
                head,
                reply_id,
                upstream,
                lambda reply: self._unstored(request, reply, ids),
            )
        prepared = self._prepare(request, project, session, attempt)
        turn_stream = self.turns.stream(prepared)
        turn = prepared.turns[-1]
        head = response_object(
            response_id(prepared.session.id, turn.seq), created_at=turn.created_at,
            model=prepared.model or self.turns.model_for(TurnOptions(model=request.model)),
            output=[], usage=None, request=request.body, conversation=prepared.session.id,
            status="in_progress",
        )  # fmt: skip

        def finished(reply: Reply) -> dict[str, Any]:
            assert turn_stream.reply is not None  # stored once the upstream stream has ended
            return self._stored(request, prepared, turn_stream.reply, reply.finish_reason)

        return ResponseStream(head, prepared.reply_id, turn_stream, finished)

    def retrieve(self, response_id: str, *, project: str | None) -> dict[str, Any]:
        """The stored response with this id (`ResponseNotFound` naming it otherwise)."""
        session, turn, reply = self._stored_turn(response_id, project)
        return response_object(
            response_id, created_at=turn.created_at, model=str(reply.metadata.get("model", "")),
            output=api_items(reply), usage=reply.usage, request={}, conversation=session.id,
        )  # fmt: skip

    # -- stored responses ---------------------------------------------------------------------

    def _prepare(
        self, request: ResponseRequest, project: str | None, ref: str | None, attempt: Attempt
    ) -> PreparedTurn:
        session, created = self._session(request, project, ref, attempt)
        prepared = self.turns.prepare(
            session, request.new, created=created, options=TurnOptions(model=request.model),
            request=request.upstream, attempt=dataclasses.replace(attempt, source="responses"),
        )  # fmt: skip
        return with_instructions(prepared, request.instructions, self.turns.wire.render)

    def _stored(
        self, request: ResponseRequest, prepared: PreparedTurn, reply: Message, finish: str | None
    ) -> dict[str, Any]:
        turn = prepared.turns[-1]
        status, incomplete = status_of(finish)
        return response_object(
            response_id(prepared.session.id, turn.seq), created_at=turn.created_at,
            model=str(reply.metadata.get("model") or prepared.model), output=api_items(reply),
            usage=reply.usage, request=request.body, conversation=prepared.session.id,
            status=status, incomplete=incomplete,
        )  # fmt: skip

    def _session(
        self, request: ResponseRequest, project: str | None, ref: str | None, attempt: Attempt
    ) -> tuple[Session, bool]:
        """The session the request continues, or a new one (and whether it was made)."""
        named = self._named(request, project, ref)
        if named is not None:
            return named, False
        if ref is not None:
            return self.turns.session_for(
                resolve_session(self.tk, ref, project), project=project, create=True
            )
        seed = attempt.idempotency_key or jsonenc.canonical(dict(request.body))
        digest = hashlib.sha256(f"{project or ''}\n{seed}".encode()).hexdigest()[:40]
        session, created = self.turns.session_for(
            f"response-{digest}", project=project, create=True
        )
        if created or attempt.retry or attempt.idempotency_key is not None:
            return session, created
        # An earlier, identical request holds the key, and this one is no retry: afresh.
        return self.tk.create_session(project=project), True

    def _named(
        self, request: ResponseRequest, project: str | None, ref: str | None
    ) -> Session | None:
        """The session `conversation` or `previous_response_id` names (404 naming it when the
        caller's project has none); refused together with the session header."""
        given = request.conversation or request.previous_response_id
        if given is not None and ref is not None:
            name = "conversation" if request.conversation else "previous_response_id"
            raise InvalidInput(name, f"give either `{name}` or the {SESSION_HEADER} header")
        if request.conversation is not None:
            return Conversations(self.tk).get(request.conversation, project=project)
        if request.previous_response_id is not None:
            return self._stored_turn(request.previous_response_id, project)[0]
        return None

    def _stored_turn(self, id: str, project: str | None) -> tuple[Session, Message, Message]:
        """The session, turn and stored reply a response id names."""
        session_id, seq = parse_id(id)
        try:
            session = self.tk.get_session(session_id, project=project)
        except NotFound:
            raise ResponseNotFound(id) from None
        turns = self.tk.store.read_messages(session.id, MessageQuery(from_seq=seq, limit=1))
        if session.id != session_id or not turns or turns[0].seq != seq:
            raise ResponseNotFound(id)
        reply_id = reply_id_for(turns[0].id)
        reply = self.tk.store.find_messages(session.id, [reply_id]).get(reply_id)
        if reply is None:  # never answered (the model failed), or still being answered
            raise ResponseNotFound(id)
        return session, turns[0], reply

    # -- `store: false` -----------------------------------------------------------------------

    def _unstored_body(
        self, request: ResponseRequest, project: str | None, ref: str | None
    ) -> dict[str, Any]:
        """The upstream request of a response that stores nothing: the named session's window
        (built as for any turn), then the input."""
        model = self.turns.model_for(TurnOptions(model=request.model))
        session = self._named(request, project, ref)
        if session is None and ref is not None:
            try:
                session = self.tk.get_session(
                    resolve_session(self.tk, ref, project), project=project
                )
            except SessionNotFound:
                session = None  # nothing is stored, so nothing is made either
        history = [] if session is None else to_openai(self.tk.context(session, model=model))
        front = (
            [{"role": "system", "content": request.instructions}] if request.instructions else []
        )
        pending = openai_messages(_entry(message) for message in request.new)
        return {"model": model, **request.upstream, "messages": [*front, *history, *pending]}

    def _unstored(
        self, request: ResponseRequest, reply: Reply, ids: tuple[str, str]
    ) -> dict[str, Any]:
        """The whole response that stores nothing; `ids`: its own and its reply item's."""
        status, incomplete = status_of(reply.finish_reason)
        return response_object(
            ids[0], created_at=utcnow(),
            model=reply.model or self.turns.model_for(TurnOptions(model=request.model)),
            output=reply_items(ids[1], reply.content, reply.tool_calls),
            usage=reply.usage, request=request.body, conversation=None, status=status,
            incomplete=incomplete,
        )  # fmt: skip


def _fresh_ids() -> tuple[str, str]:
    """The ids of a response that stores nothing, and of its reply item: nothing names them, so
    they are random (a stored response's id names its turn)."""
    return f"{PREFIX}{uuid.uuid4().hex}", f"msg_{uuid.uuid4().hex}"


def _entry(message: NewMessage) -> ContextMessage:
    """A message of the input as a window entry (to render it, not to count it)."""
    return ContextMessage(
        Role(message.role), message.content, 0, kind="pending",
        tool_calls=tuple(message.tool_calls) if message.tool_calls else None,
        tool_call_id=message.tool_call_id,
    )  # fmt: skip
