"""A minimal counting HTTP sink for the benchmarks: answers every POST with 204, counts the
events (one per request, or the length of an ``application/cloudevents-batch+json`` array) and
the requests, and, when an event carries the ``benchsent`` extension (ns since the epoch, as
``ce-benchsent`` or in a structured body), records the ingress-to-sink latency. ``GET /count``
returns JSON figures; ``GET /reset`` clears them. Usage: ``python benchmarks/sink.py PORT``."""

from __future__ import annotations

import asyncio
import json
import sys
import time


class State:
    """What the sink has seen since start or the last reset."""

    count = 0
    requests = 0
    latencies: list[float] = []


def _figures() -> bytes:
    latencies = sorted(State.latencies)

    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] if latencies else -1.0

    figures = {"count": State.count, "requests": State.requests, "p50": q(0.5), "p99": q(0.99), "max": q(1.0)}
    return json.dumps(figures).encode()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            sent = None
            batch = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                lname = name.strip().lower()
                if lname == b"content-length":
                    length = int(value)
                elif lname == b"ce-benchsent":
                    sent = int(value)
                elif lname == b"content-type":
                    batch = value.strip().startswith(b"application/cloudevents-batch+json")
            body = await reader.readexactly(length) if length else b""
            if head.startswith(b"GET /count"):
                body = _figures()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body)
                )
            elif head.startswith(b"GET /reset"):
                State.count = 0
                State.requests = 0
                State.latencies = []
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            else:
                State.requests += 1
                State.count += len(json.loads(body)) if batch else 1
                if sent is not None:
                    State.latencies.append((time.time_ns() - sent) / 1e9)
                writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
