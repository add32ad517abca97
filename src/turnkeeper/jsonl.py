"""turnkeeper's JSONL export format: the wire shape of sessions and messages on disk.

One JSON object per line: a `{"type": "session", ...}` record followed by that session's
`{"type": "message", ...}` records in seq order, then its `{"type": "trace", ...}` records (the
turn trace of each reply a chat turn produced: what the model saw, `turnkeeper.traces`), by seq.
Every field is kept (ids, seqs, times to the microsecond, token counts, usage, traces as
stored), so export → import round-trips exactly, and importing the same file twice adds nothing
the second time. The same format is the cold-storage archive. Format 2 added the trace records;
a format 1 file (no traces) imports unchanged. The records' shapes are `turnkeeper.records`';
this module reads and writes files of them.

An import checks every line as the API would check what it carries (`turnkeeper.importers`):
a message as `append` does (its limits included), counted again in this store's encoding (a
record's `tokens` is not read), with the seq that follows the last one imported; a session as
`create_session` does; a trace's JSON within its bounds. A line that fails is reported as
`FILE:LINE: problem` and the rest is imported, so one bad line never stops an import.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from turnkeeper.encryption import ENCRYPTED_EXPORT_START, configured_master_keys
from turnkeeper.errors import InvalidInput
from turnkeeper.importers.base import Batch, ImportTarget, run_import
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
from turnkeeper.types import Message, NewMessage, Role, Session
from turnkeeper.validation import MAX_TRACE_DEPTH, check_json, parse_json

if TYPE_CHECKING:
    from turnkeeper.encryption.files import SealedWriter
    from turnkeeper.encryption.keys import MasterKeys


def export_sessions(
    store: Store,
    session_ids: Iterable[str],
    out: IO[str],
    *,
    progress: Callable[[Session], None] | None = None,
    seal_with: MasterKeys | None = None,
) -> tuple[int, int]:
    """Write sessions and their messages as JSONL, encrypted when `seal_with` gives master
    keys (`turnkeeper.encryption.files`). Returns (sessions, messages) written."""
    if seal_with is None:
        return _export(store, session_ids, out, progress)
    from turnkeeper.encryption.files import SealedWriter

    sealed = SealedWriter(out, seal_with)
    written = _export(store, session_ids, sealed, progress)
    sealed.finish()
    return written


def _export(
    store: Store,
    session_ids: Iterable[str],
    out: IO[str] | SealedWriter,
    progress: Callable[[Session], None] | None,
) -> tuple[int, int]:
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


def read_batches(tk: ImportTarget, path: Path, report: ImportReport) -> Iterator[Batch]:
    """The sessions of a JSONL export, one batch each (see `turnkeeper.importers`), checked
    against `tk`'s rules.

    JSONL is UTF-8: a file that starts with a UTF-16 or UTF-32 byte order mark is refused as a
    whole (every line would be malformed), a UTF-8 one is skipped, and a line that is not UTF-8
    is a malformed line like any other. An encrypted export (`export --encrypt`, an archive
    of an encrypted store) is opened with the configured master keys; its lines are numbered
    as in the export it holds."""
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
        if start + handle.read(len(ENCRYPTED_EXPORT_START) - 4) == ENCRYPTED_EXPORT_START:
            from turnkeeper.encryption.files import opened_lines

            lines = opened_lines(str(path), handle, configured_master_keys(tk.settings))
            yield from _batches(tk, path, lines, report)
            return
        handle.seek(len(codecs.BOM_UTF8) if start.startswith(codecs.BOM_UTF8) else 0)
        yield from _batches(tk, path, handle, report)


_RECORD_DEPTH = MAX_TRACE_DEPTH + 1
"""How deep a valid record nests: its values (a trace the deepest) sit one level into it."""


def _batches(
    tk: ImportTarget, path: Path, lines: Iterable[bytes], report: ImportReport
) -> Iterator[Batch]:
    """Group records into per-session batches; a line that fails is reported and skipped."""
    batch: Batch | None = None
    ids: set[str] = set()  # of the batch's messages
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")  # a UnicodeDecodeError is a ValueError: malformed
            record = parse_json(line, levels=_RECORD_DEPTH)
            if not isinstance(record, dict):
                raise ValueError("a record must be a JSON object")
            kind = record.get("type")
            if kind == "session":
                if batch is not None:
                    yield batch
                batch = Batch(session_from_record(record), f"{path}:{number}")
                ids = set()
                report.sessions_seen += 1
            elif kind == "message":
                if batch is None or record.get("session_id") != batch.session.id:
                    raise ValueError("message record does not follow its session record")
                message = _message(tk, record, batch.messages[-1].seq if batch.messages else 0)
                if message.id in ids:
                    raise InvalidInput("id", f"{message.id!r} is an earlier message's id")
                ids.add(message.id)
                batch.messages.append(message)
                report.messages_seen += 1
            elif kind == "trace":
                if batch is None or record.get("session_id") != batch.session.id:
                    raise ValueError("trace record does not follow its session record")
                batch.traces.append(_trace(tk, record, batch.messages))
            else:
                raise ValueError(f"unknown record type {kind!r}")
        except (ValueError, KeyError, TypeError, InvalidInput) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            report.errors.append(f"{path}:{number}: {detail}")
    if batch is not None:
        yield batch


def _message(tk: ImportTarget, record: dict[str, Any], last_seq: int) -> Message:
    """A message record as `append` would store it after the session's message `last_seq`
    (the last one imported): checked by `tk.draft`, with its tokens counted in this store's
    encoding, keeping its id, seq and time. Its seq must be the next one: a session's seqs run
    1, 2, 3… without a gap (a gap is also what a bad line before it leaves)."""
    message = message_from_record(record)
    expected = last_seq + 1
    if message.seq != expected:
        raise InvalidInput(
            "seq",
            f"is {message.seq} where {expected} was expected: a session's messages are"
            " numbered 1, 2, 3, … without gaps",
        )
    draft = tk.draft(
        NewMessage(
            role=message.role, content=message.content, author=message.author,
            internal=message.internal, id=message.id, metadata=message.metadata,
            usage=message.usage, tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
        )
    )  # fmt: skip
    return dataclasses.replace(
        message, role=draft.role, tokens=draft.tokens, tool_calls=draft.tool_calls,
        metadata=draft.metadata,
    )  # fmt: skip


def _trace(tk: ImportTarget, record: dict[str, Any], messages: list[Message]) -> tuple[int, str]:
    """A trace record of one of `messages`' replies, its document within the bounds of a JSON
    value (`MAX_TRACE_DEPTH` deep, `max_json_bytes` large)."""
    replies = {m.seq for m in messages if m.role is Role.ASSISTANT}
    seq, data = trace_from_record(record, replies)
    check_json("trace", record["trace"], max_bytes=tk.settings.max_json_bytes,
               max_depth=MAX_TRACE_DEPTH)  # fmt: skip
    return seq, data


def import_sessions(
    tk: ImportTarget,
    path: Path,
    *,
    dry_run: bool = False,
    progress: Callable[[Session], None] | None = None,
    allow_erased: bool = False,
) -> ImportReport:
    """Import a JSONL export into `tk` (a `Turnkeeper`). Idempotent; a line that fails is
    reported as `FILE:LINE: problem` and the rest is imported. An erased session is refused
    so, unless `allow_erased` (see `run_import`)."""
    report = ImportReport()
    batches = read_batches(tk, path, report)
    return run_import(
        tk, batches, report, dry_run=dry_run, progress=progress, allow_erased=allow_erased
    )
