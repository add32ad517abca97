"""OpenAI items ↔ turnkeeper messages: the one translation that the Conversations API, the
Responses API and the OpenAI Agents adapter (`TurnkeeperSession`) share, so that an item stored
through any of them reads back through the others.

One item is one message. The message says what a person reading the history (or turnkeeper's
context builder) expects, and its metadata carries the item's JSON text exactly as it was given
(`ITEM_KEY`, written as the SDK's own `SQLiteSession` writes it), so the item comes back key for
key:

| item (OpenAI)                                        | message (turnkeeper)                   |
|------------------------------------------------------|----------------------------------------|
| `message`, role user / system / developer / assistant| that role (developer: system), its     |
|                                                      | text (a part without text: `[its type]`)|
| `function_call`, `custom_tool_call`                  | an assistant message with that tool call|
| `function_call_output`, `custom_tool_call_output`    | a tool message answering `call_id`     |
| anything else (reasoning, hosted tool calls, …)      | an internal assistant note: `[summary]`|
|                                                      | or `[its type]`                        |

An item reads back two ways:

- `items_of` / `given_items`: the item as given, as an SDK's session must get it back (a message
  another writer stored, without an item, reads as its equivalent items);
- `api_items`: the item as OpenAI's Conversations and Responses APIs answer, named by its
  message's id (a message with several tool calls reads as one item per call, the later ones
  `<message id>#<n>`), with the `status` and the content parts OpenAI's API always gives. An id
  inside the item that is not its message's (the adapter keeps the SDK's, which may repeat, as
  `__fake_id__` does) is replaced: in these APIs an id names one item of a conversation.

Items stored by earlier versions are read too: the adapter's under `openai_agents_item` (the same
JSON text) and the Conversations API's under `item` (the item as an object without its id,
kept only when the plain mapping could not say it). They are read where they are rather than
moved by a migration, because exported JSONL files and archives carry those keys as well, and a
migration cannot reach a file; reading them costs one more lookup for a message without the key.

Checking is apart from translating: the adapter trusts what its SDK hands it (as `SQLiteSession`
does), while the HTTP APIs check each item first (`check_item`: `InvalidInput` naming the field).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from turnkeeper import jsonenc
from turnkeeper.errors import InvalidInput
from turnkeeper.types import JSONObject, Message, NewMessage, Role
from turnkeeper.validation import check_json, check_message

__all__ = [
    "ITEM_KEY",
    "api_items",
    "check_item",
    "content_text",
    "given_items",
    "items_of",
    "message_from_item",
    "messages_of_items",
    "new_item_id",
    "own_id",
    "reply_items",
]

ITEM_KEY = "openai_item"
"""The message metadata key holding the item's JSON text, exactly as given."""
_ADAPTER_KEY = "openai_agents_item"
"""Where the OpenAI Agents adapter kept the item's JSON text before `ITEM_KEY` (still read)."""
_CONVERSATIONS_KEY = "item"
"""Where the Conversations API kept an item the plain mapping could not say, as an object
without its id, before `ITEM_KEY` (still read)."""

ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM}
ROLES["developer"] = Role.SYSTEM  # the Responses API's name for system instructions
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
"""Content parts that are text (a `refusal` part is text too, under `refusal`)."""
_STATUS_TYPES = ("message", "function_call", "function_call_output")
_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco"}


