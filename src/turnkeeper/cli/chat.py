"""`turnkeeper chat`: talk to the configured model in the terminal, remembered in a session.

Every turn is the same turn the HTTP `/chat` route runs (`turnkeeper.turns.ChatTurns`): the
user's line is stored first, the window is built from the stored history by the chosen strategy
and budget, the reply streams to stdout as it arrives and is stored when it is complete. So a
chat can be continued later (`-c`, llm's habit), inspected with `history`, or picked up by any
other interface.

stdout carries only the model's words (one reply per line read), so `echo hi | turnkeeper chat
k` is scriptable; the banner and prompts appear only on a terminal, on stderr.

A line starting with `/` is a command to the chat, never sent to the model (`/help` lists them;
an unknown one is an error line); `//` sends a line that starts with `/`.
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
    OldBudgetOption,
    ProjectOption,
    StrategyOption,
    UsageProblem,
    app,
    latest_session,
    open_ctx,
)
from turnkeeper.errors import TurnkeeperError
from turnkeeper.llm import LLMClient, delta_text
from turnkeeper.turns import Attempt, ChatTurns, TurnOptions
from turnkeeper.types import NewMessage, Role, Session
from turnkeeper.validation import window_budget

ENDINGS = frozenset({"exit", "quit"})
STREAM_REQUEST = {"stream": True, "stream_options": {"include_usage": True}}
CLI_TURN = Attempt(source="cli")
"""How a turn typed here arrived (its trace says "cli")."""

SLASH_COMMANDS = {
    "/help": "list these commands",
    "/session": "the session this chat is stored in",
    "/exit": "end the chat (also /quit, exit, quit or Ctrl-D)",
}
"""What a line starting with `/` may say; `//text` sends `/text` to the model."""


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
    max_tokens: OldBudgetOption = None,
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
    options = TurnOptions(
        strategy=strategy, budget_tokens=window_budget(budget, max_tokens), model=model
    )
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
        return latest_session(ctx, project=project, active=True)
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
        if line.startswith("/") and not line.startswith("//"):
            command = line.split()[0].lower()
            if command in ("/exit", "/quit"):
                break
            failed = not _slash(ctx, command, session) or failed
            continue
        if line.startswith("//"):
            line = line[1:]
        try:
            _turn(turns, session, line, options)
        except TurnkeeperError as exc:
            failed = True
            problem = " ".join(str(exc).splitlines())
            ctx.out.err.print(Text.assemble(("error: ", "red bold"), problem))
        session = ctx.tk.get_session(session.id)  # its counters moved on
    return failed


def _slash(ctx: Ctx, command: str, session: Session) -> bool:
    """Answer a chat command on stderr; False for an unknown one (an error line)."""
    if command == "/help":
        for name, what in SLASH_COMMANDS.items():
            ctx.out.err.print(Text.assemble((f"{name:<10}", "bold"), what))
        ctx.out.err.print("//text    send a line starting with / to the model", markup=False)
        return True
    if command == "/session":
        key = f" (key {session.key})" if session.key else ""
        ctx.out.err.print(f"session {session.id}{key}", markup=False)
        return True
    ctx.out.err.print(
        Text.assemble(("error: ", "red bold"), f"unknown command {command}; /help lists them")
    )
    return False


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
        request=STREAM_REQUEST, attempt=CLI_TURN,
    )  # fmt: skip
    stream = turns.stream(prepared)
    try:
        for chunk in stream:
            sys.stdout.write(delta_text(chunk))
            sys.stdout.flush()
    except KeyboardInterrupt:  # stop this answer (it is not stored), keep the chat
        stream.cancel()
    finally:
        sys.stdout.write("\n")
        sys.stdout.flush()
