"""`turnkeeper chat`: talk to the configured model in the terminal, remembered in a session.

Every turn is the same turn the HTTP `/chat` route runs (`turnkeeper.turns.ChatTurns`): the
user's line is stored first, the window is built from the stored history by the chosen strategy
and budget, the reply streams to stdout as it arrives and is stored when it is complete. So a
chat can be continued later (`-c`, llm's habit), inspected with `history`, or picked up by any
other interface.

stdout carries only the model's words (one reply per line read), so `echo hi | turnkeeper chat
k` is scriptable; the banner and prompts appear only on a terminal, on stderr.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.text import Text

from turnkeeper.cli.app import (
    BudgetOption,
    Ctx,
    DbOption,
    ProjectOption,
    StrategyOption,
    UsageProblem,
    app,
    open_ctx,
)
from turnkeeper.errors import TurnkeeperError
from turnkeeper.llm import LLMClient, delta_text
from turnkeeper.turns import ChatTurns, TurnOptions
from turnkeeper.types import NewMessage, Role, Session, SessionStatus

ENDINGS = frozenset({"exit", "quit"})
STREAM_REQUEST = {"stream": True, "stream_options": {"include_usage": True}}


@app.command("chat")
def chat(
    session: Annotated[
        str | None,
        typer.Argument(
            metavar="SESSION",
            help="Session id or key to talk in (a new key starts one; default: a new session).",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--continue", "-c", help="Continue the most recently active session."),
    ] = False,
    system: Annotated[
        str | None,
        typer.Option("--system", metavar="TEXT", help="System prompt of a new session."),
    ] = None,
    strategy: StrategyOption = None,
    budget: BudgetOption = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", metavar="M", help="Model (default: llm_model, then model)."),
    ] = None,
    project: ProjectOption = None,
    db: DbOption = None,
) -> None:
    """Chat with the configured model (llm_base_url), streaming its replies.

    Each line you type is a turn; `exit`, `quit` or Ctrl-D ends the chat. The model sees the
    window turnkeeper builds from the session under --strategy and --budget.
    """
    if resume and session is not None:
        raise UsageProblem("give a SESSION or --continue, not both")
    options = TurnOptions(strategy=strategy, budget_tokens=budget, model=model)
    with open_ctx(db, json_output=False) as ctx:
        llm = LLMClient.from_settings(ctx.tk.settings)
        try:
            turns = ChatTurns(ctx.tk, llm)
            found = _session(ctx, turns, session, resume=resume, project=project)
            if system is not None and found.message_count == 0:
                ctx.tk.append(found, Role.SYSTEM, system)
            failed = _converse(ctx, turns, found, options)
        finally:
            llm.close()
    if failed:
        raise typer.Exit(1)


def _session(
    ctx: Ctx, turns: ChatTurns, ref: str | None, *, resume: bool, project: str | None
) -> Session:
    if resume:
        page = ctx.tk.list_sessions(project=project, status=SessionStatus.ACTIVE, limit=1)
        if not page.items:
            raise UsageProblem("there is no active session to continue; give a SESSION")
        return page.items[0]
    if ref is None:
        return ctx.tk.create_session(project=project)
    found, created = turns.session_for(ref, project=project, create=True)
    if created:
        ctx.out.warn(f"Created session {found.id} with key {ref!r}.")
    return found


def _converse(ctx: Ctx, turns: ChatTurns, session: Session, options: TurnOptions) -> bool:
    """Run turns until the input ends; whether any turn failed (each failure is one line on
    stderr, and the chat goes on: the user's line is stored, a retry can follow)."""
    interactive = sys.stdin.isatty()
    if interactive:
        ctx.out.err.print(
            f"Chatting with {turns.model_for(options)} in session {session.id}"
            f"{f' ({session.key})' if session.key else ''}. Type 'exit' or Ctrl-D to end.",
            style="dim",
            markup=False,
        )
    failed = False
    while (line := _read_line(ctx, interactive)) is not None:
        if not line.strip():
            continue
        if line.strip().lower() in ENDINGS:
            break
        try:
            _turn(turns, session, line, options)
        except TurnkeeperError as exc:
            failed = True
            problem = " ".join(str(exc).splitlines())
            ctx.out.err.print(Text.assemble(("error: ", "red bold"), problem))
        session = ctx.tk.get_session(session.id)  # its counters moved on
    return failed


def _read_line(ctx: Ctx, interactive: bool) -> str | None:
    if interactive:
        ctx.out.err.print("[bold]>[/] ", end="")
    try:
        line = sys.stdin.readline()
    except KeyboardInterrupt:
        return None
    return line.removesuffix("\n") if line else None


def _turn(turns: ChatTurns, session: Session, text: str, options: TurnOptions) -> None:
    prepared = turns.prepare(
        session, [NewMessage(role=Role.USER, content=text)], options=options,
        request=STREAM_REQUEST,
    )  # fmt: skip
    stream = turns.stream(prepared)
    try:
        for chunk in stream:
            sys.stdout.write(delta_text(chunk))
            sys.stdout.flush()
    except KeyboardInterrupt:  # stop this answer (it is not stored), keep the chat
        stream.close()
    finally:
        sys.stdout.write("\n")
        sys.stdout.flush()
