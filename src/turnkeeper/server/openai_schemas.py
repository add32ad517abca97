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
