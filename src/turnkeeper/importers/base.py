"""What every importer shares: batches of one session each, and the loop that stores them.

A source (turnkeeper's JSONL, a desktop agents app's session files, an older conversation service's
`conversation_contexts` table)
only turns its own records into `Batch`es — a finished `Session` with its `Message`s — and
reports what it cannot read as `where: problem` in `ImportReport.errors`, where `where` is the
file and line (or table row) of the offending record. `run_import` does the rest the same way for
all of them: the session's own checks, dry run, progress, and idempotence (ids are
deterministic, and a message whose id is already stored is skipped), so running an import twice
adds nothing the second time.

Nothing is trusted because it comes from a file: every message is checked and its tokens are
counted by the service's `draft`, as an append's are, and every session field is checked as
creating the session would check it (`check_session`); a session's totals are the store's sums
of what it holds, never the source's figures.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from turnkeeper.config import Settings
from turnkeeper.errors import InvalidInput, SessionErased, SessionNotFound, TurnkeeperError
from turnkeeper.storage.base import ErasureStore, Store, TransferStore, require
from turnkeeper.types import Message, MessageDraft, NewMessage, Session
from turnkeeper.validation import (
    check_metadata,
    check_name,
    check_non_negative,
    check_text,
)


class ImportTarget(Protocol):
    """What an importer needs of the service it imports into (a `Turnkeeper` is one): its
    settings, its store, and `draft`, which validates and counts a message the way `append`
    does. Named here so the importers sit below the service and never import it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def store(self) -> Store: ...

    def draft(self, message: NewMessage) -> MessageDraft: ...


NAMESPACE = uuid.UUID("5d0c6f1e-7b8a-4c1e-9a57-2f4b7e0c9d31")
"""uuid5 namespace of every id an importer derives, so ids are the same on every run."""


def derived_id(*parts: str) -> str:
    """A deterministic UUID from source identities: the same source record, the same id."""
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(parts)))


@dataclass
class ImportReport:
    """What an import did (or, in a dry run, would do). `errors` name file and line."""

    sessions_seen: int = 0
    sessions_created: int = 0
    messages_seen: int = 0
    messages_added: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class Batch:
    """One session and its messages, as the source has them.

    `origin` names where the session came from (`file:line`), for errors about the whole batch.
    With `exact_seqs` (turnkeeper's own export) the seqs are the exported ones and are kept;
    otherwise they are positions the importer chose, and messages new to an already imported
    session are numbered after what is stored — so a source that grew since the last run adds
    just its new messages at the end.
    """

    session: Session
    origin: str
    messages: list[Message] = field(default_factory=list)
    exact_seqs: bool = True
    traces: list[tuple[int, str]] = field(default_factory=list)
    """Turn traces `(seq, data)` of the batch's replies (turnkeeper's own export only)."""


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """A message read from a source, before validation and token counting.

    `identity` is what makes it unique in its session at the source (its own id, or else its
    content and time): the stored id is derived from it, which is what makes re-runs idempotent.
    """

    where: str
    identity: str
    message: NewMessage
    created_at: datetime


def build_batch(
    tk: ImportTarget,
    session: Session,
    origin: str,
    messages: Iterable[SourceMessage],
    report: ImportReport,
) -> Batch:
    """Validate and count each message the way `append` would; a bad one is reported by its
    `where` and left out, the others are kept."""
    stored: list[Message] = []
    occurrences: dict[str, int] = {}
    for source in messages:
        try:
            draft = tk.draft(source.message)
        except InvalidInput as exc:
            report.errors.append(f"{source.where}: {exc}")
            continue
        seen = occurrences.get(source.identity, 0)
        occurrences[source.identity] = seen + 1
        fields = {f.name: getattr(draft, f.name) for f in dataclasses.fields(draft)}
        del fields["trace"]  # a source message is not a chat turn's reply
        fields |= {"id": derived_id(session.id, source.identity, str(seen))}
        fields |= {"created_at": source.created_at}  # the source's time, not the clock's
        stored.append(Message(session_id=session.id, seq=len(stored) + 1, **fields))
        report.messages_seen += 1
    report.sessions_seen += 1
    return Batch(session, origin, stored, exact_seqs=False)


