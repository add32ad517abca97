"""Wire shapes of Anthropic's Messages API route (`POST /v1/messages`), as Anthropic's API and
the official `anthropic` client write them. Declared apart from turnkeeper's own REST shapes
(`schemas`) and OpenAI's (`openai_schemas`): these follow Anthropic's field names, and a request
keeps the fields turnkeeper does not know (they go to the upstream as sent)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from turnkeeper.validation import KEY_PATTERN, MAX_WHOLE

SESSION_FIELD = "session_id"
"""The `metadata` field that names the session to remember in (removed before forwarding)."""


class MessagesMetadata(BaseModel):
    """Anthropic's request `metadata`, and turnkeeper's session field beside its `user_id`."""

    model_config = ConfigDict(extra="allow")

    user_id: str | None = Field(
        None,
        max_length=256,
        description="Anthropic's own: who the request is for. Forwarded, never a session (a "
        "user has many conversations).",
    )
    session_id: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        pattern=KEY_PATTERN,
        description="Session id or key to remember in (the `X-Turnkeeper-Session` header "
        "wins); removed before the request is forwarded.",
    )


class MessagesRequest(BaseModel):
    """Anthropic's `POST /v1/messages` body. With a session named, the request's new turns are
    stored and the window is sent in place of its `system` and `messages`; without one it is
    forwarded as sent. Fields turnkeeper does not define go upstream unchanged."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 1024,
                    "messages": [{"role": "user", "content": "What did I ask you before?"}],
                    "metadata": {"session_id": "support-42"},
                }
            ]
        },
    )

    model: str = Field(min_length=1, max_length=256)
    max_tokens: int = Field(ge=1, le=MAX_WHOLE, description="The reply's limit, as Anthropic's.")
    messages: list[dict[str, Any]] = Field(
        min_length=1,
        description="Alternating user and assistant turns; those after the last assistant turn "
        "are new (text, tool results). A client may send only its new turn.",
    )
    system: str | list[dict[str, Any]] | None = Field(
        None, description="Stored as the session's system prompt when the session is empty."
    )
    stream: bool = False
    metadata: MessagesMetadata | None = None
    tools: list[dict[str, Any]] | None = Field(
        None, description="Client tools (no `type`, or `custom`); server tools are a 400."
    )
    cache_control: dict[str, Any] | None = Field(
        None,
        description="Asks for prompt caching (as a `cache_control` on any block does): the "
        "window's stable prefix is marked with it.",
    )

    def session_and_body(self, header: str | None) -> tuple[str | None, dict[str, Any]]:
        """The session the request names (header first) and the body to forward without it."""
        body = self.model_dump(exclude_unset=True)
        metadata = dict(body.pop("metadata", None) or {})
        ref = metadata.pop(SESSION_FIELD, None)
        if metadata:
            body["metadata"] = metadata
        return header or ref, body
