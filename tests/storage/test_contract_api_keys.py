"""The API-key part of the storage contract, on every backend (`store` fixture)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from turnkeeper.errors import Conflict, NotFound
from turnkeeper.storage.base import Store
from turnkeeper.types import ApiKey

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _key(key_id: str, project: str = "p", *, at: datetime = NOW) -> ApiKey:
    return ApiKey(id=key_id, project=project, name=f"{key_id} name", admin=False, created_at=at)


def test_a_stored_key_is_found_with_its_hash_and_listed_by_project(store: Store) -> None:
    store.create_api_key(_key("k1"), secret_hash="hash-1")
    store.create_api_key(_key("k2", "q", at=NOW + timedelta(seconds=1)), secret_hash="hash-2")
    assert store.find_api_key("k1") == (_key("k1"), "hash-1")
    assert store.find_api_key("unknown") is None
    assert [k.id for k in store.list_api_keys("p")] == ["k1"]
    assert [k.id for k in store.list_api_keys()] == ["k1", "k2"]


def test_a_key_id_is_stored_once(store: Store) -> None:
    store.create_api_key(_key("k1"), secret_hash="h")
    with pytest.raises(Conflict):
        store.create_api_key(_key("k1"), secret_hash="other")


def test_revoking_keeps_the_first_revocation_time(store: Store) -> None:
    store.create_api_key(_key("k1"), secret_hash="h")
    first = store.revoke_api_key("k1", now=NOW + timedelta(hours=1))
    again = store.revoke_api_key("k1", now=NOW + timedelta(hours=2))
    assert first.revoked_at == again.revoked_at == NOW + timedelta(hours=1)
    assert not again.active
    with pytest.raises(NotFound):
        store.revoke_api_key("unknown", now=NOW)
