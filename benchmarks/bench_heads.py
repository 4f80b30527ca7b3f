"""What the limits on request heads cost: the bare endpoint of ``bare_app.py`` served by
uvicorn's own protocol and by the limited one ``cebroker serve`` uses (``cebroker.web.heads``),
side by side, for both parsers (httptools and h11), loaded in turn round after round with small
``POST /events`` requests carrying a dozen headers. Prints requests/s of each, the ratio limited /
plain per parser (the median round) and the load average before and after (the machine may be
shared: compare the ratio, not the figures).

Usage: ``python benchmarks/bench_heads.py [--rounds 3] [--seconds 3] [--concurrency 16]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections.abc import Callable

from harness import Child, free_port, load, request_bytes

#: Serves ``bare_app`` with the given parser, plain or limited (run as a child process).
SERVE = """
import sys
import uvicorn
sys.path.insert(0, "benchmarks")
from bare_app import app
from cebroker.web.heads import HeadLimits, LimitedConfig, protocol_class
port, http, limited = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "limited"
options = dict(host="127.0.0.1", port=port, log_level="warning", access_log=False, loop="uvloop")
if limited:
    config = LimitedConfig(app, head_limits=HeadLimits(), http=protocol_class(http), **options)
else:
    config = uvicorn.Config(app, http=http, **options)
uvicorn.Server(config).run()
"""

HEADERS = {f"X-Header-{n}": "v" * 40 for n in range(10)} | {"Content-Type": "application/json"}


def _maker(port: int) -> Callable[[int], bytes]:
    request = request_bytes("/events", b'{"a":1}', HEADERS, port)
    return lambda n: request


def _serve(http: str, kind: str) -> Child:
    port = free_port()
    return Child(["-c", SERVE, str(port), http, kind], port, "/readyz")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for http in ("httptools", "h11"):
        servers = {kind: _serve(http, kind) for kind in ("plain", "limited")}
        try:
            rates: dict[str, list[float]] = {kind: [] for kind in servers}
            for _ in range(args.rounds):
                for kind, server in servers.items():
                    result = asyncio.run(
                        load(
                            server.port,
                            _maker(server.port),
                            concurrency=args.concurrency,
                            seconds=args.seconds,
                        )
                    )
                    assert set(result.statuses) == {202}, result.statuses
                    rates[kind].append(result.rate)
            plain, limited = (statistics.median(rates[kind]) for kind in ("plain", "limited"))
            print(
                f"{http}: plain {plain:,.0f} req/s, limited {limited:,.0f} req/s, "
                f"ratio {limited / plain:.3f} (rounds: {[round(r) for r in rates['limited']]} vs "
                f"{[round(r) for r in rates['plain']]})"
            )
        finally:
            for server in servers.values():
                server.stop()
    print(f"load average after: {os.getloadavg()[0]:.2f} (a shared machine: other work runs too)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
