"""One model call per chat turn, however many requests for it arrive at once.

A retry may come while the first request for a turn is still waiting for the model: a client
that timed out and retries (the OpenAI SDKs do, with `x-stainless-retry-count`), two calls with
one `Idempotency-Key`, the same text sent twice. The turn's messages are stored once either way
(`turnkeeper.turns`); this module makes the *model call* happen once, across threads, processes
and replicas, through the store's record of which attempt answers each turn
(`TurnAttemptStore`, a `TurnAttempt` per turn):

- The request that will ask the model first takes the turn (`begin_turn_attempt`), after the
  turn's messages are stored and before the window is built. While it works, one thread per
  process (`Leases`) keeps its lease `turn_lease` ahead of the clock, renewing every third of it.
- Its outcome completes the turn: the reply, stored under the turn's reply id (then the record
  is deleted), or the model's failure (`UpstreamError`), kept in the record as JSON for the
  requests that waited. Any other failure (the window cannot be built, the reply cannot be
  stored) deletes the record without an outcome: the next request takes the turn.
- A request finding the turn held waits: it polls the store (the record, then the reply) with
  backoff from 20 ms to 500 ms and answers with the holder's reply (a replay) or raises the
  holder's error. A holder whose lease lapsed (its process died, or hangs) is taken over: the
  waiting request takes the turn and asks the model itself, the only way left to answer.
- Waiting and holding are bounded by `longest_hold`: a model call's worst case under the
  settings (each of `llm_max_retries` + 1 tries, and each wait before a retry, at most
  `llm_timeout`) plus one lease. A waiter past it raises `TurnInProgress` (HTTP 409 with
  `Retry-After`: the same request later gets the answer); a holder stops renewing, so a turn
  forgotten by its holder (a prepared turn never finished) is free once its lease lapses.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from turnkeeper.config import Settings
from turnkeeper.errors import TurnInProgress, TurnkeeperError, UpstreamError, UpstreamTimeout
from turnkeeper.logs import get_logger
from turnkeeper.storage.base import Store, TurnAttemptStore
from turnkeeper.types import Message

FIRST_POLL = 0.02
LONGEST_POLL = 0.5
"""Seconds between a waiter's looks at the store: from the first, doubled up to the longest."""

log = get_logger("turnkeeper.attempts")


@dataclass(frozen=True, slots=True)
class HeldTurn:
    """A turn this process holds: it asks the model, then `TurnAttempts.end`s the hold."""

    session_id: str
    turn_id: str
    attempt_id: str


def longest_hold(settings: Settings) -> timedelta:
    """How long a turn may be held, and waited for (see the module docstring)."""
    tries = settings.llm_max_retries + 1
    return settings.llm_timeout * (2 * tries - 1) + settings.turn_lease


