"""turnkeeper's JSONL export format: the wire shape of sessions and messages on disk.

One JSON object per line: a `{"type": "session", ...}` record followed by that session's
`{"type": "message", ...}` records in seq order, then its `{"type": "trace", ...}` records (the
turn trace of each reply a chat turn produced: what the model saw, `turnkeeper.traces`), by seq.
Every field is kept (ids, seqs, times to the microsecond, token counts, usage, traces as
stored), so export → import round-trips exactly, and importing the same file twice adds nothing
the second time. The same format is the cold-storage archive. Format 2 added the trace records;
a format 1 file (no traces) imports unchanged. The records' shapes are `turnkeeper.records`';
this module reads and writes files of them.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from turnkeeper.errors import InvalidInput
from turnkeeper.importers.base import Batch, run_import
from turnkeeper.importers.base import ImportReport as ImportReport  # re-exported: its old home
from turnkeeper.records import FORMAT_VERSION as FORMAT_VERSION  # re-exported: its old home
from turnkeeper.records import (
    message_from_record,
    message_record,
    session_from_record,
    session_record,
    trace_from_record,
    trace_record,
)
from turnkeeper.storage.base import Store, TraceStore
from turnkeeper.types import Role, Session


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
        traces = (
            store.read_traces(session.id, upto_seq=session.last_seq, limit=session.last_seq)
            if isinstance(store, TraceStore)
            else []  # a store without turn traces has none to export
        )
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
