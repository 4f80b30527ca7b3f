"""The receivers' shared hand-over rules (ceprotocols.receiver), in memory: an accepted batch
is one call; a refused batch is retried event by event so only the invalid events are dropped;
transient failures repeat the same events; undecodable messages never reach the callback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from ceprotocols import receiver
from ceprotocols.errors import BindingError
from ceprotocols.receiver import Decoded, Handover, ReceiverStats, decode, trace_of
from ceprotocols.tracecontext import TraceContext


def ev(n: int, type_: str = "ok") -> dict[str, Any]:
    return {"specversion": "1.0", "id": str(n), "source": "/s", "type": type_}


class Callback:
    def __init__(self, transient: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.traces: list[list[TraceContext | None]] = []
        self.stored: list[str] = []
        self.transient = transient

    async def __call__(self, events: list[dict[str, Any]], traces: Sequence[TraceContext | None], /) -> None:
        self.calls.append([e["id"] for e in events])
        self.traces.append(list(traces))
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


async def test_each_events_trace_context_goes_with_it() -> None:
    """The context a message carried reaches the callback beside its event, also when a refused
    batch is handed over again event by event."""
    trace = TraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v")
    callback = Callback()
    items = [Decoded(ev(1), trace=trace), Decoded(ev(2, "bad")), Decoded(ev(3))]
    await Handover("src", ReceiverStats())(items, callback)
    assert callback.traces == [[trace, None, None], [trace], [None], [None]]


def test_a_messages_trace_context_is_read_from_its_own_fields() -> None:
    def unreadable(message: bytes) -> TraceContext | None:
        raise ValueError("no headers")

    headers: list[tuple[str, str | bytes | None]] = [
        ("ce_traceparent", b"00-other"),
        ("TraceParent", b"00-a-b-01"),
        ("tracestate", "k=v"),
    ]
    assert trace_of(headers) == TraceContext("00-a-b-01", "k=v")
    assert trace_of([("tracestate", "k=v")]) is None
    assert decode(lambda m: ev(1), b"x", trace=lambda m: trace_of(headers)).trace == TraceContext(
        "00-a-b-01", "k=v"
    )
    # A context that cannot be read is none: it never costs the message its outcome.
    assert decode(lambda m: ev(1), b"x", trace=unreadable) == Decoded(ev(1))
