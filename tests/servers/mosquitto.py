"""mosquitto (MQTT 3.1.1 and 5) for tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from servers.base import ServerProcess, require_binary


class MosquittoServer(ServerProcess):
    """mosquitto with one listener on 127.0.0.1; with ``users`` it requires a username and
    password (a mosquitto password file) instead of allowing anonymous clients; with
    ``persistent`` it saves sessions and queued messages in its directory on shutdown, so they
    survive a restart."""

    name = "mosquitto"

    def __init__(
        self, workdir: Path, *, users: dict[str, str] | None = None, persistent: bool = False
    ) -> None:
        super().__init__(workdir)
        self.binary = require_binary("mosquitto", "/usr/sbin/mosquitto")
        self.users = dict(users or {})
        # ``user root`` stops mosquitto (started as root) from switching to its own user, who could
        # not read the private temporary directory; it is ignored when not started as root.
        lines = [f"listener {self.port} 127.0.0.1", "log_dest stdout", "user root"]
        if persistent:
            lines += ["persistence true", f"persistence_location {self.workdir}/"]
        else:
            lines.append("persistence false")
        if self.users:
            passwd = self.workdir / "passwd"
            tool = require_binary("mosquitto_passwd", "/usr/bin/mosquitto_passwd")
            for user, password in self.users.items():
                create = ["-c"] if not passwd.exists() else []
                subprocess.run(
                    [tool, *create, "-b", str(passwd), user, password], check=True, capture_output=True
                )
            lines += ["allow_anonymous false", f"password_file {passwd}"]
        else:
            lines.append("allow_anonymous true")
        self.config = self.workdir / "mosquitto.conf"
        self.config.write_text("\n".join(lines) + "\n")

    @property
    def url(self) -> str:
        """The broker's ``mqtt://`` URL."""
        return f"mqtt://{self.host}:{self.port}"

    def command(self) -> list[str]:
        return [self.binary, "-c", str(self.config)]
