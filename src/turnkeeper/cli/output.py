"""Rendering for the CLI: rich tables for people, exactly one JSON document for machines.

Every domain value becomes JSON through `turnkeeper.records.plain`, as in the MCP tools' answers:
sessions and messages take the record shapes of the JSONL export, so `--json` output, MCP answers
and export files agree field for field. People output goes to stdout; progress bars and diagnostics go to stderr, so a
`--json` stdout never carries anything but its one document.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from turnkeeper import records
from turnkeeper.context.conversation import ConversationContext
from turnkeeper.importers.base import ImportReport
from turnkeeper.types import (
    AgentState,
    Branch,
    ContextMessage,
    ContextReport,
    ContextWindow,
    ErasureReceipt,
    ExpiryReport,
    LegalHold,
    Message,
    Page,
    ProjectStats,
    SeqRanges,
    Session,
    SessionStats,
    SessionStatus,
    SummaryCheckpoint,
)
from turnkeeper.wording import counted

_UNBOUNDED = 100_000
"""A width no table reaches: measuring at it gives a table's unfolded width."""

PROGRESS_THRESHOLD = 20
"""Progress bars appear only for runs over this many sessions (short runs stay quiet)."""

ROLE_STYLES = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
STATUS_STYLES = {
    SessionStatus.ACTIVE: "green",
    SessionStatus.ARCHIVED: "blue",
    SessionStatus.EXPIRED: "red",
}


def _when(value: datetime | None, *, missing: str = "-") -> str:
    return missing if value is None else value.astimezone().strftime("%Y-%m-%d %H:%M")


def _relative(value: datetime | None, *, missing: str = "-") -> str:
    """A compact distance from now, e.g. `5m ago` or `in 23h` (tables stay narrow)."""
    if value is None:
        return missing
    seconds = (value - datetime.now(UTC)).total_seconds()
    size = abs(seconds)
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if size >= length:
            amount = f"{int(size // length)}{unit}"
            break
    else:
        return "now"
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _role(role: str) -> Text:
    return Text(role, style=ROLE_STYLES.get(role, ""))


def _status(status: SessionStatus) -> Text:
    return Text(status.value, style=STATUS_STYLES.get(status, ""))


def _opt(value: object) -> Text:
    """Data is always shown as plain `Text`, so brackets in it are never read as markup."""
    return Text("-", style="dim") if value is None else Text(str(value))


def _counted(count: int, seqs: SeqRanges) -> str:
    """A report's count with the seqs it counts: `12 (seq 2–13)`."""
    return f"{count} (seq {seqs})" if seqs else str(count)


def listing(*columns: str) -> Table:
    """A table of rows under a bold header (sessions, messages, hits…), with `columns` (more
    may be added with their own settings)."""
    table = Table(box=box.SIMPLE_HEAD, header_style="bold")
    for column in columns:
        table.add_column(column)
    return table


def _fields_table(rows: Sequence[tuple[str, Text | str]]) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, value in rows:
        table.add_row(name, value)
    return table


