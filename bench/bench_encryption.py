"""What encryption at rest costs: append, window build and search with `encryption_key` off and
on, in the same run, interleaved round by round so the shared machine's noise falls on both.

    .venv/bin/python bench/bench_encryption.py [--quick] [--postgres]

Each round, each mode (off, on) has a fresh database of its own, and the two run side by
side, turn by turn (which goes first alternates): `--sessions` sessions each get `--turns`
turns (a user message with metadata, then an assistant reply with a tool call, its result and
a final answer), one `tk.append` per message (timed: "append"); after each turn the session's
next window is built (timed: "build": what a chat turn does; the append moved the version, so
the pages come from the store). Then a second service on each database builds every session's
window once (timed: "cold build": another process's first look, nothing in its memory). Search runs a word query over the
project (timed; with encryption on it is refused, see docs/privacy.md). SQLite by default;
`--postgres` runs PostgreSQL with Redis as well. Results to bench/results/encryption.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import turnkeeper
from turnkeeper.encryption.keys import generate_master_key
from turnkeeper.errors import Unsupported

RESULTS = Path(__file__).parent / "results" / "encryption.md"
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/14"
KEY = generate_master_key("bench")
USER = (
    "We land in Lisbon on the 3rd and leave on the 7th; my partner has a knee injury, so "
    "nothing steep. Budget about 150 euros a day for the two of us. What would you plan?"
)
REPLY = (
    "Day one: Baixa and the riverside by tram 15 to Belém (flat all the way). Day two: the "
    "Gulbenkian and its garden. Day three: Sintra by train, Pena by the shuttle bus."
)


def _modes(base: Path, postgres: bool, round_: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """The database URL and settings of each mode, fresh for this round."""
    modes: dict[str, tuple[str, dict[str, Any]]] = {}
    for mode in ("off", "on"):
        extra: dict[str, Any] = {"encryption_key": KEY} if mode == "on" else {}
        if postgres:
            url = _fresh_postgres_schema(f"bench_enc_{mode}_{round_}")
            extra["redis_url"] = REDIS_URL
            if mode == "on":
                extra["key_store"] = f"sqlite:///{base / f'keys-{round_}.db'}"
        else:
            url = f"sqlite:///{base / f'{mode}-{round_}.db'}"
        modes[mode] = (url, extra)
    return modes


def _fresh_postgres_schema(name: str) -> str:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{POSTGRES_URL}?options=-csearch_path%3D{name}"


def _timed(samples: list[float], action: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    start = time.perf_counter()
    result = action(*args, **kwargs)
    samples.append(time.perf_counter() - start)
    return result


Samples = dict[str, dict[str, list[float]]]
"""Per mode (off, on), per operation, the seconds of each call."""

_CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "find_hotels", "arguments": '{"city": "Lisbon", "max": 150}'},
}


def _turn(turn: int) -> list[tuple[str, str, dict[str, Any]]]:
    """One turn's messages: a user message with metadata, a tool call, its result, a reply."""
    return [
        ("user", USER, {"metadata": {"channel": "web", "turn": turn}}),
        ("assistant", "", {"tool_calls": [_CALL]}),
        ("tool", '{"hotels": ["Memmo Alfama", "Lumiares"]}', {"tool_call_id": "c1"}),
        ("assistant", REPLY, {}),
    ]


