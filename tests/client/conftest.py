"""A real broker (SQLite in tmp_path, served over TCP in a thread) and a recording sink for the
management command tests; ``cli`` runs ``cebroker`` in process against it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pipeline.servers import ServedApps

from cebroker.app import create_app
from cebroker.cli import main
from cebroker.settings import Settings


@dataclass
class Ran:
    """The outcome of one command."""

    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


@pytest.fixture
def broker_url(tmp_path: Path) -> Iterator[str]:
    served = ServedApps()
    server, _ = served.start(create_app(Settings(db=tmp_path / "cli.db", webhook_validation=False)))
    yield server.url
    served.close()


@pytest.fixture
def cli(
    broker_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Ran]:
    """Run ``cebroker ARGS`` in process with CEBROKER_URL pointing at the broker."""
    monkeypatch.setenv("CEBROKER_URL", broker_url)
    monkeypatch.delenv("CEBROKER_TOKEN", raising=False)

    def run(*args: str) -> Ran:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run
