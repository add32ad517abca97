"""The value encodings every backend stores: one text per instant, one JSON text per value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from turnkeeper.storage.codec import dump_json, from_ts, load_json, to_ts


def test_an_instant_has_one_text_whatever_its_time_zone() -> None:
    utc = datetime(2026, 11, 23, 16, 0, 0, tzinfo=UTC)
    paris = utc.astimezone(timezone(timedelta(hours=1)))
    naive = utc.replace(tzinfo=None)  # taken as UTC
    assert to_ts(utc) == to_ts(paris) == to_ts(naive) == "2026-11-23T16:00:00.000000+00:00"
    assert from_ts(to_ts(paris)) == utc


def test_json_text_is_canonical_and_the_empty_object_round_trips() -> None:
    assert dump_json({}) == "{}" and load_json("{}") == {}
    assert dump_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert dump_json([]) == "[]" and dump_json(None) == "null"
