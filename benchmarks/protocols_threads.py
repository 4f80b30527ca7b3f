"""Where a protocol delivery's CPU goes, by thread, and this tree against an earlier commit.

The broker's pipeline drains ``--events`` deliveries of one subscription into the protocol's real
server (the drain of ``protocols_bench.py``, without the raw client loop), ``--drains`` times per
process. Each drain prints its rate, the process's CPU per delivery (``time.process_time()``),
the event loop thread's (``time.thread_time()``) and every other thread's (from /proc, in clock
ticks: coarse for a short drain). With ``--base <commit>`` the tree of that commit (a detached git
worktree, imported with this interpreter and libraries, driven by this tree's benchmark code)
and this tree run alternately in separate processes, ``--rounds`` processes each, and the
medians are printed with the ratios this ÷ base: CPU per delivery holds far better than rates on
a shared machine. The load average is printed before and after. Usage: ``python
benchmarks/protocols_threads.py [--protocols KAFKA,AMQP] [--events 6000] [--drains 2]
[--base <commit> --rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import pipeline_drain
from protocols_bench import PROTOCOLS, event

from cebroker.storage import Incoming
from cebroker.subscription import Subscription


async def _drain(db: Path, sub: Subscription, events: int) -> dict[str, Any]:
    encoder = json.JSONEncoder(separators=(",", ":"))

    def incoming(n: int) -> Incoming:
        e = event(n)
        return Incoming(encoder.encode(e).encode(), "/bench", str(e["id"]), (sub.id,))

    cpu: list[float] = []
    threads: dict[str, float] = {}
    rate = await pipeline_drain(db, sub, events, incoming, cpu, threads)
    per = {name: seconds / events * 1e6 for name, seconds in threads.items() if seconds > 0}
    return {"rate": rate, "cpu": cpu[0] / events * 1e6, "threads": per}


def drains(protocol: str, events: int, count: int) -> list[dict[str, Any]]:
    """``count`` drains of ``events`` deliveries into one server of ``protocol``, in this process."""
    kind, _raw, destination = PROTOCOLS[protocol]
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        server = kind(Path(tmp) / "server")
        server.start()
        try:
            for n in range(count):
                sink, settings = destination(server, f"threads-{protocol.lower()}-{n}")
                sub = Subscription(
                    id="bench",
                    protocol=protocol,
                    sink=sink,
                    protocolsettings=settings,
                    config={"concurrency": "16"},
                )
                found.append(asyncio.run(_drain(Path(tmp) / f"drain{n}.db", sub, events)))
        finally:
            getattr(server, "close", server.stop)()
    return found


def _child(tree: Path | None, protocol: str, events: int, count: int) -> list[dict[str, Any]]:
    """The drains of one process running the code of ``tree`` (this tree when None)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = ":".join(str(tree / part) for part in ("src", "filters", "protocols"))
    command = [sys.executable, str(Path(__file__)), "--child", protocol, "--events", str(events)]
    command += ["--drains", str(count)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _line(label: str, drain: dict[str, Any]) -> str:
    threads = ", ".join(
        f"{name} {us:.1f}" for name, us in sorted(drain["threads"].items(), key=lambda i: -i[1])
    )
    return f"   {label:5} {drain['rate']:8.0f}/s  CPU {drain['cpu']:6.1f} µs  ({threads})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--protocols", default="KAFKA,AMQP")
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--drains", type=int, default=2, help="per process")
    parser.add_argument("--base", help="an earlier commit to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="processes per tree, with --base")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        for drain in drains(args.child, args.events, args.drains):
            print(json.dumps(drain))
        return
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"Broker drains ({args.events} deliveries, concurrency 16, binary mode), µs per delivery")
    for protocol in args.protocols.split(","):
        print(f"{protocol}:")
        if args.base is None:
            for drain in drains(protocol, args.events, args.drains):
                print(_line("this", drain))
            continue
        from bench_telemetry import base_tree

        measured: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
        with base_tree(args.base) as tree:
            for r in range(args.rounds):
                for side in ("base", "this") if r % 2 == 0 else ("this", "base"):
                    for drain in _child(tree if side == "base" else None, protocol, args.events, args.drains):
                        measured[side].append(drain)
                        print(_line(side, drain))
        medians = {
            side: (
                statistics.median(d["rate"] for d in found),
                statistics.median(d["cpu"] for d in found),
                statistics.median(d["threads"].get("event loop", 0.0) for d in found),
            )
            for side, found in measured.items()
        }
        (rate_b, cpu_b, loop_b), (rate_t, cpu_t, loop_t) = medians["base"], medians["this"]
        print(
            f"   medians: rate {rate_b:.0f} → {rate_t:.0f}/s ({rate_t / rate_b:.2f}), CPU {cpu_b:.1f} →"
            f" {cpu_t:.1f} µs ({cpu_t / cpu_b:.2f}), event loop {loop_b:.1f} → {loop_t:.1f} µs"
            f" ({loop_t / loop_b:.2f}); this ÷ base"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
