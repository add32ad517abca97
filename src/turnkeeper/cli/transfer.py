"""`turnkeeper export` and `import`: sessions and messages as JSONL (see `turnkeeper.jsonl`),
and imports from the seeds' own stores (see `turnkeeper.importers`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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
from turnkeeper.errors import InvalidInput
from turnkeeper.importers import SourceKind, detect, import_from


@app.command("export")
def export(
    output: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="FILE.jsonl", help="File to write.", dir_okay=False),
    ],
    sessions: Annotated[
        list[str] | None,
        typer.Argument(metavar="SESSION", help="Sessions to export (default: all)."),
    ] = None,
    project: ProjectOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Export sessions and their messages to a JSONL file (written whole, then renamed)."""
    with open_ctx(db, json_output) as ctx:
        if sessions:
            ids = [ctx.tk.get_session(ref, project=project).id for ref in sessions]
        else:
            ids = list(ctx.tk.iter_session_ids(project=project))
        partial = output.with_name(output.name + ".partial")
        try:
            with (
                ctx.out.progress("Exporting", total=len(ids)) as advance,
                partial.open("w", encoding="utf-8") as out,
            ):
                written = ctx.tk.export_sessions(ids, out, progress=lambda _: advance())
            partial.replace(output)
        except OSError as exc:
            raise InvalidInput("output", f"cannot write {output}: {exc.strerror}") from None
        finally:
            partial.unlink(missing_ok=True)
        ctx.out.exported(str(output), *written)


@app.command("import")
def import_(
    source: Annotated[
        Path | None,
        typer.Argument(
            metavar="FILE|DIR",
            help="A turnkeeper export (.jsonl), or seed 002's session files (a .json file or a "
            "directory holding .dagent-worktrees). Not needed with --source-db.",
            exists=True,
        ),
    ] = None,
    kind: Annotated[
        SourceKind | None,
        typer.Option(
            "--from",
            help="What SOURCE is (default: guessed — a directory or .json file is dagent's, "
            "--source-db is conversation-contexts, anything else jsonl).",
        ),
    ] = None,
    source_db: Annotated[
        str | None,
        typer.Option(
            "--source-db",
            metavar="URL",
            help="PostgreSQL URL of seed 000's conversation_contexts table.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be imported; write nothing.")
    ] = False,
    project: ProjectOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Import conversations; sessions and messages already stored are skipped.

    Sources: turnkeeper's JSONL export, seed 002's dagent session files (their session id
    becomes the key, in --project), seed 000's conversation_contexts table (--source-db).
    Malformed records are reported on stderr as FILE:LINE and the rest is still imported;
    the exit code is then 1.
    """
    kind, location = _import_source(source, kind, source_db)
    with open_ctx(db, json_output) as ctx:
        total = _sessions_in(location) if kind is SourceKind.JSONL else None
        with ctx.out.progress("Importing", total=total) as advance:
            report = import_from(
                ctx.tk, kind, location, project=project, dry_run=dry_run,
                progress=lambda _: advance(),
            )  # fmt: skip
        ctx.out.imported(report, dry_run=dry_run)
    if report.errors:
        raise typer.Exit(EXIT_ERROR)


def _sessions_in(location: str | Path) -> int | None:
    """How many sessions a JSONL export holds, for the progress bar's total: a quick scan for
    the session records' line start as `export` writes it (None if the file cannot be read)."""
    try:
        with Path(location).open("rb") as lines:
            return sum(line.startswith(b'{"type": "session"') for line in lines)
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
