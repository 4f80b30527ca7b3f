"""The receivers' shared hand-over rules (ceprotocols.receiver), in memory: an accepted batch
is one call; a refused batch is retried event by event so only the invalid events are dropped;
transient failures repeat the same events; undecodable messages never reach the callback."""

from __future__ import annotations

from typing import Any

import pytest
from ceprotocols import receiver
from ceprotocols.errors import BindingError
from ceprotocols.receiver import Decoded, Handover, ReceiverStats, decode


def ev(n: int, type_: str = "ok") -> dict[str, Any]:
    return {"specversion": "1.0", "id": str(n), "source": "/s", "type": type_}


class Callback:
    def __init__(self, transient: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.stored: list[str] = []
        self.transient = transient

    async def __call__(self, events: list[dict[str, Any]]) -> None:
        self.calls.append([e["id"] for e in events])
        if self.transient:
            self.transient -= 1
            raise OSError("disk busy")
        if any(e["type"] == "bad" for e in events):
            raise BindingError("type bad is refused")
        self.stored += [e["id"] for e in events]


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(receiver, "RETRY_PAUSE", 0)


async def test_accepted_batch_is_one_call() -> None:
    stats = ReceiverStats()
    callback = Callback()
    outcome = await Handover("src", stats)([Decoded(ev(1)), Decoded(ev(2))], callback)
    assert outcome == [None, None]
    assert callback.calls == [["1", "2"]]
    assert (stats.received, stats.accepted, stats.invalid) == (2, 2, 0)


async def test_refused_batch_isolates_the_invalid_event() -> None:
    stats = ReceiverStats()
    callback = Callback()
    outcome = await Handover("src", stats)([Decoded(ev(1)), Decoded(ev(2, "bad")), Decoded(ev(3))], callback)
    assert outcome == [None, "type bad is refused", None]
    assert callback.stored == ["1", "3"]
    assert (stats.accepted, stats.invalid) == (2, 1)


async def test_transient_failure_repeats_the_same_events() -> None:
    stats = ReceiverStats()
    callback = Callback(transient=3)
    assert await Handover("src", stats)([Decoded(ev(1))], callback) == [None]
    assert callback.calls == [["1"]] * 4
    assert stats.retries == 3


async def test_undecodable_message_never_reaches_the_callback() -> None:
    def broken(message: bytes) -> dict[str, Any]:
        raise BindingError(f"not JSON: {message!r}")

    stats = ReceiverStats()
    callback = Callback()
    items = [decode(broken, b"x"), Decoded(ev(2))]
    outcome = await Handover("src", stats)(items, callback)
    assert outcome[0] == "not JSON: b'x'"
    assert outcome[1] is None
    assert callback.calls == [["2"]]
    assert stats.invalid == 1
