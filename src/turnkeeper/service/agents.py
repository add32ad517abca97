"""Multi-agent conversations, as `tk.agents`: agent states (how far each agent has read),
phase changes and hand-offs recorded as system events, and the act of responding.

The agent-state store calls all live here; the context builder and the session statistics ask
this object (`position`, `execution_ms`) rather than the store.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from turnkeeper.context.perspective import EVENT_KEY
from turnkeeper.errors import InvalidInput
from turnkeeper.service.core import Core, SessionRef, agent_name
from turnkeeper.service.messages import Messages
from turnkeeper.storage.base import AgentStateStore, require
from turnkeeper.types import (
    AgentState,
    AgentStateUpdate,
    Message,
    NewMessage,
    Phase,
    Role,
    Session,
    SessionPatch,
)
from turnkeeper.validation import check_name, check_non_negative, check_phase, check_text


class Agents:
    """The multi-agent operations of a `Turnkeeper` (`tk.agents`)."""

    def __init__(self, core: Core, messages: Messages) -> None:
        self._core = core
        self._messages = messages

    @property
    def _states(self) -> AgentStateStore:
        """The store's agent states, or `Unsupported` on a store without them."""
        return require(self._core.store, AgentStateStore, "agent states")

    # -- what other capabilities ask --------------------------------------------------------

    def position(self, session_id: str, agent: str) -> int:
        """The seq `agent` had read up to when it last answered (0: it has processed nothing)."""
        state = self._states.get_agent_state(session_id, agent)
        return state.last_processed_seq if state else 0

    def execution_ms(self, session_id: str) -> int:
        """The execution time every agent of the session reported, in total."""
        store = self._core.store
        if not isinstance(store, AgentStateStore):
            return 0  # a store without agent states has no agent that reported any
        return sum(state.execution_ms for state in store.list_agent_states(session_id))

    # -- events -----------------------------------------------------------------------------

    def _event(
        self,
        session: Session,
        content: str,
        author: str | None,
        event: dict[str, Any],
        **extra: Any,
    ) -> Message:
        """Store a system event (phase transition, hand-off) in the history: `metadata.event`
        holds its fields (`kind` first); `extra` adds top-level metadata."""
        metadata = {EVENT_KEY: event, **extra}
        (stored,) = self._messages.append_many(
            session, [NewMessage(Role.SYSTEM, content, author=author, metadata=metadata)]
        )
        return stored

    def set_phase(
        self,
        ref: SessionRef,
        phase: Phase | str,
        *,
        by: str | None = None,
        summary: str | None = None,
        project: str | None = None,
    ) -> Message:
        """Move the session to `phase` (chat, brainstorm, plan, execute, verification, chores,
        reflection) and record the transition in the history as a system event (`metadata.
        event.kind == "phase_transition"`, with who moved it and the hand-off summary if any).
        Returns the stored event."""
        new = check_phase(phase)
        if new is None:
            raise InvalidInput("phase", "a phase is needed")
        core = self._core
        session = core.get_session(ref, project=project)
        by = check_name("by", by)
        summary = check_text("summary", summary)
        text = f"Phase changed from {session.phase or 'none'} to {new.value}"
        text += f" by {by}." if by else "."
        if summary:
            text += f"\nSummary: {summary}"
        event = self._event(
            session, text, by,
            {"kind": "phase_transition", "from": session.phase, "to": new.value, "by": by,
             "summary": summary},
            phase=new.value,  # what the web UI draws as a phase divider
        )  # fmt: skip
        core.store.update_session(session.id, SessionPatch(phase=new.value), now=core.now())
        return event

    def handoff(
        self,
        ref: SessionRef,
        from_agent: str,
        to_agent: str,
        summary: str | None = None,
        *,
        project: str | None = None,
    ) -> Message:
        """Record that `from_agent` hands the work to `to_agent`, with a summary for the
        receiver, as a system event in the history (`metadata.event.kind == "handoff"`).
        The receiver sees it in its history, and in its "while you were away" block if it
        was away. Returns the stored event."""
        session = self._core.get_session(ref, project=project)
        source, target = agent_name("from_agent", from_agent), agent_name("to_agent", to_agent)
        summary = check_text("summary", summary)
        text = f"Hand-off from {source} to {target}."
        if summary:
            text += f"\nSummary: {summary}"
        return self._event(
            session, text, source,
            {"kind": "handoff", "from": source, "to": target, "summary": summary},
        )  # fmt: skip

    # -- states -----------------------------------------------------------------------------

    def state(self, ref: SessionRef, agent: str, *, project: str | None = None) -> AgentState:
        """The agent's state in the session; an agent that never answered is at 0."""
        session = self._core.get_session(ref, project=project)
        name = agent_name("agent", agent)
        return self._states.get_agent_state(session.id, name) or AgentState(session.id, name)

    def states(self, ref: SessionRef, *, project: str | None = None) -> list[AgentState]:
        """Every agent's state in the session, by name."""
        return self._states.list_agent_states(self._core.get_session(ref, project=project).id)

    def update_state(
        self,
        ref: SessionRef,
        agent: str,
        *,
        last_processed_seq: int | None = None,
        provider_session_id: str | None = None,
        project: str | None = None,
    ) -> AgentState:
        """Set the agent's position and/or provider session id (None keeps a field)."""
        core = self._core
        session = core.get_session(ref, project=project)
        if last_processed_seq is not None:
            check_non_negative("last_processed_seq", last_processed_seq)
        update = AgentStateUpdate(
            last_processed_seq=last_processed_seq,
            provider_session_id=check_text("provider_session_id", provider_session_id),
        )
        name = agent_name("agent", agent)
        return self._states.update_agent_state(session.id, name, update, now=core.now())

    def responded(
        self,
        ref: SessionRef,
        agent: str,
        reply: str | NewMessage | None = None,
        *,
        provider_session_id: str | None = None,
        execution_ms: int | None = None,
        project: str | None = None,
    ) -> AgentState:
        """Record that `agent` answered: store its `reply` (if given; authored by it), then
        move its state to the end of the history (the multi-agent runner's
        `lastProcessedMessageIndex` = history length), keep or replace its provider session id,
        and add `execution_ms` to its time. This, not a plain append, is what advances an agent."""
        core = self._core
        session = core.get_session(ref, project=project)
        name = agent_name("agent", agent)
        if execution_ms is not None:
            check_non_negative("execution_ms", execution_ms)
        if reply is not None:
            message = reply if isinstance(reply, NewMessage) else NewMessage(Role.ASSISTANT, reply)
            self._messages.append_many(session, [dataclasses.replace(message, author=name)])
        update = AgentStateUpdate(
            last_processed_seq=core.store.get_session(session.id).last_seq,
            provider_session_id=check_text("provider_session_id", provider_session_id),
            add_execution_ms=execution_ms or 0,
            add_turns=1,
        )
        return self._states.update_agent_state(session.id, name, update, now=core.now())
