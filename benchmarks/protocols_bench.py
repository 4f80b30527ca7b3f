"""Protocol delivery benchmark: deliveries/s into each real local server through the broker's
pipeline, against the protocol's raw client library publishing the same messages in a loop with
the same confirmation (MQTT PUBACK, AMQP accepted, Kafka delivery report, NATS flush) and the
same number in flight, measured in the same run.

Each protocol's server is started on a free loopback port (the test fixtures' server classes).
For the broker figure, N events for one subscription are first written to the durable log, then
the pipeline starts and drains them through the protocol's sender, timed until nothing is
pending. The two are alternated for ``--rounds`` rounds against one server, and the median
ratio is printed with every round's, of the rates and of the CPU per delivery: this process's
CPU time (every thread: the client library's and the pipeline's) and the server's (its process
group, from /proc), per message. On a shared machine the CPU figures hold far better than the
rates. Before each side is measured, the garbage collector gets the policy ``cebroker serve``
gives it after its start-up (:func:`cebroker.pipeline.gcpause.freeze_started`, as in
``bench_delivery.py``): both sides alike. Without it a full collection, which traced everything
the process had loaded, fell inside some of the drains and took 37 to 47 ms of them. Usage:
``python benchmarks/protocols_bench.py
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
from dataclasses import dataclass
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

from cebroker.pipeline.gcpause import freeze_started  # noqa: E402
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


# -- measuring -------------------------------------------------------------------------------------


def _group_cpu(pgrp: int | None) -> float:
    """CPU seconds (user + system) of the live processes of process group ``pgrp``, from /proc."""
    if pgrp is None:
        return 0.0
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if int(fields[2]) == pgrp:  # fields from the state on: state ppid pgrp ... utime stime
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    """One side of one round: seconds of wall clock, of this process's CPU and of the server's."""

    events: int
    wall: float
    cpu: float
    server: float

    @property
    def rate(self) -> float:
        return self.events / self.wall

    def per(self, seconds: float) -> float:
        """Microseconds per delivery."""
        return seconds / self.events * 1e6


class Meter:
    """Times the measured part of one side: wall clock, process CPU, the server's CPU."""

    def __init__(self, server: ServerProcess, events: int) -> None:
        process = getattr(server, "_process", None)
        self._pgrp: int | None = process.pid if process is not None else None
        self._events = events
        self._start = (0.0, 0.0, 0.0)

    def start(self) -> None:
        self._start = (time.perf_counter(), time.process_time(), _group_cpu(self._pgrp))

    def stop(self) -> Sample:
        wall, cpu, server = self._start
        return Sample(
            self._events,
            time.perf_counter() - wall,
            time.process_time() - cpu,
            _group_cpu(self._pgrp) - server,
        )


# -- raw client loops (the baselines) ------------------------------------------------------------


def raw_mqtt(server: MosquittoServer, topic: str, events: int, window: int, meter: Meter) -> Sample:
    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    in_flight = threading.Semaphore(window)
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    client.on_publish = lambda c, u, mid, rc, p: in_flight.release()  # PUBACK
    client.connect(server.host, server.port)
    client.loop_start()
    meter.start()
    for n in range(events):
        message = mqtt_binding.to_binary(event(n))
        properties = Properties(PacketTypes.PUBLISH)
        properties.ContentType = message.content_type
        properties.UserProperty = list(message.user_properties)
        in_flight.acquire()
        client.publish(topic, message.payload, qos=1, properties=properties)
    for _ in range(window):  # wait for the last acknowledgements
        in_flight.acquire()
    sample = meter.stop()
    client.disconnect()
    client.loop_stop()
    return sample


def raw_amqp(server: RabbitMQServer, queue: str, events: int, window: int, meter: Meter) -> Sample:
    from proton import Delivery
    from proton.utils import BlockingConnection

    # ``window`` messages are written, then their outcomes awaited together: the same number in
    # flight as the broker's sender (which writes concurrent sends together and awaits their
    # outcomes together); BlockingSender.send alone would wait for each outcome in turn.
    connection = BlockingConnection(server.url, timeout=10)
    link = connection.create_sender(f"/queue/{queue}").link
    meter.start()
    for first in range(0, events, window):
        sent: list[Delivery] = []
        for n in range(first, min(events, first + window)):
            delivery = link.send(to_proton(amqp_binding.to_binary(event(n))))
            assert isinstance(delivery, Delivery)  # proton returns a byte count only for raw bytes
            sent.append(delivery)

        def settled(sent: list[Delivery] = sent) -> bool:
            return all(d.settled for d in sent)

        connection.wait(settled, timeout=10)
        for delivery in sent:
            delivery.settle()
            if delivery.remote_state != Delivery.ACCEPTED:
                raise RuntimeError(f"AMQP outcome {delivery.remote_state}")
    sample = meter.stop()
    connection.close()
    return sample


