"""Memory held per indexed subscription (issue: <= 2 KiB per indexed subscription)."""

from __future__ import annotations

import gc
import random
import tracemalloc

import cefilters
from cefilters import bench


def test_bytes_per_subscription_within_two_kib() -> None:
    """The index, with the compiled filters it keeps, holds at most 2 KiB per subscription for the
    benchmark's mix (50% exact type, 30% prefix, 10% suffix, 10% sql with types)."""
    specs = bench.generate_subscriptions(5_000, random.Random(1))
    cefilters.compile([{"sql": "priority > 1 AND subject LIKE 'a%'"}])  # load the engine first
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index: cefilters.SubscriptionIndex[int] = cefilters.SubscriptionIndex()
        for key, spec in enumerate(specs):
            index.add(key, spec.filters, types=spec.types)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(index) == 5_000
    assert held / len(specs) <= 2048


def test_benchmark_runs_and_index_agrees_with_scan() -> None:
    """The benchmark's own agreement check passes and its figures are positive (not a timing
    assertion: speed targets are reported by ``python -m cefilters.bench``)."""
    row = bench.measure(200, budget=0.01)
    assert row.subscriptions == 200
    assert row.index_eps > 0
    assert row.scan_eps > 0
    assert row.mean_matches > 0
