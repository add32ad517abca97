"""Full-text search benchmarks: query latency on a large corpus, and what the index costs appends.

    .venv/bin/python bench/bench_search.py [--quick] [--messages N] [--sessions N]

1. Append cost: single appends to one session at synchronous=NORMAL and FULL, four writers
   taking turns in rounds of 50 — raw sqlite3 (one INSERT + COMMIT, WAL), and turnkeeper on
   the schema without the full-text index (before step 7), with the index written by every
   append (steps 7–9's trigger) and with the index caught up at the next search (step 10,
   today) — so the index's share is read side by side. Then what the first search after n new
   messages pays to index them, against the search after it.
2. Search latency on each backend (SQLite, PostgreSQL) over 1,000,000 messages in 10,000
   sessions of 10 projects. The corpus is written straight into the tables (executemany in one
   transaction on SQLite, COPY on PostgreSQL) on the schema before the index, then the index
   migration runs (that is the backfill an upgrade does; its time is reported). Typical queries
   run in one project (a tenth of the corpus), repeated; p50 and p95 are reported.

Not part of `make bench` (it takes several minutes: see docs/benchmarks.md). Results go to
bench/results/search.md (`--appends-only`: section 1 alone, to bench/results/search-appends.md). The machine is shared and noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import io
import itertools
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from turnkeeper.config import load_settings
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.sql.schema import MIGRATIONS
from turnkeeper.storage.sql.sqlite import SQLiteStore

RESULTS = Path(__file__).parent / "results" / "search.md"
APPENDS_RESULTS = RESULTS.with_name("search-appends.md")
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "
START = datetime(2025, 1, 1, tzinfo=UTC)
PROJECTS = 10
RARE = ["lisbon", "azulejos", "fado", "tram", "belém", "sintra"]
"""Words planted in about 1 message in 1,000 each (the selective queries)."""

QUERIES: list[tuple[str, dict[str, object]]] = [
    ("lisbon", {}),
    ("lisbon hotel", {}),
    ('"tram 28"', {}),
    ("lisb*", {}),
    ("fado OR azulejos", {}),
    ("lisbon -hotel", {}),
    ("w3", {}),  # a common word: in about one message in five
    ("w3 w7", {}),
    ("w3", {"role": "user"}),
    ("w3", {"since": START + timedelta(days=300)}),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


BEFORE_SEARCH = (
    next(m.version for m in MIGRATIONS if m.name == "full-text search of message content") - 1
)
"""The schema version just before the full-text index."""
LAZY = next(m.version for m in MIGRATIONS if m.name.startswith("full-text index catches up"))
"""The schema version from which the index catches up at search instead of in every append."""


# -- 1. what the index costs an append ---------------------------------------------------------


WRITERS = {
    "plain": ("turnkeeper `append`, no full-text index (schema before step 7)", BEFORE_SEARCH),
    "trigger": ("turnkeeper `append`, indexed in the append (steps 7–9's trigger)", LAZY - 1),
    "lazy": ("turnkeeper `append`, indexed at the next search (step 10, today)", LAZY),
}
"""The turnkeeper writers of section 1: the same code on the schema of each version."""


def interleaved_appends(
    root: Path, count: int, synchronous: str, round_size: int = 50
) -> dict[str, list[float]]:
    """Raw sqlite3 and each of `WRITERS` taking turns in rounds, all at `synchronous`."""
    conn = sqlite3.connect(root / f"raw-{synchronous}.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(
        "CREATE TABLE messages (session_id TEXT, seq INTEGER, id TEXT UNIQUE, role TEXT,"
        " content TEXT, created_at TEXT, tokens INTEGER, PRIMARY KEY (session_id, seq))"
    )
    settings = load_settings(database_url=f"sqlite:///{root / 'unused.db'}")
    writers = {
        name: Turnkeeper(
            SQLiteStore(
                f"sqlite:///{root / f'{name}-{synchronous}.db'}",
                synchronous=synchronous,
                target_version=version,
            ),
            settings,
        )
        for name, (_, version) in WRITERS.items()
    }
    times: dict[str, list[float]] = {"raw": [], **{name: [] for name in writers}}
    sessions = {name: tk.create_session(key="bench") for name, tk in writers.items()}
    for name, tk in writers.items():  # load the tokenizer, warm up
        tk.append(sessions[name].id, "user", "warm-up")
    seq = 0
    while seq < count:
        for _ in range(round_size):
            seq += 1
            start = time.perf_counter()
            conn.execute("BEGIN")
            conn.execute(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                ("s", seq, str(uuid.uuid4()), "user", f"{TEXT}{seq}",
                 datetime.now(UTC).isoformat(), 20),
            )  # fmt: skip
            conn.execute("COMMIT")
            times["raw"].append(time.perf_counter() - start)
        for name, tk in writers.items():
            for i in range(seq - round_size + 1, seq + 1):
                start = time.perf_counter()
                tk.append(sessions[name].id, "user", f"{TEXT}{i}")
                times[name].append(time.perf_counter() - start)
    conn.close()
    for tk in writers.values():
        tk.close()
    return times


def append_table(times: dict[str, list[float]], synchronous: str) -> list[str]:
    rate = {name: len(t) / sum(t) for name, t in times.items()}
    lines = [
        f"### Append cost of the index ({len(times['raw'])} single appends each, SQLite,"
        f" synchronous={synchronous}, interleaved in rounds of 50)",
        "",
        "| | messages/s | p50 ms | p99 ms | rate / raw |",
        "|---|---:|---:|---:|---:|",
    ]
    labels = {"raw": "raw sqlite3 (INSERT + COMMIT)"} | {n: w[0] for n, w in WRITERS.items()}
    for name, label in labels.items():
        t = times[name]
        lines.append(
            f"| {label} | {rate[name]:,.0f} | {percentile(t, 0.5) * 1e3:.3f}"
            f" | {percentile(t, 0.99) * 1e3:.3f} | {rate[name] / rate['raw']:.2f} |"
        )
    return [
        *lines,
        "",
        f"Indexed at the next search / in the append: **{rate['lazy'] / rate['trigger']:.2f}**;"
        f" / no index: {rate['lazy'] / rate['plain']:.2f}",
        "",
    ]


def catch_up_costs(root: Path, sizes: list[int]) -> list[str]:
    """What the first search after `n` unindexed messages pays (it indexes them), against the
    search after it. The messages are written as an import writes them (rows, one transaction)."""
    lines = [
        "### The first search after n new messages pays their indexing (SQLite)",
        "",
        "| n new messages | first search ms | next search ms | indexing µs per message |",
        "|---:|---:|---:|---:|",
    ]
    for n in sizes:
        path = root / f"catch-up-{n}.db"
        fill_sqlite(path, n, max(1, n // 100), version=LAZY)
        with Turnkeeper(
            SQLiteStore(f"sqlite:///{path}"), load_settings(database_url=f"sqlite:///{path}")
        ) as tk:
            first = timed(lambda: tk.search("lisbon", project="p0"))
            nxt = statistics.median(
                timed(lambda: tk.search("lisbon", project="p0")) for _ in range(5)
            )
        lines.append(
            f"| {n:,} | {first * 1e3:,.1f} | {nxt * 1e3:.1f} | {(first - nxt) / n * 1e6:.1f} |"
        )
    return [*lines, ""]


def postgres_appends(count: int, round_size: int = 50) -> list[str]:
    """PostgreSQL's generated `tsvector` under a GIN index is computed by the append's INSERT:
    turnkeeper on the schema before the index and on today's, taking turns in rounds."""
    from turnkeeper.storage.sql.postgres import PostgresStore

    settings = load_settings(database_url="sqlite:///unused.db")
    urls = [postgres_schema_url(), postgres_schema_url()]
    writers = {
        name: Turnkeeper(PostgresStore(next(url), target_version=version), settings)
        for (name, version), url in zip(
            (("plain", BEFORE_SEARCH), ("indexed", LAZY)), urls, strict=True
        )
    }
    times: dict[str, list[float]] = {name: [] for name in writers}
    sessions = {name: tk.create_session(key="bench") for name, tk in writers.items()}
    for seq in range(0, count, round_size):
        for name, tk in writers.items():
            for i in range(seq, seq + round_size):
                start = time.perf_counter()
                tk.append(sessions[name].id, "user", f"{TEXT}{i}")
                times[name].append(time.perf_counter() - start)
    for tk in writers.values():
        tk.close()
    for url in urls:  # drop the schemas
        next(url, None)
    rate = {name: len(t) / sum(t) for name, t in times.items()}
    return [
        f"### PostgreSQL: what the index costs an append ({count} single appends each,"
        " interleaved in rounds of 50)",
        "",
        "| | messages/s | p50 ms |",
        "|---|---:|---:|",
        *(
            f"| turnkeeper `append`, {label} | {rate[name]:,.0f}"
            f" | {percentile(times[name], 0.5) * 1e3:.3f} |"
            for name, label in (
                ("plain", "no full-text index (schema before step 7)"),
                ("indexed", "the generated tsvector + GIN (today)"),
            )
        ),
        "",
        f"With the index / without: **{rate['indexed'] / rate['plain']:.2f}**",
        "",
    ]


