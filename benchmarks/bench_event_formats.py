"""Event validation by data format: events/s with ``--event-validation enforce`` against the
same events with validation off, in one run, for JSON Schema, Avro and Protobuf data.

Two ``cebroker serve`` processes hold the same registry (one schema and one message definition
per format); one checks events (``enforce``), the other does not (``off``). Each round loads
each broker in turn with single events (Avro and Protobuf in HTTP binary mode, their binary
encodings as the body; JSON Schema as structured JSON), round after round, and prints events/s
and the ratio enforce / off per format, and the cost of checking one event in process (the
registry's validator alone, no HTTP), with the load average before and after (the machine may be
shared: compare the ratios, not the absolute figures, across runs).

Usage: ``python benchmarks/bench_event_formats.py [--rounds 2] [--seconds 3] [--concurrency 16]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import httpx
from harness import Child, broker, load, request_bytes

AVRO = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "total", "type": "int"},
        {"name": "items", "type": {"type": "array", "items": "string"}},
    ],
}
PROTO = """syntax = "proto3";
package shop;
message Order {
  string id = 1;
  int32 total = 2;
  repeated string items = 3;
}
"""
JSON_SCHEMA = {
    "type": "object",
    "required": ["id", "total"],
    "properties": {
        "id": {"type": "string"},
        "total": {"type": "integer", "minimum": 0},
        "items": {"type": "array", "items": {"type": "string"}},
    },
}
DATUM = {"id": "o-1", "total": 3, "items": ["a", "b", "c"]}
#: shop.Order {id: "o-1", total: 3, items: ["a", "b", "c"]}, binary encoding
PROTO_BYTES = b"\x0a\x03o-1\x10\x03\x1a\x01a\x1a\x01b\x1a\x01c"
FORMATS = {
    "jsonschema": ("JsonSchema/draft-07", json.dumps(JSON_SCHEMA).encode(), "application/json"),
    "avro": ("Avro/1.9", json.dumps(AVRO).encode(), "application/json"),
    "protobuf": ("Protobuf/3", PROTO.encode(), "text/plain"),
}


def _avro_bytes() -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), DATUM)
    return out.getvalue()


def _define(url: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as http:
        for name, (fmt, doc, ctype) in FORMATS.items():
            r = http.put(
                f"/schemagroups/bench/schemas/{name}",
                content=doc,
                headers={"content-type": ctype, "xRegistry-format": fmt},
            )
            assert r.status_code == 201, r.text
            message = {
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {"type": {"value": f"bench.{name}"}},
                "dataschemaformat": fmt,
                "dataschemauri": f"/schemagroups/bench/schemas/{name}",
            }
            assert http.put(f"/messagegroups/bench/messages/bench.{name}", json=message).status_code == 201


def _request(name: str, port: int, run: str) -> Callable[[int], bytes]:
    """Single events of ``name``'s type (each with an id of its own)."""
    if name == "jsonschema":

        def structured(n: int) -> bytes:
            event = {"specversion": "1.0", "id": f"{run}-{n}", "source": "/bench", "type": "bench.jsonschema"}
            body = json.dumps({**event, "datacontenttype": "application/json", "data": DATUM}).encode()
            return request_bytes("/events", body, {"Content-Type": "application/cloudevents+json"}, port)

        return structured
    body, ctype = (
        (_avro_bytes(), "application/avro") if name == "avro" else (PROTO_BYTES, "application/protobuf")
    )

    def binary(n: int) -> bytes:
        headers = {
            "Content-Type": ctype,
            "ce-specversion": "1.0",
            "ce-id": f"{run}-{n}",
            "ce-source": "/bench",
            "ce-type": f"bench.{name}",
        }
        return request_bytes("/events", body, headers, port)

    return binary


def _in_process() -> dict[str, float]:
    """Microseconds per event checked by the registry's validator (no HTTP), per format."""
    from cebroker.registry.datachecks import CompiledSchemas, check_data
    from cebroker.registry.formats import parse_format
    from cebroker.registry.formats.catalog import Formats

    compiled = CompiledSchemas(Formats())
    out: dict[str, float] = {}
    events: dict[str, dict[str, Any]] = {
        "avro": {
            "data_base64": base64.b64encode(_avro_bytes()).decode(),
            "datacontenttype": "application/avro",
        },
        "protobuf": {
            "data_base64": base64.b64encode(PROTO_BYTES).decode(),
            "datacontenttype": "application/protobuf",
        },
    }
    for name, event in events.items():
        fmt, doc, _ = FORMATS[name]
        name_ = parse_format(fmt)
        assert name_ is not None
        checker = compiled.checker(name_, doc, "shop.Order" if name == "protobuf" else "", name)
        assert checker is not None
        assert check_data(checker, event) == []
        n = 20000
        started = time.perf_counter()
        for _ in range(n):
            check_data(checker, event)
        out[name] = (time.perf_counter() - started) / n * 1e6
    return out


async def _rate(child: Child, make: Callable[[int], bytes], concurrency: int, seconds: float) -> float:
    result = await load(child.port, make, concurrency=concurrency, seconds=seconds)
    bad = {s: c for s, c in result.statuses.items() if s != 202}
    assert not bad, f"statuses other than 202: {bad}"
    return result.rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (the machine may be shared)")
    for name, cost in _in_process().items():
        print(f"in process, one {name} event's data checked: {cost:.1f} us")
    rates: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {
            mode: broker(Path(tmp) / f"{mode}.db", webhook_validation="off", event_validation=mode)
            for mode in ("enforce", "off")
        }
        try:
            for server in servers.values():
                _define(server.url)
            for round_ in range(args.rounds):
                for name in FORMATS:
                    for mode, server in servers.items():
                        make = _request(name, server.port, f"r{round_}-{mode}-{name}")
                        rate = asyncio.run(_rate(server, make, args.concurrency, args.seconds))
                        rates.setdefault((name, mode), []).append(rate)
        finally:
            for server in servers.values():
                server.stop()
    for name in FORMATS:
        enforce = statistics.median(rates[(name, "enforce")])
        off = statistics.median(rates[(name, "off")])
        print(
            f"{name}: enforce {enforce:,.0f} events/s vs off {off:,.0f} events/s: ratio {enforce / off:.2f}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
