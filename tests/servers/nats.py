"""nats-server (core NATS and JetStream) for tests."""

from __future__ import annotations

from pathlib import Path

from servers.base import ServerProcess, require_binary


class NatsServer(ServerProcess):
    """nats-server on 127.0.0.1 with JetStream stored in the work directory (so streams survive a
    restart), no monitoring port; optional ``user``/``password`` or ``token`` authentication."""

    name = "nats-server"

    def __init__(
        self, workdir: Path, *, user: str | None = None, password: str | None = None, token: str | None = None
    ) -> None:
        super().__init__(workdir)
        self.binary = require_binary("nats-server", "/usr/sbin/nats-server")
        self.auth: list[str] = []
        if user is not None:
            self.auth = ["--user", user, "--pass", password or ""]
        elif token is not None:
            self.auth = ["--auth", token]

    @property
    def url(self) -> str:
        """The server's ``nats://`` URL."""
        return f"nats://{self.host}:{self.port}"

    def command(self) -> list[str]:
        store = self.workdir / "jetstream"
        return [self.binary, "-a", self.host, "-p", str(self.port), "-js", "-sd", str(store), *self.auth]
