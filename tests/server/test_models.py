"""`GET /v1/models` and `/v1/models/{id}` driven by the official `openai` client: the upstream's
list passed through, or the configured model when the upstream keeps none; errors in OpenAI's
shape."""

from __future__ import annotations

import httpx
import openai
import pytest

from .conftest import Service
from .upstream import Upstream

LISTED = [
    {"id": "gpt-test", "object": "model", "created": 1700000000, "owned_by": "acme"},
    {"id": "org/llama-3", "object": "model", "created": 1, "owned_by": "me", "max_model_len": 8192},
]


def test_the_upstreams_list_is_passed_through_with_its_own_fields(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    upstream.models = LISTED
    models = list(llm.models.list())
    assert [model.model_dump(exclude_unset=True) for model in models] == LISTED
    assert upstream.headers[-1]["authorization"] == "Bearer upstream-secret"  # its own key


def test_an_upstream_without_a_list_shows_the_configured_model(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    (model,) = llm.models.list()
    assert (model.id, model.object, model.owned_by) == ("test-model", "model", "turnkeeper")
    assert llm.models.retrieve("test-model").id == "test-model"


def test_a_model_is_retrieved_by_its_id_slashes_included(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    upstream.models = LISTED
    assert llm.models.retrieve("org/llama-3").model_dump()["max_model_len"] == 8192


def test_an_unknown_model_is_a_404_naming_it(llm: openai.OpenAI, upstream: Upstream) -> None:
    upstream.models = LISTED
    with pytest.raises(openai.NotFoundError) as caught:
        llm.models.retrieve("gpt-nope")
    assert "'gpt-nope'" in caught.value.message
    assert caught.value.body["type"] == "not_found_error"  # type: ignore[index]


def test_an_unknown_api_key_is_refused_in_openais_shape(
    service: Service, upstream: Upstream
) -> None:
    with (
        openai.OpenAI(
            base_url=f"{service.url}/v1", api_key="tk_no_such", max_retries=0
        ) as anonymous,
        pytest.raises(openai.AuthenticationError) as caught,
    ):
        anonymous.models.list()
    assert caught.value.status_code == 401
    assert upstream.headers == []  # the upstream was never asked


def test_a_failing_upstream_is_a_502_in_openais_shape(
    client: httpx.Client, upstream: Upstream
) -> None:
    upstream.mode = "error"
    answer = client.get("/v1/models")
    assert answer.status_code == 502
    assert answer.json()["error"]["message"].endswith("model overloaded")
    assert answer.json()["error"]["type"] == "api_error"


def test_the_openapi_schema_describes_the_model_routes(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/models"]) == {"get"}
    listed = paths["/v1/models"]["get"]["responses"]
    assert listed["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ModelList"
    }
    assert "404" in paths["/v1/models/{model}"]["get"]["responses"]
