"""OpenAI's Responses API over chat turns: `POST /v1/responses` answered by any OpenAI-compatible
chat-completions model, with turnkeeper's memory.

A response is a chat turn (`turnkeeper.turns.ChatTurns`, as for `/chat` and the proxy): its input
items are stored as the session's new messages (translated as `turnkeeper.openai_items` says),
the window is built from the stored history by the configured strategy (budget, trace, exactly
once under retries), the upstream is asked over chat completions, and the reply is stored; the
response's output items are the reply's items. The session:

| the request names                   | the session                                          |
|-------------------------------------|------------------------------------------------------|
| `conversation` (an id)              | that conversation, a session of the caller's project |
| `previous_response_id`              | the session that response is in, as it stands now    |
| header `X-Turnkeeper-Session`       | that session id or key (a key names a new session)   |
| none of them                        | a new session for this response alone                |

A response's id names its turn (`resp_<session id>_<seq of its last input message>`), so
`GET /v1/responses/{id}` reads the turn's reply back, `previous_response_id` continues its
session, and a retried request gets the same id. A request naming none of the three is kept
in a session keyed by its `Idempotency-Key` or its body, so that a retry (which says so) finds
the first attempt's turn; an identical request that is no retry starts a session of its own.

`instructions` are sent in front of the window on this turn only (never stored). `store: false`
stores nothing: the window is built from what the named session holds, the input follows it,
and the response cannot be retrieved. What chat completions cannot be asked is refused before
anything is stored (`InvalidInput` naming the field): items other than messages, function
calls and their outputs; content parts other than text; tools other than functions; and the
options of OpenAI's own platform (`background`, `prompt`, `max_tool_calls`, `top_logprobs`,
`context_management`, a reasoning summary).
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from turnkeeper import jsonenc
from turnkeeper.callers import resolve_session
from turnkeeper.context.formats import openai_messages, to_openai
from turnkeeper.conversations import Conversations, check_metadata
from turnkeeper.errors import InvalidInput, NotFound, SessionNotFound
from turnkeeper.llm import Reply
from turnkeeper.openai_items import (
    TEXT_PARTS,
    api_items,
    check_item,
    messages_of_items,
    reply_items,
)
from turnkeeper.service import utcnow
from turnkeeper.turns import (
    Attempt,
    ChatTurns,
    PreparedTurn,
    TurnOptions,
    reply_id_for,
    with_instructions,
)
from turnkeeper.types import ContextMessage, Message, NewMessage, Role, Session, Usage

PREFIX = "resp_"
"""How a response id begins."""
SESSION_HEADER = "X-Turnkeeper-Session"

FORWARDED = (
    "temperature", "top_p", "user", "safety_identifier", "prompt_cache_key",
    "prompt_cache_retention", "service_tier",
)  # fmt: skip
"""Request fields chat completions takes under the same name and meaning."""
PLATFORM_ONLY = {
    "background": "runs in the background on OpenAI's platform only",
    "prompt": "names a prompt stored on OpenAI's platform",
    "max_tool_calls": "counts calls of OpenAI's hosted tools",
    "top_logprobs": "is not passed on: output items carry no log probabilities here",
    "context_management": "is OpenAI's own compaction: turnkeeper's strategy builds the window",
}
"""Options refused when set (to a value that asks for something), and why."""
_ITEM_TYPES = ("message", "function_call", "function_call_output")
_TOOL_FIELDS = frozenset({"type", "name", "description", "parameters", "strict"})


class ResponseNotFound(NotFound):
    """No stored response of the caller's project has this id."""

    def __init__(self, response_id: str) -> None:
        super().__init__(f"response {response_id!r} not found")


def response_id(session_id: str, turn_seq: int) -> str:
    """The id of the response answering the turn at `turn_seq` of the session."""
    return f"{PREFIX}{session_id}_{turn_seq}"


