"""Turning core values into HTML: the template environment and the safe markdown filter.

Message content is untrusted (anyone with a key, or a model, wrote it). Jinja escapes every
value by default, and markdown goes through markdown-it with raw HTML turned off, so a
`<script>` in a message is shown as text; markdown-it also refuses `javascript:` links. The
pages' Content-Security-Policy (no inline script) is the second line of defence.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

from turnkeeper.storage.search import HIGHLIGHT_END, HIGHLIGHT_START, SnippetPart, snippet_parts
from turnkeeper.turns import is_turn_reply
from turnkeeper.types import Message
from turnkeeper.wording import counted

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_markdown.enable(["table", "strikethrough"])

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def markdown(text: str) -> Markup:
    """Markdown to HTML, with any HTML in the source escaped, never passed through."""
    return Markup(_markdown.render(text))


def ago(when: datetime | None, now: datetime | None = None) -> str:
    """A short "5 min ago" / "in 3 h" for lists a person scans (the exact time is a tooltip)."""
    if when is None:
        return "never"
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            amount = f"{int(seconds // size)} {unit}"
            break
    else:
        amount = "moments" if not future else f"{int(seconds)} s"
    if future:
        return f"in {amount}"
    return "just now" if amount == "moments" else f"{amount} ago"


def plain_snippet(parts: Sequence[SnippetPart]) -> list[tuple[str, bool]]:
    """A search hit's snippet as plain text pieces, each with whether it is a matched word.

    Markdown is for reading a whole message; in a one-line excerpt its syntax (`**`, `#`,
    `[text](url)`) is noise. So the snippet is parsed as markdown (raw HTML off, as for
    messages) and only the text a reader of the rendered message sees is kept; the match
    marks ride along as the private-use characters the store put there. The pieces are text,
    escaped like any other value when the page is rendered."""
    marked = "".join(
        f"{HIGHLIGHT_START}{p.text}{HIGHLIGHT_END}" if p.match else p.text for p in parts
    )
    text = " ".join(" ".join(_visible(marked)).split())  # one line, as an excerpt reads
    return [(part.text, part.match) for part in snippet_parts(text)]


def _visible(source: str) -> Iterator[str]:
    """The text of `source`'s markdown as a reader sees it, a block at a time."""
    for token in _markdown.parse(source):
        if token.type in ("code_block", "fence"):
            yield token.content
        elif token.type == "inline":
            yield "".join(_inline_text(child) for child in token.children or ())


def _inline_text(token: Any) -> str:
    if token.type in ("text", "code_inline"):
        return str(token.content)
    if token.type in ("softbreak", "hardbreak"):
        return " "
    if token.type == "image":  # its alt text
        return "".join(_inline_text(child) for child in token.children or ())
    return ""


def stamp(when: datetime | None) -> str:
    return "" if when is None else when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def number(value: int) -> str:
    return f"{value:,}"


def session_label(title: str | None, key: str | None, session_id: str) -> str:
    """What a person calls a session: its title, else its key, else "Untitled session" with
    the start of its id to tell it apart (never a bare id)."""
    return title or key or f"Untitled session {session_id[:8]}"


def message_kind(message: Message) -> str:
    """How a message is drawn: a phase change or a system event is a divider across the
    transcript; everything else is a chat bubble."""
    if "phase" in message.metadata:
        return "phase"
    if message.role == "system":
        return "system"
    return "bubble"


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("turnkeeper.server.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        markdown=markdown, ago=ago, stamp=stamp, number=number, counted=counted,
        plain_snippet=plain_snippet,
    )  # fmt: skip
    env.globals.update(
        message_kind=message_kind, is_turn_reply=is_turn_reply, session_label=session_label
    )
    return env


ENV = _environment()


def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render template `name` as a response with the UI's security headers."""
    html = ENV.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)
