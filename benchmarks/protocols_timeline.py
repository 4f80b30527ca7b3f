"""A NATS drain's timeline: where the broker's pipeline waits while it delivers.

The pipeline drains ``--events`` deliveries of one subscription (concurrency 16, binary mode) into
a local nats-server, ``--drains`` times, as ``protocols_bench.py`` does, with these moments
recorded (wall clock, nanoseconds): each publish, each PING written and PONG read, each flush
round and its waiters, each delivery's outcome, each completion write and read of the log (start
and end), each lane worker started, the pipeline's start, and every wait of the event loop's
selector longer than 20 µs (the event loop idle, or waiting for the interpreter lock on its way
out of the selector). Each drain prints its rate and CPU per delivery, the waits by the moments
before and after them, the flush rounds' round trips, the log's reads and writes, its start (to
the first publish) and its end (from the last outcome). The methods are wrapped in this process
only; the code measured is this tree's. The load average is printed before and after. Usage:
``python benchmarks/protocols_timeline.py [--events 6000] [--drains 2]`` (docs/performance.md,
"Protocol deliveries, the fourth round").
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the real-server classes of the test suite

import nats.aio.client as nats_client  # noqa: E402
from ceprotocols.nats import flusher  # noqa: E402
from harness import pipeline_drain  # noqa: E402
from protocols_bench import event  # noqa: E402
from servers import NatsServer  # noqa: E402

from cebroker.pipeline import component  # noqa: E402
from cebroker.pipeline.dispatch import completions, lanes, loader, outcomes  # noqa: E402
from cebroker.storage import Incoming  # noqa: E402
from cebroker.subscription import Subscription  # noqa: E402

#: (when in ns, what, a number: waiters, outcomes, or a wait's length in ns)
Moment = tuple[int, str, int]
#: A selector wait shorter than this is not recorded.
SHORTEST_WAIT = 20_000


class Timeline:
    """The moments of one drain, recorded by the wrapped methods."""

    def __init__(self) -> None:
        self.moments: list[Moment] = []

    def mark(self, what: str, number: int = 0) -> None:
        self.moments.append((time.perf_counter_ns(), what, number))

    def wrap(self, owner: type, name: str, what: str, number: Callable[..., int] | None = None) -> None:
        """Record a moment when ``owner.name`` is called (and, for a coroutine function, when it
        returns: ``what`` with ``<`` and ``>``)."""
        original = getattr(owner, name)
        if asyncio.iscoroutinefunction(original):

            async def timed(*args: Any, **kwargs: Any) -> Any:
                self.mark(what + "<", number(*args) if number else 0)
                try:
                    return await original(*args, **kwargs)
                finally:
                    self.mark(what + ">")

            setattr(owner, name, timed)
        else:

            def marked(*args: Any, **kwargs: Any) -> Any:
                self.mark(what, number(*args) if number else 0)
                return original(*args, **kwargs)

            setattr(owner, name, marked)

    def watch_selector(self, loop: asyncio.AbstractEventLoop) -> None:
        """Record the selector's waits longer than :data:`SHORTEST_WAIT`."""
        selector = vars(loop)["_selector"]
        select = selector.select

        def timed(timeout: float | None = None) -> Any:
            started = time.perf_counter_ns()
            ready = select(timeout)
            waited = time.perf_counter_ns() - started
            if waited > SHORTEST_WAIT:
                self.moments.append((started, "wait", waited))
            return ready

        selector.select = timed


def instrument(timeline: Timeline) -> None:
    timeline.wrap(nats_client.Client, "publish", "publish")
    timeline.wrap(nats_client.Client, "_send_ping", "ping")
    timeline.wrap(nats_client.Client, "_process_pong", "pong")
    timeline.wrap(flusher.Flusher, "_round", "round", lambda _self, waiters: len(waiters))
    timeline.wrap(outcomes.Settler, "confirmed", "outcome")
    timeline.wrap(completions.Completions, "flush", "write", lambda self: len(self._delivered))
    timeline.wrap(loader.Loader, "_load", "read")
    timeline.wrap(lanes.Lanes, "_work", "worker")
    timeline.wrap(component.PipelineComponent, "start", "start")


