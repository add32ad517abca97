"""`POST /v1/chat/completions` driven by the official `openai` client: an existing OpenAI
program gets memory by pointing its base URL at turnkeeper and naming a session."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from .conftest import Service, service_settings, start_service
from .upstream import Upstream


def test_without_a_session_it_is_a_plain_pass_through(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
    completion = llm.chat.completions.create(model="gpt-test", messages=messages, temperature=0)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "reply 1 to: Hi"
    assert completion.system_fingerprint == "fp_test"  # the upstream's own fields, unchanged
    assert upstream.requests[0]["messages"] == messages
    assert upstream.requests[0]["model"] == "gpt-test"


def test_with_a_session_the_history_is_prepended_and_stored(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    remember = {"X-Turnkeeper-Session": "travel"}
    llm.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "system", "content": "You plan trips."},
                  {"role": "user", "content": "Four days in Lisbon."}],
        extra_headers=remember,
    )  # fmt: skip
    second = llm.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "system", "content": "You plan trips."},
                  {"role": "user", "content": "Where should we eat?"}],
        extra_headers=remember,
    )  # fmt: skip
    assert second.choices[0].message.content == "reply 2 to: Where should we eat?"
    assert [(m["role"], m["content"]) for m in upstream.requests[1]["messages"]] == [
        ("system", "You plan trips."),
        ("user", "Four days in Lisbon."),
        ("assistant", "reply 1 to: Four days in Lisbon."),
        ("user", "Where should we eat?"),
    ]
    stored = client.get("/v1/sessions/travel/messages").json()["items"]
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "user", "assistant"]
    assert stored[2]["usage"] is not None


def test_metadata_session_id_names_the_session_and_is_not_forwarded(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    llm.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "Hi"}],
        metadata={"session_id": "by-metadata", "team": "ops"},
    )
    assert upstream.requests[0]["metadata"] == {"team": "ops"}
    assert client.get("/v1/sessions/by-metadata").json()["message_count"] == 2


def test_a_client_resending_its_transcript_stores_only_the_new_turn(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    remember = {"X-Turnkeeper-Session": "echoing"}
    first = llm.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "One"}], extra_headers=remember
    )
    transcript = [
        {"role": "user", "content": "One"},
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Two"},
    ]
    llm.chat.completions.create(model="gpt-test", messages=transcript, extra_headers=remember)  # type: ignore[arg-type]
    sent = [m["content"] for m in upstream.requests[1]["messages"]]
    assert sent == ["One", "reply 1 to: One", "Two"]
    assert client.get("/v1/sessions/echoing").json()["message_count"] == 4


def test_streams_chunks_unchanged_and_stores_the_whole_reply(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    stream = llm.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "Stream please"}],
        stream=True,
        extra_headers={"X-Turnkeeper-Session": "streamed"},
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "reply 1 to: Stream please"
    stored = client.get("/v1/sessions/streamed/messages").json()["items"]
    assert stored[-1]["content"] == text


def test_streams_without_a_session_too(llm: openai.OpenAI, upstream: Upstream) -> None:
    stream = llm.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "Hi"}], stream=True
    )
    assert (
        "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "reply 1 to: Hi"
    )


def test_a_failing_model_reaches_the_client_as_an_error_and_keeps_the_turn(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    upstream.mode = "error"
    with pytest.raises(openai.InternalServerError) as caught:
        llm.chat.completions.create(
            model="gpt-test",
            messages=[{"role": "user", "content": "Hi"}],
            extra_headers={"X-Turnkeeper-Session": "flaky"},
        )
    assert caught.value.status_code == 502
    assert client.get("/v1/sessions/flaky").json()["message_count"] == 1


def test_the_proxy_needs_a_key_like_every_route(service: Service, upstream: Upstream) -> None:
    bad = openai.OpenAI(base_url=f"{service.url}/v1", api_key="tk_bad_key", max_retries=0)
    with bad, pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])
    assert upstream.requests == []


def test_another_projects_session_is_not_reachable_through_the_proxy(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    client.post("/v1/sessions", json={"key": "private"})
    client.post("/v1/sessions/private/messages", json={"role": "user", "content": "secret plan"})
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["b"], max_retries=0
    ) as beta:
        beta.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "What was the plan?"}],
            extra_headers={"X-Turnkeeper-Session": "private"},
        )
    sent = [m["content"] for m in upstream.requests[0]["messages"]]
    assert "secret plan" not in sent  # beta got its own session named "private"


def test_the_strategy_setting_relevant_recalls_an_older_turn_through_the_proxy(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    settings = service_settings(
        tmp_path, upstream_server[1], strategy="relevant", budget_tokens=250
    )
    upstream = upstream_server[0]
    for service in start_service(settings):
        remember = {"X-Turnkeeper-Session": "recall"}
        with service.client("a") as client:
            client.post("/v1/sessions", json={"key": "recall"})
            lines = [{"role": "user", "content": "My seat number is 31K."}] + [
                {"role": "user", "content": f"note {n} " + "filler " * 25} for n in range(8)
            ]
            client.post("/v1/sessions/recall/messages/batch", json={"messages": lines})
        with openai.OpenAI(
            base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=0, timeout=10
        ) as llm:
            llm.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": "Which seat number did I get?"}],
                extra_headers=remember,
            )
        sent = [message["content"] for message in upstream.requests[-1]["messages"]]
        assert "My seat number is 31K." in sent and sent[-1] == "Which seat number did I get?"
        assert sent.index("My seat number is 31K.") > 1  # after the newest turns and the note
