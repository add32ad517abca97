"""OpenAI's Conversations API over sessions: a conversation is a session, its items are the
session's messages, in order.

An item and a message say the same thing in two vocabularies:

| item (OpenAI)                                   | message (turnkeeper)                        |
|-------------------------------------------------|---------------------------------------------|
| `message`, role user / system / assistant, text | that role, the text as its content          |
| `function_call` (`call_id`, `name`, `arguments`)| an assistant message with that tool call    |
| `function_call_output` (`call_id`, `output`)    | a tool message answering `call_id`          |
| anything else (reasoning, a web search call, …) | an internal assistant message              |

What the plain mapping cannot say (a `developer` role, an image or file part, a list output, an
item type turnkeeper does not translate) is kept: the item as given is stored in the message's
metadata under `item`, its text (or, without text, a bracketed note of its parts) as the
content, and the item comes back as it was given. An item's id is its message's id (one the
client gave, or `msg_…`, `fc_…`, `fco_…`, `item_…` made here); a message stored by another
route with several tool calls reads as one item per call, the later ones `<message id>#<n>`.

Items are checked before anything is stored (a bad one is `InvalidInput` naming
`items[i].<field>`), and one request's items are appended at once, so a bad request stores
nothing. Deleting an item deletes its message, and only the newest message can go: the record
is gapless (`InvalidInput` naming `item_id` otherwise).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from turnkeeper.errors import InvalidInput, NotFound
from turnkeeper.service import Turnkeeper
from turnkeeper.types import Message, NewMessage, Role, Session
from turnkeeper.validation import check_message

ITEMS_PER_REQUEST = 20
"""Most items one request may add (OpenAI's limit)."""
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512
"""OpenAI's limits on a conversation's metadata: string pairs."""
ITEM = "item"
"""The message metadata key an item is kept under when the plain mapping cannot say it."""

_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_MESSAGE_ROLES = {
    "user": Role.USER,
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "assistant": Role.ASSISTANT,
}
_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco"}


class ItemNotFound(NotFound):
    """No item of the conversation has this id."""

    def __init__(self, conversation_id: str, item_id: str) -> None:
        super().__init__(f"item {item_id!r} not found in conversation {conversation_id!r}")


class ConversationNotFound(NotFound):
    """No conversation (session) of the caller's project has this id."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} not found")


@dataclass(frozen=True, slots=True)
class ItemPage:
    """A page of items, and whether more follow in the same order."""

    items: list[dict[str, Any]]
    has_more: bool


def check_metadata(metadata: Any) -> dict[str, str]:
    """A conversation's metadata as OpenAI takes it: up to 16 pairs of strings."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput("metadata", "must be an object of string values")
    if len(metadata) > METADATA_PAIRS:
        raise InvalidInput("metadata", f"has {len(metadata)} keys; at most {METADATA_PAIRS}")
    for key, value in metadata.items():
        if not isinstance(key, str) or len(key) > METADATA_KEY_CHARS:
            raise InvalidInput("metadata", f"keys are strings of at most {METADATA_KEY_CHARS}")
        if not isinstance(value, str) or len(value) > METADATA_VALUE_CHARS:
            raise InvalidInput(
                f"metadata.{key}", f"must be a string of at most {METADATA_VALUE_CHARS} characters"
            )
    return dict(metadata)


# -- items → messages -----------------------------------------------------------------------


def message_from_item(item: Any, field: str) -> NewMessage:
    """The message an input item is stored as (`field` names the item in errors)."""
    if not isinstance(item, Mapping):
        raise InvalidInput(field, "must be an object")
    kind = item.get("type", "message" if "role" in item else None)
    if not isinstance(kind, str):
        raise InvalidInput(f"{field}.type", "must name the item's type")
    item_id = item.get("id")
    if item_id is not None and (not isinstance(item_id, str) or not item_id):
        raise InvalidInput(f"{field}.id", "must be a non-empty string")
    item_id = item_id or f"{_ID_PREFIX.get(kind, 'item')}_{uuid.uuid4().hex}"
    given = {key: value for key, value in item.items() if key != "id"}
    if kind == "message":
        return _from_message_item(given, field, item_id)
    if kind == "function_call":
        call_id, name = _text(given, "call_id", field), _text(given, "name", field)
        arguments = _text(given, "arguments", field, blank=True)
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        plain = set(given) <= {"type", "call_id", "name", "arguments", "status"}
        return NewMessage(
            role=Role.ASSISTANT, content="", id=item_id, tool_calls=[call],
            metadata=None if plain else {ITEM: given},
        )  # fmt: skip
    if kind == "function_call_output":
        call_id = _text(given, "call_id", field)
        output = given.get("output")
        if isinstance(output, str):
            plain = set(given) <= {"type", "call_id", "output", "status"}
            text = output
        elif isinstance(output, list):
            plain, text = False, _parts_text(output, f"{field}.output")
        else:
            raise InvalidInput(f"{field}.output", "must be a string or a list of content parts")
        return NewMessage(
            role=Role.TOOL, content=text, id=item_id, tool_call_id=call_id,
            metadata=None if plain else {ITEM: given},
        )  # fmt: skip
    if kind == "item_reference":
        raise InvalidInput(f"{field}.type", "item references are not supported: send the item")
    return NewMessage(
        role=Role.ASSISTANT, content=f"[{kind}]", id=item_id, internal=True,
        metadata={ITEM: given},
    )  # fmt: skip


def _from_message_item(given: dict[str, Any], field: str, item_id: str) -> NewMessage:
    role = given.get("role")
    if role not in _MESSAGE_ROLES:
        raise InvalidInput(f"{field}.role", f"must be one of {', '.join(_MESSAGE_ROLES)}")
    content = given.get("content")
    if isinstance(content, str):
        text, plain_parts = content, True
    elif isinstance(content, list):
        text = _parts_text(content, f"{field}.content")
        plain_parts = all(_plain_text_part(part) for part in content)
    else:
        raise InvalidInput(f"{field}.content", "must be a string or a list of content parts")
    if not text.strip():
        raise InvalidInput(f"{field}.content", "must hold some text")
    plain = (
        plain_parts and role != "developer" and set(given) <= {"type", "role", "content", "status"}
    )
    return NewMessage(
        role=_MESSAGE_ROLES[role], content=text, id=item_id,
        metadata=None if plain else {ITEM: given},
    )  # fmt: skip


def _plain_text_part(part: Mapping[str, Any]) -> bool:
    """A text part that the plain mapping gives back as it was (no annotations, no logprobs)."""
    return part.get("type") in _TEXT_PARTS and all(
        key in ("type", "text") or not value for key, value in part.items()
    )


def _parts_text(parts: list[Any], field: str) -> str:
    """The text of a list of content parts, or a bracketed note of the parts without text."""
    texts, kinds = [], []
    for index, part in enumerate(parts):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidInput(f"{field}[{index}]", "must be a content part with a `type`")
        if part["type"] in _TEXT_PARTS or part["type"] == "refusal":
            text = part.get("text", part.get("refusal"))
            if not isinstance(text, str):
                raise InvalidInput(f"{field}[{index}].text", "must be a string")
            texts.append(text)
        else:
            kinds.append(part["type"])
    return "\n".join(texts) if texts else " ".join(f"[{kind}]" for kind in kinds)


def _text(given: Mapping[str, Any], name: str, field: str, *, blank: bool = False) -> str:
    value = given.get(name)
    if not isinstance(value, str) or (not blank and not value):
        raise InvalidInput(
            f"{field}.{name}", "must be a non-empty string" if not blank else "must be a string"
        )
    return value


# -- messages → items -----------------------------------------------------------------------


def items_of(message: Message) -> list[dict[str, Any]]:
    """The items a stored message reads as: one, or one per tool call of a message another
    route stored with several (the text first, when it has any)."""
    kept = message.metadata.get(ITEM)
    if isinstance(kept, Mapping):
        item = {"id": message.id, **kept}
        if item.get("type") in ("message", "function_call", "function_call_output"):
            item.setdefault("status", "completed")
        if "role" in item:
            item.setdefault("type", "message")
            if isinstance(item.get("content"), str):  # OpenAI answers with parts, always
                kind = "output_text" if item["role"] == "assistant" else "input_text"
                item["content"] = [{"type": kind, "text": item["content"]}]
        return [item]
    if message.role is Role.TOOL:
        return [
            {
                "id": message.id, "type": "function_call_output",
                "call_id": message.tool_call_id or "", "output": message.content,
                "status": "completed",
            }
        ]  # fmt: skip
    calls = [_function_call(call) for call in message.tool_calls or ()]
    texts = [_message_item(message)] if message.content.strip() or not calls else []
    items = [*texts, *calls]
    for index, item in enumerate(items):
        item["id"] = message.id if index == 0 else f"{message.id}#{index}"
    return items


def _message_item(message: Message) -> dict[str, Any]:
    if message.role is Role.ASSISTANT:
        part: dict[str, Any] = {"type": "output_text", "text": message.content, "annotations": []}
    else:
        part = {"type": "input_text", "text": message.content}
    return {
        "type": "message", "role": message.role.value, "status": "completed", "content": [part],
    }  # fmt: skip


def _function_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments", "")
    return {
        "type": "function_call", "call_id": str(call.get("id", "")),
        "name": str(function.get("name", "")),
        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        "status": "completed",
    }  # fmt: skip


def conversation_object(session: Session) -> dict[str, Any]:
    """A session as OpenAI's `Conversation`."""
    return {
        "id": session.id, "object": "conversation",
        "created_at": int(session.created_at.timestamp()), "metadata": dict(session.metadata),
    }  # fmt: skip


# -- the operations -------------------------------------------------------------------------


class Conversations:
    """The Conversations API's operations over a `Turnkeeper`, each in a project (None: an
    admin, any project; a conversation is then found by its id wherever it is)."""

    def __init__(self, tk: Turnkeeper) -> None:
        self.tk = tk

    def create(
        self, *, metadata: Any = None, items: Sequence[Any] = (), project: str | None
    ) -> Session:
        """A new conversation with `metadata` and its first `items`."""
        checked, messages = check_metadata(metadata), self._messages(items)
        session = self.tk.create_session(metadata=checked, project=project)
        if messages:
            self.tk.append_many(session, messages)
        return self.tk.get_session(session.id)

    def get(self, conversation_id: str, *, project: str | None) -> Session:
        """The conversation with this id (`ConversationNotFound` naming it otherwise)."""
        try:
            return self.tk.get_session(conversation_id, project=project)
        except NotFound:
            raise ConversationNotFound(conversation_id) from None

    def update(self, conversation_id: str, *, metadata: Any, project: str | None) -> Session:
        """Replace the conversation's metadata."""
        checked = check_metadata(metadata)
        session = self.get(conversation_id, project=project)
        return self.tk.update_session(session.id, metadata=checked, project=project)

    def delete(self, conversation_id: str, *, project: str | None) -> str:
        """Delete the conversation and all its items; returns its id."""
        session = self.get(conversation_id, project=project)
        self.tk.delete_session(session.id, project=project)
        return session.id

    def add_items(
        self, conversation_id: str, items: Sequence[Any], *, project: str | None
    ) -> list[dict[str, Any]]:
        """Append `items` at once; returns them as stored (an item sent again with its id is
        stored once)."""
        if not items:
            raise InvalidInput("items", "must hold at least one item")
        messages = self._messages(items)
        session = self.get(conversation_id, project=project)
        stored = self.tk.append_many(session, messages)
        return [item for message in stored for item in items_of(message)]

    def list_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: str = "desc",
        project: str | None,
    ) -> ItemPage:
        """A page of `limit` items in `order` (`asc`: oldest first), after the item `after`."""
        session = self.get(conversation_id, project=project)
        newest_first = order == "desc"
        items = self._walk(session, after, newest_first)
        page = [item for _, item in zip(range(limit + 1), items, strict=False)]
        return ItemPage(page[:limit], has_more=len(page) > limit)

    def get_item(
        self, conversation_id: str, item_id: str, *, project: str | None
    ) -> dict[str, Any]:
        """One item (`ItemNotFound` naming it otherwise)."""
        session = self.get(conversation_id, project=project)
        message, index = self._locate(session, item_id)
        return items_of(message)[index]

    def delete_item(self, conversation_id: str, item_id: str, *, project: str | None) -> Session:
        """Delete the item's message, which must be the newest; returns the conversation."""
        session = self.get(conversation_id, project=project)
        message, _ = self._locate(session, item_id)
        if message.seq != session.last_seq:
            raise InvalidInput(
                "item_id",
                f"only the newest item of a conversation can be deleted, and {item_id!r} is "
                "not (turnkeeper keeps a gapless record: delete from the newest back)",
            )
        self.tk.pop_last_message(session.id, project=project)
        return self.tk.get_session(session.id)

    def _messages(self, items: Sequence[Any]) -> list[NewMessage]:
        """The items as messages, each checked as an append would (nothing stored yet)."""
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise InvalidInput("items", "must be a list of items")
        if len(items) > ITEMS_PER_REQUEST:
            raise InvalidInput("items", f"holds {len(items)}; at most {ITEMS_PER_REQUEST}")
        settings = self.tk.settings
        messages = []
        for index, item in enumerate(items):
            message = message_from_item(item, f"items[{index}]")
            try:
                check_message(
                    message,
                    max_bytes=settings.max_message_bytes,
                    max_json_bytes=settings.max_json_bytes,
                )
            except InvalidInput as exc:
                raise InvalidInput(f"items[{index}]", f"{exc.field}: {exc.problem}") from None
            messages.append(message)
        return messages

    def _locate(self, session: Session, item_id: str) -> tuple[Message, int]:
        """The message holding the item `item_id`, and the item's place among its items."""
        found = self.tk.store.find_messages(session.id, [item_id])
        if item_id in found:
            return found[item_id], 0
        base, _, index = item_id.rpartition("#")
        if base and index.isdigit():
            found = self.tk.store.find_messages(session.id, [base])
            if base in found and int(index) < len(items_of(found[base])):
                return found[base], int(index)
        raise ItemNotFound(session.id, item_id)

    def _walk(
        self, session: Session, after: str | None, newest_first: bool
    ) -> Iterator[dict[str, Any]]:
        """Every item in order, starting after the item `after`."""
        skip_through: str | None = None
        if after is None:
            next_seq: int | None = session.last_seq if newest_first else 1
        else:
            message, _ = self._locate(session, after)
            next_seq, skip_through = message.seq, after
        batch = 50
        while next_seq is not None and 1 <= next_seq <= session.last_seq:
            if newest_first:
                messages = self.tk.store.read_messages(
                    session.id, to_seq=next_seq, newest_first=True, limit=batch
                )
            else:
                messages = self.tk.store.read_messages(session.id, from_seq=next_seq, limit=batch)
            if not messages:
                return
            for message in messages:
                items = items_of(message)
                if newest_first:
                    items.reverse()
                for item in items:
                    if skip_through is not None:
                        if item["id"] == skip_through:
                            skip_through = None
                        continue
                    yield item
            next_seq = messages[-1].seq - 1 if newest_first else messages[-1].seq + 1
