"""Wire shapes of the OpenAI-compatible routes (models, conversations), as OpenAI's API and the
official `openai` client read them. Declared apart from turnkeeper's own REST shapes
(`schemas`): these follow OpenAI's field names and keep fields turnkeeper does not know."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ModelObject(BaseModel):
    """One model: OpenAI's `Model`, with any further fields the upstream sent kept."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="The model's name, as the upstream takes it in `model`.")
    object: Literal["model"] = "model"
    created: int = Field(0, description="Unix seconds the model was created (0: unknown).")
    owned_by: str = Field("turnkeeper", description="Who publishes the model.")


class ModelList(BaseModel):
    """OpenAI's model list."""

    object: Literal["list"] = "list"
    data: list[ModelObject]


def model_entry(raw: dict[str, Any]) -> ModelObject:
    """An upstream's entry as a `ModelObject`, its own fields kept."""
    return ModelObject.model_validate({"object": "model", **raw, "id": str(raw["id"])})


class _OpenAIRequest(BaseModel):
    """A request body of an OpenAI-compatible route: a field it does not define is a 400
    naming it."""

    model_config = ConfigDict(extra="forbid")


Item = dict[str, Any]
"""A conversation item, in OpenAI's shape (see `turnkeeper.conversations`)."""


class ConversationCreate(_OpenAIRequest):
    """OpenAI's `POST /conversations` body."""

    metadata: dict[str, Any] | None = Field(
        None, description="Up to 16 string pairs (keys ≤ 64 characters, values ≤ 512)."
    )
    items: list[Item] | None = Field(
        None,
        description="Up to 20 first items: messages with text, function calls, function call "
        "outputs; other item types are stored and returned as given.",
    )


class ConversationUpdate(_OpenAIRequest):
    """OpenAI's `POST /conversations/{id}` body: the new metadata, replacing the old."""

    metadata: dict[str, Any] | None = Field(description="The new metadata (null: none).")


class ItemsCreate(_OpenAIRequest):
    """OpenAI's `POST /conversations/{id}/items` body."""

    items: list[Item] = Field(description="Up to 20 items to append, in order.")


class ConversationObject(BaseModel):
    """OpenAI's `Conversation`: a turnkeeper session."""

    id: str = Field(description="The session's id.")
    object: Literal["conversation"] = "conversation"
    created_at: int = Field(description="Unix seconds the conversation was created.")
    metadata: dict[str, Any]


class ConversationDeleted(BaseModel):
    id: str
    object: Literal["conversation.deleted"] = "conversation.deleted"
    deleted: bool = True


class ItemList(BaseModel):
    """A page of items (OpenAI's `ConversationItemList`)."""

    object: Literal["list"] = "list"
    data: list[Item]
    first_id: str | None
    last_id: str | None
    has_more: bool

    @classmethod
    def of(cls, items: list[Item], *, has_more: bool = False) -> ItemList:
        return cls(
            data=items,
            first_id=items[0]["id"] if items else None,
            last_id=items[-1]["id"] if items else None,
            has_more=has_more,
        )


class ResponseCreate(_OpenAIRequest):
    """OpenAI's `POST /responses` body. What a chat-completions model cannot be asked for
    (hosted tools, non-text parts, `background`, …) is a 400 naming the field."""

    model: str | None = Field(None, description="The upstream model (default: the configured).")
    input: Any = Field(
        description="A string (one user message) or a list of items: messages with text, "
        "function calls, function call outputs."
    )
    instructions: str | None = Field(
        None, description="A system message in front of the window, for this response only."
    )
    conversation: Any = Field(
        None, description="A conversation's (session's) id, or {\"id\": …}: remember in it."
    )
    previous_response_id: str | None = Field(
        None, max_length=300, description="Continue the session that response is in."
    )
    store: bool | None = Field(None, description="false: store nothing (default true).")
    stream: bool | None = Field(None, description="Answer as server-sent Responses events.")
    stream_options: dict[str, Any] | None = None
    tools: list[Any] | None = Field(None, description="Function tools (no hosted tools).")
    tool_choice: Any = Field(None, description="auto, none, required or a function tool.")
    parallel_tool_calls: bool | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1, description="The reply's token limit.")
    text: Any = Field(None, description="`format` (text, json_schema, json_object), `verbosity`.")
    reasoning: Any = Field(None, description="`effort` only.")
    metadata: dict[str, Any] | None = Field(None, description="Up to 16 string pairs, echoed.")
    include: list[str] | None = Field(None, description="Accepted; nothing more to include.")
    truncation: Literal["auto", "disabled"] | None = Field(
        None, description="Accepted: turnkeeper's strategy fits the window to its budget."
    )
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    service_tier: str | None = None
    background: bool | None = Field(None, description="Refused when true.")
    prompt: Any = Field(None, description="Refused: stored prompts live on OpenAI's platform.")
    max_tool_calls: int | None = Field(None, description="Refused: counts hosted tool calls.")
    top_logprobs: int | None = Field(None, description="Refused.")
    context_management: Any = Field(None, description="Refused.")


class ResponseObject(BaseModel):
    """OpenAI's `Response` (its other fields kept as the route gives them)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="resp_<session id>_<seq of the turn>; `store: false`: resp_<…>.")
    object: Literal["response"] = "response"
    created_at: int
    status: str = Field(description="completed, incomplete (the reply hit its limit), …")
    model: str
    output: list[Item]
    usage: dict[str, Any] | None
    conversation: dict[str, Any] | None = Field(description="The session the turn is in.")
