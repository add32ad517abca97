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

import inspect
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

import turnkeeper
from turnkeeper.callers import located
from turnkeeper.cli.help import readable_help
from turnkeeper.cli.output import Output
from turnkeeper.config import load_settings, parse_duration
from turnkeeper.errors import InvalidInput, SessionErased, SessionNotFound, TurnkeeperError
from turnkeeper.logs import ROOT, send_to, snapshot
from turnkeeper.service import Turnkeeper
from turnkeeper.types import UNSET, JSONObject, Session, SessionStatus, StrategyName
from turnkeeper.validation import parse_json

EXIT_ERROR = 1

COMMAND_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Commands", ("sessions", "add", "history", "context", "chat", "search", "trace", "demo")),
    ("Branches and agents", ("fork", "branches", "agents", "summaries", "conversation-context")),
    ("The service", ("serve", "keys", "mcp")),
    ("Data", ("export", "import", "stats", "gc", "encryption", "erase", "hold")),
)
"""How `--help` lists the commands: what a user needs first, first (a conversation's commands),
in panels as gh's help has them. A command missing here is listed last."""

_COMMAND_ORDER = [name for _, names in COMMAND_PANELS for name in names]


class TurnkeeperGroup(TyperGroup):
    """The root command; its `main` is the one place errors are turned into exit codes."""

    def list_commands(self, ctx: Any) -> list[str]:
        """The commands in `COMMAND_PANELS` order, each in its panel."""
        for panel, names in COMMAND_PANELS[1:]:
            for name in names:
                if name in self.commands:
                    self.commands[name].rich_help_panel = panel  # type: ignore[attr-defined]
        known = [name for name in _COMMAND_ORDER if name in self.commands]
        return known + sorted(set(self.commands) - set(known))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        readable_help(self)
        reset = _GLOBAL_OPTIONS.set(None)  # an in-process rerun starts afresh
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
        finally:
            _GLOBAL_OPTIONS.reset(reset)
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
    """While a command runs, library warnings and worse go to stderr as one `warning: event
    key=value …` line each, so stdout carries nothing but the command's output. Logging is
    restored afterwards (the CLI may run in-process)."""
    restore = snapshot(ROOT)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LevelPrefix())
    send_to(handler, logging.WARNING, ROOT)
    try:
        yield
    finally:
        restore()


class _LevelPrefix(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {super().format(record)}"


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
    rich_markup_mode="markdown",  # docstring paragraphs re-flow whole, never mid-sentence
    context_settings={"help_option_names": ["-h", "--help"]},
)


# -- the context every command opens --------------------------------------------------------


@dataclass(frozen=True)
class GlobalOptions:
    """`--db` and `--json` given before the command (`turnkeeper --db X sessions list`), as
    gh and git take them; the same options after the command win."""

    db: str | None = None
    json_output: bool = False


@dataclass(frozen=True)
class Ctx:
    """What a command works with: the opened service and the output for this invocation."""

    tk: Turnkeeper
    out: Output


_GLOBAL_OPTIONS: ContextVar[GlobalOptions | None] = ContextVar(
    "turnkeeper_cli_global_options", default=None
)
"""Set by the root callback for the one invocation `TurnkeeperGroup.main` runs (a context
variable rather than click's context object, which typer's own vendored click owns)."""


def global_options() -> GlobalOptions:
    """The options given before the command of the running invocation."""
    return _GLOBAL_OPTIONS.get() or GlobalOptions()


@contextmanager
def open_ctx(db: str | None, json_output: bool) -> Iterator[Ctx]:
    """Build the settings (`--db` over `TURNKEEPER_DATABASE_URL` over the config file over the
    default), open turnkeeper on them, and close it when the command is done.

    A session the command did not find in its project is looked for in the others: whoever
    holds the database may see them all, so the error says where it is."""
    before = global_options()
    settings = load_settings(database_url=db or before.db)
    with turnkeeper.open(settings=settings) as tk:
        try:
            yield Ctx(tk, Output(json=json_output or before.json_output))
        except SessionNotFound as exc:
            raise located(
                tk,
                exc,
                may_see=lambda project: True,
                how=lambda project: f"pass --project {project}",
            ) from None


def command(group: typer.Typer, name: str) -> Callable[[Action], Action]:
    """Register `action(ctx, …)` as the command `name` of `group`, run in an opened `Ctx`.

    The command takes the options `action` declares after `ctx` (in that order), then `--db`
    and `--json`, which every command takes to open its context; so a command states only
    what is its own. A command that must check its options before the database is opened
    (a usage error opens nothing) opens its context itself with `open_ctx`."""

    def register(action: Action) -> Action:
        own = list(inspect.signature(action, eval_str=True).parameters.values())[1:]
        parameters = [*own, *_CONTEXT_PARAMETERS]

        def run(db: str | None = None, json_output: bool = False, **options: Any) -> None:
            with open_ctx(db, json_output) as ctx:
                action(ctx, **options)

        # typer reads a command's options from its callback's signature and annotations
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        run.__doc__, run.__name__ = action.__doc__, action.__name__
        group.command(name)(run)
        return action

    return register


