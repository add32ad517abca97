"""The web UI's forms: bytes that are not UTF-8 are a 422 a person can read, never a 500, and
nothing is stored."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Service, snapshot

FORM = {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"}
NOT_UTF8 = [b"key=\xff\xfe", b"key=%ff%fe", b"role=user&content=caf%e9", b"content=\xe9t\xe9"]


@pytest.mark.parametrize("body", NOT_UTF8)
@pytest.mark.parametrize("accept", ["text/html", "*/*"])
def test_a_login_form_that_is_not_utf8_is_a_422(
    hostile_service: Service, body: bytes, accept: str
) -> None:
    response = httpx.post(
        hostile_service.url + "/login", content=body, headers={**FORM, "Accept": accept}
    )
    assert response.status_code == 422
    assert "UTF-8" in response.text and "Traceback" not in response.text
    assert "set-cookie" not in response.headers


@pytest.mark.parametrize("body", NOT_UTF8)
def test_a_message_form_that_is_not_utf8_is_a_422_and_stores_nothing(
    hostile_service: Service, body: bytes
) -> None:
    before = snapshot(hostile_service.tk)
    response = httpx.post(
        hostile_service.url + "/sessions/target/messages",
        content=body,
        headers=FORM,
        cookies={"turnkeeper_key": hostile_service.keys["a"]},
    )
    assert response.status_code == 422
    assert "UTF-8" in response.text
    assert snapshot(hostile_service.tk) == before
