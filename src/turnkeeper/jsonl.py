"""turnkeeper's JSONL export format: the wire shape of sessions and messages on disk.

One JSON object per line: a `{"type": "session", ...}` record followed by that session's
`{"type": "message", ...}` records in seq order, then its `{"type": "trace", ...}` records (the
turn trace of each reply a chat turn produced: what the model saw, `turnkeeper.traces`), by seq.
Every field is kept (ids, seqs, times to the microsecond, token counts, usage, traces as
stored), so export → import round-trips exactly, and importing the same file twice adds nothing
the second time. The same format is the cold-storage archive. Format 2 added the trace records;
a format 1 file (no traces) imports unchanged.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from turnkeeper.errors import InvalidInput
from turnkeeper.importers.base import Batch, run_import
from turnkeeper.importers.base import ImportReport as ImportReport  # re-exported: its old home
from turnkeeper.storage.base import Store
from turnkeeper.storage.codec import from_ts, from_ts_or_none, to_ts, to_ts_or_none
from turnkeeper.types import Message, Role, Session, SessionStatus, Usage

FORMAT_VERSION = 2


def session_record(session: Session) -> dict[str, Any]:
    return {
        "type": "session",
        "format": FORMAT_VERSION,
        "id": session.id,
        "key": session.key,
        "project": session.project,
        "subject": session.subject,
        "kind": session.kind,
        "title": session.title,
        "phase": session.phase,
        "status": session.status.value,
        "created_at": to_ts(session.created_at),
        "updated_at": to_ts(session.updated_at),
        "expires_at": to_ts_or_none(session.expires_at),
        "message_count": session.message_count,
        "last_seq": session.last_seq,
        "stored_tokens": session.stored_tokens,
        "usage_input_tokens": session.usage_input_tokens,
        "usage_output_tokens": session.usage_output_tokens,
        "metadata": dict(session.metadata),
        "version": session.version,
    }


def message_record(message: Message) -> dict[str, Any]:
    return {
        "type": "message",
        "id": message.id,
        "session_id": message.session_id,
        "seq": message.seq,
        "role": message.role.value,
        "author": message.author,
        "content": message.content,
        "internal": message.internal,
        "created_at": to_ts(message.created_at),
        "tokens": message.tokens,
        "usage": (
            None
            if message.usage is None
            else {
                "input_tokens": message.usage.input_tokens,
                "output_tokens": message.usage.output_tokens,
            }
        ),
        "tool_calls": list(message.tool_calls) if message.tool_calls is not None else None,
        "tool_call_id": message.tool_call_id,
        "metadata": dict(message.metadata),
    }


def trace_record(session_id: str, seq: int, data: str) -> dict[str, Any]:
    """A stored trace: the reply's seq and the trace document as stored (its window entries
    refer to the exported messages by seq, which import keeps)."""
    return {"type": "trace", "session_id": session_id, "seq": seq, "trace": json.loads(data)}


def trace_from_record(record: dict[str, Any], replies: set[int]) -> tuple[int, str]:
    """`(seq, data)` of a trace record; its seq must be a reply exported before it."""
    seq = record["seq"]
    if not isinstance(seq, int) or seq not in replies:
        raise ValueError(f"trace seq {seq!r} is not an assistant message of its session")
    trace = _object(record["trace"], "trace")
    return seq, json.dumps(trace, separators=(",", ":"), ensure_ascii=False)


def session_from_record(record: dict[str, Any]) -> Session:
    return Session(
        id=record["id"],
        key=record.get("key"),
        project=record["project"],
        subject=record.get("subject"),
        kind=record.get("kind"),
        title=record.get("title"),
        phase=record.get("phase"),
        status=SessionStatus(record["status"]),
        created_at=from_ts(record["created_at"]),
        updated_at=from_ts(record["updated_at"]),
        expires_at=from_ts_or_none(record.get("expires_at")),
        message_count=int(record.get("message_count", 0)),
        last_seq=int(record.get("last_seq", 0)),
        stored_tokens=int(record.get("stored_tokens", 0)),
        usage_input_tokens=int(record.get("usage_input_tokens", 0)),
        usage_output_tokens=int(record.get("usage_output_tokens", 0)),
        metadata=_object(record.get("metadata"), "metadata"),
        version=int(record.get("version", 0)),
    )


def message_from_record(record: dict[str, Any]) -> Message:
    usage = record.get("usage")
    tool_calls = record.get("tool_calls")
    content = record["content"]
    if not isinstance(content, str):
        raise ValueError("content must be text")
    return Message(
        id=str(record["id"]),
        session_id=str(record["session_id"]),
        seq=int(record["seq"]),
        role=Role(record["role"]),
        author=record.get("author"),
        content=content,
        internal=bool(record.get("internal", False)),
        created_at=from_ts(record["created_at"]),
        tokens=int(record["tokens"]),
        usage=None
        if usage is None
        else Usage(int(usage["input_tokens"]), int(usage["output_tokens"])),
        tool_calls=tuple(tool_calls) if tool_calls is not None else None,
        tool_call_id=record.get("tool_call_id"),
        metadata=_object(record.get("metadata"), "metadata"),
    )


def _object(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object")
    return value


def export_sessions(
    store: Store,
    session_ids: Iterable[str],
    out: IO[str],
    *,
    progress: Callable[[Session], None] | None = None,
) -> tuple[int, int]:
    """Write sessions and their messages as JSONL. Returns (sessions, messages) written."""
    sessions = messages = 0
    for session_id in session_ids:
        session = store.get_session(session_id)
        out.write(json.dumps(session_record(session), ensure_ascii=False) + "\n")
        for message in store.read_messages(session.id):
            out.write(json.dumps(message_record(message), ensure_ascii=False) + "\n")
            messages += 1
        traces = store.read_traces(session.id, upto_seq=session.last_seq, limit=session.last_seq)
        for seq, data in reversed(traces):
            out.write(json.dumps(trace_record(session.id, seq, data), ensure_ascii=False) + "\n")
        sessions += 1
        if progress is not None:
            progress(session)
    return sessions, messages


_WIDE_BOMS = {
    codecs.BOM_UTF32_LE: "UTF-32",
    codecs.BOM_UTF32_BE: "UTF-32",
    codecs.BOM_UTF16_LE: "UTF-16",
    codecs.BOM_UTF16_BE: "UTF-16",
}


def read_batches(path: Path, report: ImportReport) -> Iterator[Batch]:
    """The sessions of a JSONL export, one batch each (see `turnkeeper.importers`).

    JSONL is UTF-8: a file that starts with a UTF-16 or UTF-32 byte order mark is refused as a
    whole (every line would be malformed), a UTF-8 one is skipped, and a line that is not UTF-8
    is a malformed line like any other."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InvalidInput("file", f"cannot read {path}: {exc.strerror}") from None
    with handle:
        start = handle.read(4)
        for bom, name in _WIDE_BOMS.items():
            if start.startswith(bom):
                raise InvalidInput(
                    "file",
                    f"{path} is {name} text; JSONL is UTF-8 (convert it first, e.g. "
                    f"iconv -f {name} -t UTF-8)",
                )
        handle.seek(len(codecs.BOM_UTF8) if start.startswith(codecs.BOM_UTF8) else 0)
        yield from _batches(path, handle, report)


