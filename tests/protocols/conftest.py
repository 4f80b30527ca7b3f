"""Fixtures for the protocol tests: the server of each protocol case, started on demand."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.sinks import Sink, served_sink

from protocols.harness import ProtocolCase


@pytest.fixture
def server_of(request: pytest.FixtureRequest) -> Any:
    """``server_of(case)``: the shared server for a protocol case (started on first use)."""

    def get(case: ProtocolCase) -> Any:
        return request.getfixturevalue(case.fixture)

    return get


@pytest.fixture(scope="session")
def http_sink() -> Iterator[Sink]:
    """A shared recording HTTP sink (grants the webhook handshake)."""
    with served_sink() as sink:
        yield sink