def content_text(value: Any) -> str:
    """The readable text of an item's content: a string, or its parts' texts joined by new
    lines (a part without text shows as `[its type]`)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if len(value) == 1:  # one part with its text (the usual output message): no join
            (part,) = value
            if type(part) is dict and type(part.get("text")) is str:
                return part["text"]  # type: ignore[no-any-return]
        return "\n".join(filter(None, (_part_text(part) for part in value)))
    return json.dumps(value)


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return str(part)
    for field in ("text", "refusal", "transcript"):
        if isinstance(part.get(field), str):
            return str(part[field])
    return f"[{part.get('type', 'part')}]"


# -- items → messages -----------------------------------------------------------------------


def message_from_item(item: Mapping[str, Any], *, id: str | None = None) -> NewMessage:
    """The message that stores `item`: readable, and carrying the item exactly. `id` is the
    message's (None: one made when it is stored)."""
    metadata = {ITEM_KEY: jsonenc.dumps(item)}
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and role in ROLES:  # most items: built here, without `_message`
        text = content_text(item.get("content")) or f"[empty {role} message]"
        return NewMessage(role=ROLES[role], content=text, id=id, metadata=metadata)
    if kind in ("function_call", "custom_tool_call") and item.get("call_id"):
        call = {
            "id": item["call_id"],
            "type": "function",
            "function": {"name": item.get("name", ""), "arguments": _arguments(item)},
        }
        return _message(Role.ASSISTANT, "", metadata, id, tool_calls=[call])
    if kind in ("function_call_output", "custom_tool_call_output") and item.get("call_id"):
        output = content_text(item.get("output"))
        return _message(Role.TOOL, output, metadata, id, tool_call_id=item["call_id"])
    # Reasoning, hosted tools (web/file search, computer, MCP…), references: the model needs
    # them back, a reader of the conversation does not.
    note = content_text(item.get("summary")) or kind
    return _message(Role.ASSISTANT, f"[{note}]", metadata, id, internal=True)


def _message(
    role: Role,
    content: str,
    metadata: JSONObject,
    id: str | None,
    *,
    internal: bool = False,
    tool_calls: list[JSONObject] | None = None,
    tool_call_id: str | None = None,
) -> NewMessage:
    return NewMessage(
        role=role, content=content, id=id, internal=internal, tool_calls=tool_calls,
        tool_call_id=tool_call_id, metadata=metadata,
    )  # fmt: skip


def _arguments(item: Mapping[str, Any]) -> str:
    value = item.get("arguments", item.get("input", ""))
    return value if isinstance(value, str) else jsonenc.dumps(value)


def own_id(item: Mapping[str, Any]) -> str | None:
    """The item's id, when it can name the item's message. The id `api_items` gives a later
    item of a message (`<message id>#<n>`, sent back by a client that stores or resends the
    output of a response) cannot: no message id holds `#`. Such an item's message gets an id
    of its own, and the item keeps its id inside."""
    given = item.get("id")
    if not isinstance(given, str) or not given:
        return None
    base, mark, index = given.rpartition("#")
    return None if mark and base and index.isdigit() else given


def new_item_id(item: Mapping[str, Any]) -> str:
    """The id an item is stored under: its own (`own_id`), else a new one in OpenAI's style
    (`msg_…`, `fc_…`, `fco_…`, `item_…`)."""
    kind = item.get("type", "message")
    return own_id(item) or f"{_ID_PREFIX.get(kind, 'item')}_{uuid.uuid4().hex}"


def check_item(item: Any, field: str) -> None:
    """Refuse an item the HTTP APIs cannot store as what it says (`InvalidInput` naming
    `field` or one of its fields): a message needs a known role and some text, a function
    call its `call_id` and `name`, an output its `call_id` and a string or parts."""
    if not isinstance(item, Mapping):
        raise InvalidInput(field, "must be an object")
    kind = item.get("type", "message" if "role" in item else None)
    if not isinstance(kind, str):
        raise InvalidInput(f"{field}.type", "must name the item's type")
    item_id = item.get("id")
    if item_id is not None and (not isinstance(item_id, str) or not item_id):
        raise InvalidInput(f"{field}.id", "must be a non-empty string")
    if kind == "message":
        if item.get("role") not in ROLES:
            raise InvalidInput(f"{field}.role", f"must be one of {', '.join(ROLES)}")
        text = _checked_content(item.get("content"), f"{field}.content")
        if not text.strip():
            raise InvalidInput(f"{field}.content", "must hold some text")
    elif kind == "function_call":
        _check_text(item, "call_id", field)
        _check_text(item, "name", field)
        if not isinstance(item.get("arguments"), str):
            raise InvalidInput(f"{field}.arguments", "must be a string")
    elif kind == "function_call_output":
        _check_text(item, "call_id", field)
        if not isinstance(item.get("output"), str):
            _checked_content(item.get("output"), f"{field}.output")
    elif kind == "item_reference":
        raise InvalidInput(f"{field}.type", "item references are not supported: send the item")