class TurnAttempts:
    """Takes, waits for and ends the turns of one store (see the module docstring).

    A store without `TurnAttemptStore` gets no coordination: every request holds its turn, as
    if it were alone.
    """

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], datetime]) -> None:
        self._store = store if isinstance(store, TurnAttemptStore) else None
        self._clock = clock
        self.lease = settings.turn_lease
        self.longest = longest_hold(settings)
        self._leases = Leases(self._store, self.lease, self.longest, clock)

    def hold_or_wait(
        self, session_id: str, turn_id: str, reply_id: str, *, answered_maybe: bool
    ) -> HeldTurn | Message:
        """Take the turn, or wait for the attempt holding it: a `HeldTurn` when this request
        must ask the model, else the stored reply. `answered_maybe` (the turn was stored
        before this request) looks for a reply first, and again once the turn is taken: its
        holder may have stored one and let go in between. Raises the holder's `UpstreamError`,
        or `TurnInProgress` past `longest`."""
        if self._store is None:
            return HeldTurn(session_id, turn_id, str(uuid.uuid4()))
        store = self._store
        if answered_maybe and (reply := self._reply(session_id, reply_id)) is not None:
            return reply  # a retry of an answered turn: a read, and nothing written
        deadline = time.monotonic() + self.longest.total_seconds()
        while True:
            held = HeldTurn(session_id, turn_id, str(uuid.uuid4()))
            now = self._clock()
            record = store.begin_turn_attempt(
                session_id, turn_id, held.attempt_id, now=now, lease_until=now + self.lease
            )
            if record.attempt_id == held.attempt_id:
                reply = self._reply(session_id, reply_id) if answered_maybe else None
                if reply is not None:
                    store.end_turn_attempt(session_id, turn_id, held.attempt_id)
                    return reply
                self._leases.add(held)
                return held
            answered_maybe = True  # whatever the holder does, the reply may be there next
            outcome = self._wait(record.attempt_id, session_id, turn_id, reply_id, deadline)
            if outcome is not None:
                return outcome

    def _wait(
        self, holder: str, session_id: str, turn_id: str, reply_id: str, deadline: float
    ) -> Message | None:
        """Poll until the holder's reply is stored (returned) or its failure recorded (raised);
        None when the holder let go or lapsed without an outcome (the turn is free to take)."""
        assert self._store is not None
        pause = FIRST_POLL
        while True:
            if time.monotonic() + pause > deadline:
                raise TurnInProgress(session_id, retry_after=math.ceil(self.lease.total_seconds()))
            time.sleep(pause)
            pause = min(pause * 2, LONGEST_POLL)
            record = self._store.get_turn_attempt(session_id, turn_id)
            if record is not None and record.attempt_id == holder and record.error is not None:
                raise failure_from_text(record.error)
            reply = self._reply(session_id, reply_id)
            if reply is not None:
                return reply
            if record is None or record.attempt_id != holder:
                return None
            if not record.holds_turn_at(self._clock()):
                log.warning("turn_taken_over", session_id=session_id, turn_id=turn_id)
                return None

    def _reply(self, session_id: str, reply_id: str) -> Message | None:
        assert self._store is not None
        return self._store.find_messages(session_id, [reply_id]).get(reply_id)

    def end(self, held: HeldTurn | None, failure: BaseException | None = None) -> None:
        """The holder is done: its reply is stored (no `failure`), or it failed. A model's
        failure (`UpstreamError`) is kept for the requests waiting; any other lets the turn go
        without an outcome. A store that cannot be reached now only delays the waiters: the
        lease, no longer renewed, lapses."""
        if held is None or self._store is None:
            return
        self._leases.discard(held)
        error = failure_text(failure) if isinstance(failure, UpstreamError) else None
        try:
            self._store.end_turn_attempt(
                held.session_id, held.turn_id, held.attempt_id, error=error
            )
        except TurnkeeperError as exc:
            log.warning("turn_end_not_recorded", session_id=held.session_id, error=str(exc))


class Leases:
    """Keeps the leases of the turns this process holds ahead of the clock: one daemon thread,
    started while there is a turn to keep, renewing each every third of a lease, for at most
    `longest` after it was taken."""

    def __init__(
        self,
        store: TurnAttemptStore | None,
        lease: timedelta,
        longest: timedelta,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._lease = lease
        self._longest = longest.total_seconds()
        self._clock = clock
        self._held: dict[HeldTurn, float] = {}
        """Each held turn, with the `time.monotonic()` after which it is no longer renewed."""
        self._guard = threading.Lock()
        self._running = False

    def add(self, held: HeldTurn) -> None:
        with self._guard:
            self._held[held] = time.monotonic() + self._longest
            if not self._running:
                self._running = True
                threading.Thread(target=self._renew, name="turnkeeper-leases", daemon=True).start()

    def discard(self, held: HeldTurn) -> None:
        with self._guard:
            self._held.pop(held, None)

    def _renew(self) -> None:
        assert self._store is not None
        interval = self._lease.total_seconds() / 3
        while True:
            time.sleep(interval)
            with self._guard:
                now = time.monotonic()
                for held in [held for held, until in self._held.items() if until < now]:
                    del self._held[held]
                if not self._held:
                    self._running = False
                    return
                due = list(self._held)
            lease_until = self._clock() + self._lease
            for held in due:
                try:
                    kept = self._store.renew_turn_attempt(
                        held.session_id, held.turn_id, held.attempt_id, lease_until=lease_until
                    )
                except TurnkeeperError as exc:  # the store is down: try again next time
                    log.warning(
                        "turn_lease_not_renewed", session_id=held.session_id, error=str(exc)
                    )
                    continue
                if not kept:
                    self.discard(held)


def failure_text(error: UpstreamError) -> str:
    """A model's failure as the text a `TurnAttempt` keeps for the requests that wait."""
    return json.dumps(
        {
            "timeout": isinstance(error, UpstreamTimeout),
            "message": str(error),
            "status": error.status,
            "retry_after": error.retry_after,
            "unreachable": error.unreachable,
        }
    )


def failure_from_text(text: str) -> UpstreamError:
    """The failure `failure_text` wrote, raised again for a request that waited for it."""
    fields = json.loads(text)
    kind = UpstreamTimeout if fields["timeout"] else UpstreamError
    return kind(
        fields["message"],
        status=fields["status"],
        retry_after=fields["retry_after"],
        unreachable=fields["unreachable"],
    )
