"""A PostgreSQL server of the test's own (initdb + pg_ctl in a temporary directory, on a free
loopback port), to stop and start at will. The shared server on 5432 is never touched.

PostgreSQL refuses to run as root; as root, its commands run as the `postgres` user."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from .served import free_port


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


class ThrowawayPostgres:
    """`url` reaches the server while it runs; `stop()` kills it, `start()` brings it back on
    the same port with the same data."""

    def __init__(self) -> None:
        if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
            raise RuntimeError("initdb and pg_ctl are needed (PostgreSQL's server binaries)")
        self.root = Path(tempfile.mkdtemp(prefix="tk-throwaway-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._run(["initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync"])

    def _run(self, command: list[str]) -> None:
        subprocess.run(
            _as_server_user(command), check=True, capture_output=True, timeout=120, cwd=self.root
        )

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off"
        self._run(["pg_ctl", "-D", str(self.data), "-o", options, "-l",
                   str(self.root / "server.log"), "-w", "start"])  # fmt: skip

    def stop(self) -> None:
        """Stop the server the hard way, as a crash or a network cut would (no goodbyes)."""
        self._run(["pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop"])

    def __enter__(self) -> ThrowawayPostgres:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
