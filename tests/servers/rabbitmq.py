"""RabbitMQ with the AMQP 1.0 plugin, isolated in a temporary directory, for tests.

Everything that would otherwise be shared on the machine is private: node name, data and log
directories, config files, the Erlang distribution port and the epmd port (an epmd of our own,
started first, so concurrent instances never meet and stopping never touches another's epmd).
"""

from __future__ import annotations

import contextlib
import glob
import os
import subprocess
from pathlib import Path

from servers.base import ServerError, ServerProcess, die_with_parent, free_port, require_binary


def _rabbitmq_home() -> Path:
    homes = sorted(glob.glob("/usr/lib/rabbitmq/lib/rabbitmq_server-*/sbin/rabbitmq-server"))
    if not homes:
        require_binary("rabbitmq-server", "/usr/sbin/rabbitmq-server")
        raise ServerError("rabbitmq-server found but not its RABBITMQ_HOME")
    return Path(homes[-1]).parent.parent


class RabbitMQServer(ServerProcess):
    """RabbitMQ on 127.0.0.1 with ``rabbitmq_amqp1_0``; the ``guest``/``guest`` user may connect
    from loopback (SASL PLAIN) and anonymous AMQP 1.0 clients map to it."""

    name = "rabbitmq"
    ready_timeout = 90.0

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.rabbitmq_home = _rabbitmq_home()
        self.epmd_binary = require_binary("epmd", "/usr/bin/epmd")
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.node = f"rabbit{self.port}@localhost"
        self._epmd: subprocess.Popen[bytes] | None = None
        (self.workdir / "home").mkdir(exist_ok=True)
        (self.workdir / "rabbitmq.conf").write_text("loopback_users = none\n")
        (self.workdir / "rabbitmq-env.conf").write_text("")
        self._plugins_enabled = False

    @property
    def url(self) -> str:
        """The broker's ``amqp://`` URL."""
        return f"amqp://{self.host}:{self.port}"

    def environment(self) -> dict[str, str]:
        w = self.workdir
        env = dict(os.environ)
        env.update(
            RABBITMQ_HOME=str(self.rabbitmq_home),
            HOME=str(w / "home"),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS=self.host,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            ERL_EPMD_ADDRESS=self.host,
            ERL_EPMD_PORT=str(self.epmd_port),
            RABBITMQ_MNESIA_BASE=str(w / "mnesia"),
            RABBITMQ_LOG_BASE=str(w / "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(w / "enabled_plugins"),
            RABBITMQ_CONFIG_FILE=str(w / "rabbitmq"),
            RABBITMQ_CONF_ENV_FILE=str(w / "rabbitmq-env.conf"),
        )
        return env

    def command(self) -> list[str]:
        return [str(self.rabbitmq_home / "sbin" / "rabbitmq-server")]

    def start(self) -> None:
        if self.running:
            return
        if self._epmd is None or self._epmd.poll() is not None:
            self._epmd = subprocess.Popen(
                [self.epmd_binary, "-address", self.host, "-port", str(self.epmd_port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        if not self._plugins_enabled:
            subprocess.run(
                [
                    str(self.rabbitmq_home / "sbin" / "rabbitmq-plugins"),
                    "enable",
                    "--offline",
                    "rabbitmq_amqp1_0",
                ],
                env=self.environment(),
                check=True,
                capture_output=True,
                timeout=60,
            )
            self._plugins_enabled = True
        super().start()

    def close(self) -> None:
        """Stop the node and the epmd this server started."""
        self.stop()
        epmd, self._epmd = self._epmd, None
        if epmd is not None and epmd.poll() is None:
            epmd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                epmd.wait(timeout=5)
            if epmd.poll() is None:
                epmd.kill()
                epmd.wait()

    def __exit__(self, *exc: object) -> None:
        self.close()
