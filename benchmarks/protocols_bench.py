"""Protocol delivery benchmark: deliveries/s into each real local server through the broker's
pipeline, against the protocol's raw client library publishing the same messages in a loop with
the same confirmation (MQTT PUBACK, AMQP accepted, Kafka delivery report, NATS flush) and the
same number in flight, measured in the same run.

Each protocol's server is started on a free loopback port (the test fixtures' server classes).
For the broker figure, N events for one subscription are first written to the durable log, then
the pipeline starts and drains them through the protocol's sender, timed until nothing is
pending. The two are alternated for ``--rounds`` rounds against one server, and the median
ratio is printed with every round's. Usage: ``python benchmarks/protocols_bench.py
[--events 3000] [--concurrency 16] [--rounds 3] [--protocols MQTT5,AMQP,KAFKA,NATS]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the real-server classes of the test suite

from ceprotocols.amqp import binding as amqp_binding  # noqa: E402
from ceprotocols.amqp.connection import to_proton  # noqa: E402
from ceprotocols.kafka import binding as kafka_binding  # noqa: E402
from ceprotocols.mqtt import binding as mqtt_binding  # noqa: E402
from ceprotocols.nats import binding as nats_binding  # noqa: E402
from harness import pipeline_drain  # noqa: E402
from servers import MosquittoServer, NatsServer, RabbitMQServer, ServerProcess, TansuServer  # noqa: E402

from cebroker.storage import Incoming  # noqa: E402
from cebroker.subscription import Subscription  # noqa: E402


def event(n: int) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"b-{n}",
        "source": "/bench",
        "type": "com.example.bench",
        "datacontenttype": "application/json",
        "data": {"n": n, "payload": "x" * 100},
    }


# -- raw client loops (the baselines) ------------------------------------------------------------


def raw_mqtt(server: MosquittoServer, topic: str, events: int, window: int) -> float:
    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    in_flight = threading.Semaphore(window)
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    client.on_publish = lambda c, u, mid, rc, p: in_flight.release()  # PUBACK
    client.connect(server.host, server.port)
    client.loop_start()
    started = time.perf_counter()
    for n in range(events):
        message = mqtt_binding.to_binary(event(n))
        properties = Properties(PacketTypes.PUBLISH)
        properties.ContentType = message.content_type
        properties.UserProperty = list(message.user_properties)
        in_flight.acquire()
        client.publish(topic, message.payload, qos=1, properties=properties)
    for _ in range(window):  # wait for the last acknowledgements
        in_flight.acquire()
    rate = events / (time.perf_counter() - started)
    client.disconnect()
    client.loop_stop()
    return rate


def raw_amqp(server: RabbitMQServer, queue: str, events: int, window: int) -> float:
    from proton.utils import BlockingConnection

    connection = BlockingConnection(server.url, timeout=10)
    sender = connection.create_sender(f"/queue/{queue}")
    started = time.perf_counter()
    for n in range(events):
        sender.send(to_proton(amqp_binding.to_binary(event(n))))
    rate = events / (time.perf_counter() - started)
    connection.close()
    return rate


def raw_kafka(server: TansuServer, topic: str, events: int, window: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 2})
    done = threading.Semaphore(0)
    started = time.perf_counter()
    for first in range(0, events, window):
        count = min(events, first + window) - first
        for n in range(first, first + count):
            record = kafka_binding.to_binary(event(n))
            producer.produce(
                topic,
                record.value,
                record.key,
                headers=list(record.headers),
                on_delivery=lambda e, m: done.release(),
            )
        for _ in range(count):
            while not done.acquire(timeout=0.001):
                producer.poll(0.01)
    rate = events / (time.perf_counter() - started)
    producer.flush(10)
    return rate


async def raw_nats(server: NatsServer, subject: str, events: int, window: int) -> float:
    import nats

    client = await nats.connect(server.url)
    counter = iter(range(events))

    async def worker() -> None:
        for n in counter:
            message = nats_binding.to_binary(event(n))
            await client.publish(subject, message.payload, headers=dict(message.headers or {}))
            await client.flush(timeout=10)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(window)))
    rate = events / (time.perf_counter() - started)
    await client.close()
    return rate


# -- the broker ------------------------------------------------------------------------------------


async def broker_drain(db: Path, sub: Subscription, events: int) -> float:
    encoder = json.JSONEncoder(separators=(",", ":"))

    def incoming(n: int) -> Incoming:
        e = event(n)
        return Incoming(encoder.encode(e).encode(), "/bench", str(e["id"]), (sub.id,))

    return await pipeline_drain(db, sub, events, incoming)


# -- per protocol ----------------------------------------------------------------------------------

Raw = Callable[[Any, str, int, int], float | Awaitable[float]]
PROTOCOLS: dict[str, tuple[type[ServerProcess], Raw, Callable[[Any, str], tuple[str, dict[str, Any]]]]] = {
    "MQTT5": (MosquittoServer, raw_mqtt, lambda s, n: (s.url, {"topicname": n, "qos": 1})),
    "AMQP": (RabbitMQServer, raw_amqp, lambda s, n: (s.url, {"address": f"/queue/{n}"})),
    "KAFKA": (TansuServer, raw_kafka, lambda s, n: (s.url, {"topicname": n, "acks": "all"})),
    "NATS": (NatsServer, raw_nats, lambda s, n: (s.url, {"subject": n})),
}


async def _awaited(value: Awaitable[float]) -> float:
    return await value


def run(protocol: str, events: int, concurrency: int, rounds: int) -> list[tuple[float, float]]:
    """(raw client rate, broker rate) of each round, the two alternated against one server."""
    kind, raw, destination = PROTOCOLS[protocol]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        server = kind(Path(tmp) / "server")
        server.start()
        try:
            for r in range(rounds):
                sink, settings = destination(server, f"broker-{protocol.lower()}-{r}")
                sub = Subscription(
                    id="bench",
                    protocol=protocol,
                    sink=sink,
                    protocolsettings=settings,
                    config={"concurrency": str(concurrency)},
                )
                rate = baseline = 0.0
                for side in ("raw", "broker") if r % 2 == 0 else ("broker", "raw"):
                    if side == "raw":
                        measured = raw(server, f"raw-{protocol.lower()}-{r}", events, concurrency)
                        baseline = (
                            measured if isinstance(measured, float) else asyncio.run(_awaited(measured))
                        )
                    else:
                        rate = asyncio.run(broker_drain(Path(tmp) / f"bench{r}.db", sub, events))
                results.append((float(baseline), rate))
        finally:
            closer = getattr(server, "close", server.stop)
            closer()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="raw and broker alternated, per protocol")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    args = parser.parse_args()
    print(f"load average before: {_load()}")
    print(
        f"Protocol deliveries ({args.events} events, {args.concurrency} in flight, binary mode,"
        f" {args.rounds} alternated rounds; the round with the median ratio)"
    )
    print(f"   {'protocol':8} {'raw client/s':>13} {'broker/s':>10} {'ratio':>6}")
    for protocol in args.protocols.split(","):
        rounds = run(protocol, args.events, args.concurrency, args.rounds)
        ratios = [rate / baseline for baseline, rate in rounds]
        median = statistics.median(ratios)
        baseline, rate = min(rounds, key=lambda r: abs(r[1] / r[0] - median))
        print(
            f"   {protocol:8} {baseline:13.0f} {rate:10.0f} {median:6.2f}   (target >= 0.90;"
            f" rounds {', '.join(f'{x:.2f}' for x in ratios)})"
        )
    print(f"load average after: {_load()}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