def session_or_new(ctx: Ctx, ref: str, *, project: str | None) -> Session:
    """The session `ref` names; a key that names none gets a new session (llm's habit: adding
    to a conversation that does not exist yet starts it), said on stderr."""
    try:
        return ctx.tk.get_session(ref, project=project)
    except SessionErased:
        raise  # an erased id never comes back, not even as a new session's key
    except SessionNotFound:
        session, created = ctx.tk.get_or_create_session(ref, project=project)
    if created:
        ctx.out.warn(f"Created session {session.id} with key {ref!r}.")
    return session


def latest_session(ctx: Ctx, *, project: str | None, active: bool = False) -> Session:
    """The session with the most recent activity (of `project`, else of any; only an active
    one with `active`), as llm's `logs` shows the latest conversation; `UsageProblem` when
    there is none."""
    status = SessionStatus.ACTIVE if active else None
    page = ctx.tk.list_sessions(project=project, status=status, limit=1)
    if not page.items:
        kind = "active session" if active else "session"
        where = f" in project {project!r}" if project else ""
        raise UsageProblem(f"there is no {kind}{where} yet; give a SESSION")
    return page.items[0]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"turnkeeper {turnkeeper.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    db: Annotated[
        str | None, db_option("Database URL for any command (the command's own --db wins).")
    ] = None,
    json_output: Annotated[bool, json_option("JSON output for any command.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    _GLOBAL_OPTIONS.set(GlobalOptions(db=db, json_output=json_output))


# -- value parsers: a bad value is a usage error (exit 2) -----------------------------------


class UsageProblem(typer.BadParameter):
    """A usage error (exit 2) whose message stands on its own, for rules across options."""

    def format_message(self) -> str:
        return self.message


def parse_metadata(text: str) -> dict[str, Any]:
    try:
        value = parse_json(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise typer.BadParameter('must be a JSON object, e.g. \'{"team": "support"}\'')
    return value


def parse_tool_calls(text: str) -> list[JSONObject]:
    """`--tool-calls` (parsed in the command: typer has no list-of-objects option type)."""
    hint = "'--tool-calls'"
    try:
        value = parse_json(text)
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON ({exc.msg} at column {exc.colno})"
        raise typer.BadParameter(problem, param_hint=hint) from None
    if not isinstance(value, list) or not all(isinstance(call, dict) for call in value):
        raise typer.BadParameter("must be a JSON array of tool-call objects", param_hint=hint)
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


def db_option(help: str) -> Any:
    """`--db URL`: the database to open, as every command takes it and the root takes it for
    any command (`global_options`)."""
    return typer.Option("--db", metavar="URL", help=help, show_default=False)


def json_option(help: str) -> Any:
    """`--json`: output as one JSON document, as every command and the root take it."""
    return typer.Option("--json", help=help)


DbOption = Annotated[
    str | None,
    db_option(
        "Database URL, e.g. sqlite:///chat.db (default: $TURNKEEPER_DATABASE_URL, then "
        "the config file, then the embedded database in the user data directory)."
    ),
]
JsonOption = Annotated[
    bool, json_option("Print exactly one JSON document on stdout instead of tables.")
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
IncludeInternalOption = Annotated[
    bool, typer.Option("--internal/--no-internal", help="Include internal messages.")
]
"""Whether a listing of messages (`history`, `search`) shows the internal ones too."""
SessionArg = Annotated[
    str, typer.Argument(metavar="SESSION", help="Session id, or key (looked up in --project).")
]


def metadata_option(help: str) -> Any:
    """`--metadata JSON`: a JSON object (a usage error naming the option otherwise)."""
    return typer.Option(
        "--metadata", metavar="JSON", parser=parse_metadata, help=help, show_default=False
    )


def ttl_option(help: str) -> Any:
    """`--ttl DURATION|never`: a session's lifetime without activity, read by `ttl_value`."""
    return typer.Option("--ttl", metavar="DURATION|never", help=help)


MetadataOption = Annotated[
    dict[str, Any] | None,
    metadata_option("Metadata as a JSON object (replaces the stored metadata as a whole)."),
]
StrategyOption = Annotated[
    StrategyName | None,
    typer.Option("--strategy", help="Context strategy (default: the configured one)."),
]
BudgetOption = Annotated[
    int | None,
    typer.Option("--budget", metavar="N", help="Token budget of the context window."),
]
OldBudgetOption = Annotated[
    int | None, typer.Option("--max-tokens", metavar="N", hidden=True, help="Old name of --budget.")
]
"""`--max-tokens`, still read as `--budget` (`window_budget` merges them) but not shown: to a
model API `max_tokens` is the reply's limit."""

Action = Callable[..., None]
"""A command's work, given the opened `Ctx` and the command's own options (see `command`)."""

_CONTEXT_PARAMETERS = (
    inspect.Parameter("db", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=DbOption),
    inspect.Parameter(
        "json_output", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=JsonOption
    ),
)
"""`--db` and `--json`, as `command` adds them after a command's own options."""
