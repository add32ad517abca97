"""The `turnkeeper` command line: one typer app of noun groups and thin commands.

A command parses its options, calls one `Turnkeeper` method and hands the result to
`turnkeeper.cli.output`; no business logic lives in the CLI. Options shared by many commands are
declared once here as `Annotated` aliases, and every command opens the same small `Ctx` (the
settings, built once at this edge, and the opened `Turnkeeper`).

Errors become exit codes in exactly one place, `TurnkeeperGroup.main`: any `TurnkeeperError` is
one `error: …` line on stderr and exit code 1; a usage error (unknown option, missing argument,
a value that does not parse) is one line and exit code 2. Neither prints a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import structlog
import typer
from typer.core import TyperGroup

import turnkeeper
from turnkeeper.cli.output import Output
from turnkeeper.config import load_settings, parse_duration
from turnkeeper.errors import InvalidInput, TurnkeeperError
from turnkeeper.service import Turnkeeper
from turnkeeper.types import UNSET

EXIT_ERROR = 1


class TurnkeeperGroup(TyperGroup):
    """The root command; its `main` is the one place errors are turned into exit codes."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            _check_utf8(sys.argv[1:] if args is None else args)
            with _logs_to_stderr():
                result = super().main(
                    args, prog_name, complete_var, False, windows_expand_args, **extra
                )
            code = result if isinstance(result, int) else 0
        except TurnkeeperError as exc:
            code = _fail(str(exc), EXIT_ERROR)
        except typer.TyperException as exc:  # click's usage errors and friends
            code = _usage_failure(exc)
        except typer.Abort:
            code = _fail("aborted", EXIT_ERROR)
        if standalone_mode:
            raise SystemExit(code)
        return code


def _check_utf8(args: Sequence[str]) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates (`surrogateescape`), which no
    text field can store: refuse them here, naming the argument, before any command runs."""
    for arg in args:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageProblem(f"argument {os.fsencode(arg)!r} is not UTF-8 text") from None


def read_stdin_text(field: str) -> str:
    """All of stdin as UTF-8 text (`InvalidInput` naming `field` when it is not)."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            field, f"stdin is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})"
        ) from None


@contextmanager
def _logs_to_stderr() -> Iterator[None]:
    """While a command runs, library log events (e.g. `conversation_context_loaded`) go to
    stderr, warnings and worse only, so stdout carries nothing but the command's output. The
    previous structlog configuration is restored afterwards (the CLI may run in-process)."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    try:
        yield
    finally:
        if configured:
            structlog.configure(**saved)
        else:
            structlog.reset_defaults()


def _fail(message: str, code: int) -> int:
    typer.secho("error: ", fg="red", bold=True, err=True, nl=False)
    typer.echo(" ".join(message.splitlines()), err=True)
    return code


def _usage_failure(exc: typer.TyperException) -> int:
    code = int(getattr(exc, "exit_code", EXIT_ERROR))
    if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group: its help (already printed
        if help_text := exc.format_message():  # by rich), and click's exit code
            typer.echo(help_text, err=True)
        return code
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return _fail(exc.format_message() + hint, code)


app = typer.Typer(
    name="turnkeeper",
    cls=TurnkeeperGroup,
    help="Conversation memory for LLM products and agents: durable turns, token-budgeted "
    "context windows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


# -- the context every command opens --------------------------------------------------------


@dataclass(frozen=True)
class Ctx:
    """What a command works with: the opened service and the output for this invocation."""

    tk: Turnkeeper
    out: Output


@contextmanager
def open_ctx(db: str | None, json_output: bool) -> Iterator[Ctx]:
    """Build the settings (`--db` over `TURNKEEPER_DATABASE_URL` over the config file over the
    default), open turnkeeper on them, and close it when the command is done."""
    settings = load_settings(database_url=db)
    with turnkeeper.open(settings=settings) as tk:
        yield Ctx(tk, Output(json=json_output))


# -- value parsers: a bad value is a usage error (exit 2) -----------------------------------


class UsageProblem(typer.BadParameter):
    """A usage error (exit 2) whose message stands on its own, for rules across options."""

    def format_message(self) -> str:
        return self.message


def parse_metadata(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise typer.BadParameter('must be a JSON object, e.g. \'{"team": "support"}\'')
    return value


def parse_timedelta(text: str) -> timedelta:
    value = parse_duration(text)
    if not isinstance(value, timedelta):
        raise typer.BadParameter(f"{text!r} is not a duration; use e.g. 24h, 90m, 1h30m, 2d")
    return value


def parse_since(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not an ISO 8601 time") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def ttl_value(text: str | None) -> Any:
    """`--ttl`: absent → the configured lifetime (UNSET), `never` → None, else a duration."""
    if text is None:
        return UNSET
    if text.strip().lower() == "never":
        return None
    try:
        return parse_timedelta(text)
    except typer.BadParameter as exc:
        raise typer.BadParameter(exc.message, param_hint="'--ttl'") from None


# -- options shared by many commands --------------------------------------------------------

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Database URL, e.g. sqlite:///chat.db (default: $TURNKEEPER_DATABASE_URL, then "
        "the config file, then the embedded database in the user data directory).",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print exactly one JSON document on stdout instead of tables."),
]
ProjectOption = Annotated[
    str | None,
    typer.Option(
        "--project",
        metavar="P",
        help="Project (tenant). Keys are looked up in it; a session of another project is "
        "not found.",
        show_default=False,
    ),
]
SessionArg = Annotated[
    str, typer.Argument(metavar="SESSION", help="Session id, or key (looked up in --project).")
]
MetadataOption = Annotated[
    dict[str, Any] | None,
    typer.Option(
        "--metadata",
        metavar="JSON",
        parser=parse_metadata,
        help="Metadata as a JSON object (replaces the stored metadata as a whole).",
        show_default=False,
    ),
]
