"""PostgreSQL for tests: one cluster in a temporary directory, run as the ``postgres`` user.

``initdb`` refuses to run as root (and CI runs as root), so the cluster's directory belongs to
the ``postgres`` system user and the server process drops to that user before it starts. The
server listens on 127.0.0.1 only, with its Unix socket inside its own directory, trusts local
connections (the tests' only clients) and is stopped with a fast shutdown (SIGINT), which ends
open sessions at once: a test that stops the server under load must not wait for its clients.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from servers.base import INSTALL_HINT, ServerError, ServerProcess, die_with_parent, port_open

#: Role the tests connect as (created by initdb as the cluster's superuser).
USER = "cebroker"


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise ServerError(f"PostgreSQL is not installed: {INSTALL_HINT}")
    return Path(found[-1]).parent


def _as_postgres() -> None:
    """In the child before exec: become the ``postgres`` user and die with the test process."""
    entry = pwd.getpwnam("postgres")
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    die_with_parent()


class PostgresServer(ServerProcess):
    """A private PostgreSQL cluster; :meth:`create_database` gives each test its own database,
    empty or copied from a template database (:meth:`create_template`).

    ``workdir`` keeps the server's log; the cluster itself lives in a directory of its own under
    the system temporary directory, because the ``postgres`` user cannot enter the test's
    temporary directories (they are private to root). It is removed by :meth:`close`.
    """

    name = "postgres"
    ready_timeout = 30.0

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.bin = _binaries()
        self.cluster = Path(tempfile.mkdtemp(prefix="cebroker-pg-"))
        entry = pwd.getpwnam("postgres")
        os.chown(self.cluster, entry.pw_uid, entry.pw_gid)
        self.data = self.cluster / "data"
        self._initdb()

    @property
    def log_path(self) -> Path:
        """The server log (inside the cluster directory, which the server user can write)."""
        return self.cluster / "postgres.log"

    def _initdb(self) -> None:
        result = subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", USER, "-E", "UTF8"],
            capture_output=True,
            preexec_fn=_as_postgres,
            cwd=self.cluster,
            check=False,
        )
        if result.returncode != 0:
            raise ServerError(f"initdb failed: {result.stderr.decode(errors='replace')[-2000:]}")

    def command(self) -> list[str]:
        return [
            str(self.bin / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-k",
            str(self.cluster),
            "-c",
            f"listen_addresses={self.host}",
            "-c",
            "fsync=on",
            "-c",
            "max_connections=200",
        ]

    def start(self) -> None:
        """Start the server as the ``postgres`` user and wait until it accepts connections."""
        if self.running:
            return
        log = self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.cluster,
            start_new_session=True,
            preexec_fn=_as_postgres,
        )
        self.wait_ready()
        self._wait_accepting()

    def _wait_accepting(self) -> None:
        # The port opens before recovery ends; a query proves the server takes sessions.
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.psql("SELECT 1", database="postgres", check=False).returncode == 0:
                return
            time.sleep(0.05)
        raise ServerError(f"postgres did not accept sessions:\n{self.tail_log()}")

    def stop(self) -> None:
        """Fast shutdown (SIGINT: open sessions are ended), SIGKILL after 10 s."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None
        deadline = time.monotonic() + 5
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        """Stop the server and remove the cluster directory."""
        self.stop()
        shutil.rmtree(self.cluster, ignore_errors=True)

    def psql(
        self, sql: str, *, database: str = "postgres", check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run one SQL command with ``psql`` as the test role."""
        result = subprocess.run(
            [
                str(self.bin / "psql"),
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                self.host,
                "-p",
                str(self.port),
                "-U",
                USER,
                "-d",
                database,
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if check and result.returncode != 0:
            raise ServerError(f"psql failed on {sql!r}: {result.stderr.strip()}")
        return result

    def processes(self) -> list[int]:
        """The PIDs of this server: its postmaster and every process it started (backends,
        background workers), found by their parent PID."""
        process = self._process
        if process is None or process.poll() is not None:
            return []
        found = [process.pid]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                # the parent PID is the 4th field, after the name in parentheses
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == process.pid:
                    found.append(int(entry.name))
        return found

    def freeze(self) -> list[int]:
        """Stop this server's processes (SIGSTOP: a hung server, whose kernel still accepts
        connections and acknowledges what is sent); returns the PIDs stopped."""
        pids = self.processes()
        for pid in pids:  # the postmaster first: it starts no process meanwhile
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        return pids

    def thaw(self, pids: list[int]) -> None:
        """Let the processes :meth:`freeze` stopped run again (SIGCONT)."""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def url(self, database: str) -> str:
        """The ``postgresql://`` URL of ``database`` on this server."""
        return f"postgresql://{USER}@{self.host}:{self.port}/{database}"

    def create_database(self, *, template: str | None = None) -> str:
        """A new database, empty or a copy of ``template`` (see :meth:`create_template`); returns
        its URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.psql(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return self.url(name)

    def create_template(self, fill: Callable[[str], None]) -> str:
        """A template database: a new database that ``fill`` (given its URL) sets up, then closed
        to connections so that it can be copied; returns its name, for :meth:`create_database`.

        Copying a template is one statement, however much ``fill`` did (PostgreSQL refuses to
        copy a database while anyone is connected to it: ``fill`` must close its connections).
        """
        url = self.create_database()
        fill(url)
        name = url.rsplit("/", 1)[1]
        self.psql(f"ALTER DATABASE {name} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false")
        return name

    def __exit__(self, *exc: object) -> None:
        self.close()
