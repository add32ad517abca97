"""The providers' own variables configure the upstreams: a user with `OPENAI_API_KEY` (and
`OPENAI_BASE_URL`) set reaches the model through `/chat` and the proxy with no turnkeeper
setting of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from turnkeeper.config import load_settings

from .conftest import Service, start_service
from .upstream import Upstream


@pytest.fixture
def conventional(
    tmp_path: Path, upstream_server: tuple[Upstream, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Service]:
    """The service with only `OPENAI_API_KEY` and `OPENAI_BASE_URL` naming its upstream."""
    for name in ("TURNKEEPER_LLM_BASE_URL", "TURNKEEPER_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-by-convention")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{upstream_server[1]}/v1")
    settings = load_settings(
        database_url=f"sqlite:///{tmp_path / 'service.db'}", llm_model="test-model",
        llm_timeout="1s", llm_retry_backoff="10ms",
    )  # fmt: skip
    yield from start_service(settings)


def test_chat_sends_the_openai_api_key_to_the_openai_base_url(
    conventional: Service, upstream: Upstream
) -> None:
    with conventional.client("a") as http:
        answer = http.post("/v1/sessions/trip/chat", json={"content": "hello", "create": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["reply"]["content"] == "reply 1 to: hello"
    assert upstream.headers[0]["authorization"] == "Bearer sk-by-convention"


def test_the_proxy_sends_the_openai_api_key_not_the_callers(
    conventional: Service, upstream: Upstream
) -> None:
    with openai.OpenAI(
        base_url=f"{conventional.url}/v1", api_key=conventional.keys["a"], max_retries=0
    ) as client:
        completion = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "Hi"}],
            extra_headers={"X-Turnkeeper-Session": "remembered"},
        )  # fmt: skip
    assert completion.choices[0].message.content == "reply 1 to: Hi"
    assert upstream.headers[0]["authorization"] == "Bearer sk-by-convention"


def test_a_turnkeeper_base_url_elsewhere_never_gets_the_openai_key(
    tmp_path: Path, upstream_server: tuple[Upstream, str], upstream: Upstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "sk-for-openai-only")
    settings = load_settings(
        database_url=f"sqlite:///{tmp_path / 'service.db'}",
        llm_base_url=f"{upstream_server[1]}/v1", llm_model="test-model", llm_timeout="1s",
    )  # fmt: skip
    for service in start_service(settings):
        with service.client("a") as http:
            answer = http.post("/v1/sessions/t/chat", json={"content": "hi", "create": True})
        assert answer.status_code == 200, answer.text
    assert "authorization" not in upstream.headers[0]


def test_turnkeeper_settings_win_over_the_provider_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TURNKEEPER_LLM_API_KEY", "sk-turnkeeper")
    settings = load_settings()
    assert (settings.llm_base_url, settings.llm_api_key) == (
        "https://api.openai.com/v1", "sk-turnkeeper",
    )  # fmt: skip
    assert "sk-" not in " ".join(settings.upstreams())


def test_anthropic_variables_configure_the_anthropic_upstream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    settings = load_settings()
    assert (settings.anthropic_base_url, settings.anthropic_api_key) == (
        "http://127.0.0.1:9", "sk-ant-1",
    )  # fmt: skip
    assert settings.upstreams()[1] == (
        "Anthropic upstream: http://127.0.0.1:9 (key from ANTHROPIC_API_KEY)"
    )


def test_unset_provider_variables_leave_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.llm_api_key is None and settings.anthropic_api_key is None
    assert settings.upstreams() == [
        "OpenAI-compatible upstream: https://api.openai.com/v1 (no key)",
        "Anthropic upstream: not configured (set ANTHROPIC_API_KEY)",
    ]