def messages_of_items(
    items: Sequence[Any], field: str, *, max_bytes: int, max_json_bytes: int, made_ids: bool
) -> list[NewMessage]:
    """`items` (sent as `field`) as the messages that store them, each checked as an append
    would check it (`InvalidInput` naming `field[i]`), before anything is stored. An item's
    message is named by its own id; without one, by an id made here (`made_ids`: as OpenAI's
    APIs name items) or by the append."""
    messages = []
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        check_json(where, item, max_bytes=max_json_bytes)  # its text is stored, unwalked
        check_item(item, where)
        message = message_from_item(item, id=new_item_id(item) if made_ids else own_id(item))
        try:
            check_message(message, max_bytes=max_bytes, max_json_bytes=max_json_bytes)
        except InvalidInput as exc:
            raise InvalidInput(where, f"{exc.field}: {exc.problem}") from None
        messages.append(message)
    return messages


def _checked_content(content: Any, field: str) -> str:
    """The text of a string or of a list of content parts, each checked."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidInput(field, "must be a string or a list of content parts")
    for index, part in enumerate(content):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidInput(f"{field}[{index}]", "must be a content part with a `type`")
        if part["type"] in TEXT_PARTS and not isinstance(part.get("text"), str):
            raise InvalidInput(f"{field}[{index}].text", "must be a string")
        if part["type"] == "refusal" and not isinstance(part.get("refusal"), str):
            raise InvalidInput(f"{field}[{index}].refusal", "must be a string")
    return content_text(content)


def _check_text(item: Mapping[str, Any], name: str, field: str) -> None:
    value = item.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{field}.{name}", "must be a non-empty string")


# -- messages → items, as given -------------------------------------------------------------


def _stored_text(message: Message) -> str | None:
    """The item's JSON text the message carries, if it carries one as text."""
    metadata = message.metadata
    stored = metadata.get(ITEM_KEY)
    if stored is None:
        stored = metadata.get(_ADAPTER_KEY)
    return stored if isinstance(stored, str) else None


def _kept_object(message: Message) -> Mapping[str, Any] | None:
    """The item an earlier Conversations API kept as an object (without its id), if any."""
    kept = message.metadata.get(_CONVERSATIONS_KEY)
    return kept if isinstance(kept, Mapping) else None


def items_of(message: Message) -> list[Any]:
    """The items a stored message stands for, as fresh objects: the item as given when it
    carries one, else the equivalent of a message another writer stored."""
    stored = _stored_text(message)
    if stored is not None:
        return [jsonenc.loads(stored)]
    kept = _kept_object(message)
    if kept is not None:
        return [jsonenc.loads(jsonenc.dumps(kept))]
    return _equivalents(message)


def given_items(messages: Iterable[Message]) -> list[Any]:
    """`items_of` each message, in order, as fresh objects decoded as one JSON array (one
    parse, not one per message: most messages carry their item's text)."""
    texts: list[str] = []
    for message in messages:  # `_stored_text`, inline: this loop is an agent's every read
        metadata = message.metadata
        stored = metadata.get(ITEM_KEY) or metadata.get(_ADAPTER_KEY)
        if type(stored) is str:
            texts.append(stored)
        else:
            kept = _kept_object(message)
            rebuilt = [kept] if kept is not None else _equivalents(message)
            texts.extend(jsonenc.dumps(item) for item in rebuilt)
    items: list[Any] = jsonenc.loads("[" + ",".join(texts) + "]")
    return items


