"""HTTP service load test: concurrent clients appending and building context over loopback,
against `turnkeeper serve` and, side by side, a baseline doing the same work by hand.

    make bench            # or: python bench/bench_http.py [--seconds 60] [--clients 50]
    python bench/bench_http.py --seconds 15 --workers 1,2,4 --name http-scaling

`turnkeeper serve --workers N` runs in its own process (with API keys on, as deployed, and its
JSON request logs going to /dev/null); then `bench/baseline_app.py` (a minimal FastAPI app on
the same server stack: one INSERT per append, one SELECT of the newest rows per context, no
auth, no token counting) under the same load, each on a fresh database. An asyncio driver
(raw HTTP/1.1 on keep-alive connections: httpx cost more CPU than the server) runs N clients,
each owning one session and looping: append a user message (with a client id) → GET its
context (sliding_window, 2,000 tokens). Measured per backend and server: requests/s and its
ratio to the baseline's, the servers' CPU time per request, p50/p99 latency from the start
(the first minute included), errors (any non-2xx or transport error: must be 0) and messages
lost (acknowledged appends missing from the store, or stored twice: must be 0), and the
resident memory of all the server's processes after warm-up and after the load.

With `--against REV` (e.g. `main`) turnkeeper as of that git revision is served too, under the
same load on the line before this checkout's: a before/after pair from one run.

With `--message-bytes N` every appended message is N bytes: a test of the server's memory bound
(results in bench/results/http-memory.md and docs/benchmarks.md's `bench:http-memory` block).

Backends: the embedded SQLite default (WAL, synchronous=FULL: every append reaches the disk),
and PostgreSQL when `$TURNKEEPER_BENCH_POSTGRES_URL` (default: the test database on 127.0.0.1)
is reachable, in a schema of its own dropped afterwards. Results go to bench/results/NAME.md
and into docs/benchmarks.md between the `bench:NAME` markers (NAME: `--name`, default http).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

import turnkeeper
from turnkeeper.apikeys import ApiKeys

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "http.md"
BENCHMARKS_PAGE = ROOT / "docs" / "benchmarks.md"  # the docs page holding the tables
TEXT = "Where should we eat near Alfama tonight? We are vegetarian and like quiet places. "


@dataclass
class Tally:
    """What the clients saw."""

    append_ms: list[float] = field(default_factory=list)
    context_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    acknowledged: dict[str, int] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float:
    """Memory of the server in MiB: the resident set (VmRSS) of a single process; with workers,
    the sum of every process's proportional share (Pss), so pages the workers share since the
    fork are counted once, not once per worker."""
    children = _children(pid)
    if not children:
        return _status_kib(f"/proc/{pid}/status", "VmRSS:") / 1024
    return sum(_status_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in [pid, *children]) / 1024


def _status_kib(path: str, field: str) -> int:
    for line in Path(path).read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by process `pid` and its children (the workers):
    per request, the measure the other load on a shared machine disturbs least."""
    total = 0
    for process in [pid, *_children(pid)]:
        fields = Path(f"/proc/{process}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        found.extend(int(child) for child in children)
    return found


@contextmanager
def serving(
    database_url: str, workers: int, source: Path = ROOT / "src"
) -> Iterator[tuple[str, str, int]]:
    """`turnkeeper serve --workers N` on `database_url` in a subprocess, importing turnkeeper
    from `source`; yields (URL, an API key, its process id)."""
    with turnkeeper.open(database_url) as tk:
        _, token = ApiKeys(tk.store).create("bench")
    port = _free_port()
    command = ["-m", "turnkeeper", "serve", "--port", str(port), "--db", database_url]
    with _process([*command, "--workers", str(workers)], port, token, source) as (url, pid):
        yield url, token, pid


@contextmanager
def source_at(revision: str) -> Iterator[Path]:
    """The package's source as of git `revision`, in a temporary directory (`--against`)."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, "src"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp) / "src"


@contextmanager
def serving_baseline(database_url: str, workers: int) -> Iterator[tuple[str, str, int]]:
    """The baseline app (`bench/baseline_app.py`) on `database_url`, served the same way."""
    port = _free_port()
    script = str(ROOT / "bench" / "baseline_app.py")
    command = [script, "--port", str(port), "--db", database_url, "--workers", str(workers)]
    with _process(command, port, "") as (url, pid):
        yield url, "", pid


@contextmanager
def _process(
    arguments: list[str], port: int, token: str, source: Path = ROOT / "src"
) -> Iterator[tuple[str, int]]:
    env = {**os.environ, "PYTHONPATH": str(source), "TURNKEEPER_CONFIG": os.devnull}
    process = subprocess.Popen(
        [sys.executable, *arguments], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"the server did not come up: {arguments}")
        _warm_up(url, token)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def _warm_up(url: str, token: str) -> None:
    """A few appends and builds first, so the tokenizer's one-time load is not measured (a few,
    so that each worker has likely seen one)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        http.post(
            "/v1/sessions", json={"key": "warm-up", "get_or_create": True}
        ).raise_for_status()  # replicas of one database share it
        for _ in range(8):
            with httpx.Client(base_url=url, headers=http.headers, timeout=120) as fresh:
                fresh.post("/v1/sessions/warm-up/messages", json={"role": "user", "content": TEXT})
                fresh.get("/v1/sessions/warm-up/context").raise_for_status()


