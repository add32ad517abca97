"""Value encodings shared by the backends: timestamps, JSON columns and listing cursors.

Timestamps are `turnkeeper.records`' (re-exported here, so the backends import one module).

Kept in one place so every backend stores and pages the same way.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from turnkeeper import jsonenc
from turnkeeper.errors import InvalidInput
from turnkeeper.records import from_ts as from_ts
from turnkeeper.records import from_ts_or_none as from_ts_or_none
from turnkeeper.records import to_ts as to_ts
from turnkeeper.records import to_ts_or_none as to_ts_or_none
from turnkeeper.validation import MAX_JSON_DEPTH


def dump_json(value: Any) -> str:
    """Canonical JSON text (`jsonenc.canonical`)."""
    return jsonenc.canonical(value)


def load_json(value: Any) -> Any:
    """Decode a JSON column (text on SQLite, on PostgreSQL what its `jsonb` loader reads).

    A value nested deeper than any write accepts (`MAX_JSON_DEPTH`: one stored before the
    limit, or written by hand) is read with what lies beyond the limit replaced by a note
    saying so (`jsonenc.loads_within`): a read never fails for what is stored, and never hands
    out a value an interface could not answer with."""
    if value is None or not isinstance(value, str):
        return value
    return jsonenc.loads_within(value, MAX_JSON_DEPTH)


def encode_cursor(updated_at: str, session_id: str) -> str:
    raw = json.dumps([updated_at, session_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """The (updated_at, id) position a cursor points after; `InvalidInput` if it is not ours."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        updated_at, session_id = json.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(updated_at, str) or not isinstance(session_id, str):
            raise ValueError(cursor)
        return updated_at, session_id
    except (ValueError, TypeError) as exc:
        raise InvalidInput("cursor", "not a cursor returned by a previous listing") from exc
