"""A minimal counting HTTP sink for the benchmarks: answers every POST with 204, counts the
events (one per request, or the length of an ``application/cloudevents-batch+json`` array) and
the requests, and, when an event carries the ``benchsent`` extension (ns since the epoch, as
``ce-benchsent`` or in a structured body), records the ingress-to-sink latency. ``GET /count``
returns JSON figures (counts, latency quantiles, arrival times of the first and the last
delivery); ``GET /reset`` clears them. ``GET /down`` makes it answer every POST with 503 (still
counted: an attempt), ``GET /up`` with 204 again. A POST to a path under ``/slow/`` is answered
after 200 ms, and the arrival times of every event under ``/track/`` are kept by its ``ce-id``
(``GET /arrivals`` returns them). A POST to a path under ``/reply/`` is answered 200 with a small
binary-mode CloudEvent (id ``r-<the event's ce-id>``, type ``com.example.benchreply``).
Usage: ``python benchmarks/sink.py PORT``."""

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
    down = False
    #: Arrival times (seconds since the epoch) of the first and the last delivery.
    first = 0.0
    last = 0.0
    #: ce-id -> arrival times of its deliveries, for paths under /track/
    arrivals: dict[str, list[float]] = {}


def _figures() -> bytes:
    latencies = sorted(State.latencies)

    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] if latencies else -1.0

    figures: dict[str, float] = {"count": State.count, "requests": State.requests}
    figures.update(p50=q(0.5), p90=q(0.9), p99=q(0.99), max=q(1.0))
    figures.update(first=State.first, last=State.last)
    return json.dumps(figures).encode()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            sent = None
            event_id = None
            batch = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                lname = name.strip().lower()
                if lname == b"content-length":
                    length = int(value)
                elif lname == b"ce-benchsent":
                    sent = int(value)
                elif lname == b"ce-id":
                    event_id = value.strip().decode()
                elif lname == b"content-type":
                    batch = value.strip().startswith(b"application/cloudevents-batch+json")
            body = await reader.readexactly(length) if length else b""
            if head.startswith(b"GET /count"):
                body = _figures()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body)
                )
            elif head.startswith(b"GET /arrivals"):
                body = json.dumps(State.arrivals).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            elif head.startswith(b"GET /reset"):
                State.count = 0
                State.requests = 0
                State.latencies = []
                State.first = State.last = 0.0
                State.arrivals = {}
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            elif head.startswith((b"GET /down", b"GET /up")):
                State.down = head.startswith(b"GET /down")
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            elif State.down:
                State.count += 1
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            else:
                State.requests += 1
                State.count += len(json.loads(body)) if batch else 1
                State.last = time.time()
                if State.first == 0.0:
                    State.first = State.last
                if sent is not None:
                    State.latencies.append((time.time_ns() - sent) / 1e9)
                target = head.split(b" ", 2)[1]
                if event_id is not None and b"/track/" in target:
                    State.arrivals.setdefault(event_id, []).append(State.last)
                if b"/slow/" in target:
                    await asyncio.sleep(0.2)
                if b"/reply/" in target and event_id is not None:
                    answer = b'{"ok":true}'
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nce-specversion: 1.0\r\nce-id: r-%s\r\nce-source: /benchsink\r\n"
                        b"ce-type: com.example.benchreply\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (event_id.encode(), len(answer), answer)
                    )
                else:
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