class Connection:
    """One keep-alive HTTP/1.1 connection speaking just what the load needs.

    httpx costs the client more CPU per request than the server spends on the baseline's, and
    on a 2-core machine the load generator shares the cores with the server: it would measure
    itself. This client writes a request in one `write` and reads a `Content-Length` answer
    (what uvicorn sends for every JSON response), so nearly all the CPU goes to the server."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self.auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, target: str, body: object = None) -> tuple[int, bytes]:
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        payload = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: {self.host}\r\n{self.auth}"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        self.writer.write(head.encode() + payload)
        status_line = await self.reader.readuntil(b"\r\n")
        length = 0
        while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def client(connection: Connection, index: int, deadline: float, tally: Tally) -> None:
    key = f"bench-client-{index}"
    status, answer = await connection.request(
        "POST", "/v1/sessions", {"key": key, "get_or_create": True}
    )
    if status not in (200, 201):
        raise RuntimeError(f"cannot create session {key}: {status} {answer[:200]!r}")
    acked = 0
    context = f"/v1/sessions/{key}/context?strategy=sliding_window&budget_tokens=2000"
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        try:
            status, answer = await connection.request(
                "POST",
                f"/v1/sessions/{key}/messages",
                {"role": "user", "content": f"{TEXT}#{acked}", "id": f"{key}-{acked}"},
            )
            tally.append_ms.append((time.perf_counter() - started) * 1000)
            if status != 201:
                tally.errors.append(f"append {status}: {answer[:200]!r}")
                continue
            acked += 1
            started = time.perf_counter()
            status, answer = await connection.request("GET", context)
            tally.context_ms.append((time.perf_counter() - started) * 1000)
            if status != 200:
                tally.errors.append(f"context {status}: {answer[:200]!r}")
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            tally.errors.append(f"transport: {exc!r}")
            connection.close()
            connection.reader = connection.writer = None
    tally.acknowledged[key] = acked


async def load(url: str, token: str, clients: int, seconds: float) -> tuple[Tally, float, int]:
    """Run the clients; returns the tally, the wall time and the messages lost or doubled."""
    tally = Tally()
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connections = [Connection(host, int(port), token) for _ in range(clients)]
    try:
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(*(client(c, n, deadline, tally) for n, c in enumerate(connections)))
        elapsed = time.perf_counter() - started
        lost = 0
        for key, acked in tally.acknowledged.items():
            _, answer = await connections[0].request("GET", f"/v1/sessions/{key}")
            lost += abs(json.loads(answer)["message_count"] - acked)
    finally:
        for connection in connections:
            connection.close()
    return tally, elapsed, lost


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Run:
    """One server under the load: what it is, and what the clients saw."""

    backend: str
    server: str
    workers: int
    clients: int
    tally: Tally
    elapsed: float
    lost: int
    rss: tuple[float, float]
    cpu: float

    @property
    def requests(self) -> int:
        return len(self.tally.append_ms) + len(self.tally.context_ms)

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed


def row(run: Run, baseline: Run | None) -> str:
    tally, elapsed = run.tally, run.elapsed
    every = tally.append_ms + tally.context_ms
    ratio = f"{run.rate / baseline.rate:.2f}×" if baseline is not None else "1×"
    cpu_ms = run.cpu * 1000 / max(1, len(every))
    cpu_ratio = (
        f" ({cpu_ms / (baseline.cpu * 1000 / max(1, baseline.requests)):.1f}×)" if baseline else ""
    )
    return (
        f"| {run.backend} | {run.server} | {run.workers} | {run.clients} | {elapsed:.0f} s"
        f" | {len(every):,} | {run.rate:,.0f} | {ratio} | {cpu_ms:.2f}{cpu_ratio}"
        f" | {statistics.median(every):.1f} / {pct(every, 0.99):.1f}"
        f" | {statistics.median(tally.append_ms):.1f} / {pct(tally.append_ms, 0.99):.1f}"
        f" | {statistics.median(tally.context_ms):.1f} / {pct(tally.context_ms, 0.99):.1f}"
        f" | {len(tally.errors)} | {run.lost} | {run.rss[0]:.0f} → {run.rss[1]:.0f} |"
    )


@contextmanager
def postgres_database() -> Iterator[str | None]:
    """A fresh schema in the bench PostgreSQL database, or None when it is not reachable."""
    try:
        import psycopg

        from bench_shared import POSTGRES, bench_schema  # the shared benchmarks' helper

        psycopg.connect(POSTGRES, connect_timeout=2).close()
    except Exception as exc:  # no driver, no server: the SQLite row alone
        print(f"PostgreSQL not available ({exc}); benchmarking SQLite only", file=sys.stderr)
        yield None
        return
    with bench_schema() as url:
        yield url


def measure(
    name: str, server: str, workers: int, database: str, clients: int, seconds: float
) -> Run:
    """Start `server` (turnkeeper or the baseline) with `workers` on `database`, load it."""
    if server == "baseline":
        started = serving_baseline(database, workers)
    else:  # "turnkeeper", or "turnkeeper @REV" (`--against`): that revision's source
        started = serving(database, workers, SOURCES.get(server, ROOT / "src"))
    with started as (base, token, pid):
        before, cpu_before = rss_mib(pid), cpu_seconds(pid)
        tally, elapsed, lost = asyncio.run(load(base, token, clients, seconds))
        after, cpu = rss_mib(pid), cpu_seconds(pid) - cpu_before
    if MESSAGE_BYTES:  # windows of such messages do not fit 2,000 tokens
        tally.errors = [e for e in tally.errors if not e.startswith("context 422")]
    for error in tally.errors[:5]:
        print(f"error: {server}: {error}", file=sys.stderr)
    run = Run(name, server, workers, clients, tally, elapsed, lost, (before, after), cpu)
    print(row(run, None), file=sys.stderr)
    return run


MESSAGE_BYTES = 0
SOURCES: dict[str, Path] = {}
"""The server names of `--against` revisions → their source directories."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="10 seconds per backend")
    parser.add_argument(
        "--workers",
        default="1",
        help="Comma-separated worker counts to measure each backend with (a scaling table), "
        "e.g. 1,2,4; the baseline is measured with the same counts.",
    )
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres or both")
    parser.add_argument("--no-baseline", action="store_true", help="turnkeeper alone")
    parser.add_argument(
        "--message-bytes",
        type=int,
        default=0,
        help="Append messages of this size instead of the short default (a memory test: "
        "their context builds are refused, 422, and not counted as errors).",
    )
    parser.add_argument(
        "--against",
        default="",
        help="Also serve turnkeeper as of this git revision (e.g. main), under the same load in "
        "the same run, on the line before this checkout's: a before/after comparison.",
    )
    parser.add_argument("--note", default="", help="Load conditions to record with the table.")
    parser.add_argument(
        "--name",
        default="http",
        help="Results file and docs/benchmarks.md block: bench/results/NAME.md",
    )
    args = parser.parse_args()
    seconds = 10.0 if args.quick else args.seconds
    global TEXT, MESSAGE_BYTES
    if args.message_bytes:
        MESSAGE_BYTES = args.message_bytes
        TEXT = (TEXT * (args.message_bytes // len(TEXT) + 1))[: args.message_bytes]
    counts = [int(n) for n in args.workers.split(",")]
    servers = (
        ["turnkeeper"] if args.no_baseline or args.message_bytes else ["baseline", "turnkeeper"]
    )
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as sources:
        if args.against:
            before = f"turnkeeper @{args.against}"
            SOURCES[before] = sources.enter_context(source_at(args.against))
            servers.insert(servers.index("turnkeeper"), before)
        backends = []
        if "sqlite" in args.backends:
            backends.append(("SQLite (WAL, synchronous=FULL)", lambda: nullcontext(tmp)))
        if "postgres" in args.backends:
            backends.append(("PostgreSQL", postgres_database))
        for name, database in backends:
            for workers in counts:
                baseline = None
                for server in servers:  # side by side: a fresh database each
                    with database() as where:
                        if where is None:
                            break
                        url = where
                        if where == tmp:
                            label = server.replace(" @", "-").replace("/", "-")
                            url = f"sqlite:///{tmp}/{label}-{workers}.db"
                        run = measure(name, server, workers, url, args.clients, seconds)
                    rows.append(row(run, baseline))
                    baseline = run if server == "baseline" else baseline
    load_after = os.getloadavg()
    report = "\n".join(
        [
            f"HTTP load, {datetime.now(UTC):%Y-%m-%d}: `turnkeeper serve --workers N` (API keys"
            " on, exact token counting) and, on the line above each, the baseline"
            " (`bench/baseline_app.py`: the same work by hand on the same server stack, no auth,"
            " no token counting) under the same load, one after the other in one run. Each"
            " client owns a session and loops append → context (sliding_window, 2,000 tokens)."
            " ÷ baseline: turnkeeper's req/s over the baseline's. Server CPU: user + system"
            " time of all the server's processes per request (what other load on the machine"
            " disturbs least), and turnkeeper's over the baseline's. Latencies in ms (p50 / p99),"
            " measured from the server's start (after a few warm-up requests), so the first"
            " minute is included. RSS: the server's resident memory in MiB (with workers: the sum of"
            " their proportional shares, Pss, so shared pages count once) after warm-up → after"
            " the run"
            + (f"; messages of {args.message_bytes:,} bytes." if args.message_bytes else ".")
            + f" Machine: {os.cpu_count()} cores, load average {load_before[0]:.1f} before →"
            f" {load_after[0]:.1f} after" + (f" ({args.note})." if args.note else "."),
            "",
            f"`python bench/bench_http.py {shlex.join(sys.argv[1:])}`".replace(" `", "`"),
            "",
            "| backend | server | workers | clients | run | requests | req/s | ÷ baseline"
            " | server CPU ms/req (× baseline)"
            " | all p50 / p99 | append p50 / p99 | context p50 / p99 | errors | messages lost"
            " | RSS MiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    publish("http-memory" if args.message_bytes else args.name, report)


def publish(name: str, report: str) -> None:
    """Print `report`, write it to bench/results/NAME.md and between the `bench:NAME` markers of
    docs/benchmarks.md (other benchmarks import this)."""
    print(report)
    results = RESULTS.with_name(f"{name}.md")
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(report, encoding="utf-8")
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = BENCHMARKS_PAGE.read_text(encoding="utf-8")
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        BENCHMARKS_PAGE.write_text(f"{head}{start}\n{report}{end}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()
