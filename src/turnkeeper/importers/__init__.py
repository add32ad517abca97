"""`turnkeeper import`: bring conversations in from turnkeeper's JSONL and older designs' stores.

Every source works the same way (see `turnkeeper.importers.base`): a dry run that counts what
would be imported, a progress callback per session, idempotence (ids are derived from the
source, so a second run adds nothing), and malformed records reported as `file:line: problem`
while everything else is imported.

- `jsonl` — turnkeeper's own export (`turnkeeper.jsonl`);
- `session-files` — a desktop agents app's session files (`turnkeeper.importers.session_files`;
  the app's own name is accepted for it);
- `conversation-contexts` — an older conversation service's PostgreSQL table
  (`turnkeeper.importers.conversation_contexts`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from pathlib import Path

from turnkeeper.errors import InvalidInput
from turnkeeper.importers.base import Batch, ImportReport, ImportTarget, run_import
from turnkeeper.types import Session
from turnkeeper.validation import check_name

__all__ = ["ImportReport", "SourceKind", "detect", "import_from"]


class SourceKind(enum.StrEnum):
    """Where an import reads from."""

    JSONL = "jsonl"
    SESSION_FILES = "session-files"
    CONVERSATION_CONTEXTS = "conversation-contexts"

    @classmethod
    def _missing_(cls, value: object) -> SourceKind | None:
        """The older name of a source, still accepted (not listed in help): see
        docs/compatibility.md."""
        return cls.SESSION_FILES if value == OLDER_SESSION_FILES_NAME else None


OLDER_SESSION_FILES_NAME = "dagent"  # what `--from` called session files before 0.2


def detect(path: Path) -> SourceKind:
    """Guess a file's source when it is obvious: a directory or a `.json` file is session files,
    anything else is taken as turnkeeper JSONL (whose errors then say what is wrong)."""
    if path.is_dir() or path.suffix == ".json":
        return SourceKind.SESSION_FILES
    return SourceKind.JSONL


def import_from(
    tk: ImportTarget,
    kind: SourceKind,
    location: str | Path,
    *,
    project: str | None = None,
    dry_run: bool = False,
    progress: Callable[[Session], None] | None = None,
    allow_erased: bool = False,
) -> ImportReport:
    """Import from `location` (a file or directory, or for `conversation-contexts` a database
    URL). `project` is where session files' sessions go (default: the configured one); the other
    sources carry their own projects. An erased session is refused unless `allow_erased`."""
    report = ImportReport()
    batches: Iterator[Batch]
    if kind is SourceKind.CONVERSATION_CONTEXTS:
        from turnkeeper.importers import conversation_contexts

        batches = conversation_contexts.read_batches(tk, str(location), report)
    elif kind is SourceKind.SESSION_FILES:
        from turnkeeper.importers import session_files

        home = check_name("project", project) or tk.settings.default_project
        batches = session_files.read_batches(tk, _existing(location), report, home)
    else:
        from turnkeeper import jsonl

        batches = jsonl.read_batches(tk, _existing(location), report)
    return run_import(
        tk, batches, report, dry_run=dry_run, progress=progress, allow_erased=allow_erased
    )


def _existing(location: str | Path) -> Path:
    path = Path(location)
    if not path.exists():
        raise InvalidInput("file", f"{path} does not exist")
    return path
