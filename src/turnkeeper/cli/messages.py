"""`turnkeeper add`, `history` and `context`: write turns, read the audit trail, build windows."""

from __future__ import annotations

import enum
import sys
from typing import Annotated, Any

import typer

from turnkeeper.cli.app import (
    BudgetOption,
    Ctx,
    DbOption,
    IncludeInternalOption,
    JsonOption,
    OldBudgetOption,
    ProjectOption,
    SessionArg,
    StrategyOption,
    app,
    command,
    latest_session,
    metadata_option,
    open_ctx,
    parse_tool_calls,
    read_stdin_text,
    session_or_new,
)
from turnkeeper.context.formats import to_anthropic, to_openai
from turnkeeper.types import ContextWindow, NewMessage
from turnkeeper.validation import window_budget


class WindowFormat(enum.StrEnum):
    """How `context --json` shapes the window's messages."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    REPORT = "report"  # the report alone


def _payload(window: ContextWindow, shape: WindowFormat) -> Any | None:
    if shape is WindowFormat.OPENAI:
        return to_openai(window)
    if shape is WindowFormat.ANTHROPIC:
        return to_anthropic(window)
    return None


@app.command("add")
def add(
    session: Annotated[
        str,
        typer.Argument(
            metavar="SESSION",
            help="Session id, or key (looked up in --project; a new key creates the session).",
        ),
    ],
    text: Annotated[
        str, typer.Argument(metavar="TEXT|-", help="The content; - or nothing reads stdin.")
    ] = "-",
    role: Annotated[
        str, typer.Option("--role", metavar="ROLE", help="system, user, assistant or tool.")
    ] = "user",
    author: Annotated[
        str | None, typer.Option("--author", metavar="A", help="Agent or person who said it.")
    ] = None,
    internal: Annotated[
        bool, typer.Option("--internal", help="Kept for audit, hidden from user-facing views.")
    ] = False,
    message_id: Annotated[
        str | None,
        typer.Option("--id", metavar="ID", help="Client message id: adding it twice stores once."),
    ] = None,
    tool_call_id: Annotated[
        str | None,
        typer.Option(
            "--tool-call-id", metavar="ID", help="The call a tool message answers (--role tool)."
        ),
    ] = None,
    tool_calls: Annotated[
        str | None,
        typer.Option(
            "--tool-calls",
            metavar="JSON",
            help="Tool calls an assistant message makes, as an OpenAI JSON array, e.g. "
            '\'[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]\'.',
            show_default=False,
        ),
    ] = None,
    metadata: Annotated[
        dict[str, Any] | None, metadata_option("The message's metadata, as a JSON object.")
    ] = None,
    project: ProjectOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Append one message to a session; a key that names no session creates one."""
    calls = None if tool_calls is None else parse_tool_calls(tool_calls)
    if text == "-" and sys.stdin.isatty():
        typer.echo("Reading the message from stdin; end it with Ctrl-D.", err=True)
    content = read_stdin_text("content").removesuffix("\n") if text == "-" else text
    new = NewMessage(
        role=role, content=content, author=author, internal=internal, id=message_id,
        metadata=metadata, tool_calls=calls, tool_call_id=tool_call_id,
    )  # fmt: skip
    with open_ctx(db, json_output) as ctx:
        ctx.tk.draft(new)  # a bad message is refused before a new session is created for it
        (message,) = ctx.tk.append_many(session_or_new(ctx, session, project=project), [new])
        ctx.out.appended(message)


@command(app, "history")
def history(
    ctx: Ctx,
    session: Annotated[
        str | None,
        typer.Argument(
            metavar="SESSION",
            help="Session id, or key (looked up in --project); default: the session with the "
            "most recent activity.",
            show_default=False,
        ),
    ] = None,
    from_seq: Annotated[
        int | None, typer.Option("--from-seq", metavar="N", help="First seq (inclusive).")
    ] = None,
    to_seq: Annotated[
        int | None, typer.Option("--to-seq", metavar="N", help="Last seq (inclusive).")
    ] = None,
    internal: IncludeInternalOption = True,
    newest_first: Annotated[bool, typer.Option("--newest-first", help="Newest first.")] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", metavar="N", help="At most N messages.")
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Show a session's stored messages (the audit trail), whatever its status; without
    SESSION, those of the most recently active one."""
    if session is None:
        found = latest_session(ctx, project=project)
    else:
        found = ctx.tk.get_session(session, project=project)
    messages = ctx.tk.history(
        found, from_seq=from_seq, to_seq=to_seq, include_internal=internal,
        newest_first=newest_first, limit=limit,
    )  # fmt: skip
    origin = ctx.tk.fork_origin(found)
    if origin is not None:
        ctx.out.note(
            f"[dim]A branch of session {origin.parent_id}: messages up to"
            f" #{origin.forked_at_seq} came from it.[/]"
        )
    ctx.out.history(found.id, messages)


@command(app, "context")
def context(
    ctx: Ctx,
    session: SessionArg,
    strategy: StrategyOption = None,
    budget: BudgetOption = None,
    max_tokens: OldBudgetOption = None,
    reserved: Annotated[
        int | None,
        typer.Option("--reserved", metavar="N", help="Tokens kept free for the reply."),
    ] = None,
    keep_recent: Annotated[
        int | None,
        typer.Option("--keep-recent", metavar="N", help="N of recent, K verbatim of summarize."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="M", help="Model (tokenizer, window).")
    ] = None,
    pending: Annotated[
        str | None,
        typer.Option("--pending", metavar="TEXT", help="A user turn not stored yet, to answer."),
    ] = None,
    internal: Annotated[
        bool | None,
        typer.Option(
            "--internal/--no-internal",
            help="Include internal messages (default: not for recent, yes otherwise).",
            show_default=False,
        ),
    ] = None,
    shape: Annotated[
        WindowFormat,
        typer.Option("--format", help="Message shape of --json output (report: report only)."),
    ] = WindowFormat.OPENAI,
    agent: Annotated[
        str | None,
        typer.Option("--agent", metavar="NAME", help="Build this agent's perspective."),
    ] = None,
    trigger: Annotated[
        int | None,
        typer.Option("--trigger", metavar="SEQ", help="Stored message to answer (with --agent)."),
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Build the window the model would see for the next turn, and report how it was built.
    With --agent, the window is that agent's view of a multi-agent conversation."""
    window = ctx.tk.context(
        session, strategy=strategy, budget_tokens=window_budget(budget, max_tokens),
        reserved_tokens=reserved,
        keep_recent=keep_recent, model=model, include_internal=internal, project=project,
        new_message=None if pending is None else NewMessage(role="user", content=pending),
        agent=agent, trigger=trigger, preview=True,
    )  # fmt: skip
    ctx.out.context(window, _payload(window, shape))
