"""`GET /v1/models` and `GET /v1/models/{id}`: the models a client may name, as OpenAI's API
lists them. The upstream's own list is passed through (each entry as it sent it); an upstream
that keeps no list (many local servers answer 404) is shown as the one model turnkeeper is
configured to ask for. Errors are in OpenAI's shape, as on every OpenAI-compatible route."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from turnkeeper.errors import NotFound
from turnkeeper.server.deps import CallerDep, Turns
from turnkeeper.server.openai_schemas import ModelList, ModelObject, model_entry
from turnkeeper.server.problems import OPENAI_ERRORS
from turnkeeper.turns import ChatTurns, TurnOptions

router = APIRouter(tags=["openai-compatible"], responses=OPENAI_ERRORS)


def _models(turns: ChatTurns) -> list[ModelObject]:
    listed = turns.llm.models()
    if not listed:
        return [ModelObject(id=turns.model_for(TurnOptions()))]
    return [model_entry(entry) for entry in listed]


@router.get("/v1/models")
def list_models(turns: Turns, caller: CallerDep) -> ModelList:
    """The upstream's models, or the configured one when the upstream lists none."""
    return ModelList(data=_models(turns))


@router.get("/v1/models/{model:path}")
def retrieve_model(
    model: Annotated[str, Path(min_length=1, max_length=255, description="The model's id.")],
    turns: Turns,
    caller: CallerDep,
) -> ModelObject:
    """One model of the list; 404 naming it when the list has no such model."""
    for entry in _models(turns):
        if entry.id == model:
            return entry
    raise NotFound(f"the model {model!r} does not exist")
