"""`turnkeeper mcp`: the MCP server on stdin/stdout, for a host that starts it as a subprocess.

The host that starts the process is trusted as the local user of its database, so there are no
API keys here: the process is an admin of `--db`, or, with `--project`, works in that project
only (its sessions are all it sees, as with a project API key over HTTP).
"""

from __future__ import annotations

import anyio

from turnkeeper.callers import ANONYMOUS_ADMIN, Caller
from turnkeeper.mcp.tools import build_server
from turnkeeper.service import Turnkeeper
from turnkeeper.validation import check_name


def local_caller(project: str | None) -> Caller:
    """The caller a stdio server acts as: the admin, or a caller of `project` only."""
    name = check_name("project", project)
    return ANONYMOUS_ADMIN if name is None else Caller(project=name, admin=False)


def serve_stdio(tk: Turnkeeper, *, project: str | None = None) -> None:
    """Serve `tk` over stdio until the host closes stdin."""
    caller = local_caller(project)
    server = build_server(tk, lambda ctx: caller)
    anyio.run(server.run_stdio_async)
