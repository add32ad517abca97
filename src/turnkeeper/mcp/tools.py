"""The MCP server: turnkeeper's operations as tools a model can call, and each session's
transcript as a resource.

Every tool is thin: it asks who is calling (`CallerOf`: the API key's caller over HTTP, the
local admin or `--project` on stdio), resolves the session in that caller's project exactly as
the HTTP routes do (`turnkeeper.callers`), calls one `Turnkeeper` method and answers with the
same JSON document `turnkeeper --json` prints for it (both made by `turnkeeper.records.plain`).
A `TurnkeeperError` becomes a tool error (`isError`) carrying the CLI's one-line message, so the
model reads what went wrong and can correct its call; a session of another project is "not
found", never its data.

Inputs are checked by turnkeeper itself, not by the schema, so a bad value gets the same
message as everywhere else (`budget_tokens: must be positive, got -5`); the schemas say in their
descriptions what is allowed. Their types are strict, though: a number or a flag sent as text
(`{"from_seq": "1"}`, `{"newest_first": "yes"}`) or a fraction for a whole number is refused
naming the argument, never read as a guess (`StrictInt`, `StrictBool`).

This module does not use `from __future__ import annotations`: the SDK reads the tools'
signatures at run time to build their input schemas.
"""

import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, StrictBool, StrictInt

import turnkeeper
from turnkeeper import records
from turnkeeper.callers import Caller, PerCallerLimit, resolve_session
from turnkeeper.errors import SessionNotFound, TurnkeeperError
from turnkeeper.service import Turnkeeper
from turnkeeper.types import Message, StrategyName

CallerOf = Callable[[Context], Caller]
"""Who is making the request `Context` belongs to."""

INSTRUCTIONS = """turnkeeper is durable conversation memory. Store every turn of a conversation
with append_message (a session is named by its id or by a key you choose, e.g. a ticket or task
name; get_or_create_session starts one), and before answering call get_context: it returns the
messages to send to the model under a token budget, with a report of what was left out or
summarized. list_sessions finds earlier conversations and search_messages what was said in
them; get_history reads the stored messages;
summarize_session condenses the older part; get_session_stats counts messages and tokens."""

STRATEGIES = ", ".join(name.value for name in StrategyName)

SessionArg = Annotated[
    str,
    Field(
        description="The session: its id, or its key (looked up in your project).",
        min_length=1,
    ),
]
ProjectArg = Annotated[
    str | None,
    Field(
        description="Project to work in. A project API key works in its own only; an admin "
        "names any (default: all projects for a listing, the default project for a new "
        "session)."
    ),
]


def _document(value: Any) -> dict[str, Any]:
    document: dict[str, Any] = records.plain(value)
    return document


def _ok(value: Any) -> CallToolResult:
    """A tool's answer: the JSON document as text (what a model reads) and as structured
    content (what a program reads)."""
    document = _document(value)
    text = json.dumps(document, ensure_ascii=False, indent=1)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=document
    )


def _failed(exc: TurnkeeperError) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)


