"""OpenAI's Conversations API (`/v1/conversations…`), as the official `openai` client and the
openai-agents SDK's `OpenAIConversationsSession` call it. A conversation is a session of the
caller's project and its items are the session's messages (`turnkeeper.conversations` says
how they translate); errors are in OpenAI's shape, a bad value a 400 naming it."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from turnkeeper.conversations import Conversations, conversation_object
from turnkeeper.server.deps import TK, Scope
from turnkeeper.server.openai_schemas import (
    ConversationCreate,
    ConversationDeleted,
    ConversationObject,
    ConversationUpdate,
    Item,
    ItemList,
    ItemsCreate,
)
from turnkeeper.server.problems import OPENAI_ERRORS

router = APIRouter(prefix="/v1/conversations", tags=["conversations"], responses=OPENAI_ERRORS)

ConversationId = Annotated[
    str, Path(min_length=1, max_length=255, description="The conversation's (session's) id.")
]
ItemId = Annotated[str, Path(min_length=1, max_length=255, description="The item's id.")]
Include = Annotated[
    list[str] | None,
    Query(description="Accepted for OpenAI's clients; every item is returned whole anyway."),
]


@router.post("")
def create_conversation(body: ConversationCreate, tk: TK, scope: Scope) -> ConversationObject:
    """A new conversation (a session) with its metadata and first items."""
    session = Conversations(tk).create(
        metadata=body.metadata, items=body.items or [], project=scope
    )
    return ConversationObject(**conversation_object(session))


@router.get("/{conversation_id}")
def retrieve_conversation(
    conversation_id: ConversationId, tk: TK, scope: Scope
) -> ConversationObject:
    """The conversation; 404 naming it when the caller's project has no such one."""
    return ConversationObject(
        **conversation_object(Conversations(tk).get(conversation_id, project=scope))
    )


@router.post("/{conversation_id}")
def update_conversation(
    conversation_id: ConversationId, body: ConversationUpdate, tk: TK, scope: Scope
) -> ConversationObject:
    """Replace the conversation's metadata."""
    session = Conversations(tk).update(conversation_id, metadata=body.metadata, project=scope)
    return ConversationObject(**conversation_object(session))


@router.delete("/{conversation_id}")
def delete_conversation(
    conversation_id: ConversationId, tk: TK, scope: Scope
) -> ConversationDeleted:
    """Delete the conversation and all its items."""
    return ConversationDeleted(id=Conversations(tk).delete(conversation_id, project=scope))


@router.post("/{conversation_id}/items")
def create_items(
    conversation_id: ConversationId,
    body: ItemsCreate,
    tk: TK,
    scope: Scope,
    include: Include = None,
) -> ItemList:
    """Append up to 20 items at once (a bad one: 400 naming it, nothing stored)."""
    return ItemList.of(Conversations(tk).add_items(conversation_id, body.items, project=scope))


@router.get("/{conversation_id}/items")
def list_items(
    conversation_id: ConversationId,
    tk: TK,
    scope: Scope,
    after: Annotated[str | None, Query(max_length=300, description="List after this item.")] = None,
    limit: Annotated[int, Query(ge=1, le=100, description="Items per page.")] = 20,
    order: Annotated[Literal["asc", "desc"], Query(description="desc: newest first.")] = "desc",
    include: Include = None,
) -> ItemList:
    """A page of the conversation's items."""
    page = Conversations(tk).list_items(
        conversation_id, after=after, limit=limit, order=order, project=scope
    )
    return ItemList.of(page.items, has_more=page.has_more)


@router.get("/{conversation_id}/items/{item_id}")
def retrieve_item(
    conversation_id: ConversationId, item_id: ItemId, tk: TK, scope: Scope, include: Include = None
) -> Item:
    """One item; 404 naming it when the conversation has no such item."""
    return Conversations(tk).get_item(conversation_id, item_id, project=scope)


@router.delete("/{conversation_id}/items/{item_id}")
def delete_item(
    conversation_id: ConversationId, item_id: ItemId, tk: TK, scope: Scope
) -> ConversationObject:
    """Delete the newest item (its message); returns the conversation."""
    session = Conversations(tk).delete_item(conversation_id, item_id, project=scope)
    return ConversationObject(**conversation_object(session))
