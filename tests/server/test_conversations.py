"""OpenAI's Conversations API driven by the official `openai` client (and the openai-agents
SDK's `OpenAIConversationsSession`) against the service on loopback with API keys on, on
SQLite and PostgreSQL: a conversation is a session, its items the session's messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import run_async

from .conftest import Service, service_settings, start_service
from .upstream import Upstream


@pytest.fixture(params=["sqlite", "postgres"])
def service(
    request: pytest.FixtureRequest, tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    yield from start_service(service_settings(tmp_path, upstream_server[1], **overrides))


def texts(items: Any) -> list[tuple[str, str]]:
    """(role, text) of each message item."""
    return [(item.role, item.content[0].text) for item in items if item.type == "message"]


def test_create_retrieve_update_delete_round_trip(llm: openai.OpenAI, client: httpx.Client) -> None:
    made = llm.conversations.create(
        metadata={"topic": "travel"},
        items=[
            {"type": "message", "role": "system", "content": "You plan trips."},
            {"role": "user", "content": "Four days in Lisbon."},
        ],
    )
    assert made.object == "conversation" and made.metadata == {"topic": "travel"}
    assert made.created_at > 0
    again = llm.conversations.retrieve(made.id)
    assert (again.id, again.metadata) == (made.id, {"topic": "travel"})
    # The conversation is a session of the caller's project, its items the messages.
    stored = client.get(f"/v1/sessions/{made.id}/messages").json()["items"]
    assert [(m["role"], m["content"]) for m in stored] == [
        ("system", "You plan trips."), ("user", "Four days in Lisbon."),
    ]  # fmt: skip

    updated = llm.conversations.update(made.id, metadata={"topic": "food"})
    assert updated.metadata == {"topic": "food"}
    assert llm.conversations.retrieve(made.id).metadata == {"topic": "food"}

    deleted = llm.conversations.delete(made.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (made.id, True, "conversation.deleted")
    assert client.get(f"/v1/sessions/{made.id}/messages").status_code == 404  # items went too
    with pytest.raises(openai.NotFoundError) as caught:
        llm.conversations.retrieve(made.id)
    assert made.id in caught.value.message


def test_items_are_added_listed_in_either_order_and_paged(llm: openai.OpenAI) -> None:
    conversation = llm.conversations.create()
    added = llm.conversations.items.create(
        conversation.id,
        items=[{"role": "user", "content": f"question {n}"} for n in range(1, 6)],
    )
    assert [item.content[0].text for item in added.data] == [f"question {n}" for n in range(1, 6)]
    assert added.first_id == added.data[0].id and added.last_id == added.data[-1].id

    newest_first = list(llm.conversations.items.list(conversation.id))  # desc by default
    assert [t for _, t in texts(newest_first)] == [f"question {n}" for n in range(5, 0, -1)]
    page = llm.conversations.items.list(conversation.id, order="asc", limit=2)
    assert [t for _, t in texts(page.data)] == ["question 1", "question 2"]
    assert page.has_more is True
    rest = llm.conversations.items.list(conversation.id, order="asc", after=page.data[-1].id)
    assert [t for _, t in texts(rest.data)] == ["question 3", "question 4", "question 5"]
    assert rest.has_more is False
    everything = list(llm.conversations.items.list(conversation.id, order="asc", limit=2))
    assert len(everything) == 5  # the client follows `last_id` through the pages

    item = llm.conversations.items.retrieve(added.data[2].id, conversation_id=conversation.id)
    assert item.type == "message" and item.content[0].text == "question 3"  # type: ignore[union-attr]


def test_function_calls_outputs_and_other_items_come_back_as_given(llm: openai.OpenAI) -> None:
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Think."}]}
    items: list[Any] = [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        reasoning,
        {"type": "function_call", "call_id": "call_1", "name": "weather",
         "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C, sunny"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "18C and sunny.",
                                           "annotations": []}]},
        {"role": "developer", "content": "Answer in Celsius."},
    ]  # fmt: skip
    conversation = llm.conversations.create(items=items)
    listed = [
        item.model_dump(exclude_unset=True)
        for item in llm.conversations.items.list(conversation.id, order="asc")
    ]
    assert [item["type"] for item in listed] == [
        "message", "reasoning", "function_call", "function_call_output", "message", "message",
    ]  # fmt: skip
    call, output = listed[2], listed[3]
    assert (call["call_id"], call["name"], call["arguments"]) == (
        "call_1", "weather", '{"city": "Paris"}',
    )  # fmt: skip
    assert (output["call_id"], output["output"]) == ("call_1", "18C, sunny")
    assert {k: v for k, v in listed[1].items() if k != "id"} == reasoning
    assert listed[4]["content"][0]["text"] == "18C and sunny."
    assert listed[5]["role"] == "developer"  # kept as given, though stored as a system message
    assert all(item["id"] for item in listed)


def test_only_the_newest_item_can_be_deleted(llm: openai.OpenAI) -> None:
    conversation = llm.conversations.create(
        items=[{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    )
    first, second = llm.conversations.items.list(conversation.id, order="asc").data
    with pytest.raises(openai.BadRequestError) as caught:
        llm.conversations.items.delete(first.id, conversation_id=conversation.id)
    assert caught.value.body["param"] == "item_id"  # type: ignore[index]
    after = llm.conversations.items.delete(second.id, conversation_id=conversation.id)
    assert after.id == conversation.id
    assert [t for _, t in texts(llm.conversations.items.list(conversation.id))] == ["one"]
    with pytest.raises(openai.NotFoundError) as missing:
        llm.conversations.items.retrieve(second.id, conversation_id=conversation.id)
    assert second.id in missing.value.message


def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(
    llm: openai.OpenAI, client: httpx.Client
) -> None:
    conversation = llm.conversations.create(items=[{"role": "user", "content": "kept"}])
    bad_items: list[tuple[Any, str]] = [
        ([{"role": "user", "content": "fine"}, {"role": "wizard", "content": "x"}],
         "items[1].role"),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], "items[0].call_id"),
        ([{"type": "function_call_output", "call_id": "c", "output": 3}], "items[0].output"),
        ([{"role": "user", "content": " "}], "items[0].content"),
        ([{"type": "item_reference", "id": "msg_1"}], "items[0].type"),
        ([{"role": "user", "content": "x"}] * 21, "items"),
    ]  # fmt: skip
    for items, field in bad_items:
        with pytest.raises(openai.BadRequestError) as caught:
            llm.conversations.items.create(conversation.id, items=items)
        assert caught.value.body["param"] == field, field  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as metadata:
        llm.conversations.create(metadata={"n": 1}, items=[{"role": "user", "content": "x"}])  # type: ignore[dict-item]
    assert metadata.value.body["param"] == "metadata.n"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as limit:
        llm.conversations.items.list(conversation.id, limit=101)
    assert limit.value.body["param"] == "limit"  # type: ignore[index]
    assert [t for _, t in texts(llm.conversations.items.list(conversation.id))] == ["kept"]
    sessions = client.get("/v1/sessions").json()["items"]
    assert [s["id"] for s in sessions] == [conversation.id]  # the refused create made nothing


def test_an_unknown_conversation_is_a_404_naming_it(llm: openai.OpenAI) -> None:
    for call in (
        lambda: llm.conversations.retrieve("conv_missing"),
        lambda: llm.conversations.items.list("conv_missing"),
        lambda: llm.conversations.items.create(
            "conv_missing", items=[{"role": "user", "content": "x"}]
        ),
        lambda: llm.conversations.delete("conv_missing"),
    ):
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        assert "'conv_missing'" in caught.value.message


def test_another_projects_conversation_is_a_404(service: Service, llm: openai.OpenAI) -> None:
    mine = llm.conversations.create(items=[{"role": "user", "content": "secret"}])
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["b"], max_retries=0
    ) as other:
        for call in (
            lambda: other.conversations.retrieve(mine.id),
            lambda: other.conversations.items.list(mine.id),
            lambda: other.conversations.delete(mine.id),
            lambda: other.conversations.items.create(
                mine.id, items=[{"role": "user", "content": "injected"}]
            ),
        ):
            with pytest.raises(openai.NotFoundError):
                call()
    assert [t for _, t in texts(llm.conversations.items.list(mine.id))] == ["secret"]


def test_an_item_sent_again_with_its_id_is_stored_once(llm: openai.OpenAI) -> None:
    conversation = llm.conversations.create()
    item = {"id": "msg_client_1", "role": "user", "content": "only once"}
    llm.conversations.items.create(conversation.id, items=[item])
    llm.conversations.items.create(conversation.id, items=[item])
    assert [i.id for i in llm.conversations.items.list(conversation.id)] == ["msg_client_1"]


def test_the_agents_sdk_session_gets_adds_pops_and_clears(service: Service) -> None:
    agents = pytest.importorskip("agents")
    if not hasattr(agents, "OpenAIConversationsSession"):
        pytest.skip("this openai-agents has no OpenAIConversationsSession")

    async def scenario() -> tuple[Any, ...]:
        client = openai.AsyncOpenAI(
            base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=0
        )
        session = agents.OpenAIConversationsSession(openai_client=client)
        await session.add_items(
            [{"role": "user", "content": "Hello"},
             {"role": "assistant", "content": "Hi! How can I help?"},
             {"role": "user", "content": "Book a table."}]
        )  # fmt: skip
        got = await session.get_items()
        latest = await session.get_items(limit=1)
        popped = await session.pop_item()
        after_pop = await session.get_items()
        conversation_id = session.session_id
        await session.clear_session()
        await client.close()
        return got, latest, popped, after_pop, conversation_id

    got, latest, popped, after_pop, conversation_id = run_async(scenario())
    assert [(item["role"], item["content"][0]["text"]) for item in got] == [
        ("user", "Hello"), ("assistant", "Hi! How can I help?"), ("user", "Book a table."),
    ]  # fmt: skip
    assert [item["content"][0]["text"] for item in latest] == ["Book a table."]
    assert popped["content"][0]["text"] == "Book a table."
    assert len(after_pop) == 2
    with service.client("a") as http:  # clear_session deleted the conversation
        assert http.get(f"/v1/conversations/{conversation_id}").status_code == 404


def test_the_openapi_schema_describes_the_conversation_routes(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/conversations"]) == {"post"}
    assert set(paths["/v1/conversations/{conversation_id}"]) == {"get", "post", "delete"}
    assert set(paths["/v1/conversations/{conversation_id}/items"]) == {"get", "post"}
    assert set(paths["/v1/conversations/{conversation_id}/items/{item_id}"]) == {"get", "delete"}
    listed = paths["/v1/conversations/{conversation_id}/items"]["get"]
    assert {p["name"] for p in listed["parameters"]} >= {"after", "limit", "order", "include"}
    assert "404" in listed["responses"]


SDK_ITEMS: list[Any] = [  # as the openai-agents SDK hands items to a session
    {"role": "user", "content": "Weather in Oslo?"},
    {"type": "reasoning", "id": "rs_1",
     "summary": [{"type": "summary_text", "text": "Need the weather tool."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city": "Oslo"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": '{"temp_c": -3}'},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "-3 °C in Oslo.", "annotations": []}]},
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "Oslo weather"}},
]  # fmt: skip


def test_items_the_agents_adapter_stored_read_back_through_the_conversations_api(
    service: Service, client: httpx.Client
) -> None:
    from turnkeeper.adapters import TurnkeeperSession

    run_async(TurnkeeperSession("cross-1", service.tk, project="alpha").add_items(SDK_ITEMS))
    session = service.tk.get_session("cross-1", project="alpha")
    ids = [message.id for message in service.tk.history(session)]
    listed = client.get(f"/v1/conversations/{session.id}/items", params={"order": "asc"})
    assert listed.json()["data"] == [
        {"id": ids[0], "type": "message", "role": "user", "status": "completed",
         "content": [{"type": "input_text", "text": "Weather in Oslo?"}]},
        {**SDK_ITEMS[1], "id": ids[1]},
        {**SDK_ITEMS[2], "id": ids[2]},
        {**SDK_ITEMS[3], "id": ids[3], "status": "completed"},
        {**SDK_ITEMS[4], "id": ids[4]},
        {**SDK_ITEMS[5], "id": ids[5]},
    ]  # fmt: skip
    one = client.get(f"/v1/conversations/{session.id}/items/{ids[1]}").json()
    assert one == {**SDK_ITEMS[1], "id": ids[1]}


def test_items_the_conversations_api_stored_read_back_through_the_agents_adapter(
    service: Service, client: httpx.Client
) -> None:
    from turnkeeper.adapters import TurnkeeperSession

    made = client.post("/v1/conversations", json={"items": SDK_ITEMS}).json()
    session = TurnkeeperSession(made["id"], service.tk, project="alpha")
    got = run_async(session.get_items())
    assert [json.dumps(item) for item in got] == [json.dumps(item) for item in SDK_ITEMS]
    # and through the API, each item under the id it was given (or one made for it)
    listed = client.get(f"/v1/conversations/{made['id']}/items", params={"order": "asc"})
    assert [item["id"] for item in listed.json()["data"]][1:3] == ["rs_1", "fc_1"]


def test_items_stored_under_the_earlier_keys_read_back_as_they_did(
    service: Service, client: httpx.Client
) -> None:
    """Messages the Conversations API (`item`: the item without its id, as an object) and the
    agents adapter (`openai_agents_item`: its JSON text) stored before the one key."""
    from turnkeeper.adapters import TurnkeeperSession
    from turnkeeper.types import NewMessage, Role

    developer = {"role": "developer", "content": "Answer in Celsius."}
    listed_output = {"type": "function_call_output", "call_id": "c1",
                     "output": [{"type": "input_text", "text": "18C"}]}  # fmt: skip
    adapter_items: list[Any] = [
        {"role": "assistant", "content": "Plain."}, SDK_ITEMS[1], SDK_ITEMS[2],
    ]  # fmt: skip
    session, _ = service.tk.get_or_create_session("earlier", project="alpha")
    service.tk.append_many(
        session,
        [
            NewMessage(role=Role.SYSTEM, content="Answer in Celsius.", id="msg_a",
                       metadata={"item": developer}),
            NewMessage(role=Role.TOOL, content="18C", id="fco_b", tool_call_id="c1",
                       metadata={"item": listed_output}),
            NewMessage(role=Role.USER, content="Plain.", id="msg_c"),
            NewMessage(role=Role.ASSISTANT, content="Plain.", id="m4",
                       metadata={"openai_agents_item": json.dumps(adapter_items[0])}),
            NewMessage(role=Role.ASSISTANT, content="[Need the weather tool.]", id="m5",
                       internal=True,
                       metadata={"openai_agents_item": json.dumps(adapter_items[1])}),
            NewMessage(role=Role.ASSISTANT, content="", id="m6",
                       tool_calls=[{"id": "call_1", "type": "function", "function": {
                           "name": "get_weather", "arguments": '{"city": "Oslo"}'}}],
                       metadata={"openai_agents_item": json.dumps(adapter_items[2])}),
        ],
    )  # fmt: skip
    listed = client.get(f"/v1/conversations/{session.id}/items", params={"order": "asc"})
    assert listed.json()["data"] == [
        # as the Conversations API read what it kept: status only for a typed item
        {"id": "msg_a", "role": "developer", "type": "message",
         "content": [{"type": "input_text", "text": "Answer in Celsius."}]},
        {"id": "fco_b", **listed_output, "status": "completed"},
        {"id": "msg_c", "type": "message", "role": "user", "status": "completed",
         "content": [{"type": "input_text", "text": "Plain."}]},
        {"id": "m4", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Plain.", "annotations": []}]},
        {**SDK_ITEMS[1], "id": "m5"},
        {**SDK_ITEMS[2], "id": "m6"},
    ]  # fmt: skip
    got = run_async(TurnkeeperSession("earlier", service.tk, project="alpha").get_items())
    assert got[3:] == adapter_items  # the adapter's own, exactly
    assert got[:3] == [developer, listed_output, {"role": "user", "content": "Plain."}]