def raw_kafka(server: TansuServer, topic: str, events: int, window: int, meter: Meter) -> Sample:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 2})
    done = threading.Semaphore(0)
    meter.start()
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
    sample = meter.stop()
    producer.flush(10)
    return sample


async def raw_nats(server: NatsServer, subject: str, events: int, window: int, meter: Meter) -> Sample:
    import nats

    client = await nats.connect(server.url)
    counter = iter(range(events))

    async def worker() -> None:
        for n in counter:
            message = nats_binding.to_binary(event(n))
            await client.publish(subject, message.payload, headers=dict(message.headers or {}))
            await client.flush(timeout=10)

    meter.start()
    await asyncio.gather(*(worker() for _ in range(window)))
    sample = meter.stop()
    await client.close()
    return sample


# -- the broker ------------------------------------------------------------------------------------


async def broker_drain(db: Path, sub: Subscription, events: int, meter: Meter) -> Sample:
    encoder = json.JSONEncoder(separators=(",", ":"))

    def incoming(n: int) -> Incoming:
        e = event(n)
        return Incoming(encoder.encode(e).encode(), "/bench", str(e["id"]), (sub.id,))

    # The server's CPU is counted from before the log is written (it has no part in that), this
    # process's only while the pipeline drains.
    cpu: list[float] = []
    meter.start()
    rate = await pipeline_drain(db, sub, events, incoming, cpu)
    measured = meter.stop()
    return Sample(events, events / rate, cpu[0], measured.server)


# -- per protocol ----------------------------------------------------------------------------------

Raw = Callable[[Any, str, int, int, Meter], Sample | Awaitable[Sample]]
PROTOCOLS: dict[str, tuple[type[ServerProcess], Raw, Callable[[Any, str], tuple[str, dict[str, Any]]]]] = {
    "MQTT5": (MosquittoServer, raw_mqtt, lambda s, n: (s.url, {"topicname": n, "qos": 1})),
    "AMQP": (RabbitMQServer, raw_amqp, lambda s, n: (s.url, {"address": f"/queue/{n}"})),
    "KAFKA": (TansuServer, raw_kafka, lambda s, n: (s.url, {"topicname": n, "acks": "all"})),
    "NATS": (NatsServer, raw_nats, lambda s, n: (s.url, {"subject": n})),
}


async def _awaited(value: Awaitable[Sample]) -> Sample:
    return await value


def run(protocol: str, events: int, concurrency: int, rounds: int) -> list[tuple[Sample, Sample]]:
    """(raw client, broker) of each round, the two alternated against one server."""
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
                samples: dict[str, Sample] = {}
                for side in ("raw", "broker") if r % 2 == 0 else ("broker", "raw"):
                    freeze_started()
                    meter = Meter(server, events)
                    if side == "raw":
                        measured = raw(server, f"raw-{protocol.lower()}-{r}", events, concurrency, meter)
                        samples[side] = (
                            measured if isinstance(measured, Sample) else asyncio.run(_awaited(measured))
                        )
                    else:
                        samples[side] = asyncio.run(
                            broker_drain(Path(tmp) / f"bench{r}.db", sub, events, meter)
                        )
                results.append((samples["raw"], samples["broker"]))
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
        f" {args.rounds} alternated rounds; the round with the median rate ratio; CPU in µs per"
        " delivery, this process's (client library or pipeline) and the server's; the CPU ratio is"
        " raw CPU / broker CPU, so above 1 means the broker spends less)"
    )
    print(
        f"   {'protocol':8} {'raw client/s':>13} {'broker/s':>10} {'ratio':>6}"
        f" {'raw CPU':>8} {'broker CPU':>10} {'CPU ratio':>9} {'server raw/broker':>18}"
    )
    for protocol in args.protocols.split(","):
        rounds = run(protocol, args.events, args.concurrency, args.rounds)
        ratios = [broker.rate / raw.rate for raw, broker in rounds]
        cpu_ratios = [raw.cpu / broker.cpu for raw, broker in rounds]
        median = statistics.median(ratios)
        raw, broker = min(rounds, key=lambda r: abs(r[1].rate / r[0].rate - median))
        print(
            f"   {protocol:8} {raw.rate:13.0f} {broker.rate:10.0f} {median:6.2f}"
            f" {raw.per(raw.cpu):8.0f} {broker.per(broker.cpu):10.0f} {statistics.median(cpu_ratios):9.2f}"
            f" {raw.per(raw.server):8.0f}/{broker.per(broker.server):<9.0f}"
        )
        print(
            f"   {'':8} (target >= 0.90; rate ratios {', '.join(f'{x:.2f}' for x in ratios)};"
            f" CPU ratios {', '.join(f'{x:.2f}' for x in cpu_ratios)})"
        )
    print(f"load average after: {_load()}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
