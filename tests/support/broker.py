"""A whole broker for the tests, in two forms.

- :class:`Broker`: the broker's ASGI app served in a thread of the test process (see
  :class:`Brokers`), with an HTTP client bound to it. Fast, and the test can hand it a clock or
  a storage of its own.
- :class:`BrokerProcess`: the real ``cebroker serve`` command as a child process, for what only
  a process shows: its command line and variables, its log, SIGTERM and SIGKILL, a restart on
  the same database, the lock on the SQLite file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
from ceprotocols.egress import Resolver, system_resolver
from ceprotocols.registry import SenderFactory
from servers import free_port
from starlette.applications import Starlette

from cebroker.app import build_components, create_app
from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.sealing.keys import new_key, write_key_file
from cebroker.settings import Settings
from cebroker.storage import Storage
from support.servers import ServedApps, ServerThread
from support.waiting import wait_for, wait_until

STRUCTURED = {"content-type": "application/cloudevents+json"}


#: Seconds the backlog count must stay at zero on a broker that shares its log (PostgreSQL)
#: before :meth:`Broker.settled` trusts it: such a broker reads the count back from the log
#: every second, and a read begun just before an ingest committed sets it to what it was before
#: that ingest, a moment after the ingest added to it, until the next read.
SHARED_COUNT_STEADY = 2.0


class Broker:
    """A running broker with an HTTP client bound to it (``http``); ``shared`` when its
    delivery log is shared with other instances (PostgreSQL)."""

    def __init__(
        self, server: ServerThread, client: httpx.Client, app: Starlette, *, shared: bool = False
    ) -> None:
        self.server = server
        self.url = server.url
        self.http = client
        self.app = app
        self.shared = shared

    def subscribe(self, sink: str, **fields: Any) -> dict[str, Any]:
        """Create an HTTP subscription delivering to ``sink`` (201 asserted); returns it."""
        response = self.http.post("/subscriptions", json={"protocol": "HTTP", "sink": sink, **fields})
        assert response.status_code == 201, response.text
        return dict(response.json())

    def send(self, event: Mapping[str, Any]) -> httpx.Response:
        """POST one structured event to the broker's ingress."""
        return self.http.post("/events", json=event, headers=STRUCTURED)

    def status(self, subscription: Mapping[str, Any]) -> dict[str, Any]:
        """The delivery status of ``subscription`` (as returned by :meth:`subscribe`)."""
        return dict(self.http.get(f"/subscriptions/{subscription['id']}/status").json())

    def backlog(self) -> float:
        """The pending deliveries the broker counts (its ``cebroker_delivery_backlog`` metric)."""
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith("cebroker_delivery_backlog "):
                return float(line.split()[1])
        raise AssertionError("the metrics have no cebroker_delivery_backlog")

    def settled(self, timeout: float = 15.0) -> None:
        """Wait until no delivery is pending: each one accepted so far has reached its sink (or
        its dead letter, or was dropped with its subscription), so none can arrive later. On a
        shared log the count must stay at zero for :data:`SHARED_COUNT_STEADY` seconds."""
        steady = SHARED_COUNT_STEADY if self.shared else 0.0
        zero_since: list[float] = []

        def observe() -> tuple[float, float]:
            """The count, and for how many seconds it has been zero."""
            pending, now = self.backlog(), time.monotonic()
            if pending != 0:
                zero_since.clear()
            elif not zero_since:
                zero_since.append(now)
            return pending, now - zero_since[0] if zero_since else 0.0

        wait_for(
            observe,
            lambda seen: seen[0] == 0 and seen[1] >= steady,
            timeout + steady,
            f"no pending delivery for {steady:g} s" if steady else "no pending delivery",
        )


class Brokers:
    """Whole brokers served in threads on free ports of 127.0.0.1, each over its own SQLite file
    in ``directory`` (or the database its ``db`` names: on a PostgreSQL URL with the secrets key
    file every broker of ``directory`` shares), without the webhook handshake and without a
    shutdown grace unless told otherwise; :meth:`close` stops them all. ``force_exit`` false lets
    in-flight requests finish when they stop."""

    def __init__(self, directory: Path, *, force_exit: bool = True) -> None:
        self._directory = directory
        self._force_exit = force_exit
        self._served = ServedApps()

    def start(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        storage: Storage | None = None,
        resolver: Resolver = system_resolver,
        senders: Mapping[str, SenderFactory] | None = None,
        **overrides: Any,
    ) -> Broker:
        """A broker with these ``Settings`` overrides, scheduling on ``clock``, over ``storage``
        (by default the SQLite file the settings name), resolving the names of destinations
        with ``resolver`` (tests map names to any address), delivering with ``senders`` in the
        place of the built-in senders of the protocols it names (the in-memory sender, see
        :mod:`support.memory`)."""
        fields: dict[str, Any] = {
            "db": self._directory / f"broker{len(self._served)}.db",
            "webhook_validation": False,
            # Stopped at once at the end of a test, as before graceful shutdown: deliveries to a
            # sink a test left hanging are not waited for (tests of the grace set it).
            "shutdown_grace": 0.0,
            **overrides,
        }
        key = key_for(fields["db"], self._directory)
        if key is not None and "secrets_key" not in fields:
            fields["secrets_key"] = key
        settings = Settings(**fields)
        parts = build_components(settings, storage, clock=clock, resolver=resolver, senders=senders)
        app = create_app(settings, parts)
        server, client = self._served.start(app, force_exit=self._force_exit)
        shared = storage.claims is not None if storage is not None else key is not None
        return Broker(server, client, app, shared=shared)

    def close(self) -> None:
        """Stop every broker started, newest first."""
        self._served.close()


