"""Benchmark of the subscription index against the linear scan: ``python -m cefilters.bench``.

Builds 100, 1k, 10k and 100k subscriptions with the issue's mix (50% ``exact`` on ``type``, 30%
``prefix`` on ``source`` or ``subject``, 10% ``suffix`` on ``subject``, 10% ``sql`` such as
``type = '...' AND priority > 3 AND subject LIKE 'region%'``) and matches the same random events
with :meth:`SubscriptionIndex.match` and with a scan of every subscription's filter. Value pools
grow with the subscription count, so an event matches a similar handful of subscriptions at every
size: the table shows how cost grows with the number of subscriptions, not with the number of
deliveries. Runs on one core in about a minute.

CloudEvents SQL compile/evaluate figures, side by side with cel-python: ``python -m cefilters.sql.bench``.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .base import Event, Filter
from .compiler import compile
from .dialects.logical import AllFilter
from .index import SubscriptionIndex
from .index.conditions import TypesFilter

__all__ = ["Row", "main", "measure"]

SIZES = (100, 1_000, 10_000, 100_000)
LEGEND = """
ev/s        events per CPU second of this process on one core (best pass)
us/event    index.match time per event
bytes/sub   memory the index holds per subscription, compiled filters included (tracemalloc)
build s     CPU seconds to compile and add every subscription
matches/ev  mean number of subscriptions an event matches
unanchored  subscriptions with no indexable condition, evaluated for every event

CloudEvents SQL compile/evaluate, side by side with cel-python: python -m cefilters.sql.bench"""
VERBS = ("created", "updated", "deleted", "shipped", "paid")


@dataclass(frozen=True, slots=True)
class Spec:
    """One generated subscription."""

    filters: list[dict[str, object]]
    types: list[str] | None


@dataclass(frozen=True, slots=True)
class Row:
    """The figures for one subscription count."""

    subscriptions: int
    index_eps: float
    scan_eps: float
    bytes_per_subscription: float
    build_seconds: float
    mean_matches: float
    unanchored: int


def _pools(n: int) -> tuple[int, int, int]:
    """Sizes of the type, tenant and item pools: they grow with ``n`` (see the module docstring)."""
    return max(2, n // 20), max(2, n // 20), max(2, n // 10)


def _type(rng: random.Random, types: int) -> str:
    k = rng.randrange(types)
    return f"com.example.domain{k % 97}.entity{k}.{VERBS[k % len(VERBS)]}"


def generate_subscriptions(n: int, rng: random.Random) -> list[Spec]:
    """``n`` subscriptions in the issue's mix."""
    types, tenants, items = _pools(n)
    specs: list[Spec] = []
    for i in range(n):
        slot = i % 10
        if slot < 5:
            specs.append(Spec([{"exact": {"type": _type(rng, types)}}], None))
        elif slot < 8:
            tenant = rng.randrange(tenants)
            if slot == 5:
                prefix = f"https://tenant{tenant}.example.com/"
                specs.append(Spec([{"prefix": {"source": prefix}}], None))
            elif slot == 6:
                prefix = f"https://tenant{tenant}.example.com/app{tenant % 7}/"
                specs.append(Spec([{"prefix": {"source": prefix}}], None))
            else:
                specs.append(Spec([{"prefix": {"subject": f"region{tenant % 13}/tenant{tenant}/"}}], None))
        elif slot == 8:
            specs.append(Spec([{"suffix": {"subject": f"/item-{rng.randrange(items)}"}}], None))
        else:
            sql = (
                f"type = '{_type(rng, types)}' AND priority > {rng.randrange(10)} AND subject LIKE 'region%'"
            )
            specs.append(Spec([{"sql": sql}], None))
    return specs


def generate_events(n_subscriptions: int, count: int, rng: random.Random) -> list[Event]:
    """``count`` events drawn from the same pools as the subscriptions."""
    types, tenants, items = _pools(n_subscriptions)
    events: list[Event] = []
    for i in range(count):
        tenant = rng.randrange(tenants)
        events.append(
            {
                "specversion": "1.0",
                "id": f"event-{i}",
                "type": _type(rng, types),
                "source": f"https://tenant{tenant}.example.com/app{tenant % 7}/orders",
                "subject": f"region{tenant % 13}/tenant{tenant}/item-{rng.randrange(items)}",
                "time": "2026-01-01T00:00:00Z",
                "priority": rng.randrange(10),
            }
        )
    return events