def _batches(path: Path, lines: Iterable[bytes], report: ImportReport) -> Iterator[Batch]:
    """Group records into per-session batches; malformed lines are reported and skipped."""
    batch: Batch | None = None
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")  # a UnicodeDecodeError is a ValueError: malformed
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("a record must be a JSON object")
            kind = record.get("type")
            if kind == "session":
                if batch is not None:
                    yield batch
                batch = Batch(session_from_record(record), f"{path}:{number}")
                report.sessions_seen += 1
            elif kind == "message":
                message = message_from_record(record)
                if batch is None or message.session_id != batch.session.id:
                    raise ValueError("message record does not follow its session record")
                batch.messages.append(message)
                report.messages_seen += 1
            elif kind == "trace":
                if batch is None or record.get("session_id") != batch.session.id:
                    raise ValueError("trace record does not follow its session record")
                replies = {m.seq for m in batch.messages if m.role is Role.ASSISTANT}
                batch.traces.append(trace_from_record(record, replies))
            else:
                raise ValueError(f"unknown record type {kind!r}")
        except (ValueError, KeyError, TypeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            report.errors.append(f"{path}:{number}: {detail}")
    if batch is not None:
        yield batch


def import_sessions(
    store: Store,
    path: Path,
    *,
    dry_run: bool = False,
    progress: Callable[[Session], None] | None = None,
) -> ImportReport:
    """Import a JSONL export. Idempotent; malformed lines are reported, the rest imported."""
    report = ImportReport()
    batches = read_batches(path, report)
    return run_import(store, batches, report, dry_run=dry_run, progress=progress)
