"""The encryption-at-rest contract: what a store encrypting user content must prove.

Give it two fixtures: `store`, a fresh store with every capability, encrypted (e.g. one
`turnkeeper.open(..., encryption_key=...)` assembles), and `at_rest`, a callable returning
everything the deployment has put anywhere outside the process so far, as bytes: database
files and their WAL, a dump of a server database, every cache value. The tests write
recognizable strings into every field that carries user content, read them back whole, and
then look for them at rest::

    class TestMyEncryptedStore(EncryptionContract):
        @pytest.fixture
        def store(self, tmp_path): ...
        @pytest.fixture
        def at_rest(self, tmp_path): return lambda: (tmp_path / "my.db").read_bytes()
"""

from __future__ import annotations

from collections.abc import Callable

from turnkeeper.storage.base import FullStore
from turnkeeper.testing.values import NOW, draft, new_session
from turnkeeper.types import MessageDraft, Role, SummaryCheckpoint

CANARIES = {
    "content": "CANARY-content-7f3a",
    "metadata": "CANARY-metadata-91bc",
    "arguments": "CANARY-tool-arguments-44d0",
    "result": "CANARY-tool-result-2e8f",
    "summary": "CANARY-summary-c5a1",
    "trace": "CANARY-trace-0b6e",
}
"""A string per field that carries user content; none may be found at rest."""


def canary_drafts() -> list[MessageDraft]:
    """A user message, a tool call, its result and a reply with a turn trace, carrying the
    `CANARIES` in every field that is sealed: content, metadata, tool arguments, the tool's
    result and the trace."""
    call: dict[str, object] = {
        "id": "call-1",
        "type": "function",
        "function": {"name": "lookup", "arguments": f'{{"q": "{CANARIES["arguments"]}"}}'},
    }
    return [
        draft(f"I said {CANARIES['content']}", metadata={"note": CANARIES["metadata"]}),
        draft("", role=Role.ASSISTANT, tool_calls=(call,)),
        draft(CANARIES["result"], role=Role.TOOL, tool_call_id="call-1"),
        draft("done", role=Role.ASSISTANT, trace=f'{{"why":"{CANARIES["trace"]}"}}'),
    ]


class EncryptionContract:
    """User content reads back as written and is nowhere at rest in the clear."""

    def test_user_content_reads_back_and_is_not_at_rest(
        self, store: FullStore, at_rest: Callable[[], bytes]
    ) -> None:
        session = store.create_session(new_session(key="canary"), now=NOW)
        written = canary_drafts()
        store.append_messages(session.id, written, now=NOW)
        summary = SummaryCheckpoint(
            session.id, 2, f"They talked of {CANARIES['summary']}", 9, "extractive", NOW
        )
        store.save_summary(summary)
        # Read everything twice: the second read comes from the caches, if any.
        for _ in range(2):
            first, calls, result, _reply = store.read_messages(session.id)
            assert CANARIES["content"] in first.content
            assert first.metadata == {"note": CANARIES["metadata"]}
            assert calls.tool_calls == written[1].tool_calls
            assert result.content == CANARIES["result"]
            assert store.read_traces(session.id, upto_seq=4, limit=1) == [(4, written[3].trace)]
            assert store.latest_summary(session.id) == summary
        stored = at_rest()
        assert stored, "at_rest() returned nothing to look in"
        found = [field for field, canary in CANARIES.items() if canary.encode() in stored]
        assert found == [], f"in the clear at rest: {found}"

    def test_a_retried_append_stores_nothing_twice(self, store: FullStore) -> None:
        session = store.create_session(new_session(), now=NOW)
        message = draft("same words", id="m-1", metadata={"a": 1}, trace="t")
        first = store.append_messages(session.id, [message], now=NOW)
        again = store.append_messages(session.id, [message], now=NOW)
        assert again == first and store.get_session(session.id).message_count == 1
