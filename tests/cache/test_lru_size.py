"""The in-process cache is bounded by bytes as well as by sessions: pages of large messages
can no longer pile up to gigabytes under the session count."""

from __future__ import annotations

from turnkeeper.cache.lru import SessionLRU, weigh


def test_least_recently_used_sessions_go_when_the_bytes_run_out() -> None:
    lru = SessionLRU(100, max_bytes=10_000)
    for n in range(10):
        lru.put(f"s{n}", 1, "page", "x" * 3_000)
    assert lru.weight <= 10_000
    assert len(lru) == 3
    assert lru.get("s9", 1, "page") is not None and lru.get("s0", 1, "page") is None


def test_a_value_larger_than_the_whole_cache_is_not_kept() -> None:
    lru = SessionLRU(100, max_bytes=1_000)
    lru.put("small", 1, "page", "x")
    lru.put("big", 1, "page", "x" * 5_000)
    assert lru.get("big", 1, "page") is None
    assert lru.get("small", 1, "page") == "x"


def test_the_weight_follows_replaced_and_outdated_entries() -> None:
    lru = SessionLRU(100, max_bytes=1_000_000)
    lru.put("s", 1, "page", "x" * 1_000)
    lru.put("s", 1, "page", "y" * 10)  # same key again: counted once
    assert lru.weight == weigh("y" * 10)
    lru.put("s", 2, "count", 3)  # a newer version drops the old entries
    assert lru.weight == weigh(3)


def test_a_message_weighs_its_metadata_text() -> None:
    """A message whose metadata holds a long string (the OpenAI Agents adapter's item text)
    weighs about that much more than the same message without it."""
    from datetime import UTC, datetime

    from turnkeeper.types import Message, Role

    plain = Message(
        id="m", session_id="s", seq=1, role=Role.USER, content="hi",
        created_at=datetime.now(UTC), tokens=3,
    )  # fmt: skip
    item = "x" * 10_000
    carrying = Message(
        id="m", session_id="s", seq=1, role=Role.USER, content="hi",
        created_at=plain.created_at, tokens=3, metadata={"item": item, "n": [1, 2]},
    )  # fmt: skip
    assert weigh(carrying) - weigh(plain) == len("item") + len(item) + len("n") + len("[1, 2]")
