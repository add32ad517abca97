"""What encryption at rest costs: append, window build and search with `encryption_key` off and
on, in the same run, interleaved round by round so the shared machine's noise falls on both.

    .venv/bin/python bench/bench_encryption.py [--quick] [--postgres]

Each round, for each mode (off, on) on a fresh database of its own: `--sessions` sessions
each get `--turns` turns (a user message with metadata, then an assistant reply with a tool
call, its result and a final answer), one `tk.append` per message (timed: "append"); after each
turn the next window of the session is built (timed: "build after append": what a chat turn
does, the pages read from the store since the append moved the version); then each session's
window is built again by a second service on the same database (timed: "build, other
process's view": no window memo, the page cache cold). Search runs a word query over the
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


def _timed(samples: list[float], action: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = action()
    samples.append(time.perf_counter() - start)
    return result


def _run_mode(url: str, extra: dict[str, Any], sessions: int, turns: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"append": [], "build": [], "cold build": [], "search": []}
    arguments = '{"city": "Lisbon", "max": 150}'
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "find_hotels", "arguments": arguments},
    }
    keys = [f"trip-{i}" for i in range(sessions)]
    with turnkeeper.open(url, **extra) as tk:
        for key in keys:
            session, _ = tk.get_or_create_session(key)
            for turn in range(turns):
                for role, text, fields in (
                    ("user", USER, {"metadata": {"channel": "web", "turn": turn}}),
                    ("assistant", "", {"tool_calls": [call]}),
                    ("tool", '{"hotels": ["Memmo Alfama", "Lumiares"]}', {"tool_call_id": "c1"}),
                    ("assistant", REPLY, {}),
                ):
                    _timed(samples["append"], lambda: tk.append(session, role, text, **fields))  # noqa: B023
                _timed(samples["build"], lambda: tk.context(session, budget_tokens=4000))  # noqa: B023
    with turnkeeper.open(url, **extra) as other:
        for key in keys:
            _timed(samples["cold build"], lambda: other.context(key, budget_tokens=4000))  # noqa: B023
        for _ in range(20):
            try:
                _timed(samples["search"], lambda: other.search("Lisbon"))
            except Unsupported:
                samples["search"].append(float("nan"))
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
        " (docs/privacy.md). Times per call; off and on interleaved round by round.",
        "",
    ]
    for postgres in (False, True) if args.postgres else (False,):
        totals: dict[str, dict[str, list[float]]] = {"off": {}, "on": {}}
        with tempfile.TemporaryDirectory() as tmp:
            for round_ in range(rounds):
                for mode, (url, extra) in _modes(Path(tmp), postgres, round_).items():
                    for name, values in _run_mode(url, extra, sessions, turns).items():
                        totals[mode].setdefault(name, []).extend(values)
        backend = "PostgreSQL + Redis" if postgres else "SQLite"
        lines += [*_table(totals, backend, rounds, sessions, turns), ""]
    print("\n".join(lines))
    if not args.quick:
        RESULTS.write_text("\n".join(lines))


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
