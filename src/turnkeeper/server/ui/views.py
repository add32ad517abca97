"""The UI's pages and actions. Each view parses the request, calls the core once or twice and
renders a template: no logic of its own, and never the REST API or its handlers.

Pages are plain GETs and actions plain form POSTs answered with a redirect (POST/redirect/GET),
so every button works without script; `static/app.js` adds confirmations, the streamed chat
reply and the live transcript on top.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import RedirectResponse, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BaseModel, Field

from turnkeeper.config import Settings
from turnkeeper.errors import (
    InvalidInput,
    SessionNotFound,
    TurnkeeperError,
    Unauthenticated,
    UpstreamError,
)
from turnkeeper.server.auth import Caller, authenticate
from turnkeeper.server.deps import TK, AppSettings, SessionPath, Turns
from turnkeeper.server.problems import headers_for, public_detail, status_for
from turnkeeper.server.streaming import delta, event_stream, relay, sse
from turnkeeper.server.ui import auth
from turnkeeper.server.ui.render import page, session_label
from turnkeeper.service import Turnkeeper
from turnkeeper.traces import trace_of, window_diff
from turnkeeper.turns import Attempt, TurnStream
from turnkeeper.types import (
    Branch,
    ContextWindow,
    NewMessage,
    Role,
    Session,
    SessionStatus,
    StrategyName,
)

PAGE_SIZE = 25
TRANSCRIPT_LIMIT = 500
"""The newest messages a session page shows (the audit trail stays complete in the store)."""

NOTICES = {
    "deleted": "The session was deleted.",
    "reset": "The history was cleared.",
    "archived": "The session was archived: still readable, no longer live.",
    "added": "Message added.",
    "forked": "This is a new branch: it shares the history up to the message you picked.",
    "regenerated": "Edited on a new branch, and the model answered the edited message.",
    "edited": "Edited on a new branch. No model is configured, so nothing answered it.",
    "reply_failed": "Edited on a new branch, but the model failed to answer; try again below.",
}


class UIRoute(APIRoute):
    """A route whose core errors become an HTML page (or, for a script's fetch, plain text)
    instead of the API's problem JSON: a person reads these."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except TurnkeeperError as exc:
                status, detail = status_for(exc), public_detail(exc)
                headers = headers_for(status, exc)
                if "text/html" not in request.headers.get("accept", ""):
                    return Response(
                        detail, status_code=status, media_type="text/plain", headers=headers
                    )
                return error_page(request, status, detail, headers)

        return handle


def error_page(
    request: Request, status: int, detail: str, headers: Mapping[str, str] | None = None
) -> Response:
    """The error page, in the layout of every page: the search box and log-out stay for the
    caller the request was made by (when it got as far as knowing who that is)."""
    caller: Caller | None = getattr(request.state, "caller", None)
    response = page(
        "error.html", status, request=request, caller=caller, status=status, error=detail
    )
    response.headers.update(headers or {})
    return response


router = APIRouter(include_in_schema=False, route_class=UIRoute)
UICaller = Annotated[Caller, Depends(auth.ui_caller)]


async def _form(request: Request) -> dict[str, str]:
    """An url-encoded form body (the UI's forms send nothing else, so no multipart parser).
    Its bytes and its %-escapes must both be UTF-8, as a browser sends them."""
    try:
        text = (await request.body()).decode()
        return dict(parse_qsl(text, keep_blank_values=True, errors="strict"))
    except UnicodeDecodeError:
        raise InvalidInput("form", "the form is not UTF-8 text") from None


Form = Annotated[dict[str, str], Depends(_form)]


def _number(field: str, value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidInput(field, f"must be a whole number, got {value!r}") from None


def _back(session: Session, notice: str | None = None) -> RedirectResponse:
    url = f"/sessions/{quote(session.id)}"
    return RedirectResponse(url + (f"?notice={notice}" if notice else ""), status_code=303)


def model_configured(settings: Settings) -> bool:
    """True when the operator pointed the chat at a model: a key, or a base URL of their own
    (a local server such as Ollama needs no key)."""
    default_url = Settings.model_fields["llm_base_url"].default
    return settings.llm_api_key is not None or settings.llm_base_url != default_url


# -- login --------------------------------------------------------------------------------------


@router.get("/login")
def login_page(request: Request, settings: AppSettings) -> Response:
    if not settings.auth:
        return RedirectResponse("/", status_code=303)
    return page("login.html", request=request, error=None)


@router.post("/login")
def log_in(request: Request, form: Form) -> Response:
    """Check the key exactly as an API request would be checked, then keep it in the cookie."""
    token = form.get("key", "").strip()
    try:
        authenticate(request, HTTPAuthorizationCredentials(scheme="Bearer", credentials=token))
    except Unauthenticated:
        return page("login.html", 401, request=request, error="That API key was not accepted.")
    response = RedirectResponse("/", status_code=303)
    auth.remember(response, token, secure=request.url.scheme == "https")
    return response


@router.post("/logout")
def log_out() -> Response:
    response = RedirectResponse("/login", status_code=303)
    auth.forget(response)
    return response


# -- sessions list ------------------------------------------------------------------------------


def projects_for(tk: Turnkeeper, caller: Caller) -> list[str]:
    """The projects a filter form offers: every project to an admin, none to a project's key
    (it sees its own only, so the form has no project field)."""
    return [stats.project for stats in tk.project_stats()] if caller.admin else []


@dataclass(frozen=True, slots=True)
class Filters:
    """What a filter form (the sessions list's, the search page's) sends, each field as typed
    ("": any): the words, and the project and kind of session to look in."""

    q: str = ""
    project: str = ""
    kind: str = ""


@dataclass(frozen=True, slots=True)
class SessionFilters(Filters):
    """The sessions list's filter form: the words are looked for in key, subject and title."""

    status: str = ""
    phase: str = ""


@router.get("/")
def sessions_page(
    request: Request,
    tk: TK,
    caller: UICaller,
    filters: Annotated[SessionFilters, Depends()],
    cursor: str | None = None,
    notice: str | None = None,
) -> Response:
    """Sessions, most recent activity first, filtered and searched, a page at a time."""
    listing = tk.list_sessions(
        project=caller.scope(filters.project or None), search=filters.q or None,
        kind=filters.kind or None, status=filters.status or None, phase=filters.phase or None,
        limit=PAGE_SIZE, cursor=cursor,
    )  # fmt: skip
    return page(
        "sessions.html", request=request, caller=caller, sessions=listing.items,
        next_cursor=listing.next_cursor, first_page=cursor is None,
        filters=dataclasses.asdict(filters), projects=projects_for(tk, caller),
        statuses=list(SessionStatus), notice=NOTICES.get(notice or ""),
    )  # fmt: skip


# -- one session --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PreviewAsked:
    """The session page's context preview form, as it is sent ("": the default; no
    strategy: no preview)."""

    strategy: str = ""
    budget_tokens: str = ""
    model: str = ""
    keep_recent: str = ""
    agent: str = ""


@dataclass(frozen=True, slots=True)
class Preview(PreviewAsked):
    """A context build asked for on the session page: the window, or why there is none."""

    window: ContextWindow | None = None
    error: str | None = None

    def fate(self, seq: int) -> str | None:
        """What the model gets of stored message `seq`: "kept", "summarized" (folded into a
        summary) or "dropped" (not sent at all, whether or not the build even loaded it)."""
        if self.window is None:
            return None
        if seq in self.window.report.summarized_seqs:
            return "summarized"
        sent = any(message.seq == seq for message in self.window.messages)
        return "kept" if sent else "dropped"

    @property
    def percent(self) -> float:
        if self.window is None:
            return 0.0
        report = self.window.report
        return min(100.0, 100.0 * report.tokens_used / max(report.budget, 1))


def _preview(tk: Turnkeeper, session: Session, scope: str | None, asked: PreviewAsked) -> Preview:
    """Build the window the model would get (nothing stored changes). A bad budget or an
    expired session is shown in the preview panel, not as an error page."""
    try:
        window = tk.context(
            session, strategy=asked.strategy, model=asked.model or None, project=scope,
            agent=asked.agent or None,
            budget_tokens=_number("budget_tokens", asked.budget_tokens),
            keep_recent=_number("keep_recent", asked.keep_recent), preview=True,
        )  # fmt: skip
    except TurnkeeperError as exc:
        return Preview(**dataclasses.asdict(asked), error=public_detail(exc))
    return Preview(**dataclasses.asdict(asked), window=window)


# -- branches -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One session in the branch switcher."""

    id: str
    label: str
    note: str
    current: bool


@dataclass(frozen=True)
class Family:
    """Where a session came from and the sessions one click away: its source, the source's
    other branches, and its own branches (what the branch switcher lists)."""

    origin: Branch | None
    parent: Session | None
    lines: list[Line]

    def forked_here(self, seq: int) -> bool:
        return self.origin is not None and self.origin.forked_at_seq == seq


def _line(tk: Turnkeeper, session_id: str, note: str, current: str) -> Line | None:
    try:
        found = tk.get_session(session_id)
    except SessionNotFound:
        return None
    label = session_label(found.title, found.key, found.id)
    return Line(found.id, label, f"{note} · {found.id[:8]}", found.id == current)


def _family(tk: Turnkeeper, session: Session, scope: str | None) -> Family:
    origin = tk.fork_origin(session, project=scope)
    parent = None
    lines: list[Line | None] = []
    if origin is not None:
        try:
            parent = tk.get_session(origin.parent_id, project=scope)
        except SessionNotFound:  # deleted since: the branch keeps its history
            parent = None
        if parent is not None:
            lines.append(_line(tk, parent.id, "source", session.id))
            lines += [
                _line(tk, b.session_id, f"branch at #{b.forked_at_seq}", session.id)
                for b in tk.branches(parent)
            ]
    if not lines:
        lines.append(_line(tk, session.id, "this session", session.id))
    lines += [
        _line(tk, b.session_id, f"branch at #{b.forked_at_seq}", session.id)
        for b in tk.branches(session)
    ]
    return Family(origin, parent, [line for line in lines if line is not None])


def branch_title(source: Session, what: str) -> str:
    """A readable name for a branch made here: the source's title (else its key, else
    "Untitled session") and what the branch is, so no branch is ever known by an id alone."""
    return f"{source.title or source.key or 'Untitled session'} · {what}"


def _gist(text: str, limit: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@router.post("/sessions/{ref}/fork")
def fork(ref: SessionPath, caller: UICaller, form: Form, tk: TK) -> Response:
    """'Branch from here': a new session sharing this one's history up to the message."""
    at_seq = _number("at_seq", form.get("at_seq"))
    if at_seq is None:
        raise InvalidInput("at_seq", "pick the message to branch from")
    source = tk.get_session(ref, project=caller.scope(None))
    title = branch_title(source, f"branch at #{at_seq}")
    return _back(tk.fork(source, at_seq, title=title, project=caller.scope(None)), "forked")


@router.post("/sessions/{ref}/regenerate")
def regenerate(
    request: Request,
    ref: SessionPath,
    caller: UICaller,
    form: Form,
    turns: Turns,
    settings: AppSettings,
) -> Response:
    """'Edit and regenerate' on a user message: fork at the message before it, append the
    edited text to the branch and run the chat turn there; the original stays as it was."""
    tk, scope = turns.tk, caller.scope(None)
    seq = _number("seq", form.get("seq"))
    content = form.get("content", "")
    if not content.strip():
        raise InvalidInput("content", "the edited message is empty")
    source = tk.get_session(ref, project=scope)
    edited = tk.history(source, from_seq=seq, limit=1) if seq else []
    if not edited or edited[0].seq != seq or edited[0].role is not Role.USER:
        raise InvalidInput("seq", "only a stored user message can be edited and regenerated")
    title = branch_title(source, f"edit of #{seq}: {_gist(content)}")
    branch = tk.fork(source, edited[0].seq - 1, title=title, project=scope)
    message = NewMessage(role=Role.USER, content=content, author=edited[0].author)
    if not model_configured(settings):
        tk.append_many(branch, [message])
        return _back(branch, "edited")
    attempt = Attempt(request_id=getattr(request.state, "request_id", None), source="ui")
    try:
        turns.complete(turns.prepare(branch, [message], attempt=attempt))
    except UpstreamError:  # the edited message is stored; the branch page offers the chat box
        return _back(branch, "reply_failed")
    return _back(branch, "regenerated")


@router.get("/sessions/{ref}")
def session_page(
    request: Request,
    ref: SessionPath,
    tk: TK,
    settings: AppSettings,
    caller: UICaller,
    asked: Annotated[PreviewAsked, Depends()],
    internal: bool = False,
    notice: str | None = None,
) -> Response:
    """The transcript, the statistics, the actions, the chat box and (when asked) a preview
    of the context window (from one agent's perspective when `agent` is given)."""
    scope = caller.scope(None)
    session = tk.get_session(ref, project=scope)
    newest = tk.history(
        session, include_internal=internal, newest_first=True, limit=TRANSCRIPT_LIMIT
    )
    preview = _preview(tk, session, scope, asked) if asked.strategy else None
    return page(
        "session.html", request=request, caller=caller, session=session,
        stats=tk.session_stats(session), messages=newest[::-1], internal=internal,
        truncated=len(newest) == TRANSCRIPT_LIMIT, preview=preview,
        strategies=list(StrategyName), default_strategy=settings.strategy,
        default_model=settings.llm_model or settings.model,
        chat_ready=model_configured(settings), notice=NOTICES.get(notice or ""),
        agents=sorted({state.agent for state in tk.agents.states(session, project=scope)}
                      | {m.author for m in newest if m.author and m.role == "assistant"}),
        family=_family(tk, session, scope),
    )  # fmt: skip


@router.get("/sessions/{ref}/messages")
def new_messages(
    request: Request,
    ref: SessionPath,
    tk: TK,
    caller: UICaller,
    after_seq: int = 0,
    internal: bool = False,
) -> Response:
    """The messages stored after `after_seq`, as transcript HTML, for the live page.
    `X-Last-Seq` is where the next poll starts; `X-Reload` says the history was reset. With
    new messages comes a fresh statistics card (`#stats`) for the page to swap in."""
    session = tk.get_session(ref, project=caller.scope(None))
    if session.last_seq < after_seq:
        return Response(status_code=204, headers={"X-Reload": "1"})
    new = tk.history(session, from_seq=after_seq + 1, include_internal=internal)
    stats = tk.session_stats(session) if new else None  # the card is redrawn only on change
    response = page("_messages.html", request=request, messages=new, session=session, stats=stats)
    last = max([session.last_seq, *(message.seq for message in new)])
    response.headers["X-Last-Seq"] = str(last)
    return response


@router.get("/sessions/{ref}/messages/{seq}/trace")
def trace_page(request: Request, ref: SessionPath, seq: int, tk: TK, caller: UICaller) -> Response:
    """What the model saw for one reply: the window re-rendered from its trace, how it was
    built and what it cost, and what entered or fell out since the previous turn's window."""
    session = tk.get_session(ref, project=caller.scope(None))
    current, previous = trace_of(tk, session, seq)
    diff = window_diff(previous, current)
    return page(
        "trace.html", request=request, caller=caller, session=session, trace=current,
        previous=previous, diff=diff, entered={entry.identity for entry in diff.entered},
    )  # fmt: skip


@router.post("/sessions/{ref}/messages")
def add_message(ref: SessionPath, caller: UICaller, form: Form, tk: TK) -> Response:
    """Append a message typed by hand (no model involved)."""
    session = tk.get_session(ref, project=caller.scope(None))
    tk.append_many(
        session,
        [
            NewMessage(
                role=form.get("role", "user"),
                content=form.get("content", ""),
                author=form.get("author") or None,
                internal=form.get("internal") == "on",
            )
        ],
    )
    return _back(session)


@router.post("/sessions/{ref}/reset")
def reset(ref: SessionPath, caller: UICaller, form: Form, tk: TK) -> Response:
    keep = form.get("keep_system_message") == "on"
    session = tk.reset_session(ref, keep_system_message=keep, project=caller.scope(None))
    return _back(session, "reset")


@router.post("/sessions/{ref}/archive")
def archive(ref: SessionPath, tk: TK, caller: UICaller) -> Response:
    return _back(tk.archive_session(ref, project=caller.scope(None)), "archived")


@router.post("/sessions/{ref}/delete")
def delete(ref: SessionPath, tk: TK, caller: UICaller) -> Response:
    tk.delete_session(ref, project=caller.scope(None))
    return RedirectResponse("/?notice=deleted", status_code=303)


# -- chat ---------------------------------------------------------------------------------------


class ChatTurnBody(BaseModel):
    """What the chat box sends."""

    content: str = Field(min_length=1, max_length=1_000_000)


def _reply_events(stream: TurnStream) -> Iterator[str]:
    """The reply as it arrives (`delta`), then `done` once it is stored, or `error`."""
    return relay(
        stream,
        each=delta,
        failed=lambda exc: sse({"detail": public_detail(exc)}, "error"),
        done=lambda: sse({"seq": stream.reply.seq if stream.reply else None}, "done"),
    )


@router.post("/sessions/{ref}/chat")
def chat(
    request: Request, ref: SessionPath, body: ChatTurnBody, turns: Turns, caller: UICaller
) -> StreamingResponse:
    """One chat turn through the core (`ChatTurns`): the user's message is stored first, the
    reply streams back and is stored once complete (with its trace). The page's poll then
    shows both."""
    session = turns.tk.get_session(ref, project=caller.scope(None))
    attempt = Attempt(request_id=getattr(request.state, "request_id", None), source="ui")
    prepared = turns.prepare(
        session, [NewMessage(role=Role.USER, content=body.content)], attempt=attempt,
        request={"stream_options": {"include_usage": True}},  # the usage goes in the trace
    )  # fmt: skip
    return event_stream(_reply_events(turns.stream(prepared)))
