"""`turnkeeper export` and `import`: sessions and messages as JSONL (see `turnkeeper.jsonl`),
and imports from older designs' stores (see `turnkeeper.importers`)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TextIO

import typer

from turnkeeper.cli.app import (
    EXIT_ERROR,
    DbOption,
    JsonOption,
    ProjectOption,
    UsageProblem,
    app,
    open_ctx,
)
from turnkeeper.encryption import ENCRYPTED_EXPORT_START
from turnkeeper.errors import InvalidInput
from turnkeeper.importers import SourceKind, detect, import_from
from turnkeeper.wording import counted

STDOUT = "-"


@app.command("export")
def export(
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE.jsonl",
            help="Where to write: a file (written whole, then renamed into place), a device or "
            "pipe (written straight to), or - for stdout.",
            dir_okay=False,
            allow_dash=True,
        ),
    ],
    sessions: Annotated[
        list[str] | None,
        typer.Argument(metavar="SESSION", help="Sessions to export (default: all)."),
    ] = None,
    encrypt: Annotated[
        bool,
        typer.Option(
            "--encrypt",
            help="Write no plaintext: encrypt the export under a fresh key wrapped by the "
            "current master key of encryption_key (import reads it back with that key).",
        ),
    ] = False,
    project: ProjectOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Export sessions and their messages as JSONL (encrypted with --encrypt)."""
    to_stdout = str(output) == STDOUT
    if to_stdout and json_output:
        raise UsageProblem("--json prints its document on stdout, where -o - writes the export")
    with open_ctx(db, json_output) as ctx:
        if sessions:
            ids = [ctx.tk.get_session(ref, project=project).id for ref in sessions]
        else:
            ids = list(ctx.tk.iter_session_ids(project=project))
        try:
            with (
                ctx.out.progress("Exporting", total=len(ids)) as advance,
                export_target(str(output)) as out,
            ):
                written = ctx.tk.transfer.export_sessions(
                    ids, out, progress=lambda _: advance(), encrypt=encrypt
                )
        except OSError as exc:
            if to_stdout:  # what is still buffered could not be written at exit either
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            reason = exc.strerror or str(exc)
            raise InvalidInput("output", f"cannot write {output}: {reason}") from None
        if to_stdout:
            ctx.out.warn(
                f"Exported {counted(written[0], 'session')} and {counted(written[1], 'message')}."
            )
        else:
            ctx.out.exported(str(output), *written)


@contextmanager
def export_target(output: str) -> Iterator[TextIO]:
    """The stream an export is written to, and the one place that decides how.

    - `-` is stdout.
    - A regular file, or a path where nothing is yet, is written whole to a temporary file
      beside it and renamed over it at the end: a reader never sees half an export, and a
      failed one leaves the old file as it was.
    - Anything else (a device such as /dev/null or /dev/full, a FIFO, a terminal) is written
      straight to: renaming over it would replace the device or pipe with a regular file.
    - A symbolic link is followed: its target gets the export, by the rules above, and the link
      stays a link.

    A write error (a full disk, /dev/full, a closed pipe) is raised as `OSError`.
    """
    if output == STDOUT:
        yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(os.path.realpath(output))
    if target.exists() and not target.is_file():
        with target.open("w", encoding="utf-8") as stream:
            yield stream
        return
    mode = target.stat().st_mode & 0o7777 if target.exists() else _default_file_mode()
    descriptor, partial = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".partial"
    )
    try:
        os.fchmod(descriptor, mode)  # what a plain open() would have given (mkstemp: 0600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            yield stream
        os.replace(partial, target)
    finally:
        Path(partial).unlink(missing_ok=True)


def _default_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


SOURCE_NAMES = [kind.value for kind in SourceKind]  # as help lists them; older names are accepted


def _source_kind(value: str) -> SourceKind:
    """`--from`: a source's name, or its older name (not listed: docs/compatibility.md)."""
    try:
        return SourceKind(value)
    except ValueError:
        listed = ", ".join(SOURCE_NAMES)
        raise typer.BadParameter(f"{value!r} is not one of {listed}") from None


@app.command("import")
def import_(
    source: Annotated[
        Path | None,
        typer.Argument(
            metavar="FILE|DIR",
            help="A turnkeeper export (.jsonl), or agent session files (a .json file or a "
            "project directory holding them). Not needed with --source-db.",
            exists=True,
        ),
    ] = None,
    kind: Annotated[
        SourceKind | None,
        typer.Option(
            "--from",
            metavar="SOURCE",
            parser=_source_kind,
            help="What FILE|DIR is (default: guessed — a directory or .json file is "
            "session-files, --source-db is conversation-contexts, anything else jsonl). "
            f"One of {', '.join(SOURCE_NAMES[:-1])} or {SOURCE_NAMES[-1]}.",
        ),
    ] = None,
    source_db: Annotated[
        str | None,
        typer.Option(
            "--source-db",
            metavar="URL",
            help="PostgreSQL URL of an older conversation service's conversation_contexts table.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be imported; write nothing.")
    ] = False,
    allow_erased: Annotated[
        bool,
        typer.Option(
            "--allow-erased",
            help="Import sessions that were erased since the export (their tombstones are"
            " lifted); without it they are refused, FILE:LINE each.",
        ),
    ] = False,
    project: ProjectOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Import conversations; sessions and messages already stored are skipped.

    Sources: turnkeeper's JSONL export, agent session files (their session id
    becomes the key, in --project), an older conversation service's conversation_contexts table
    (--source-db).
    Malformed records are reported on stderr as FILE:LINE and the rest is still imported;
    the exit code is then 1.
    """
    kind, location = _import_source(source, kind, source_db)
    with open_ctx(db, json_output) as ctx:
        total = _sessions_in(location) if kind is SourceKind.JSONL else None
        with ctx.out.progress("Importing", total=total) as advance:
            report = import_from(
                ctx.tk, kind, location, project=project, dry_run=dry_run,
                progress=lambda _: advance(), allow_erased=allow_erased,
            )  # fmt: skip
        ctx.out.imported(report, dry_run=dry_run)
    if report.errors:
        raise typer.Exit(EXIT_ERROR)


def _sessions_in(location: str | Path) -> int | None:
    """How many sessions a JSONL export holds, for the progress bar's total: a quick scan for
    the session records' line start as `export` writes it (None if the file cannot be read,
    or is encrypted)."""
    try:
        with Path(location).open("rb") as lines:
            first = lines.readline()
            if first.startswith(ENCRYPTED_EXPORT_START):
                return None
            starts = (line.startswith(b'{"type": "session"') for line in lines)
            return first.startswith(b'{"type": "session"') + sum(starts)
    except OSError:
        return None


def _import_source(
    source: Path | None, kind: SourceKind | None, source_db: str | None
) -> tuple[SourceKind, str | Path]:
    """Which source to read and where: usage errors (exit 2) when the options disagree."""
    if source_db is not None or kind is SourceKind.CONVERSATION_CONTEXTS:
        if (
            source is not None
            or source_db is None
            or kind not in (None, SourceKind.CONVERSATION_CONTEXTS)
        ):
            raise UsageProblem("conversation-contexts reads from --source-db URL alone (no FILE)")
        return SourceKind.CONVERSATION_CONTEXTS, source_db
    if source is None:
        raise UsageProblem("missing FILE (or --source-db URL)")
    return kind or detect(source), source
