"""Registry benchmark: import, export and event validation, with a baseline from the same run.

Run ``python benchmarks/bench_registry.py SAMPLES_DIR`` with the directory of ``*.xreg.json``
documents. It prints:

* the time to import every document (``POST /`` semantics, one transaction each), to render
  the export, and of one message write (with the definition index rebuilt after it, as the
  component does);
* the cost of checking one event against its definition (required attributes, values, URI
  templates, types and ``data`` against the JSON Schema), next to the cost of the ingress's
  own structural check of the same event, measured in the same run, and their ratio.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from cebroker.pipeline.wellformed import event_problems
from cebroker.registry.model import GROUP_TYPES, MESSAGES
from cebroker.registry.paths import Target
from cebroker.registry.query import Inline
from cebroker.registry.service import ReadOptions, RegistryCore
from cebroker.registry.validation import DefinitionIndex, RegistryValidator
from cebroker.registry.writes import Writer
from cebroker.storage import create_storage

BASE = "http://bench.local"


def _event(n: int) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"e-{n}",
        "type": "Contoso.ERP.ReservationPlaced",
        "source": "/erp/acme/orders",
        "subject": f"res-{n}",
        "time": "2026-01-01T10:00:00Z",
        "datacontenttype": "application/json",
        "data": {
            "orderId": f"o-{n}",
            "customerId": "c-1",
            "total": 10.5,
            "items": [{"productId": "p", "quantity": 1}],
        },
    }


def _put_message(writer: Writer, n: int) -> None:
    body = {"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": f"bench.{n}"}}}
    writer.upsert_resource(GROUP_TYPES["messagegroups"], "bench", MESSAGES, f"bench.{n}", body, patch=False)


def _per_call(fn: Any, events: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    for e in events:
        fn(e)
    return (time.perf_counter() - start) / len(events) * 1e6


async def _registry_figures(docs: list[dict[str, Any]], db: Path) -> tuple[float, float, float, float, Any]:
    """Import, export, index and per-write times over a fresh storage in ``db``."""
    storage = create_storage(db)
    await storage.open()
    try:
        store = storage.registry
        core = RegistryCore(BASE)
        await store.write(lambda rows: core.write(rows, lambda w: None))
        start = time.perf_counter()
        for doc in docs:

            def load(writer: Writer, doc: dict[str, Any] = doc) -> None:
                writer.import_groups(doc)

            await store.write(partial(core.write, op=load))
        imported = time.perf_counter() - start
        start = time.perf_counter()
        opts = ReadOptions(inline=Inline([("*",)]), doc=True)
        export = await store.read(lambda rows: core.read(rows, Target("registry"), opts))
        exported = time.perf_counter() - start
        start = time.perf_counter()
        index = await store.read(lambda rows: DefinitionIndex.build(rows, BASE))
        indexed = time.perf_counter() - start
        writes = 200
        start = time.perf_counter()
        for n in range(writes):
            await store.write(partial(core.write, op=partial(_put_message, n=n)))
            # the component re-indexes after each write
            await store.read(lambda rows: DefinitionIndex.build(rows, BASE))
        per_write = (time.perf_counter() - start) / writes
    finally:
        await storage.close()
    return imported, exported, indexed, per_write, (export, index)


def main(argv: list[str]) -> int:
    """Run the benchmark over the documents in ``argv[0]``."""
    samples = sorted(Path(argv[0]).glob("*.xreg.json")) if argv else []
    if not samples:
        print("usage: python benchmarks/bench_registry.py DIR_WITH_XREG_JSON", file=sys.stderr)
        return 2
    docs = [json.loads(p.read_text()) for p in samples]
    with tempfile.TemporaryDirectory() as tmp:
        imported, exported, indexed, per_write, (export, index) = asyncio.run(
            _registry_figures(docs, Path(tmp) / "bench.db")
        )
    validator = RegistryValidator()
    validator.index = index
    size = len(json.dumps(export))
    print(f"import {len(docs)} documents: {imported * 1e3:.1f} ms")
    print(f"export ({size} bytes): {exported * 1e3:.1f} ms")
    print(f"definition index build: {indexed * 1e3:.1f} ms")
    print(f"one message PUT (transaction, checks, re-index) in that registry: {per_write * 1e3:.2f} ms")
    events = [_event(n) for n in range(20_000)]
    assert validator.validate(events[0]) == [], validator.validate(events[0])
    _per_call(validator.validate, events[:2000])  # warm-up: JSON Schema validators compiled
    baseline = _per_call(event_problems, events)
    checked = _per_call(validator.validate, events)
    print(f"ingress structural check (baseline): {baseline:.1f} us/event")
    print(f"registry definition check:           {checked:.1f} us/event ({checked / baseline:.1f}x baseline)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
