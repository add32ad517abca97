"""`turnkeeper agents …` (multi-agent conversations), `summaries` and
`conversation-context`: thin commands over the service."""

from __future__ import annotations

from typing import Annotated

import typer

from turnkeeper.cli.app import Ctx, ProjectOption, SessionArg, app, command
from turnkeeper.context.conversation import planner_context
from turnkeeper.types import Phase

agents = typer.Typer(
    help="Agents of multi-agent conversations: phases, hand-offs, per-agent state.",
    no_args_is_help=True,
)
app.add_typer(agents, name="agents")

AgentArg = Annotated[str, typer.Argument(metavar="AGENT", help="The agent's name.")]
SummaryOption = Annotated[
    str | None, typer.Option("--summary", metavar="TEXT", help="Hand-off summary.")
]


@command(agents, "list")
def list_agents(ctx: Ctx, session: SessionArg, project: ProjectOption = None) -> None:
    """Every agent's state in the session: last seq processed, provider session, time."""
    ctx.out.agent_states(ctx.tk.agents.states(session, project=project))


@command(agents, "responded")
def responded(
    ctx: Ctx,
    session: SessionArg,
    agent: AgentArg,
    reply: Annotated[
        str | None, typer.Option("--reply", metavar="TEXT", help="The answer, to store.")
    ] = None,
    provider_session_id: Annotated[
        str | None,
        typer.Option("--provider-session", metavar="ID", help="The provider's session id."),
    ] = None,
    execution_ms: Annotated[
        int | None, typer.Option("--execution-ms", metavar="MS", help="Time the turn took.")
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Record that AGENT answered: store its reply and move it to the end of the history."""
    state = ctx.tk.agents.responded(
        session, agent, reply, provider_session_id=provider_session_id,
        execution_ms=execution_ms, project=project,
    )  # fmt: skip
    ctx.out.agent_states([state])


@command(agents, "phase")
def phase(
    ctx: Ctx,
    session: SessionArg,
    new_phase: Annotated[Phase, typer.Argument(metavar="PHASE", help="The new phase.")],
    by: Annotated[str | None, typer.Option("--by", metavar="AGENT", help="Who moves it.")] = None,
    summary: SummaryOption = None,
    project: ProjectOption = None,
) -> None:
    """Move the session to PHASE, recording the transition in the history."""
    event = ctx.tk.agents.set_phase(session, new_phase, by=by, summary=summary, project=project)
    ctx.out.appended(event)


@command(agents, "handoff")
def handoff(
    ctx: Ctx,
    session: SessionArg,
    from_agent: Annotated[str, typer.Argument(metavar="FROM", help="Agent handing over.")],
    to_agent: Annotated[str, typer.Argument(metavar="TO", help="Agent taking over.")],
    summary: SummaryOption = None,
    project: ProjectOption = None,
) -> None:
    """Record that FROM hands the work to TO (with a summary), in the history."""
    ctx.out.appended(ctx.tk.agents.handoff(session, from_agent, to_agent, summary, project=project))


@command(app, "summaries")
def summaries(ctx: Ctx, session: SessionArg, project: ProjectOption = None) -> None:
    """The session's stored summary checkpoints (rolling summaries of older messages)."""
    ctx.out.summaries(ctx.tk.summaries(session, project=project))


@command(app, "conversation-context")
def conversation_context(ctx: Ctx, session: SessionArg, project: ProjectOption = None) -> None:
    """The conversation context object; prints the planner text (--json: the whole object)."""
    found = ctx.tk.conversation_context(session, project=project)
    ctx.out.conversation_context(found, planner_context(found))
