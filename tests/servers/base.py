"""Process handling shared by every test server: free ports, start, readiness, stop by PID."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

INSTALL_HINT = "run scripts/install-servers.sh (CI does) to install the test servers"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the test process dies, even if it is killed
    before it could stop its servers (Linux only; elsewhere the servers need ``stop()``)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ServerError(RuntimeError):
    """A test server could not be found, started or stopped."""


#: A port of 127.0.0.1 that nothing listens on, for a target that must refuse connections: the
#: discard service's, below the range a bind to port 0 takes its ports from, so that no server a
#: test starts (in this process or in another worker) can be listening there by chance, as it
#: can on a port :func:`free_port` found free a moment before.
CLOSED_PORT = 9


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_binary(name: str, *candidates: str) -> str:
    """The path of a server binary, or ServerError naming how to install it."""
    for candidate in (name, *candidates):
        found = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
        if found:
            return found
    raise ServerError(f"{name} is not installed: {INSTALL_HINT}")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
        return True
    return False


class ServerProcess:
    """One server binary run as a child process; subclasses say how (:meth:`command`).

    ``start`` returns once the client port accepts connections; ``stop`` terminates the process
    (and its process group) by PID; ``restart`` does both on the same ports and directory.
    """

    name = "server"
    ready_timeout = 15.0

    def __init__(self, workdir: Path) -> None:
        self.host = "127.0.0.1"
        self.port = free_port()
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def command(self) -> list[str]:
        """The argv that runs the server in the foreground."""
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        """The server's environment."""
        return dict(os.environ)

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def log_path(self) -> Path:
        """Where the server's stdout and stderr go."""
        return self.workdir / f"{self.name}.log"

    def start(self) -> None:
        """Start the server and wait until its port accepts connections."""
        if self.running:
            return
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            self.command(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            env=self.environment(),
            start_new_session=True,  # its own process group: stop() ends its children too
            preexec_fn=die_with_parent,
        )
        self.wait_ready()

    def wait_ready(self) -> None:
        """Block until the client port accepts connections (ServerError on exit or timeout)."""
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise ServerError(f"{self.name} exited during start-up:\n{self.tail_log()}")
            if port_open(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise ServerError(
            f"{self.name} did not listen on {self.port} in {self.ready_timeout}s:\n{self.tail_log()}"
        )

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s) and wait for it."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
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

    def restart(self) -> None:
        """Stop, then start again on the same port."""
        self.stop()
        self.start()

    def tail_log(self, lines: int = 30) -> str:
        """The last lines of the server's log, for error messages."""
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
