"""OpenAI's Conversations API over sessions: a conversation is a session, its items are the
session's messages, in order.

An item and a message translate as `turnkeeper.openai_items` says (the translation the Responses
API and the OpenAI Agents adapter use too, so an item stored through any of them reads back
through the others): the message carries the item as given, and the item comes back as it was
given, named by its message's id (one the client gave, or `msg_…`, `fc_…`, `fco_…`, `item_…`
made here), with the `status` and content parts OpenAI's API gives; a message stored by another
route with several tool calls reads as one item per call, the later ones `<message id>#<n>`.

Items are checked before anything is stored (a bad one is `InvalidInput` naming
`items[i].<field>`), and one request's items are appended at once, so a bad request stores
nothing. Deleting an item deletes its message, and only the newest message can go: the record
is gapless (`InvalidInput` naming `item_id` otherwise).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from turnkeeper.errors import InvalidInput, NotFound
from turnkeeper.openai_items import api_items, messages_of_items
from turnkeeper.service import Turnkeeper
from turnkeeper.types import Message, MessageQuery, NewMessage, Session

ITEMS_PER_REQUEST = 20
"""Most items one request may add (OpenAI's limit)."""
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512
"""OpenAI's limits on a conversation's metadata: string pairs."""


class ItemNotFound(NotFound):
    """No item of the conversation has this id."""

    def __init__(self, conversation_id: str, item_id: str) -> None:
        super().__init__(f"item {item_id!r} not found in conversation {conversation_id!r}")


class ConversationNotFound(NotFound):
    """No conversation (session) of the caller's project has this id."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} not found")


@dataclass(frozen=True, slots=True)
class ItemPage:
    """A page of items, and whether more follow in the same order."""

    items: list[dict[str, Any]]
    has_more: bool


def check_metadata(metadata: Any) -> dict[str, str]:
    """A conversation's metadata as OpenAI takes it: up to 16 pairs of strings."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput("metadata", "must be an object of string values")
    if len(metadata) > METADATA_PAIRS:
        raise InvalidInput("metadata", f"has {len(metadata)} keys; at most {METADATA_PAIRS}")
    for key, value in metadata.items():
        if not isinstance(key, str) or len(key) > METADATA_KEY_CHARS:
            raise InvalidInput("metadata", f"keys are strings of at most {METADATA_KEY_CHARS}")
        if not isinstance(value, str) or len(value) > METADATA_VALUE_CHARS:
            raise InvalidInput(
                f"metadata.{key}", f"must be a string of at most {METADATA_VALUE_CHARS} characters"
            )
    return dict(metadata)


def conversation_object(session: Session) -> dict[str, Any]:
    """A session as OpenAI's `Conversation`."""
    return {
        "id": session.id, "object": "conversation",
        "created_at": int(session.created_at.timestamp()), "metadata": dict(session.metadata),
    }  # fmt: skip


# -- the operations -------------------------------------------------------------------------


class Conversations:
    """The Conversations API's operations over a `Turnkeeper`, each in a project (None: an
    admin, any project; a conversation is then found by its id wherever it is)."""

    def __init__(self, tk: Turnkeeper) -> None:
        self.tk = tk

    def create(
        self, *, metadata: Any = None, items: Sequence[Any] = (), project: str | None
    ) -> Session:
        """A new conversation with `metadata` and its first `items`."""
        checked, messages = check_metadata(metadata), self._messages(items)
        session = self.tk.create_session(metadata=checked, project=project)
        if messages:
            self.tk.append_many(session, messages)
        return self.tk.get_session(session.id)

    def get(self, conversation_id: str, *, project: str | None) -> Session:
        """The conversation with this id (`ConversationNotFound` naming it otherwise)."""
        try:
            return self.tk.get_session(conversation_id, project=project)
        except NotFound:
            raise ConversationNotFound(conversation_id) from None

    def update(self, conversation_id: str, *, metadata: Any, project: str | None) -> Session:
        """Replace the conversation's metadata."""
        checked = check_metadata(metadata)
        session = self.get(conversation_id, project=project)
        return self.tk.update_session(session.id, metadata=checked, project=project)

    def delete(self, conversation_id: str, *, project: str | None) -> str:
        """Delete the conversation and all its items; returns its id."""
        session = self.get(conversation_id, project=project)
        self.tk.delete_session(session.id, project=project)
        return session.id

    def add_items(
        self, conversation_id: str, items: Sequence[Any], *, project: str | None
    ) -> list[dict[str, Any]]:
        """Append `items` at once; returns them as stored (an item sent again with its id is
        stored once)."""
        if not items:
            raise InvalidInput("items", "must hold at least one item")
        messages = self._messages(items)
        session = self.get(conversation_id, project=project)
        stored = self.tk.append_many(session, messages)
        return [item for message in stored for item in api_items(message)]

    def list_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: str = "desc",
        project: str | None,
    ) -> ItemPage:
        """A page of `limit` items in `order` (`asc`: oldest first), after the item `after`."""
        session = self.get(conversation_id, project=project)
        newest_first = order == "desc"
        items = self._walk(session, after, newest_first)
        page = [item for _, item in zip(range(limit + 1), items, strict=False)]
        return ItemPage(page[:limit], has_more=len(page) > limit)

    def get_item(
        self, conversation_id: str, item_id: str, *, project: str | None
    ) -> dict[str, Any]:
        """One item (`ItemNotFound` naming it otherwise)."""
        session = self.get(conversation_id, project=project)
        message, index = self._locate(session, item_id)
        return api_items(message)[index]

    def delete_item(self, conversation_id: str, item_id: str, *, project: str | None) -> Session:
        """Delete the item's message, which must be the newest; returns the conversation."""
        session = self.get(conversation_id, project=project)
        message, _ = self._locate(session, item_id)
        if message.seq != session.last_seq:
            raise InvalidInput(
                "item_id",
                f"only the newest item of a conversation can be deleted, and {item_id!r} is "
                "not (turnkeeper keeps a gapless record: delete from the newest back)",
            )
        self.tk.pop_last_message(session.id, project=project)
        return self.tk.get_session(session.id)

    def _messages(self, items: Sequence[Any]) -> list[NewMessage]:
        """The items as messages, each checked as an append would (nothing stored yet)."""
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise InvalidInput("items", "must be a list of items")
        if len(items) > ITEMS_PER_REQUEST:
            raise InvalidInput("items", f"holds {len(items)}; at most {ITEMS_PER_REQUEST}")
        settings = self.tk.settings
        return messages_of_items(
            items, "items", max_bytes=settings.max_message_bytes,
            max_json_bytes=settings.max_json_bytes, made_ids=True,
        )  # fmt: skip

    def _locate(self, session: Session, item_id: str) -> tuple[Message, int]:
        """The message holding the item `item_id`, and the item's place among its items."""
        found = self.tk.store.find_messages(session.id, [item_id])
        if item_id in found:
            return found[item_id], 0
        base, _, index = item_id.rpartition("#")
        if base and index.isdigit():
            found = self.tk.store.find_messages(session.id, [base])
            if base in found and int(index) < len(api_items(found[base])):
                return found[base], int(index)
        raise ItemNotFound(session.id, item_id)

    def _walk(
        self, session: Session, after: str | None, newest_first: bool
    ) -> Iterator[dict[str, Any]]:
        """Every item in order, starting after the item `after`."""
        skip_through: str | None = None
        if after is None:
            next_seq: int | None = session.last_seq if newest_first else 1
        else:
            message, _ = self._locate(session, after)
            next_seq, skip_through = message.seq, after
        batch = 50
        while next_seq is not None and 1 <= next_seq <= session.last_seq:
            if newest_first:
                messages = self.tk.store.read_messages(
                    session.id, MessageQuery(to_seq=next_seq, newest_first=True, limit=batch)
                )
            else:
                messages = self.tk.store.read_messages(
                    session.id, MessageQuery(from_seq=next_seq, limit=batch)
                )
            if not messages:
                return
            for message in messages:
                items = api_items(message)
                if newest_first:
                    items.reverse()
                for item in items:
                    if skip_through is not None:
                        if item["id"] == skip_through:
                            skip_through = None
                        continue
                    yield item
            next_seq = messages[-1].seq - 1 if newest_first else messages[-1].seq + 1
