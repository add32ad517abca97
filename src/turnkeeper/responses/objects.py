"""A response's id (it names the stored turn) and OpenAI's `Response` object."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from turnkeeper.errors import NotFound
from turnkeeper.types import Usage

PREFIX = "resp_"
"""How a response id begins."""


class ResponseNotFound(NotFound):
    """No stored response of the caller's project has this id."""

    def __init__(self, response_id: str) -> None:
        super().__init__(f"response {response_id!r} not found")


def response_id(session_id: str, turn_seq: int) -> str:
    """The id of the response answering the turn at `turn_seq` of the session."""
    return f"{PREFIX}{session_id}_{turn_seq}"


def parse_id(value: str) -> tuple[str, int]:
    session_id, _, seq = value.removeprefix(PREFIX).rpartition("_")
    if not value.startswith(PREFIX) or not session_id or not seq.isdigit() or int(seq) < 1:
        raise ResponseNotFound(value)
    return session_id, int(seq)


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
        "input_tokens": usage.input_tokens, "input_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
        "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }  # fmt: skip


def status_of(finish_reason: str | None) -> tuple[str, str | None]:
    """The response's status, and why it is incomplete (a reply cut off at its limit)."""
    return ("incomplete", "max_output_tokens") if finish_reason == "length" else ("completed", None)