# -- 2. the corpus -----------------------------------------------------------------------------


def corpus(messages: int, sessions: int, seed: int = 17) -> Iterator[tuple[object, ...]]:
    """Rows `(session_id, seq, id, role, content, created_at)`: Zipf-distributed words `w0…`
    (w3 is in about one message in five), a few rare words and the phrase "tram 28"."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(5000)]
    cumulative = list(itertools.accumulate(1 / (i + 1) for i in range(len(vocabulary))))
    per_session = messages // sessions
    span = timedelta(days=365).total_seconds()
    for s in range(sessions):
        session_id = f"s{s:05d}"
        for seq in range(1, per_session + 1):
            words = rng.choices(vocabulary, cum_weights=cumulative, k=rng.randint(8, 40))
            if rng.random() < 0.006:
                words.insert(rng.randrange(len(words) + 1), rng.choice(RARE))
            if rng.random() < 0.001:
                words += ["hotel", "lisbon"]
            if rng.random() < 0.0005:
                words += ["tram", "28"]
            when = START + timedelta(seconds=rng.random() * span)
            yield (session_id, seq, f"m{seq}", "user" if seq % 2 else "assistant",
                   " ".join(words), when)  # fmt: skip


def session_rows(sessions: int, per_session: int) -> list[tuple[object, ...]]:
    return [
        (f"s{s:05d}", f"key-{s}", f"p{s % PROJECTS}", START, START, per_session, per_session)
        for s in range(sessions)
    ]


def fill_sqlite(path: Path, messages: int, sessions: int, *, version: int = BEFORE_SEARCH) -> None:
    SQLiteStore(f"sqlite:///{path}", target_version=version).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO sessions (id, key, project, created_at, updated_at, message_count,"
        " last_seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(*row[:3], row[3].isoformat(), row[4].isoformat(), *row[5:])  # type: ignore[attr-defined]
         for row in session_rows(sessions, messages // sessions)],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO messages (session_id, seq, id, role, content, created_at, tokens)"
        " VALUES (?, ?, ?, ?, ?, ?, 20)",
        ((*row[:5], row[5].strftime("%Y-%m-%dT%H:%M:%S.%f+00:00"))  # type: ignore[attr-defined]
         for row in corpus(messages, sessions)),
    )  # fmt: skip
    conn.execute("COMMIT")
    conn.close()


def fill_sqlite_at(path: str, messages: int, sessions: int) -> None:
    fill_sqlite(Path(path), messages, sessions)


def fill_postgres(url: str, messages: int, sessions: int) -> None:
    import psycopg

    from turnkeeper.storage.sql.postgres import PostgresStore

    PostgresStore(url, target_version=BEFORE_SEARCH).close()
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO sessions (id, key, project, created_at, updated_at, message_count,"
            " last_seq) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            session_rows(sessions, messages // sessions),
        )
        with cur.copy(
            "COPY messages (session_id, seq, id, role, content, created_at, tokens) FROM STDIN"
        ) as copy:
            buffer = io.StringIO()
            for n, row in enumerate(corpus(messages, sessions), 1):
                buffer.write("\t".join(str(v) for v in row[:5]) + f"\t{row[5].isoformat()}\t20\n")  # type: ignore[attr-defined]
                if n % 50_000 == 0:
                    copy.write(buffer.getvalue())
                    buffer = io.StringIO()
            copy.write(buffer.getvalue())


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def query_table(tk: Turnkeeper, repeats: int) -> list[str]:
    lines = ["| query | filters | hits (limit 20) | p50 ms | p95 ms |", "|---|---|---:|---:|---:|"]
    for text, filters in QUERIES:
        hits = tk.search(text, project="p3", limit=20, **filters)  # type: ignore[arg-type]
        timings = [
            timed(lambda: tk.search(text, project="p3", limit=20, **filters))  # type: ignore[arg-type]  # noqa: B023
            for _ in range(repeats)
        ]
        shown = ", ".join(
            f"{k}={v:%Y-%m-%d}" if isinstance(v, datetime) else f"{k}={v}"
            for k, v in filters.items()
        )
        lines.append(
            f"| `{text}` | {shown or '-'} | {len(hits)} | {percentile(timings, 0.5) * 1e3:.1f}"
            f" | {percentile(timings, 0.95) * 1e3:.1f} |"
        )
    session = "s00003"  # in p3
    timings = [
        timed(lambda: tk.search("w3", project="p3", session=session)) for _ in range(repeats)
    ]
    lines.append(
        f"| `w3` | one session | 20 | {percentile(timings, 0.5) * 1e3:.1f}"
        f" | {percentile(timings, 0.95) * 1e3:.1f} |"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--appends-only",
        action="store_true",
        help="only the append and catch-up costs (a few minutes; bench/results/search-appends.md)",
    )
    args = parser.parse_args()
    messages, sessions = (20_000, 200) if args.quick else (args.messages, args.sessions)
    appends, repeats = (150, 5) if args.quick else (1500, 21)
    began = time.perf_counter()
    lines = [
        f"Search benchmarks of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (`python"
        f" bench/bench_search.py{' --quick' if args.quick else ''}"
        f"{' --appends-only' if args.appends_only else ''}`)",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for synchronous in ("NORMAL", "FULL"):
            lines += append_table(interleaved_appends(root, appends, synchronous), synchronous)
        lines += catch_up_costs(root, [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
        if not args.no_postgres:
            lines += postgres_appends(appends)
        print("\n".join(lines), flush=True)

        backends: list[tuple[str, Callable[[], Iterator[str]]]] = [
            ("SQLite", lambda: sqlite_url(root))
        ]
        if args.appends_only:
            backends = []
        elif not args.no_postgres:
            backends.append(("PostgreSQL", postgres_schema_url))
        for name, make_url in backends:
            for url in make_url():
                fill = fill_sqlite_at if name == "SQLite" else fill_postgres
                filled = timed(lambda: fill(url, messages, sessions))  # noqa: B023
                settings = load_settings(database_url=url)
                store_open = open_store_at_latest(url)
                start = time.perf_counter()
                store = store_open()
                backfill = time.perf_counter() - start
                with Turnkeeper(store, settings) as tk:
                    tk.search("warm the caches", project="p3")
                    table = query_table(tk, repeats)
                lines += [
                    f"### {name}: {messages:,} messages in {sessions:,} sessions,"
                    f" searched in one project of {PROJECTS}",
                    "",
                    f"Loading the corpus: {filled:.0f} s; the index migration (backfill of"
                    f" {messages:,} messages): **{backfill:.0f} s**",
                    "",
                    *table,
                    "",
                ]
                print("\n".join(lines[-len(table) - 5 :]), flush=True)
    lines.append(f"Whole run: {time.perf_counter() - began:.0f} s")
    report = "\n".join(lines) + "\n"
    print(report)
    if not args.quick:  # the append and catch-up tables alone go to a file of their own
        results = APPENDS_RESULTS if args.appends_only else RESULTS
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(report, encoding="utf-8")


def sqlite_url(root: Path) -> Iterator[str]:
    yield str(root / "corpus.db")


def postgres_schema_url() -> Iterator[str]:
    import psycopg

    schema = f"bench_search_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def open_store_at_latest(url: str) -> Callable[[], object]:
    """Opening the store at the latest schema runs the index migration (timed by the caller)."""
    if url.startswith("postgresql://"):
        from turnkeeper.storage.sql.postgres import PostgresStore

        return lambda: PostgresStore(url)
    return lambda: SQLiteStore(f"sqlite:///{url}")


if __name__ == "__main__":
    main()