_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_time(value: Any, name: str = "timestamp") -> datetime:
    """An ISO 8601 time as the older stores write them (JavaScript's `toISOString`, Go's RFC 3339
    with nanoseconds). A time without a zone is taken as UTC."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(_FRACTION.sub(r"\1", value))
        except ValueError:
            raise ValueError(f"{name} {value!r} is not an ISO 8601 time") from None
    else:
        raise ValueError(f"{name} must be an ISO 8601 time, not {value!r}")
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def check_session(session: Session, settings: Settings) -> None:
    """`InvalidInput` naming the first field of an imported session that creating it through
    the API would refuse. What older versions stored is taken as they stored it, so their
    exports still import: the key is checked as a reference to a session (`check_name`), not as
    a new key (`check_key`: keys once held `/`), and the phase as a label of up to 100
    characters (phases were free text before they were a fixed list)."""
    check_name("id", session.id)
    check_name("key", session.key)
    if not check_name("project", session.project):
        raise InvalidInput("project", "a session needs a project")
    check_text("subject", session.subject, max_length=255)
    check_text("kind", session.kind, max_length=100)
    check_text("title", session.title)
    check_text("phase", session.phase, max_length=100)
    check_metadata("metadata", session.metadata, max_bytes=settings.max_json_bytes)
    check_non_negative("version", session.version)


def run_import(
    tk: ImportTarget,
    batches: Iterable[Batch],
    report: ImportReport,
    *,
    dry_run: bool = False,
    progress: Callable[[Session], None] | None = None,
    allow_erased: bool = False,
) -> ImportReport:
    """Store each batch (or, with `dry_run`, count what would be stored). A batch whose session
    is refused (`check_session`, or by the store: a key held by another live session, say) is
    reported by its origin and the import goes on.

    A session that was erased (its id a tombstone) is refused the same way unless
    `allow_erased`: then its tombstone is lifted and it is imported again (a deliberate
    restore, say of a session erased by mistake)."""
    store = tk.store
    transfer = require(store, TransferStore, "importing sessions")
    for batch in batches:
        try:
            check_session(batch.session, tk.settings)
        except InvalidInput as exc:
            report.errors.append(f"{batch.origin}: {exc} (session not imported)")
            continue
        try:
            existing: Session | None = store.get_session(batch.session.id)
        except SessionErased as exc:
            if not allow_erased:
                report.errors.append(
                    f"{batch.origin}: {exc}; not imported (allow_erased, --allow-erased"
                    " on the command line, imports it again)"
                )
                continue
            if not dry_run:
                require(store, ErasureStore, "restoring erased sessions").lift_tombstones(
                    [batch.session.id]
                )
            existing = None
        except SessionNotFound:
            existing = None
        session, messages = batch.session, batch.messages
        if existing is not None:
            messages = _new_to(existing, batch, store, report)
            # A version never goes back: the caches key what they hold by it.
            version = max(session.version, existing.version + 1)
            session = dataclasses.replace(session, version=version)
        if dry_run:
            report.sessions_created += existing is None
            report.messages_added += len(messages)
        else:
            try:
                report.messages_added += transfer.import_session(session, messages, batch.traces)
            except TurnkeeperError as exc:
                report.errors.append(f"{batch.origin}: {exc}")
                continue
            report.sessions_created += existing is None
        if progress is not None:
            progress(session)
    return report


def _new_to(existing: Session, batch: Batch, store: Store, report: ImportReport) -> list[Message]:
    """The batch's messages that an already stored session lacks, with seqs that go on from its
    last one without a gap. Exact seqs (an export of it) are those after its last seq, up to
    one whose id the session holds at another seq (reported: importing it would leave a gap);
    chosen seqs are the messages whose ids are new, numbered after its last seq."""
    known = {m.id for m in store.read_messages(existing.id)}
    if not batch.exact_seqs:
        return _after(existing, [m for m in batch.messages if m.id not in known])
    messages = [m for m in batch.messages if m.seq > existing.last_seq]
    for index, message in enumerate(messages):
        if message.id in known:
            report.errors.append(
                f"{batch.origin}: message {message.id!r} (seq {message.seq}) is stored in this"
                f" session at another seq; it and the {len(messages) - index - 1} messages after"
                " it were not imported"
            )
            return messages[:index]
    return messages


def _after(existing: Session, messages: list[Message]) -> list[Message]:
    return [
        dataclasses.replace(message, seq=existing.last_seq + index)
        for index, message in enumerate(messages, start=1)
    ]
