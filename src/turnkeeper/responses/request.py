"""A `POST /v1/responses` body, checked and translated to chat completions: its input's
messages, and the chat-completion fields its options stand for; what chat completions cannot be
asked is `InvalidInput` naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from turnkeeper.conversations import check_metadata
from turnkeeper.errors import InvalidInput
from turnkeeper.openai_items import (
    TEXT_PARTS,
    check_item,
    messages_of_items,
)
from turnkeeper.types import NewMessage

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
