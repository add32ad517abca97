"""Multi-agent conversations, summaries and the conversation context object:
`/v1/sessions/{session}/phase`, `/handoffs`, `/agents`, `/summaries`, `/conversation-context`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from turnkeeper.server.deps import TK, Scope, SessionRef
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.server.schemas import (
    AgentResponse,
    AgentStatePublic,
    AgentStateUpdatePublic,
    ConversationContextPublic,
    HandoffCreate,
    MessagePublic,
    PhaseChange,
    SummaryPublic,
)
from turnkeeper.validation import NAME_PATTERN

router = APIRouter(tags=["agents"], responses=PROBLEM_RESPONSES)

Agent = Annotated[str, Path(pattern=NAME_PATTERN)]
PREFIX = "/v1/sessions/{session}"


@router.post(f"{PREFIX}/phase", status_code=status.HTTP_201_CREATED)
def change_phase(session: SessionRef, body: PhaseChange, tk: TK, scope: Scope) -> MessagePublic:
    """Move the session to a phase; returns the system event recorded in the history."""
    event = tk.agents.set_phase(
        session, body.phase, by=body.by, summary=body.summary, project=scope
    )
    return MessagePublic.from_domain(event)


@router.post(f"{PREFIX}/handoffs", status_code=status.HTTP_201_CREATED)
def handoff(session: SessionRef, body: HandoffCreate, tk: TK, scope: Scope) -> MessagePublic:
    """Record a hand-off between agents; returns the system event recorded in the history."""
    event = tk.agents.handoff(session, body.from_agent, body.to_agent, body.summary, project=scope)
    return MessagePublic.from_domain(event)


@router.get(f"{PREFIX}/agents")
def list_agents(session: SessionRef, tk: TK, scope: Scope) -> list[AgentStatePublic]:
    """Every agent's state in the session, by name."""
    return [AgentStatePublic.from_domain(s) for s in tk.agents.states(session, project=scope)]


@router.get(f"{PREFIX}/agents/{{agent}}")
def get_agent(session: SessionRef, agent: Agent, tk: TK, scope: Scope) -> AgentStatePublic:
    """One agent's state (an agent that never answered is at 0)."""
    return AgentStatePublic.from_domain(tk.agents.state(session, agent, project=scope))


@router.patch(f"{PREFIX}/agents/{{agent}}")
def update_agent(
    session: SessionRef, agent: Agent, body: AgentStateUpdatePublic, tk: TK, scope: Scope
) -> AgentStatePublic:
    """Set an agent's position and/or provider session id."""
    state = tk.agents.update_state(
        session, agent, last_processed_seq=body.last_processed_seq,
        provider_session_id=body.provider_session_id, project=scope,
    )  # fmt: skip
    return AgentStatePublic.from_domain(state)


@router.post(f"{PREFIX}/agents/{{agent}}/responded")
def agent_responded(
    session: SessionRef, agent: Agent, body: AgentResponse, tk: TK, scope: Scope
) -> AgentStatePublic:
    """The agent answered: store its reply (if given) and move it to the end of the history."""
    state = tk.agents.responded(
        session, agent, body.reply, provider_session_id=body.provider_session_id,
        execution_ms=body.execution_ms, project=scope,
    )  # fmt: skip
    return AgentStatePublic.from_domain(state)


@router.get(f"{PREFIX}/summaries")
def list_summaries(session: SessionRef, tk: TK, scope: Scope) -> list[SummaryPublic]:
    """The session's summary checkpoints, oldest first."""
    return [SummaryPublic.from_domain(c) for c in tk.summaries(session, project=scope)]


@router.get(f"{PREFIX}/conversation-context")
def conversation_context(session: SessionRef, tk: TK, scope: Scope) -> ConversationContextPublic:
    """The conversation context object and planner text (empty if the store is unreachable)."""
    return ConversationContextPublic.from_domain(tk.conversation_context(session, project=scope))