def _equivalents(message: Message) -> list[Any]:
    """The items a message stored without one says: its text (when it has any, or no tool
    calls), then one function call per tool call; a tool message is a function call output."""
    if message.role is Role.TOOL:
        call_id = message.tool_call_id or ""
        return [{"type": "function_call_output", "call_id": call_id, "output": message.content}]
    items: list[Any] = []
    if message.content or not message.tool_calls:
        items.append({"role": message.role.value, "content": message.content})
    items.extend(_function_call(call) for call in message.tool_calls or ())
    return items


def _function_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments", "")
    return {
        "type": "function_call", "call_id": str(call.get("id", "")),
        "name": str(function.get("name", "")),
        "arguments": arguments if isinstance(arguments, str) else jsonenc.dumps(arguments),
    }  # fmt: skip


# -- messages → items, as OpenAI's APIs answer ------------------------------------------------


def api_items(message: Message) -> list[dict[str, Any]]:
    """The items a stored message reads as in the Conversations and Responses APIs: one, or
    one per tool call of a message stored without an item (the text first, when it has any)."""
    stored = _stored_text(message)
    if stored is not None:
        return [_answered(jsonenc.loads(stored), message.id)]
    kept = _kept_object(message)
    if kept is not None:
        return [_answered_as_kept(kept, message.id)]
    if message.role is Role.TOOL:
        return [
            {
                "id": message.id, "type": "function_call_output",
                "call_id": message.tool_call_id or "", "output": message.content,
                "status": "completed",
            }
        ]  # fmt: skip
    return _numbered(message.id, message.role, message.content, message.tool_calls or ())


def reply_items(
    item_id: str, content: str, tool_calls: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The output items of a model's reply that is not stored (the Responses API's
    `store: false`), named as a stored reply's would be."""
    return _numbered(item_id, Role.ASSISTANT, content, tuple(tool_calls))


def _numbered(
    item_id: str, role: Role, content: str, tool_calls: tuple[Mapping[str, Any], ...]
) -> list[dict[str, Any]]:
    calls = [{**_function_call(call), "status": "completed"} for call in tool_calls]
    texts = [_message_item(role, content)] if content.strip() or not calls else []
    items = [*texts, *calls]
    for index, item in enumerate(items):
        item["id"] = item_id if index == 0 else f"{item_id}#{index}"
    return items


def _message_item(role: Role, content: str) -> dict[str, Any]:
    parts = [_text_part(role.value, content)]
    return {"type": "message", "role": role.value, "status": "completed", "content": parts}


def _text_part(role: str, text: str) -> dict[str, Any]:
    if role == "assistant":
        return {"type": "output_text", "text": text, "annotations": []}
    return {"type": "input_text", "text": text}


def _answered(given: Mapping[str, Any], message_id: str) -> dict[str, Any]:
    """`given` named by its message's id, with the `type`, `status` and content parts that
    OpenAI's API always gives."""
    item = {"id": message_id, **{key: value for key, value in given.items() if key != "id"}}
    if "role" in item:
        item.setdefault("type", "message")
        if isinstance(item.get("content"), str):  # OpenAI answers with parts, always
            item["content"] = [_text_part(item["role"], item["content"])]
    if item.get("type") in _STATUS_TYPES:
        item.setdefault("status", "completed")
    return item


def _answered_as_kept(kept: Mapping[str, Any], message_id: str) -> dict[str, Any]:
    """An item an earlier Conversations API kept, exactly as it read it: `status` only for an
    item that named its type, text parts without `annotations`."""
    item = {"id": message_id, **kept}
    if item.get("type") in _STATUS_TYPES:
        item.setdefault("status", "completed")
    if "role" in item:
        item.setdefault("type", "message")
        if isinstance(item.get("content"), str):
            kind = "output_text" if item["role"] == "assistant" else "input_text"
            item["content"] = [{"type": kind, "text": item["content"]}]
    return item