def _scan_filter(spec: Spec) -> Filter:
    """What a per-subscription scan evaluates: the filters plus the types constraint."""
    compiled = compile(spec.filters)
    if spec.types is None:
        return compiled
    return AllFilter((TypesFilter(spec.types), compiled))


def _rate(function: Callable[[Event], object], events: Sequence[Event], budget: float) -> float:
    """Events per second of ``function`` over ``events`` on one core.

    Timed in CPU seconds of this process (``process_time``), best of repeated passes within
    ``budget`` CPU seconds: on a shared machine wall-clock time mostly measures the neighbours.
    """
    best = float("inf")
    deadline = time.process_time() + budget
    passes = 0
    while passes < 3 or time.process_time() < deadline:
        start = time.process_time()
        for event in events:
            function(event)
        best = min(best, time.process_time() - start)
        passes += 1
    return len(events) / best


def _warm_up() -> None:
    """Load every dialect's code first, so that the memory figure counts subscriptions only."""
    for spec in generate_subscriptions(10, random.Random(0)):
        compile(spec.filters).matches({"type": "x", "priority": 1})


def measure(n: int, seed: int = 7, budget: float = 1.0) -> Row:
    """Build an index of ``n`` subscriptions and time it against the scan."""
    rng = random.Random(seed + n)
    specs = generate_subscriptions(n, rng)
    events = generate_events(n, 1_000, rng)
    _warm_up()

    # Memory: everything the index holds, compiled filters included, traced during a first build.
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    traced: SubscriptionIndex[int] = SubscriptionIndex()
    for key, spec in enumerate(specs):
        traced.add(key, spec.filters, types=spec.types)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del traced

    # Time: a second build without tracing (which slows allocation several times).
    start = time.process_time()
    index: SubscriptionIndex[int] = SubscriptionIndex()
    for key, spec in enumerate(specs):
        index.add(key, spec.filters, types=spec.types)
    build = time.process_time() - start

    scan = [(key, _scan_filter(spec)) for key, spec in enumerate(specs)]

    def linear(event: Event) -> set[int]:
        return {key for key, compiled in scan if compiled.matches(event)}

    matches = sum(len(index.match(e)) for e in events[:200]) / 200
    for event in events[:50]:  # the two must agree before their speeds are compared
        if index.match(event) != linear(event):
            raise AssertionError(f"index and scan disagree on {event}")
    return Row(
        subscriptions=n,
        index_eps=_rate(index.match, events, budget),
        scan_eps=_rate(linear, events[: max(5, 20_000 // n)], budget),
        bytes_per_subscription=held / n,
        build_seconds=build,
        mean_matches=matches,
        unanchored=index.unanchored,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Print the comparison table."""
    parser = argparse.ArgumentParser(prog="python -m cefilters.bench", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--seconds", type=float, default=1.0, help="timing budget per measurement")
    args = parser.parse_args(argv)
    rows = [measure(n, budget=args.seconds) for n in args.sizes]
    header = (
        f"{'subscriptions':>13} {'index ev/s':>12} {'scan ev/s':>11} {'index/scan':>10} "
        f"{'us/event':>9} {'bytes/sub':>9} {'build s':>8} {'matches/ev':>10} {'unanchored':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.subscriptions:>13,} {row.index_eps:>12,.0f} {row.scan_eps:>11,.0f} "
            f"{row.index_eps / row.scan_eps:>10,.0f} {1e6 / row.index_eps:>9.2f} "
            f"{row.bytes_per_subscription:>9,.0f} {row.build_seconds:>8.2f} {row.mean_matches:>10.1f} "
            f"{row.unanchored:>10,}"
        )
    first, last = rows[0], rows[-1]
    print(
        f"\ntime per event grows x{first.index_eps / last.index_eps:.2f} from "
        f"{first.subscriptions:,} to {last.subscriptions:,} subscriptions"
    )
    print(LEGEND)


if __name__ == "__main__":
    main()