def _run_round(modes: dict[str, tuple[str, dict[str, Any]]], sessions: int, turns: int) -> Samples:
    """Both modes side by side, turn by turn (which goes first alternates), so a burst of load
    on the shared machine falls on both."""
    samples: Samples = {
        mode: {"append": [], "build": [], "cold build": [], "search": []} for mode in modes
    }
    order = list(modes)
    services = {mode: turnkeeper.open(url, **extra) for mode, (url, extra) in modes.items()}
    try:
        for index in range(sessions):
            for tk in services.values():
                tk.get_or_create_session(f"trip-{index}")
            for turn in range(turns):
                order.reverse()
                for mode in order:
                    tk, own = services[mode], samples[mode]
                    for role, text, fields in _turn(turn):
                        _timed(own["append"], tk.append, f"trip-{index}", role, text, **fields)
                    _timed(own["build"], tk.context, f"trip-{index}", budget_tokens=4000)
    finally:
        for tk in services.values():
            tk.close()
    # Another process's first look (nothing in its memory), both modes side by side again.
    others = {mode: turnkeeper.open(url, **extra) for mode, (url, extra) in modes.items()}
    try:
        for index in range(sessions):
            order.reverse()
            for mode in order:
                cold = samples[mode]["cold build"]
                _timed(cold, others[mode].context, f"trip-{index}", budget_tokens=4000)
        for _ in range(20):
            for mode in order:
                try:
                    _timed(samples[mode]["search"], others[mode].search, "Lisbon")
                except Unsupported:
                    samples[mode]["search"].append(float("nan"))
    finally:
        for tk in others.values():
            tk.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run (a smoke test)")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL + Redis as well")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--turns", type=int, default=25)
    args = parser.parse_args()
    rounds, sessions, turns = (2, 3, 5) if args.quick else (args.rounds, args.sessions, args.turns)
    lines = [
        "# Encryption at rest: what it costs",
        "",
        f"`.venv/bin/python bench/bench_encryption.py{' --postgres' if args.postgres else ''}`"
        " (docs/privacy.md). Times per call; off and on side by side, turn by turn, on a"
        " shared 2-core machine: read the ratios, and expect a few percent of noise in them.",
        "",
    ]
    for postgres in (False, True) if args.postgres else (False,):
        totals: dict[str, dict[str, list[float]]] = {"off": {}, "on": {}}
        with tempfile.TemporaryDirectory() as tmp:
            for round_ in range(rounds):
                modes = _modes(Path(tmp), postgres, round_)
                for mode, by_name in _run_round(modes, sessions, turns).items():
                    for name, values in by_name.items():
                        totals[mode].setdefault(name, []).extend(values)
        backend = "PostgreSQL + Redis" if postgres else "SQLite"
        lines += [*_table(totals, backend, rounds, sessions, turns), ""]
    lines += NOTES
    print("\n".join(lines))
    if not args.quick:
        RESULTS.write_text("\n".join(lines))


NOTES = [
    "## Reading",
    "",
    "- **append**: sealing content, metadata and tool calls (a keyed BLAKE2b nonce and AES-GCM"
    " each) and a larger row; the stored message handed back is the draft's own values, not"
    " decrypted again.",
    "- **build** (a chat turn's window, right after its append): what the last turn's window"
    " opened is handed out again (the data key's memo of opened rows and values), so only the"
    " new messages are decrypted.",
    "- **cold build** (another process's first window of a session): every message of the"
    " window is decrypted once (and its key read from the key store and unwrapped); every"
    ' later build of that session in that process is a "build".',
    '- **search** is refused on an encrypted store (docs/privacy.md, "Search").',
    "",
]


def _table(
    totals: dict[str, dict[str, list[float]]], backend: str, rounds: int, sessions: int, turns: int
) -> list[str]:
    lines = [
        f"## {backend}: {rounds} rounds × {sessions} sessions × {turns} turns (4 messages each)",
        "",
        "| operation | off: median (p95) | on: median (p95) | on / off (median) |",
        "|---|---|---|---|",
    ]
    for name in ("append", "build", "cold build", "search"):
        off, on = totals["off"][name], totals["on"][name]
        on_real = [v for v in on if v == v]  # NaN: refused
        if not on_real:
            lines.append(f"| {name} | {_ms(off)} | refused (Unsupported) | — |")
            continue
        ratio = statistics.median(on_real) / statistics.median(off)
        lines.append(f"| {name} | {_ms(off)} | {_ms(on_real)} | {ratio:.2f}× |")
    return lines


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[max(int(len(ordered) * 0.95) - 1, 0)]
    return f"{statistics.median(ordered) * 1000:.3f} ms ({p95 * 1000:.3f} ms)"


if __name__ == "__main__":
    main()
