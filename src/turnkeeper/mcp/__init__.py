"""turnkeeper over the Model Context Protocol: the memory as tools and resources any MCP host
(a desktop assistant, an IDE agent, an agent runtime) can use.

`turnkeeper mcp` serves it on stdio; `turnkeeper serve` serves the same tools over streamable
HTTP at `/mcp`, behind its API keys. Needs the `mcp` extra (`pip install 'turnkeeper[mcp]'`);
without it, importing this package says so.
"""

from turnkeeper.errors import TurnkeeperError

try:
    import mcp.server.mcpserver  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise TurnkeeperError("the MCP server is not installed: pip install 'turnkeeper[mcp]'") from exc

from turnkeeper.mcp.tools import CallerOf, build_server

__all__ = ["CallerOf", "build_server"]
