"""OpenAI's Responses API over chat turns: `POST /v1/responses` answered by any OpenAI-compatible
chat-completions model, with turnkeeper's memory.

A response is a chat turn (`turnkeeper.turns.ChatTurns`, as for `/chat` and the proxy): its input
items are stored as the session's new messages (translated as `turnkeeper.openai_items` says),
the window is built from the stored history by the configured strategy (budget, trace, exactly
once under retries), the upstream is asked over chat completions, and the reply is stored; the
response's output items are the reply's items. The session:

| the request names                   | the session                                          |
|-------------------------------------|------------------------------------------------------|
| `conversation` (an id)              | that conversation, a session of the caller's project |
| `previous_response_id`              | the session that response is in, as it stands now    |
| header `X-Turnkeeper-Session`       | that session id or key (a key names a new session)   |
| none of them                        | a new session for this response alone                |

A response's id names its turn (`resp_<session id>_<seq of its last input message>`), so
`GET /v1/responses/{id}` reads the turn's reply back, `previous_response_id` continues its
session, and a retried request gets the same id. A request naming none of the three is kept
in a session keyed by its `Idempotency-Key` or its body, so that a retry (which says so) finds
the first attempt's turn; an identical request that is no retry starts a session of its own.

`instructions` are sent in front of the window on this turn only (never stored). `store: false`
stores nothing: the window is built from what the named session holds, the input follows it,
and the response cannot be retrieved. What chat completions cannot be asked is refused before
anything is stored (`InvalidInput` naming the field): items other than messages, function
calls and their outputs; content parts other than text; tools other than functions; and the
options of OpenAI's own platform (`background`, `prompt`, `max_tool_calls`, `top_logprobs`,
`context_management`, a reasoning summary).
"""

from __future__ import annotations

from turnkeeper.responses.objects import PREFIX, ResponseNotFound, response_id, response_object
from turnkeeper.responses.operations import SESSION_HEADER, Responses
from turnkeeper.responses.request import ResponseRequest, input_messages, upstream_fields
from turnkeeper.responses.stream import ResponseStream

__all__ = [
    "PREFIX",
    "SESSION_HEADER",
    "ResponseNotFound",
    "ResponseRequest",
    "ResponseStream",
    "Responses",
    "input_messages",
    "response_id",
    "response_object",
    "upstream_fields",
]
