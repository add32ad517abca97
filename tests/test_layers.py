"""One clear shape: imports go only downward through the declared layers, turnkeeper imports on
platforms without `fcntl`, and the sweeper's lock is the store's own, shared across processes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client import REGISTRY

import turnkeeper
from tests.conftest import SWEEP_LOCK_HOLDER, Clock
from turnkeeper import metrics
from turnkeeper.assemble import open_store
from turnkeeper.config import load_settings
from turnkeeper.errors import InvalidInput
from turnkeeper.expiry import Sweeper
from turnkeeper.service import Turnkeeper
from turnkeeper.storage import locks

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_graph.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _python(code: str, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def test_the_package_imports_only_downward_and_has_no_cycles() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("0 violations")
    assert "[storage] turnkeeper.storage ->" in done.stdout
    storage_line = next(
        line for line in done.stdout.splitlines() if "] turnkeeper.storage ->" in line
    )
    assert "turnkeeper.cache" not in storage_line


def test_the_checker_names_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "turnkeeper"
    (package / "storage").mkdir(parents=True)
    (package / "cache").mkdir()
    for name, body in {
        "__init__.py": "",
        "errors.py": "",
        "storage/__init__.py": "def f():\n    from turnkeeper.cache import store\n",
        "cache/__init__.py": "",
        "cache/store.py": "from turnkeeper import jsonl\n",
        "jsonl.py": "from turnkeeper.cache import store\n",
        "gadget.py": "",
    }.items():
        (package / name).write_text(body)
    _, problems = _script().check(package)
    assert (
        "turnkeeper.storage (storage) imports turnkeeper.cache.store (cache) upward [lazy]"
        in problems
    )
    assert "import cycle: turnkeeper.cache.store ↔ turnkeeper.jsonl" in problems
    assert any(p.startswith("turnkeeper.gadget: in no layer") for p in problems)


def test_turnkeeper_imports_where_fcntl_does_not_exist(tmp_path: Path) -> None:
    """Windows has no `fcntl`: importing must not need it; the SQLite lock then falls back to
    one holder per process."""
    probe = _python(
        """
        import sys
        sys.modules["fcntl"] = None  # `import fcntl` now raises ImportError, as on Windows
        import turnkeeper, turnkeeper.expiry, turnkeeper.cli, turnkeeper.server
        store = turnkeeper.open(sys.argv[1]).store
        with store.exclusive_lock("sweep") as first, store.exclusive_lock("sweep") as second:
            print(first, second)
        """,
        f"sqlite:///{tmp_path / 'windows.db'}",
    )
    out, err = probe.communicate(timeout=60)
    assert probe.returncode == 0, err
    assert out.split() == ["True", "False"]


def test_lock_names_are_checked_and_keyed_the_same_in_every_process() -> None:
    with pytest.raises(InvalidInput) as caught:
        locks.lock_key("../escape")
    assert caught.value.field == "name"
    probe = _python("from turnkeeper.storage.locks import lock_key; print(lock_key('sweep'))")
    out, err = probe.communicate(timeout=60)
    assert int(out) == locks.lock_key("sweep"), err


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_a_sweeper_in_another_process_keeps_this_one_from_running(
    database_url: str, clock: Clock, tmp_path: Path
) -> None:
    settings = load_settings(database_url=database_url, expiry_grace=timedelta(0))
    with Turnkeeper(open_store(database_url, settings), settings, clock=clock) as tk:
        doomed = tk.create_session(key="doomed", ttl=timedelta(hours=1))
        clock.advance(timedelta(hours=2))
        holder = _python(SWEEP_LOCK_HOLDER, database_url, stdin=subprocess.PIPE)
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            assert Sweeper(tk).run_once() is None  # the other process is sweeping
            assert tk.store.get_session(doomed.id).id == doomed.id
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=60)
        assert holder.returncode == 0
        report = Sweeper(tk).run_once()  # released when the other process let go
        assert report is not None and report.deleted == (doomed.id,)


def test_a_sweep_lock_dies_with_its_process(database_url: str) -> None:
    """A crashed holder never blocks the others: the OS (or PostgreSQL) drops its lock."""
    holder = _python(SWEEP_LOCK_HOLDER, database_url, stdin=subprocess.PIPE)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(timeout=60)
    settings = load_settings(database_url=database_url)
    store = open_store(database_url, settings)
    try:
        for _ in range(50):  # PostgreSQL notices the dead connection shortly after
            with store.exclusive_lock("sweep") as held:
                if held:
                    break
            time.sleep(0.1)
        assert held
    finally:
        store.close()


class Recorded:
    """A recorder of its own, as a StatsD or OpenTelemetry bridge would be."""

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[str, ...], float]] = []

    def record(
        self, instrument: metrics.Instrument, labels: tuple[str, ...], amount: float
    ) -> None:
        self.events.append((instrument.name, labels, amount))


def test_every_metric_reaches_an_installed_recorder_and_prometheus_alike(tmp_path: Path) -> None:
    recorded = Recorded()
    metrics.install(recorded)
    builds = REGISTRY.get_sample_value(
        "turnkeeper_context_builds_total", {"strategy": "sliding_window"}
    )
    try:
        with turnkeeper.open(f"sqlite:///{tmp_path / 'metrics.db'}") as tk:
            session = tk.create_session()
            tk.append(session, "user", "hello")
            tk.context(session, strategy="sliding_window", budget_tokens=1000)
            tk.context(session, strategy="sliding_window", budget_tokens=1000)  # an LRU hit
    finally:
        metrics.uninstall(recorded)
    names = [name for name, _, _ in recorded.events]
    assert ("turnkeeper_context_builds_total", ("sliding_window",), 1) in recorded.events
    assert "turnkeeper_cache_hits_total" in names
    after = REGISTRY.get_sample_value(
        "turnkeeper_context_builds_total", {"strategy": "sliding_window"}
    )
    assert after == (builds or 0.0) + 2


def test_the_in_memory_reference_store_runs_without_any_sql_module() -> None:
    """The append rule is plain data (`storage/appends.py`): the reference store shares it
    with the SQL stores without loading their SQL."""
    probe = _python(
        "import sys, turnkeeper\n"
        "tk = turnkeeper.open('memory://')\n"
        "tk.append(tk.create_session(key='k'), 'user', 'hello')\n"
        "print(sorted(m for m in sys.modules if m.startswith('turnkeeper.storage.sql')))"
    )
    out, err = probe.communicate(timeout=60)
    assert probe.returncode == 0, err
    assert out.strip() == "[]"