def key_for(db: Path | str, directory: Path) -> Path | None:
    """The secrets key file a broker on ``db`` is given: on a database named by a URL
    (PostgreSQL), which has no file beside which the broker could keep its own, the one every
    broker of ``directory`` shares; else None (the broker keeps ``<db>.key``)."""
    return shared_key(directory) if "://" in str(db) else None


def shared_key(directory: Path) -> Path:
    """The secrets key file of the brokers whose logs are in ``directory`` (one database, one
    key), created on first use."""
    path = directory / "secrets.key"
    if not path.exists():
        write_key_file(path, (new_key(),), exclusive=True)
    return path


class BrokerProcess:
    """``cebroker serve`` as a child process on a free port of 127.0.0.1 over ``db`` (a SQLite
    file or a PostgreSQL URL), its output appended to ``log``; ended by its own PID only.

    ``flags`` are added to the command line. The process inherits the environment without its
    ``CEBROKER_*`` variables (a developer's own would change the broker under test), plus
    ``env``; ``port_variable`` passes the port as ``CEBROKER_PORT`` rather than ``--port``.
    ``stdout``, when given, takes the standard output apart from ``log`` (which then holds the
    standard error). ``preexec`` runs in the child before the command (to set a resource limit,
    say). :meth:`start` may be called again once it has ended: the same port, database and logs.
    """

    def __init__(
        self,
        db: Path | str,
        log: Path,
        *flags: str,
        env: Mapping[str, str] | None = None,
        port_variable: bool = False,
        stdout: Path | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self.log = log
        self.flags = flags
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._env = dict(env or {})
        self._port_variable = port_variable
        self._stdout = stdout
        self._preexec = preexec
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        """The current process's id."""
        assert self.proc is not None, "the broker was not started"
        return self.proc.pid

    def command(self) -> list[str]:
        """The command line. On a database named by a URL (PostgreSQL) the secrets key file is
        the one every broker logging to the same directory shares, unless the flags name one: a
        URL has no file beside which the broker could keep its own."""
        port = [] if self._port_variable else ["--port", str(self.port)]
        shared = key_for(self.db, self.log.parent)
        key = ["--secrets-key-file", str(shared)] if shared and "--secrets-key-file" not in self.flags else []
        return [sys.executable, "-m", "cebroker", "serve", *port, "--db", str(self.db), *key, *self.flags]

    def log_text(self) -> str:
        """Everything the broker (every start of it) wrote so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def start(self) -> BrokerProcess:
        """Spawn the process (without waiting for it to be ready)."""
        assert not self.running, "the broker is already running"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CEBROKER_")} | self._env
        if self._port_variable:
            env["CEBROKER_PORT"] = str(self.port)
        with contextlib.ExitStack() as files:
            log = files.enter_context(self.log.open("ab"))
            out = files.enter_context(self._stdout.open("ab")) if self._stdout else log
            self.proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=log if self._stdout else subprocess.STDOUT,
                env=env,
                preexec_fn=self._preexec,
            )
        return self

    def ready(self, timeout: float = 30.0) -> BrokerProcess:
        """Wait until ``/readyz`` answers 200; AssertionError, with the log, if the process exits
        first or the time runs out."""

        def answers() -> bool:
            assert self.proc is not None, "the broker was not started"
            code = self.proc.poll()
            if code is not None:
                raise AssertionError(f"the broker exited early with status {code}")
            try:
                return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_until(answers, timeout, f"{self.url}/readyz to answer 200", interval=0.1)
        except AssertionError as failure:
            raise AssertionError(f"{failure}\n{self.log_text()}") from None
        return self

    def exit_code(self, timeout: float) -> int:
        """Wait for the process to end by itself; its exit status."""
        assert self.proc is not None, "the broker was not started"
        return self.proc.wait(timeout=timeout)

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for the exit status; a process still there after ``timeout`` is
        killed and the test fails."""
        assert self.proc is not None, "the broker was not started"
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the broker did not stop within {timeout:g} s of SIGTERM") from None

    def kill(self) -> int:
        """SIGKILL (no shutdown at all) and wait; the exit status."""
        assert self.proc is not None, "the broker was not started"
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        return self.proc.wait(timeout=10)

    def restart(self) -> BrokerProcess:
        """SIGTERM, then start again on the same port and database, and wait until ready."""
        self.terminate()
        return self.start().ready()

    def close(self) -> None:
        """End the process if it still runs (SIGTERM, SIGKILL after 20 s); for teardown."""
        if not self.running:
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()


class BrokerProcesses:
    """The ``cebroker serve`` processes of one test; :meth:`close` ends those still running."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._children: list[BrokerProcess] = []

    def __call__(
        self, db: Path | str, log: str, *flags: str, stdout: str | None = None, **options: Any
    ) -> BrokerProcess:
        """A broker process over ``db`` logging to ``log`` (and ``stdout``, if given) in the
        test's directory, not yet started; the other arguments are :class:`BrokerProcess`'s."""
        out = self._directory / stdout if stdout else None
        child = BrokerProcess(db, self._directory / log, *flags, stdout=out, **options)
        self._children.append(child)
        return child

    def close(self) -> None:
        """End every process still running."""
        for child in reversed(self._children):
            child.close()
