"""Fixtures: a recording HTTP sink and a running broker, both real servers on free ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cebroker.app import build_components, create_app
from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.settings import Settings
from pipeline.helpers import Broker
from pipeline.servers import ServedApps, Sink, served_sink


@pytest.fixture
def sink() -> Iterator[Sink]:
    with served_sink() as recorder:
        yield recorder


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    served = ServedApps()

    def make(clock: Clock = SYSTEM_CLOCK, **overrides: Any) -> Broker:
        """A broker with ``Settings`` overrides; its pipeline schedules on ``clock``."""
        defaults: dict[str, Any] = {"db": tmp_path / "broker.db", "webhook_validation": False}
        settings = Settings(**{**defaults, **overrides})
        app = create_app(settings, build_components(settings, clock=clock))
        server, client = served.start(app)
        return Broker(server, client, app)

    yield make
    served.close()


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    return make_broker()
