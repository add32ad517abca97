"""The HTTP service (`turnkeeper serve`): REST under `/v1`, seed 000's `/api/v1` routes, the
chat turn, an OpenAI-compatible proxy, probes and metrics. Needs the `server` extra:
`pip install 'turnkeeper[server]'`."""

from turnkeeper.server.app import create_app

__all__ = ["create_app"]
