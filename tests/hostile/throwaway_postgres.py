"""A PostgreSQL server of the test's own (initdb + pg_ctl in a temporary directory, on a free
loopback port), to stop and start, or freeze and thaw, at will. The shared server on 5432 is
never touched.

PostgreSQL refuses to run as root; as root, its commands run as the `postgres` user."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
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
        self._frozen: list[int] = []
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

    def freeze(self) -> None:
        """Stop every process of the server (SIGSTOP), as a hung machine or a stalled disk
        would: connections stay open, the kernel still acknowledges what is sent, and nothing
        answers. The postmaster first, so it starts no new process meanwhile."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGSTOP)
        self._frozen = [postmaster, *self._children(postmaster)]
        for pid in self._frozen[1:]:
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Let every frozen process run again (SIGCONT)."""
        for pid in reversed(self._frozen):
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signal.SIGCONT)
        self._frozen = []

    @staticmethod
    def _children(pid: int) -> list[int]:
        found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        return [int(child) for child in found.stdout.split()]

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
            self.thaw()
            if (self.data / "postmaster.pid").exists():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
