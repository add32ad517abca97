"""The HTTP service (`turnkeeper serve`): REST under `/v1`, the chat turn, the OpenAI-compatible
routes (the chat proxy, models, conversations), probes and metrics. Needs the `server` extra:
`pip install 'turnkeeper[server]'`; without it, importing this package says so."""

from turnkeeper.errors import TurnkeeperError

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise TurnkeeperError(
        "the HTTP service is not installed: pip install 'turnkeeper[server]'"
    ) from exc

from turnkeeper.server.app import create_app

__all__ = ["create_app"]
