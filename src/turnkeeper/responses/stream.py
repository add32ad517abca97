"""A streamed response: the chat-completion chunks of the turn as the Responses API's events."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from turnkeeper.llm import Reply


class Chunks(Protocol):
    """Completion chunks that must be closed (`TurnStream`, `ChatStream`)."""

    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


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
