"""Turning core values into HTML: the template environment and the safe markdown filter.

Message content is untrusted (anyone with a key, or a model, wrote it). Jinja escapes every
value by default, and markdown goes through markdown-it with raw HTML turned off, so a
`<script>` in a message is shown as text; markdown-it also refuses `javascript:` links. The
pages' Content-Security-Policy (no inline script) is the second line of defence.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

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


def stamp(when: datetime | None) -> str:
    return "" if when is None else when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def number(value: int) -> str:
    return f"{value:,}"


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
    env.filters.update(markdown=markdown, ago=ago, stamp=stamp, number=number, counted=counted)
    env.globals.update(message_kind=message_kind, is_turn_reply=is_turn_reply)
    return env


ENV = _environment()


def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render template `name` as a response with the UI's security headers."""
    html = ENV.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)
