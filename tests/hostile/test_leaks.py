"""Answers to anyone name nothing of the deployment's inside: no database user, host, port or
name, no upstream URL. The detail goes to the log, under the request id the client gets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import Service, service_settings, start_service
from turnkeeper.logs import capture_events

from .served import free_port


@pytest.fixture
def unreachable_model(tmp_path: Path) -> Iterator[tuple[Service, str]]:
    """A service whose model endpoint is a loopback port nobody listens on."""
    dead = f"http://127.0.0.1:{free_port()}"
    yield from ((running, dead) for running in start_service(service_settings(tmp_path, dead)))


def test_an_unreachable_model_is_a_502_that_does_not_name_it(
    unreachable_model: tuple[Service, str],
) -> None:
    service, dead = unreachable_model
    port = dead.rsplit(":", 1)[1]
    with service.client("a") as http, capture_events() as logs:
        chat = http.post("/v1/sessions/s/chat", json={"content": "hi", "create": True})
        proxied = http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
        responded = http.post("/v1/responses", json={"model": "m", "input": "hi"})
    unreachable = "the model endpoint could not be reached or failed mid-answer"
    for answer in (chat, proxied, responded):
        assert answer.status_code == 502
        assert port not in answer.text and "127.0.0.1" not in answer.text
    # /chat answers an RFC 9457 problem; the OpenAI-compatible proxy answers in OpenAI's shape.
    assert chat.headers["content-type"] == "application/problem+json"
    assert chat.json()["detail"] == unreachable
    assert proxied.headers["content-type"] == "application/json"
    assert proxied.json()["error"]["message"] == unreachable
    assert responded.json()["error"]["message"] == unreachable
    failures = [line for line in logs if line["event"] == "request_failed"]
    assert len(failures) == 3 and all(dead in line["detail"] for line in failures)


def test_an_unreachable_model_mid_stream_names_nothing_either(
    unreachable_model: tuple[Service, str],
) -> None:
    service, dead = unreachable_model
    with service.client("a") as http:
        streamed = http.post(
            "/v1/chat/completions",
            json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        )
        responded = http.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    assert dead.rsplit(":", 1)[1] not in streamed.text
    assert dead.rsplit(":", 1)[1] not in responded.text


def test_probes_are_open_but_quiet(unreachable_model: tuple[Service, str]) -> None:
    service, _ = unreachable_model
    ready = httpx.get(service.url + "/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
