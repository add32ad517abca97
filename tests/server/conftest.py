"""Fixtures of the HTTP tests: the real service under uvicorn on a free loopback port, over a
real SQLite file, with API keys for two projects and an admin; and the recording upstream model.

Tests talk to the service over HTTP only (httpx, or the official `openai` client), exactly as a
deployed client would.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI

import turnkeeper
from turnkeeper.apikeys import ApiKeys
from turnkeeper.config import Settings, load_settings
from turnkeeper.server import create_app
from turnkeeper.server.observability import configure_logging
from turnkeeper.service import Turnkeeper

from .anthropic_upstream import AnthropicUpstream, make_anthropic_app
from .live import LiveServer
from .upstream import Upstream, make_app

PROJECTS = {"a": "alpha", "b": "beta"}

TLS = ssl.create_default_context()
"""One TLS context for every test client: httpx would build one per client (reading the CA
bundle, tens of milliseconds), though these speak plain HTTP on loopback."""


@pytest.fixture(scope="package", autouse=True)
def json_logs() -> Iterator[None]:
    """The service's own logging, as `turnkeeper serve` sets it up; restored afterwards."""
    restore = configure_logging(log_format="json")
    yield
    restore()


@pytest.fixture(scope="package")
def upstream_server() -> Iterator[tuple[Upstream, str]]:
    state = Upstream()
    with LiveServer(make_app(state)) as live:
        yield state, live.url


@pytest.fixture(scope="package")
def anthropic_server() -> Iterator[tuple[AnthropicUpstream, str]]:
    state = AnthropicUpstream()
    with LiveServer(make_anthropic_app(state)) as live:
        yield state, live.url


@pytest.fixture
def claude_upstream(anthropic_server: tuple[AnthropicUpstream, str]) -> AnthropicUpstream:
    """The recording Anthropic model, reset: answering normally, nothing received yet."""
    return anthropic_server[0].reset()


@pytest.fixture
def upstream(upstream_server: tuple[Upstream, str]) -> Upstream:
    """The recording model, reset: answering normally, nothing received yet."""
    state, _ = upstream_server
    state.mode, state.delay = "ok", 5.0
    state.failures, state.fail_status, state.retry_after = 0, 500, None
    state.gate = state.stream_gate = None
    state.models = None
    state.cached_tokens = None
    state.requests.clear()
    state.headers.clear()
    return state


def service_settings(tmp_path: Path, upstream_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path / 'service.db'}",
        "sqlite_synchronous": "NORMAL",
        "llm_base_url": f"{upstream_url}/v1",
        "llm_model": "test-model",
        "llm_api_key": "upstream-secret",
        "llm_timeout": "1s",
        "llm_retry_backoff": "10ms",
    }
    return load_settings(**(values | overrides))


@dataclass
class Service:
    """The running service: its URL, the Turnkeeper behind it, and a key per caller."""

    url: str
    app: FastAPI
    tk: Turnkeeper
    keys: dict[str, str]

    def client(self, who: str | None = "a", **kwargs: Any) -> httpx.Client:
        """An httpx client with `who`'s key (a, b or admin; None: no key)."""
        headers = {"Authorization": f"Bearer {self.keys[who]}"} if who else {}
        kwargs.setdefault("verify", TLS)
        return httpx.Client(base_url=self.url, headers=headers, timeout=10, **kwargs)


def start_service(settings: Settings) -> Iterator[Service]:
    tk = turnkeeper.open(settings=settings)
    api_keys = ApiKeys(tk.store)
    keys = {who: api_keys.create(project)[1] for who, project in PROJECTS.items()}
    keys["admin"] = api_keys.create("ops", admin=True)[1]
    app = create_app(settings, tk)
    try:
        with LiveServer(app) as live:
            yield Service(live.url, app, tk, keys)
    finally:
        tk.close()


@pytest.fixture
def service(tmp_path: Path, upstream_server: tuple[Upstream, str]) -> Iterator[Service]:
    yield from start_service(service_settings(tmp_path, upstream_server[1]))


@pytest.fixture
def llm(service: Service) -> Iterator[openai.OpenAI]:
    """The official OpenAI client, with project alpha's turnkeeper key as its API key, and its
    own retries off (tests that exercise them make their own)."""
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=0, timeout=10
    ) as client:
        yield client


@pytest.fixture
def client(service: Service) -> Iterator[httpx.Client]:
    """Project alpha's client."""
    with service.client("a") as http:
        yield http


@pytest.fixture
def service_small_messages(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[httpx.Client]:
    """Project alpha's client on a service with tiny size limits (1000-byte messages, 10 kB
    request bodies)."""
    settings = service_settings(
        tmp_path, upstream_server[1], max_message_bytes=1000, max_request_bytes=10_000
    )
    for running in start_service(settings):
        with running.client("a") as http:
            yield http
