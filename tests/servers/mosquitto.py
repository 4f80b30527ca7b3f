"""mosquitto (MQTT 3.1.1 and 5) for tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from servers.base import ServerProcess, free_port, require_binary


class MosquittoServer(ServerProcess):
    """mosquitto with one listener on 127.0.0.1; with ``users`` it requires a username and
    password (a mosquitto password file) instead of allowing anonymous clients; with
    ``persistent`` it saves sessions and queued messages in its directory on shutdown, so they
    survive a restart; with ``tls`` a second listener on ``tls_port`` speaks MQTT over TLS with a
    self-signed certificate for 127.0.0.1 (``certificate``: trust it through ``SSL_CERT_FILE``)."""

    name = "mosquitto"

    def __init__(
        self,
        workdir: Path,
        *,
        users: dict[str, str] | None = None,
        persistent: bool = False,
        tls: bool = False,
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
        self.tls_port: int | None = None
        self.certificate: Path | None = None
        if tls:
            lines += self._tls_listener()
        self.config = self.workdir / "mosquitto.conf"
        self.config.write_text("\n".join(lines) + "\n")

    @property
    def url(self) -> str:
        """The broker's ``mqtt://`` URL."""
        return f"mqtt://{self.host}:{self.port}"

    def _tls_listener(self) -> list[str]:
        self.tls_port = free_port()
        self.certificate, key = self.workdir / "cert.pem", self.workdir / "key.pem"
        tool = require_binary("openssl", "/usr/bin/openssl")
        subprocess.run(
            [tool, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(self.certificate)],
            check=True,
            capture_output=True,
        )  # fmt: skip
        return [f"listener {self.tls_port} 127.0.0.1", f"certfile {self.certificate}", f"keyfile {key}"]

    def command(self) -> list[str]:
        return [self.binary, "-c", str(self.config)]