def _parse_id(value: str) -> tuple[str, int]:
    session_id, _, seq = value.removeprefix(PREFIX).rpartition("_")
    if not value.startswith(PREFIX) or not session_id or not seq.isdigit() or int(seq) < 1:
        raise ResponseNotFound(value)
    return session_id, int(seq)


# -- the request ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResponseRequest:
    """A `POST /v1/responses` body, checked and translated: `new` are the input's messages,
    `upstream` the chat-completion fields (without `messages`)."""

    body: Mapping[str, Any]
    new: list[NewMessage]
    upstream: dict[str, Any]
    model: str | None = None
    instructions: str | None = None
    conversation: str | None = None
    previous_response_id: str | None = None
    store: bool = True
    stream: bool = False

    @classmethod
    def parse(
        cls, body: Mapping[str, Any], *, max_bytes: int, max_json_bytes: int
    ) -> ResponseRequest:
        """The request `body` says (`InvalidInput` naming the field it cannot say)."""
        for name, why in PLATFORM_ONLY.items():
            if body.get(name) not in (None, False, 0, []):
                raise InvalidInput(name, f"is not supported: it {why}")
        check_metadata(body.get("metadata"))
        conversation = _conversation_id(body.get("conversation"))
        previous = body.get("previous_response_id")
        if conversation is not None and previous is not None:
            raise InvalidInput(
                "previous_response_id", "give either `conversation` or `previous_response_id`"
            )
        stream = bool(body.get("stream"))
        return cls(
            body=body,
            new=input_messages(
                body.get("input"), max_bytes=max_bytes, max_json_bytes=max_json_bytes
            ),
            upstream=upstream_fields(body, stream=stream),
            model=body.get("model"),
            instructions=body.get("instructions"),
            conversation=conversation,
            previous_response_id=previous,
            store=body.get("store") is not False,
            stream=stream,
        )


