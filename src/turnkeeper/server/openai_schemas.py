"""Wire shapes of the OpenAI-compatible routes (models), as OpenAI's API and the
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
