"""A real broker (SQLite in tmp_path, served over TCP in a thread) and a recording sink for the
management command tests; ``cli`` runs ``cebroker`` in process against it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.broker import Broker

from cebroker.cli import main


@dataclass
class Ran:
    """The outcome of one command."""

    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


@pytest.fixture
def broker_url(tmp_path: Path, make_broker: Callable[..., Broker]) -> str:
    return make_broker(db=tmp_path / "cli.db").url


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