def _conversation_id(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("id")
        if not isinstance(value, str) or not value:
            raise InvalidInput("conversation.id", "must be a conversation's id")
    if value is not None and not isinstance(value, str):
        raise InvalidInput("conversation", 'must be a conversation\'s id or {"id": …}')
    return value or None


def input_messages(value: Any, *, max_bytes: int, max_json_bytes: int) -> list[NewMessage]:
    """The messages the request's `input` adds: a string is one user message; a list holds
    items that chat completions can be told (checked before anything is stored)."""
    if isinstance(value, str):
        if not value.strip():
            raise InvalidInput("input", "must hold some text")
        items: list[Any] = [{"role": "user", "content": value}]
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _check_translatable(item, f"input[{index}]")
        items = value
    else:
        raise InvalidInput("input", "must be a string or a non-empty list of items")
    return messages_of_items(
        items, "input", max_bytes=max_bytes, max_json_bytes=max_json_bytes, made_ids=False
    )


def _check_translatable(item: Any, field: str) -> None:
    check_item(item, field)
    kind = item.get("type", "message")
    if kind not in _ITEM_TYPES:
        raise InvalidInput(
            f"{field}.type",
            f"{kind!r} items cannot be sent to a chat-completions model: send messages, "
            "function calls and function call outputs",
        )
    where = "content" if kind == "message" else "output"
    parts = item.get(where)
    for index, part in enumerate(parts if isinstance(parts, list) else ()):
        if part["type"] not in TEXT_PARTS and part["type"] != "refusal":
            raise InvalidInput(
                f"{field}.{where}[{index}].type",
                f"{part['type']!r} parts cannot be sent to a chat-completions model: only text",
            )


def upstream_fields(body: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The chat-completion fields a Responses request stands for (without `messages`)."""
    fields = {name: body[name] for name in FORWARDED if body.get(name) is not None}
    if body.get("max_output_tokens") is not None:
        fields["max_tokens"] = body["max_output_tokens"]
    if body.get("tools"):
        fields["tools"] = chat_tools(body["tools"])
        if body.get("parallel_tool_calls") is not None:
            fields["parallel_tool_calls"] = body["parallel_tool_calls"]
    if body.get("tool_choice") is not None:
        fields["tool_choice"] = _tool_choice(body["tool_choice"])
    fields |= _text_options(body.get("text"))
    fields |= _reasoning_options(body.get("reasoning"))
    if stream:  # ask for the usage chunk, so a streamed reply is stored with its usage too
        fields["stream_options"] = {"include_usage": True}
    return fields


def chat_tools(tools: Any) -> list[dict[str, Any]]:
    """Function tools as chat completions takes them; any other tool is refused."""
    if not isinstance(tools, list):
        raise InvalidInput("tools", "must be a list of tools")
    translated = []
    for index, tool in enumerate(tools):
        field = f"tools[{index}]"
        if not isinstance(tool, Mapping):
            raise InvalidInput(field, "must be an object")
        if tool.get("type") != "function":
            raise InvalidInput(
                f"{field}.type",
                f"{tool.get('type')!r} tools cannot be used through a chat-completions model: "
                "only function tools",
            )
        for name in sorted(set(tool) - _TOOL_FIELDS):
            raise InvalidInput(f"{field}.{name}", "cannot be passed to a chat-completions model")
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise InvalidInput(f"{field}.name", "must be a non-empty string")
        function = {key: tool[key] for key in ("name", "description", "parameters", "strict")}
        translated.append({"type": "function", "function": _present(function)})
    return translated


def _present(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        if not isinstance(choice.get("name"), str) or not choice["name"]:
            raise InvalidInput("tool_choice.name", "must name a function tool")
        return {"type": "function", "function": {"name": choice["name"]}}
    raise InvalidInput(
        "tool_choice",
        "must be auto, none, required or a function tool: hosted tools cannot be chosen",
    )


def _text_options(text: Any) -> dict[str, Any]:
    """`text.format` as `response_format`, `text.verbosity` as `verbosity`."""
    if text is None:
        return {}
    if not isinstance(text, Mapping):
        raise InvalidInput("text", "must be an object")
    fields: dict[str, Any] = {}
    if text.get("verbosity") is not None:
        fields["verbosity"] = text["verbosity"]
    form = text.get("format")
    if form is None:
        return fields
    kind = form.get("type") if isinstance(form, Mapping) else None
    if kind == "json_schema":
        if not isinstance(form.get("name"), str) or not isinstance(form.get("schema"), Mapping):
            raise InvalidInput("text.format", "a JSON schema format needs a `name` and a `schema`")
        schema = {key: form.get(key) for key in ("name", "schema", "description", "strict")}
        fields["response_format"] = {"type": "json_schema", "json_schema": _present(schema)}
    elif kind == "json_object":
        fields["response_format"] = {"type": "json_object"}
    elif kind != "text":
        raise InvalidInput("text.format.type", "must be text, json_schema or json_object")
    return fields


def _reasoning_options(reasoning: Any) -> dict[str, Any]:
    """`reasoning.effort` as `reasoning_effort`; a summary cannot be asked for."""
    if reasoning is None:
        return {}
    if not isinstance(reasoning, Mapping):
        raise InvalidInput("reasoning", "must be an object")
    for name in ("summary", "generate_summary"):
        if reasoning.get(name) is not None:
            raise InvalidInput(
                f"reasoning.{name}",
                "is not supported: chat completions return no reasoning summary",
            )
    effort = reasoning.get("effort")
    return {} if effort is None else {"reasoning_effort": effort}


# -- the response ---------------------------------------------------------------------------


def response_object(
    id: str,
    *,
    created_at: datetime,
    model: str,
    output: list[dict[str, Any]],
    usage: Usage | None,
    request: Mapping[str, Any],
    conversation: str | None,
    status: str = "completed",
    incomplete: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """OpenAI's `Response`: the output and usage, and the request's options as it took them."""
    return {
        "id": id, "object": "response", "created_at": int(created_at.timestamp()),
        "status": status, "background": False, "error": error,
        "incomplete_details": None if incomplete is None else {"reason": incomplete},
        "instructions": request.get("instructions"), "model": model, "output": output,
        "max_output_tokens": request.get("max_output_tokens"),
        "parallel_tool_calls": request.get("parallel_tool_calls") is not False,
        "previous_response_id": request.get("previous_response_id"),
        "conversation": None if conversation is None else {"id": conversation},
        "reasoning": request.get("reasoning") or {"effort": None, "summary": None},
        "store": request.get("store") is not False,
        "temperature": request.get("temperature"), "top_p": request.get("top_p"),
        "text": request.get("text") or {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice") or "auto", "tools": request.get("tools") or [],
        "truncation": request.get("truncation") or "disabled", "user": request.get("user"),
        "metadata": request.get("metadata") or {}, "usage": _usage(usage),
    }  # fmt: skip


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }  # fmt: skip


def _status(finish_reason: str | None) -> tuple[str, str | None]:
    """The response's status, and why it is incomplete (a reply cut off at its limit)."""
    return ("incomplete", "max_output_tokens") if finish_reason == "length" else ("completed", None)


# -- the operations -------------------------------------------------------------------------


class Chunks(Protocol):
    """Completion chunks that must be closed (`TurnStream`, `ChatStream`)."""

    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


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
            return self._unstored(request, Reply.from_completion(completion))
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
            head_id, reply_id = f"{PREFIX}{uuid.uuid4().hex}", f"msg_{uuid.uuid4().hex}"
            head = response_object(
                head_id, created_at=utcnow(), model=request.model or self.turns.model_for(TurnOptions()),
                output=[], usage=None, request=request.body, conversation=None, status="in_progress",
            )  # fmt: skip
            return ResponseStream(
                head,
                reply_id,
                upstream,
                lambda reply: self._unstored(request, reply, head_id, reply_id),
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
        return with_instructions(prepared, request.instructions)

    def _stored(
        self, request: ResponseRequest, prepared: PreparedTurn, reply: Message, finish: str | None
    ) -> dict[str, Any]:
        turn = prepared.turns[-1]
        status, incomplete = _status(finish)
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
        session_id, seq = _parse_id(id)
        try:
            session = self.tk.get_session(session_id, project=project)
        except NotFound:
            raise ResponseNotFound(id) from None
        turns = self.tk.store.read_messages(session.id, from_seq=seq, limit=1)
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
        self,
        request: ResponseRequest,
        reply: Reply,
        id: str | None = None,
        item_id: str | None = None,
    ) -> dict[str, Any]:
        status, incomplete = _status(reply.finish_reason)
        return response_object(
            id or f"{PREFIX}{uuid.uuid4().hex}", created_at=utcnow(),
            model=reply.model or self.turns.model_for(TurnOptions(model=request.model)),
            output=reply_items(item_id or f"msg_{uuid.uuid4().hex}", reply.content, reply.tool_calls),
            usage=reply.usage, request=request.body, conversation=None, status=status,
            incomplete=incomplete,
        )  # fmt: skip


def _entry(message: NewMessage) -> ContextMessage:
    """A message of the input as a window entry (to render it, not to count it)."""
    return ContextMessage(
        Role(message.role), message.content, 0, kind="pending",
        tool_calls=tuple(message.tool_calls) if message.tool_calls else None,
        tool_call_id=message.tool_call_id,
    )  # fmt: skip


# -- streaming ------------------------------------------------------------------------------


@dataclass
class _Opened:
    """An output item the stream has opened: where it is, and what it has said so far."""

    index: int
    item: dict[str, Any]
    text: str = ""


@dataclass
class ResponseStream:
    """A streamed response: iterating yields the Responses API's events, each a dict with its
    `type` and `sequence_number` — `response.created`, `response.in_progress`, per output item
    `response.output_item.added`, its text (`response.content_part.added`,
    `response.output_text.delta` …, `.done`, `response.content_part.done`) or its arguments
    (`response.function_call_arguments.delta` …, `.done`), `response.output_item.done`, and
    last `response.completed` (or `response.incomplete`, for a reply cut off at its limit).
    A failure of the model part-way raises from the iteration; `failed` is the event that ends
    the stream then. `close` closes the upstream (a stored answer is still read and stored)."""

    head: dict[str, Any]
    reply_id: str
    chunks: Chunks
    finished: Callable[[Reply], dict[str, Any]]
    _sequence: int = 0
    _opened: dict[str, _Opened] = field(default_factory=dict)
    _calls: dict[int, str] = field(default_factory=dict)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield self._event("response.created", response=self.head)
        yield self._event("response.in_progress", response=self.head)
        gathered = Reply()
        for chunk in self.chunks:
            gathered.add_chunk(chunk)
            yield from self._deltas(chunk)
        final = self.finished(gathered)
        yield from self._closing(final)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield self._event(kind, response=final)

    def close(self) -> None:
        self.chunks.close()

    def failed(self, message: str, code: str) -> dict[str, Any]:
        """The event ending a stream whose model failed part-way."""
        response = {**self.head, "status": "failed", "error": {"code": code, "message": message}}
        return self._event("response.failed", response=response)

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _open(self, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
        item["id"] = self.reply_id if not self._opened else f"{self.reply_id}#{len(self._opened)}"
        opened = self._opened[item["id"]] = _Opened(len(self._opened), item)
        yield self._event("response.output_item.added", output_index=opened.index, item=item)

    def _deltas(self, chunk: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        delta = ((chunk.get("choices") or [{}])[0] or {}).get("delta") or {}
        if text := delta.get("content"):
            yield from self._text(str(text))
        for call in delta.get("tool_calls") or ():
            yield from self._call(call)

    def _text(self, text: str) -> Iterator[dict[str, Any]]:
        message = next((o for o in self._opened.values() if o.item["type"] == "message"), None)
        if message is None:
            item: dict[str, Any] = {
                "type": "message", "role": "assistant", "status": "in_progress", "content": [],
            }  # fmt: skip
            yield from self._open(item)
            message = self._opened[item["id"]]
            yield self._event(
                "response.content_part.added", item_id=item["id"], output_index=message.index,
                content_index=0, part={"type": "output_text", "text": "", "annotations": []},
            )  # fmt: skip
        message.text += text
        yield self._event(
            "response.output_text.delta", item_id=message.item["id"], output_index=message.index,
            content_index=0, delta=text, logprobs=[],
        )  # fmt: skip

    def _call(self, call: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        index = int(call.get("index", len(self._calls)))
        function = call.get("function") or {}
        if index not in self._calls:
            item = {
                "type": "function_call", "status": "in_progress", "call_id": call.get("id") or "",
                "name": function.get("name") or "", "arguments": "",
            }  # fmt: skip
            yield from self._open(item)
            self._calls[index] = item["id"]
        opened = self._opened[self._calls[index]]
        if piece := function.get("arguments"):
            opened.text += piece
            yield self._event(
                "response.function_call_arguments.delta", item_id=opened.item["id"],
                output_index=opened.index, delta=piece,
            )  # fmt: skip

    def _closing(self, final: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Each opened item's closing events, the item as the final response has it."""
        done = {item["id"]: item for item in final["output"]}
        for item_id, opened in self._opened.items():
            where = {"item_id": item_id, "output_index": opened.index}
            if opened.item["type"] == "message":
                part = {"type": "output_text", "text": opened.text, "annotations": []}
                yield self._event(
                    "response.output_text.done", **where, content_index=0, text=opened.text,
                    logprobs=[],
                )  # fmt: skip
                yield self._event("response.content_part.done", **where, content_index=0, part=part)
                fallback = {**opened.item, "status": "completed", "content": [part]}
            else:
                yield self._event(
                    "response.function_call_arguments.done", **where, arguments=opened.text
                )
                fallback = {**opened.item, "status": "completed", "arguments": opened.text}
            yield self._event(
                "response.output_item.done", output_index=opened.index,
                item=done.get(item_id, fallback),
            )  # fmt: skip
