"""One project's searches against another project's appends, through `turnkeeper serve`.

    .venv/bin/python bench/bench_search_load.py [--messages N] [--seconds S] [--no-sqlite]

A corpus of N messages (default 200,000, in 2,000 sessions of ten projects; bench_search.py's)
is loaded into SQLite and into a schema of its own on the shared PostgreSQL, and `turnkeeper
serve` runs on it with API keys for two projects. Project p3 runs 20 clients that search for
`w*` (every message matches) in a loop, each waiting its `Retry-After` when refused; meanwhile
project p5 appends to a session of its own, one message after another, for S seconds. Three
runs per backend:

- alone: the appends, no searches;
- unbounded: the searches with no per-key limit and no search timeout (what turnkeeper did
  before `search_concurrency` and `search_timeout`);
- bounded: the defaults (`search_concurrency` 2 per key, `search_timeout` 3 s).

It reports p5's append latency (median, p95, errors) in each run, the searches' outcomes, and
the ratio of the median append latency unbounded / bounded. Results go to
bench/results/search-load.md and docs/benchmarks.md between the `bench:search-load` markers. The machine
is shared and noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile.served import run_cli, serve  # noqa: E402 - the tests' own helpers

from bench_http import publish  # noqa: E402
from bench_search import fill_postgres, fill_sqlite, postgres_schema_url  # noqa: E402

SEARCHERS = 20
UNBOUNDED = {"TURNKEEPER_SEARCH_CONCURRENCY": "1000000", "TURNKEEPER_SEARCH_TIMEOUT": "1h"}


@dataclass
class Run:
    appends: list[float] = field(default_factory=list)  # seconds, successful appends
    append_errors: Counter[int] = field(default_factory=Counter)
    searches: Counter[int] = field(default_factory=Counter)  # status → count
    search_seconds: list[float] = field(default_factory=list)  # the 200s

    def row(self, name: str) -> str:
        median, p95 = (
            (statistics.median(self.appends), _p95(self.appends)) if self.appends else (0, 0)
        )
        outcomes = ", ".join(f"{status} ×{n}" for status, n in sorted(self.searches.items()))
        searched = (
            f"{statistics.median(self.search_seconds) * 1000:,.0f}" if self.search_seconds else "-"
        )
        errors = sum(self.append_errors.values())
        return (
            f"| {name} | {len(self.appends):,} | {median * 1000:,.1f} | {p95 * 1000:,.1f} |"
            f" {errors} | {outcomes or '-'} | {searched} |"
        )


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _key(db: str, project: str) -> str:
    made = run_cli("keys", "create", "--project", project, "--json", "--db", db)
    assert made.returncode == 0, made.stderr.decode()
    return str(json.loads(made.stdout)["token"])


def measure(db: str, keys: dict[str, str], seconds: float, *, searching: bool,
            env: dict[str, str]) -> Run:  # fmt: skip
    """One run: p5 appends for `seconds`, while p3's searchers search (if `searching`)."""
    run = Run()
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp, serve(db, Path(tmp) / "serve.log", env=env) as srv:
        headers = {"p3": {"Authorization": f"Bearer {keys['p3']}"},
                   "p5": {"Authorization": f"Bearer {keys['p5']}"}}  # fmt: skip
        with httpx.Client(base_url=srv.url, headers=headers["p5"], timeout=120) as quiet:
            session = quiet.post("/v1/sessions", json={}).json()["id"]  # its own, each run

        def search() -> None:
            with httpx.Client(base_url=srv.url, headers=headers["p3"], timeout=300) as http:
                while not stop.is_set():
                    started = time.perf_counter()
                    answer = http.get("/v1/search", params={"q": "w*"})
                    run.searches[answer.status_code] += 1
                    if answer.status_code == 200:
                        run.search_seconds.append(time.perf_counter() - started)
                    elif answer.status_code == 429:
                        stop.wait(float(answer.headers.get("retry-after", "1")))

        searchers = [threading.Thread(target=search) for _ in range(SEARCHERS if searching else 0)]
        for searcher in searchers:
            searcher.start()
        if searching:
            time.sleep(2)  # the searches under way
        with httpx.Client(base_url=srv.url, headers=headers["p5"], timeout=120) as quiet:
            deadline = time.monotonic() + seconds
            n = 0
            while time.monotonic() < deadline:
                n += 1
                started = time.perf_counter()
                answer = quiet.post(
                    f"/v1/sessions/{session}/messages",
                    json={"role": "user", "content": f"a note from the quiet project, {n}"},
                )
                if answer.status_code == 201:
                    run.appends.append(time.perf_counter() - started)
                else:
                    run.append_errors[answer.status_code] += 1
        stop.set()
        for searcher in searchers:
            searcher.join()
    return run


@contextmanager
def corpus(backend: str, messages: int, sessions: int) -> Iterator[str]:
    """A database URL holding the corpus, migrated to the latest schema (index built)."""
    import turnkeeper

    if backend == "SQLite":
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "corpus.db"
            fill_sqlite(path, messages, sessions)
            url = f"sqlite:///{path}"
            turnkeeper.open(url).close()
            yield url
        return
    for url in postgres_schema_url():
        fill_postgres(url, messages, sessions)
        turnkeeper.open(url).close()
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--no-sqlite", action="store_true")
    args = parser.parse_args()
    sessions = max(10, args.messages // 100)
    lines = [
        f"Search load, {datetime.now(UTC):%Y-%m-%d}: `turnkeeper serve` (one process) over"
        f" {args.messages:,} messages in {sessions:,} sessions of ten projects. Project p3 runs"
        f" {SEARCHERS} clients searching `w*` (every message) in a loop, each waiting its"
        f" `Retry-After` when refused; project p5 appends one message after another for"
        f" {args.seconds:g} s. Append latency in ms; searches: HTTP status × count, and the"
        " median ms of those answered 200.",
        "",
    ]
    backends = ["PostgreSQL"] if args.no_sqlite else ["PostgreSQL", "SQLite"]
    for backend in backends:
        with corpus(backend, args.messages, sessions) as db:
            # the searches' first run catches the SQLite index up: not part of any run
            keys = {project: _key(db, project) for project in ("p3", "p5")}
            runs = {
                "alone": measure(db, keys, args.seconds, searching=False, env={}),
                "unbounded": measure(db, keys, args.seconds, searching=True, env=UNBOUNDED),
                "bounded (defaults)": measure(db, keys, args.seconds, searching=True, env={}),
            }
        unbounded = statistics.median(runs["unbounded"].appends)
        bounded = statistics.median(runs["bounded (defaults)"].appends)
        lines += [
            f"#### {backend}",
            "",
            "| searches | appends | append p50 | append p95 | append errors | searches |"
            " search p50 |",
            "|---|---:|---:|---:|---:|---|---:|",
            *(run.row(name) for name, run in runs.items()),
            "",
            f"Median append latency, unbounded / bounded: **{unbounded / bounded:.1f}×**",
            "",
        ]
        print("\n".join(lines), flush=True)
    publish("search-load", "\n".join(lines))


if __name__ == "__main__":
    main()
