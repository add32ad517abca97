"""`turnkeeper export` and `import`: sessions and messages as JSONL (see `turnkeeper.jsonl`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from turnkeeper.cli.app import EXIT_ERROR, DbOption, JsonOption, ProjectOption, app, open_ctx
from turnkeeper.errors import InvalidInput


@app.command("export")
def export(
    output: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="FILE.jsonl", help="File to write.", dir_okay=False),
    ],
    sessions: Annotated[
        list[str] | None,
        typer.Argument(metavar="[SESSION]...", help="Sessions to export (default: all)."),
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
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE.jsonl", help="A turnkeeper export.", exists=True, dir_okay=False
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be imported; write nothing.")
    ] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Import a JSONL export; sessions and messages already stored are skipped.

    Malformed lines are reported on stderr as FILE:LINE and the rest is still imported;
    the exit code is then 1.
    """
    with open_ctx(db, json_output) as ctx:
        with ctx.out.progress("Importing") as advance:
            report = ctx.tk.import_sessions(file, dry_run=dry_run, progress=lambda _: advance())
        ctx.out.imported(report, dry_run=dry_run)
    if report.errors:
        raise typer.Exit(EXIT_ERROR)