def _quantiles(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    return (
        f"p10 {ordered[len(ordered) // 10]:.0f}, p50 {statistics.median(ordered):.0f},"
        f" p90 {ordered[len(ordered) * 9 // 10]:.0f}"
    )


def report(moments: list[Moment], events: int, rate: float) -> None:
    """Print what the moments of one drain say (see the module docstring)."""
    moments.sort()
    started = next(m[0] for m in moments if m[1] == "start<")
    first = next(m[0] for m in moments if m[1] == "publish<")
    last = max(m[0] for m in moments if m[1] == "outcome")
    ended = started + int(events / rate * 1e9)
    span = [m for m in moments if first <= m[0] <= last]
    waits = [m for m in span if m[1] == "wait"]
    waited = sum(m[2] for m in waits)
    print(
        f"   span (first publish to last outcome) {(last - first) / 1e6:.1f} ms, the event loop waited"
        f" {waited / 1e6:.1f} ms ({waited / (last - first):.0%}) in {len(waits)} waits"
    )
    others = [m for m in moments if m[1] != "wait"]
    stamps = [m[0] for m in others]
    pairs: Counter[str] = Counter()
    for when, _, length in waits:
        before = bisect.bisect_left(stamps, when) - 1
        after = bisect.bisect_left(stamps, when + length)
        previous = others[before][1] if before >= 0 else "-"
        following = others[after][1] if after < len(others) else "-"
        pairs[f"{previous} → {following}"] += length
    top = ", ".join(f"{label} {length / 1e6:.1f}" for label, length in pairs.most_common(8))
    print(f"   waits by the moments before and after them (ms): {top}")
    pings = [m[0] for m in span if m[1] == "ping<"]
    pongs = [m[0] for m in span if m[1] == "pong<"]
    rounds = [m[2] for m in span if m[1] == "round<"]
    next_ping = []
    for pong in pongs:
        i = bisect.bisect_right(pings, pong)
        if i < len(pings):
            next_ping.append((pings[i] - pong) / 1e3)
    print(
        f"   flush rounds {len(rounds)}, waiters each {_quantiles([float(r) for r in rounds])};"
        f" PING to PONG µs {_quantiles([(b - a) / 1e3 for a, b in zip(pings, pongs, strict=False)])};"
        f" PONG to the next PING µs {_quantiles(next_ping)}"
    )
    for what in ("write", "read"):
        begins = [m for m in span if m[1] == what + "<"]
        ends = [m[0] for m in span if m[1] == what + ">"]
        lengths = [(end - begin[0]) / 1e3 for begin, end in zip(begins, ends, strict=False)]
        sizes = f", outcomes each {_quantiles([float(b[2]) for b in begins])}" if what == "write" else ""
        print(f"   {what}s {len(begins)}, µs {_quantiles(lengths)}{sizes}")
    workers = sum(1 for m in moments if m[1] == "worker<")
    writes_after = [m[0] for m in moments if m[1] == "write>" and m[0] >= last]
    last_write = f"{(min(writes_after) - last) / 1e6:.2f} ms" if writes_after else "none"
    print(
        f"   lane workers started {workers}; start to first publish {(first - started) / 1e6:.2f} ms;"
        f" last outcome to its write's end {last_write}, to the drain's end {(ended - last) / 1e6:.2f} ms"
    )


async def drains(events: int, count: int) -> None:
    timeline = Timeline()
    instrument(timeline)
    timeline.watch_selector(asyncio.get_running_loop())
    encoder = json.JSONEncoder(separators=(",", ":"))
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(Path(tmp) / "server")
        server.start()
        try:
            for n in range(count):
                sub = Subscription(
                    id="bench",
                    protocol="NATS",
                    sink=server.url,
                    protocolsettings={"subject": f"timeline-{n}"},
                    config={"concurrency": "16"},
                )

                def incoming(i: int, sub: Subscription = sub) -> Incoming:
                    e = event(i)
                    return Incoming(encoder.encode(e).encode(), "/bench", str(e["id"]), (sub.id,))

                timeline.moments.clear()
                cpu: list[float] = []
                rate = await pipeline_drain(Path(tmp) / f"drain{n}.db", sub, events, incoming, cpu)
                print(f"drain {n}: {rate:.0f}/s, CPU {cpu[0] / events * 1e6:.1f} µs per delivery")
                report(list(timeline.moments), events, rate)
        finally:
            getattr(server, "close", server.stop)()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--drains", type=int, default=2)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    asyncio.run(drains(args.events, args.drains))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