@dataclass(frozen=True)
class _SessionColumns:
    """The columns of `sessions list`: id, key (and project) and status always; the others
    while they fit, dropped from the last (expires) to the first (msgs)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("msgs", "tokens", "updated", "expires")
    with_project: bool

    def table(self, sessions: Sequence[Session], optional: Sequence[str]) -> Table:
        table = Table(
            box=box.SIMPLE_HEAD, header_style="bold", show_edge=False, pad_edge=False,
            collapse_padding=True,
        )  # fmt: skip
        table.add_column("id", no_wrap=True)
        table.add_column("key", no_wrap=True, min_width=3)
        if self.with_project:
            table.add_column("project", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for name in optional:
            table.add_column(name, justify="right", no_wrap=True)
        for s in sessions:
            cells = {
                "msgs": str(s.message_count),
                "tokens": str(s.stored_tokens),
                "updated": _relative(s.updated_at),
                "expires": _relative(s.expires_at, missing="never"),
            }
            table.add_row(
                Text(s.id),
                _opt(s.key),
                *([Text(s.project)] if self.with_project else []),
                _status(s.status),
                *(cells[name] for name in optional),
            )
        return table


class Output:
    """Where and how one command invocation prints: `json` picks the machine format."""

    def __init__(self, *, json: bool) -> None:
        self.json = json
        self.console = Console(highlight=False)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    # -- primitives -------------------------------------------------------------------------

    def document(self, value: Any) -> None:
        """Print the one JSON document of this invocation."""
        sys.stdout.write(json.dumps(records.plain(value), ensure_ascii=False, indent=2) + "\n")
        sys.stdout.flush()

    def listed(self, document: Any, items: Sequence[Any], empty: str) -> bool:
        """The start every listing shares: `document` with --json, else `empty` (dimmed) when
        there is nothing to list. Whether that said it all (False: print the list)."""
        if self.json:
            self.document(document)
            return True
        if not items:
            self.console.print(f"[dim]{empty}[/]")
            return True
        return False

    def note(self, message: str) -> None:
        """A line for people (markup allowed); nothing in JSON mode."""
        if not self.json:
            self.console.print(message)

    def warn(self, message: str) -> None:
        """One plain diagnostic line on stderr, in either mode."""
        self.err.print(Text(message, style="yellow"))

    def command(self, line: str) -> None:
        """Echo an equivalent shell command (the demo teaches the CLI this way)."""
        if self.json:
            return
        self.console.print()
        self.console.print(Text("$ " + line, style="bold"), soft_wrap=True)

    @contextmanager
    def progress(self, description: str, total: int | None = None) -> Iterator[Callable[[], None]]:
        """A stderr progress bar, advanced by calling the yielded function once per session.

        Shown only on a terminal and only past `PROGRESS_THRESHOLD` sessions: when `total` is
        known it decides up front; otherwise the bar appears once that many have gone by.
        """
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.err,
            transient=True,
        )
        task = bar.add_task(description, total=total)
        shown = self.err.is_terminal
        if shown and total is not None and total > PROGRESS_THRESHOLD:
            bar.start()
        seen = 0

        def advance() -> None:
            nonlocal seen
            seen += 1
            bar.advance(task)
            if shown and total is None and seen == PROGRESS_THRESHOLD + 1:
                bar.start()

        try:
            yield advance
        finally:
            if bar.live.is_started:  # (stopping an unstarted bar still prints a newline)
                bar.stop()

    # -- sessions ---------------------------------------------------------------------------

    def session_page(self, page: Page[Session]) -> None:
        document = {"sessions": page.items, "next_cursor": page.next_cursor}
        if self.listed(document, page.items, "No sessions."):
            return
        # One project on the page (e.g. --project): its column would only repeat it.
        projects = {s.project for s in page.items}
        if len(projects) == 1:
            self.console.print(f"[dim]Project:[/] {next(iter(projects))}")
        table, needed = self._fitted(_SessionColumns(len(projects) > 1), page.items)
        # Ids and keys are never folded (a split key cannot be copied back into a command):
        # a key longer than the terminal gets a longer line, not a broken one.
        terminal = self.console.width
        self.console.width = max(terminal, needed)  # (print's own width= is capped by it)
        try:
            self.console.print(table)
        finally:
            self.console.width = terminal
        if page.next_cursor:
            self.console.print(
                Text.assemble(("More sessions: add ", "dim"), f"--cursor {page.next_cursor}"),
                soft_wrap=True,
            )

    def _fitted(self, columns: _SessionColumns, sessions: Sequence[Session]) -> tuple[Table, int]:
        """The sessions table with as many optional columns as fit the terminal, and the
        width it needs."""
        optional = list(_SessionColumns.OPTIONAL)
        while True:
            table = columns.table(sessions, optional)
            unbounded = self.console.options.update_width(_UNBOUNDED)
            needed = Measurement.get(self.console, unbounded, table).maximum  # nothing folded
            if needed <= self.console.width or not optional:
                return table, needed
            optional.pop()

    def session(
        self,
        session: Session,
        *,
        headline: str | None = None,
        stats: SessionStats | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """One session: its fields, and its statistics when given."""
        if self.json:
            document: dict[str, Any] = {"session": session, **(extra or {})}
            if stats is not None:
                document["stats"] = stats
            self.document(document)
            return
        if headline:
            self.console.print(headline)
        rows: list[tuple[str, Text | str]] = [
            ("id", Text(session.id)),
            ("key", _opt(session.key)),
            ("project", Text(session.project)),
            ("status", _status(session.status)),
            ("subject", _opt(session.subject)),
            ("kind", _opt(session.kind)),
            ("title", _opt(session.title)),
            ("phase", _opt(session.phase)),
            ("created", _when(session.created_at)),
            ("updated", _when(session.updated_at)),
            ("expires", _when(session.expires_at, missing="never")),
            ("messages", f"{session.message_count} (last seq {session.last_seq})"),
            ("tokens", f"{session.stored_tokens} stored"),
            ("usage", f"{session.usage_input_tokens} in / {session.usage_output_tokens} out"),
        ]
        if session.metadata:
            rows.append(("metadata", Text(json.dumps(dict(session.metadata), ensure_ascii=False))))
        if stats is not None:
            by_role = ", ".join(f"{role} {n}" for role, n in sorted(stats.messages_by_role.items()))
            rows += [
                ("by role", by_role or "-"),
                (
                    "user-facing",
                    f"{stats.user_facing_messages} ({stats.internal_messages} internal)",
                ),
                ("first message", _when(stats.first_message_at)),
                ("last message", _when(stats.last_message_at)),
            ]
        self.console.print(_fields_table(rows))

    def deleted(self, session: Session) -> None:
        if self.json:
            self.document({"deleted": session.id})
        else:
            self.console.print(
                f"Deleted session {session.id} and its {counted(session.message_count, 'message')}."
            )

    # -- messages ---------------------------------------------------------------------------

    def appended(self, message: Message) -> None:
        if self.json:
            self.document({"message": message})
            return
        hidden = " [dim](internal)[/]" if message.internal else ""
        self.console.print(
            f"Added message #{message.seq} ({_role(message.role.value).markup}, "
            f"{counted(message.tokens, 'token')}){hidden} to session {message.session_id}."
        )

    def history(self, session_id: str, messages: Sequence[Message]) -> None:
        if self.listed({"session_id": session_id, "messages": messages}, messages, "No messages."):
            return
        table = listing()
        table.add_column("seq", justify="right")
        table.add_column("time", no_wrap=True)
        table.add_column("role")
        table.add_column("author")
        table.add_column("tokens", justify="right")
        table.add_column("content", overflow="fold", ratio=1)
        for m in messages:
            content = Text(m.content)
            if m.internal:
                content = Text.assemble(("[internal] ", "dim italic"), content)
            table.add_row(
                str(m.seq), _when(m.created_at), _role(m.role.value), _opt(m.author),
                str(m.tokens), content,
            )  # fmt: skip
        self.console.print(table)

    # -- context ----------------------------------------------------------------------------

    def context(self, window: ContextWindow, payload: Any | None) -> None:
        """A built window. `payload` is its messages in the wire shape asked for: a list
        (OpenAI) goes under "messages"; a dict of request fields (Anthropic's system and
        messages) is merged in; None leaves only the report."""
        if self.json:
            if isinstance(payload, Mapping):
                self.document({**payload, "report": window.report})
            elif payload is not None:
                self.document({"messages": payload, "report": window.report})
            else:
                self.document({"report": window.report})
            return
        if payload is not None and window.messages:
            self.console.print(self._window_table(window.messages))
        elif payload is not None:
            self.console.print("[dim]The window is empty: the session has no messages yet.[/]")
        self.console.print(self._report_panel(window.report))

    def _window_table(self, messages: Sequence[ContextMessage]) -> Table:
        table = listing()
        table.add_column("role", min_width=9)
        table.add_column("author", max_width=16)
        table.add_column("kind", min_width=7)
        table.add_column("seq", justify="right", min_width=3)
        table.add_column("tokens", justify="right", min_width=6)
        table.add_column("content", no_wrap=True, overflow="ellipsis")
        room = max(24, self.console.width - 50)  # what the other columns leave on one line
        for m in messages:
            kind = Text(m.kind, style="" if m.kind == "message" else "bold yellow")
            if m.internal:  # sent to the model, never shown to the product's users
                kind.append(" internal", style="bold magenta")
            table.add_row(
                _role(m.role.value), _opt(m.author), kind, _opt(m.seq), str(m.tokens),
                Text(_preview(m.content, room)),
            )  # fmt: skip
        return table

    def _report_panel(self, report: ContextReport) -> Panel:
        used = f"{report.tokens_used} / {report.budget} tokens ({report.encoding})"
        rows: list[tuple[str, Text | str]] = [
            ("strategy", str(report.strategy)),
            ("tokens", used),
            ("in store", str(report.messages_in_store)),
            ("loaded", _counted(report.messages_loaded, report.loaded_seqs)),
            ("included", str(report.messages_included)),
            ("dropped", _counted(report.messages_dropped, report.dropped_seqs)),
            ("summarized", _counted(report.messages_summarized, report.summarized_seqs)),
        ]
        if report.cut_seq is not None:
            rows.append(("cut point", f"seq {report.cut_seq}" if report.cut_seq else "none"))
        if report.markers:
            rows.append(("markers", Text("\n".join(report.markers))))
        title = "[yellow]truncated[/]" if report.truncated else "[green]complete[/]"
        return Panel(_fields_table(rows), title=f"context report: {title}", expand=False)

    # -- transfer ---------------------------------------------------------------------------

    def exported(self, path: str, sessions: int, messages: int) -> None:
        if self.json:
            self.document({"file": path, "sessions": sessions, "messages": messages})
        else:
            self.console.print(
                f"Exported {counted(sessions, 'session')} and {counted(messages, 'message')}"
                f" to {path}."
            )

    def imported(self, report: ImportReport, *, dry_run: bool) -> None:
        """Counts on stdout; every malformed line on stderr (also in the JSON document)."""
        for error in report.errors:
            self.err.print(Text(f"error: {error}", style="red"))
        if self.json:
            self.document({"dry_run": dry_run, **records.plain(report)})
            return
        verb = "Would import" if dry_run else "Imported"
        self.console.print(
            f"{verb} {counted(report.sessions_created, 'new session')} and "
            f"{counted(report.messages_added, 'new message')} "
            f"({counted(report.sessions_seen, 'session')} and "
            f"{counted(report.messages_seen, 'message')} read)."
        )
        if report.errors:
            self.console.print(
                f"[red]{counted(len(report.errors), 'line')} could not be imported.[/]"
            )

    # -- erasure and legal holds ------------------------------------------------------------

    LISTED_IDS = 20
    """Most session ids a receipt prints for people (--json lists every one)."""

    def erased(self, receipt: ErasureReceipt) -> None:
        """The receipt: counts and ids for people, the whole receipt in JSON."""
        if self.json:
            self.document(receipt)
            return
        verb = "Would erase" if receipt.dry_run else "Erased"
        rows = (
            f"{counted(receipt.messages, 'message')}, {counted(receipt.summaries, 'summary', 'summaries')},"
            f" {counted(receipt.traces, 'trace')},"
            f" {counted(receipt.agent_states, 'agent state')}"
        )
        when = "" if receipt.dry_run else f" at {records.to_ts(receipt.erased_at)}"
        line = f"{verb} {counted(len(receipt.sessions), 'session')} ({rows}){when}."
        self.console.print(Text(line), soft_wrap=True)
        for label, ids in (
            ("Erased" if not receipt.dry_run else "To erase", receipt.sessions),
            ("Held by a legal hold, not erased", receipt.held),
            ("Erased before", receipt.already_erased),
        ):
            if ids:
                shown = ", ".join(ids[: self.LISTED_IDS])
                more = len(ids) - self.LISTED_IDS
                tail = f" and {more} more (--json lists them)" if more > 0 else ""
                self.console.print(Text(f"{label}: {shown}{tail}"), soft_wrap=True)

    def legal_hold(
        self, hold: LegalHold | None, *, session: str | None, project: str | None
    ) -> None:
        if self.json:
            self.document({"held": hold is not None, "hold": hold})
            return
        what = f"session {hold.session_id if hold and hold.session_id else session}"
        if session is None:
            what = f"project {project}"
        if hold is None:
            self.console.print(Text(f"No legal hold on {what}."))
        else:
            since = records.to_ts(hold.held_at)
            self.console.print(Text(f"Legal hold on {what} (since {since})."))

    def legal_holds(self, holds: Sequence[LegalHold]) -> None:
        if self.listed(holds, holds, "No legal holds."):
            return
        table = Table(box=box.SIMPLE_HEAD)
        for column in ("project", "session", "held since"):
            table.add_column(column)
        for hold in holds:
            table.add_row(
                hold.project, hold.session_id or "(whole project)", records.to_ts(hold.held_at)
            )
        self.console.print(table)

    # -- admin ------------------------------------------------------------------------------

    def expiry(
        self, report: ExpiryReport, *, delete: bool, dry_run: bool = False, retains: bool = False
    ) -> None:
        """Counts for people (ids only in JSON: a sweep may touch thousands of sessions): what
        was expired, deleted, deleted past retention (when one is set: `retains`; sessions
        whole, and old messages of those that live on), and kept by a legal hold."""
        if self.json:
            self.document({**records.plain(report), "dry_run": dry_run})
            return
        deletions = []
        if delete:
            deletions.append(counted(len(report.deleted), "session"))
        if retains:
            deletions.append(f"{counted(len(report.retention_deleted), 'session')} past retention")
        if report.messages_deleted:
            messages = counted(sum(report.messages_deleted.values()), "message")
            sessions = counted(len(report.messages_deleted), "session")
            deletions.append(f"{messages} past retention from {sessions} that live on")
        expired = counted(len(report.expired), "session")
        held = (
            f"; kept {counted(len(report.held), 'session')} under legal hold" if report.held else ""
        )
        if dry_run:
            actions = [f"expire {expired}", *(f"delete {d}" for d in deletions)]
            line = " and ".join([", ".join(actions[:-1]), actions[-1]] if actions[1:] else actions)
            self.console.print(f"Would {line}{held}; nothing was changed (--json lists them).")
            return
        line = ", ".join([f"Expired {expired}", *(f"deleted {d}" for d in deletions)])
        if report.archive_path is not None:
            line += f" (archived to {report.archive_path})"
        self.console.print(Text(line + held + "."), soft_wrap=True)

    def session_stats(self, stats: SessionStats) -> None:
        if self.json:
            self.document(stats)
            return
        by_role = ", ".join(f"{role} {n}" for role, n in sorted(stats.messages_by_role.items()))
        rows: list[tuple[str, Text | str]] = [
            ("session", Text(stats.session_id)),
            ("messages", str(stats.message_count)),
            ("by role", by_role or "-"),
            ("user-facing", str(stats.user_facing_messages)),
            ("internal", str(stats.internal_messages)),
            ("stored tokens", str(stats.stored_tokens)),
            ("usage", f"{stats.usage_input_tokens} in / {stats.usage_output_tokens} out"),
            (
                "prompt cache",
                f"{stats.usage_cache_read_tokens} read / "
                f"{stats.usage_cache_creation_tokens} written",
            ),
            ("first message", _when(stats.first_message_at)),
            ("last message", _when(stats.last_message_at)),
            ("agent time", f"{stats.execution_ms} ms"),
        ]
        self.console.print(_fields_table(rows))

    def agent_states(self, states: Sequence[AgentState]) -> None:
        if self.listed({"agents": states}, states, "No agent has answered in this session."):
            return
        table = listing("agent", "last seq", "provider session", "turns", "time (ms)", "updated")
        for st in states:
            table.add_row(
                Text(st.agent), str(st.last_processed_seq), _opt(st.provider_session_id),
                str(st.turns), str(st.execution_ms), _when(st.updated_at),
            )  # fmt: skip
        self.console.print(table)

    def branches(self, session_id: str, origin: Branch | None, forks: Sequence[Branch]) -> None:
        """Where a session came from, and the branches forked from it."""
        if self.json:
            self.document({"session_id": session_id, "forked_from": origin, "branches": forks})
            return
        if origin is not None:
            self.console.print(
                f"Forked from session {origin.parent_id} at seq {origin.forked_at_seq}"
                f" ({_when(origin.created_at)})."
            )
        if not forks:
            self.console.print("[dim]No branches forked from this session.[/]")
            return
        table = listing("branch", "forked at seq", "created")
        for b in forks:
            table.add_row(Text(b.session_id), str(b.forked_at_seq), _when(b.created_at))
        self.console.print(table)

    def summaries(self, checkpoints: Sequence[SummaryCheckpoint]) -> None:
        if self.json:
            self.document({"summaries": checkpoints})
            return
        if not checkpoints:
            self.console.print("[dim]No summary checkpoints yet.[/]")
        for c in checkpoints:
            self.console.print(
                f"[bold]up to #{c.covers_to_seq}[/] [dim]{c.method}, {counted(c.tokens, 'token')},"
                f" {_when(c.created_at)}[/]"
            )
            self.console.print(Text(c.text))

    def conversation_context(self, context: ConversationContext, planner: str) -> None:
        if self.json:
            self.document({**context.as_dict(), "planner_context": planner})
            return
        self.console.print(Text(planner))

    def project_stats(self, projects: Sequence[ProjectStats]) -> None:
        if self.listed({"projects": projects}, projects, "No sessions."):
            return
        table = listing("project")
        for status in SessionStatus:
            table.add_column(status.value, justify="right")
        table.add_column("messages", justify="right")
        table.add_column("tokens", justify="right")
        table.add_column("usage in/out", justify="right")
        table.add_column("cache read/written", justify="right")
        for p in projects:
            table.add_row(
                Text(p.project),
                *(str(p.sessions_by_status.get(s.value, 0)) for s in SessionStatus),
                str(p.message_count),
                str(p.stored_tokens),
                f"{p.usage_input_tokens}/{p.usage_output_tokens}",
                f"{p.usage_cache_read_tokens}/{p.usage_cache_creation_tokens}",
            )
        self.console.print(table)
