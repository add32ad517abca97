"""`turnkeeper mcp`: serve the memory to an MCP host (desktop assistant, IDE agent) on stdio."""

from __future__ import annotations

from turnkeeper.cli.app import DbOption, ProjectOption, app, open_ctx


@app.command("mcp")
def mcp(project: ProjectOption = None, db: DbOption = None) -> None:
    """Serve turnkeeper over the Model Context Protocol on stdin/stdout, for an MCP host that
    starts it (register `turnkeeper mcp --db URL` in the host's config). Its tools list
    sessions, append and search messages, build context windows, summarize and count; each
    session's transcript is a resource. It acts as the local admin of the database, or in
    --project only.
    Over HTTP, `turnkeeper serve` offers the same tools at /mcp, behind its API keys."""
    from turnkeeper.mcp.stdio import (  # first: without the mcp extra, this names it
        local_caller,
        serve_stdio,
    )

    local_caller(project)  # a bad --project fails before the database is opened
    with open_ctx(db, False) as ctx:
        serve_stdio(ctx.tk, project=project)