def build_server(
    tk: Turnkeeper, caller_of: CallerOf, searches: PerCallerLimit | None = None
) -> MCPServer:
    """The MCP server over the open `tk`, serving each request as `caller_of` says. `searches`:
    the turns at search each API key may take at once (the HTTP service's, which its REST
    and UI searches take too); None: unlimited (one local client on stdio)."""
    server: MCPServer = MCPServer(
        "turnkeeper",
        title="turnkeeper",
        description="Conversation memory: durable turns, token-budgeted context windows.",
        instructions=INSTRUCTIONS,
        version=turnkeeper.__version__,
        log_level="WARNING",
    )

    def answer(
        ctx: Context, work: Callable[[str | None], Any], project: str | None = None
    ) -> CallToolResult:
        """Run `work` in the project the caller works in, given the `project` it asked for
        (None: an admin across all projects)."""
        try:
            return _ok(work(caller_of(ctx).scope(project)))
        except TurnkeeperError as exc:
            return _failed(exc)

    def session_in(ref: str, scope: str | None) -> str:
        return resolve_session(tk, ref, scope)

    def search_turn(ctx: Context) -> AbstractContextManager[None]:
        return searches.turn(caller_of(ctx)) if searches is not None else nullcontext()

    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=reading)
    def list_sessions(
        ctx: Context,
        project: ProjectArg = None,
        search: Annotated[
            str | None,
            Field(description="Only sessions whose key, subject or title contains this text "
                  "(case-insensitive)."),
        ] = None,
        key: Annotated[str | None, Field(description="Only the sessions with this key.")] = None,
        subject: Annotated[
            str | None, Field(description="Only sessions about this subject (exact).")
        ] = None,
        kind: Annotated[str | None, Field(description="Only sessions of this kind (exact).")] = None,
        status: Annotated[
            str | None, Field(description="Only sessions in this status: active, archived or expired.")
        ] = None,
        limit: Annotated[
            StrictInt, Field(description="Sessions per page, 1 to 1000.")
        ] = 20,
        cursor: Annotated[
            str | None,
            Field(description="The next_cursor of the previous page, to read the next one."),
        ] = None,
    ) -> CallToolResult:  # fmt: skip
        """List conversation sessions, most recently updated first: id, key, title, status,
        message and token counts. Pass next_cursor back as cursor for the next page."""

        def work(scope: str | None) -> Any:
            page = tk.list_sessions(
                project=scope, search=search, key=key, subject=subject,
                kind=kind, status=status, limit=limit, cursor=cursor,
            )  # fmt: skip
            return {"sessions": page.items, "next_cursor": page.next_cursor}

        return answer(ctx, work, project)

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, open_world_hint=False))
    def get_or_create_session(
        ctx: Context,
        key: Annotated[
            str,
            Field(description="The session's key: a name you choose (e.g. 'ticket-4711') of "
                  "letters, digits and . _ : @ + = ~ - (no /), unique among the live sessions "
                  "of the project.", min_length=1),
        ],
        title: Annotated[str | None, Field(description="A title (new session only).")] = None,
        subject: Annotated[
            str | None, Field(description="What it is about, e.g. a ticket id (new session only).")
        ] = None,
        kind: Annotated[
            str | None, Field(description="A kind of conversation, e.g. 'support' (new session only).")
        ] = None,
        project: ProjectArg = None,
    ) -> CallToolResult:  # fmt: skip
        """Find the live session holding `key`, or start a new one with it. Answers the
        session and whether it was created."""

        def work(scope: str | None) -> Any:
            session, created = tk.get_or_create_session(
                key, project=scope, title=title, subject=subject, kind=kind
            )
            return {"session": session, "created": created}

        return answer(ctx, work, project)

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, open_world_hint=False))
    def append_message(
        ctx: Context,
        session: SessionArg,
        content: Annotated[str, Field(description="The message text.")],
        role: Annotated[
            str, Field(description="Who speaks: system, user, assistant or tool.")
        ] = "user",
        author: Annotated[
            str | None,
            Field(description="Name of the speaker (a person, or an agent in a multi-agent "
                  "conversation)."),
        ] = None,
        id: Annotated[
            str | None,
            Field(description="Your id for the message. Sending the same id again stores "
                  "nothing twice (safe retries); the same id with other content is refused."),
        ] = None,
        internal: Annotated[
            StrictBool,
            Field(description="An internal note: kept in the history, left out of "
                  "user-facing context."),
        ] = False,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Any JSON object stored with the message.")
        ] = None,
    ) -> CallToolResult:  # fmt: skip
        """Store one message at the end of a session's history. Answers the stored message
        with its seq (its position, from 1) and its token count."""

        def work(scope: str | None) -> Any:
            stored = tk.append(
                session_in(session, scope), role, content, author=author, id=id,
                internal=internal, metadata=metadata, project=scope,
            )  # fmt: skip
            return {"message": stored}

        return answer(ctx, work)

    @server.tool(annotations=reading)
    def get_context(
        ctx: Context,
        session: SessionArg,
        strategy: Annotated[
            str | None,
            Field(description=f"How to fit the history into the budget: one of {STRATEGIES} "
                  "(default: the server's configured strategy)."),
        ] = None,
        budget_tokens: Annotated[
            StrictInt | None,
            Field(description="Token budget of the window, a positive integer (default: from "
                  "the model's context window)."),
        ] = None,
        reserved_tokens: Annotated[
            StrictInt | None,
            Field(description="Tokens of the budget to keep free for the reply (0 or more)."),
        ] = None,
        keep_recent: Annotated[
            StrictInt | None,
            Field(description="How many recent messages `recent` keeps, and `summarize` keeps "
                  "verbatim (a positive integer)."),
        ] = None,
        model: Annotated[
            str | None,
            Field(description="The model the window is for, e.g. 'gpt-4o': picks the "
                  "tokenizer and the default budget."),
        ] = None,
    ) -> CallToolResult:  # fmt: skip
        """Build the messages a model should see for the next turn of a session, under a token
        budget: OpenAI-style chat messages, and a report of what was included, dropped or
        summarized and how many tokens the window costs. Nothing stored changes."""

        def work(scope: str | None) -> Any:
            window = tk.context(
                session_in(session, scope), strategy=strategy, budget_tokens=budget_tokens,
                reserved_tokens=reserved_tokens, keep_recent=keep_recent, model=model,
                project=scope, preview=True,
            )  # fmt: skip
            return {"messages": turnkeeper.to_openai(window), "report": window.report}

        return answer(ctx, work)

    @server.tool(annotations=reading)
    def get_history(
        ctx: Context,
        session: SessionArg,
        from_seq: Annotated[
            StrictInt | None, Field(description="First seq to read (messages are numbered from 1).")
        ] = None,
        limit: Annotated[
            StrictInt | None, Field(description="At most this many messages (a positive integer).")
        ] = 50,
        newest_first: Annotated[
            StrictBool, Field(description="Newest message first (e.g. with limit, the last N).")
        ] = False,
        include_internal: Annotated[
            StrictBool, Field(description="Include internal notes.")
        ] = True,
    ) -> CallToolResult:  # fmt: skip
        """Read a session's stored messages (the full audit trail, whatever its status), in
        seq order."""

        def work(scope: str | None) -> Any:
            ref = session_in(session, scope)
            messages = tk.history(
                ref, from_seq=from_seq, limit=limit, newest_first=newest_first,
                include_internal=include_internal, project=scope,
            )  # fmt: skip
            return {"session_id": tk.get_session(ref, project=scope).id, "messages": messages}

        return answer(ctx, work)

    @server.tool(annotations=reading)
    def search_messages(
        ctx: Context,
        query: Annotated[
            str,
            Field(description='What to find: words (all must appear), "a phrase", a OR b, '
                  "-excluded, prefix*.", min_length=1),
        ],
        project: ProjectArg = None,
        session: Annotated[
            str | None, Field(description="Only this session (its id, or its key).")
        ] = None,
        role: Annotated[
            str | None, Field(description="Only messages of this role: system, user, assistant "
                              "or tool.")
        ] = None,
        author: Annotated[str | None, Field(description="Only messages by this author.")] = None,
        limit: Annotated[StrictInt, Field(description="At most this many hits, 1 to 100.")] = 20,
        offset: Annotated[StrictInt, Field(description="Skip this many hits (the next page).")] = 0,
    ) -> CallToolResult:  # fmt: skip
        """Search the content of stored messages across sessions, best matches first: each
        hit names its session (id and key), seq, role and author, with a snippet in which the
        matching words are marked. Use it to find what was said in earlier conversations."""

        def work(scope: str | None) -> Any:
            ref = session_in(session, scope) if session else None
            with search_turn(ctx):
                hits = tk.search(
                    query, project=scope, session=ref, role=role, author=author,
                    limit=limit, offset=offset,
                )  # fmt: skip
            return {"hits": hits}

        return answer(ctx, work, project)

    @server.tool(annotations=reading)
    def get_session_stats(ctx: Context, session: SessionArg) -> CallToolResult:
        """A session's statistics: messages (by role, user-facing and internal), stored
        tokens, the models' reported token usage, and the time of its first and last message."""
        return answer(
            ctx, lambda scope: tk.session_stats(session_in(session, scope), project=scope)
        )

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, open_world_hint=False))
    def summarize_session(
        ctx: Context,
        session: SessionArg,
        budget_tokens: Annotated[
            StrictInt | None,
            Field(description="The token budget the session must fit, a positive integer "
                  "(default: from the model's context window). What does not fit is "
                  "summarized."),
        ] = None,
        keep_recent: Annotated[
            StrictInt | None,
            Field(description="How many recent messages stay verbatim, never summarized "
                  "(a positive integer; default: the server's setting)."),
        ] = None,
        model: Annotated[
            str | None,
            Field(description="The model the budget is for, e.g. 'gpt-4o'."),
        ] = None,
    ) -> CallToolResult:  # fmt: skip
        """Fit a session into a token budget by summarizing its older messages (all but the
        last `keep_recent`) when the whole does not fit. The summary is stored as a checkpoint
        that later context windows reuse, so each turn summarizes only what is new. Answers
        the summary (null when everything fits), the seq it covers up to, and the report."""

        def work(scope: str | None) -> Any:
            ref = session_in(session, scope)
            window = tk.context(
                ref, strategy=StrategyName.SUMMARIZE, budget_tokens=budget_tokens,
                keep_recent=keep_recent, model=model, project=scope,
            )  # fmt: skip
            summarized = window.report.messages_summarized > 0
            checkpoints = tk.summaries(ref, project=scope) if summarized else []
            return {"summary": checkpoints[-1] if checkpoints else None, "report": window.report}

        return answer(ctx, work)

    @server.resource(
        "turnkeeper://sessions/{session}/transcript",
        name="transcript",
        title="Session transcript",
        description="A session's stored messages as plain text, one per line: seq, role, "
        "author and content.",
        mime_type="text/plain",
    )
    def transcript(session: str, ctx: Context) -> str:
        try:
            scope = caller_of(ctx).scope(None)
            ref = resolve_session(tk, session, scope)
            found = tk.get_session(ref, project=scope)
            messages = tk.history(ref, project=scope)
        except SessionNotFound as exc:
            raise ResourceNotFoundError(str(exc)) from None
        except TurnkeeperError as exc:
            raise ResourceError(str(exc)) from None
        title = f" — {found.title}" if found.title else ""
        head = f"session {found.id} (key {found.key or '-'}){title}: {len(messages)} messages"
        return "\n".join([head, *(_line(message) for message in messages)]) + "\n"

    return server


def _line(message: Message) -> str:
    who = f" ({message.author})" if message.author else ""
    note = " [internal]" if message.internal else ""
    text = message.content.replace("\n", "\n    ")
    return f"#{message.seq} {message.role.value}{who}{note}: {text}"
