"""Fixtures for the protocol tests: the server of each protocol case, started on demand."""

from __future__ import annotations

from typing import Any

import pytest
from harness import CASES, ProtocolCase

MARKS = {"MQTT3": "mqtt", "MQTT5": "mqtt", "AMQP": "amqp", "KAFKA": "kafka", "NATS": "nats"}


def protocol_params(*, modes: bool = False) -> list[Any]:
    """pytest params over every protocol case (and content mode), marked with the server they need."""
    params = []
    for name, case in CASES.items():
        mark = getattr(pytest.mark, MARKS[name])
        if modes:
            params += [pytest.param(case, mode, id=f"{name}-{mode}", marks=mark) for mode in case.modes]
        else:
            params.append(pytest.param(case, id=name, marks=mark))
    return params


@pytest.fixture
def server_of(request: pytest.FixtureRequest) -> Any:
    """``server_of(case)``: the shared server for a protocol case (started on first use)."""

    def get(case: ProtocolCase) -> Any:
        return request.getfixturevalue(case.fixture)

    return get
