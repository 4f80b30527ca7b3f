"""Benchmark: the filter index, CloudEvents SQL and ordinary CEL filters with the expression
budgets on, against the previous release, in the same run.

The previous release's ``cefilters`` (by default the commit before the bounded evaluator came in:
the parent of the commit that added ``filters/cefilters/cel/budget.py``; ``--baseline REF`` picks
another) is extracted with ``git archive`` into a temporary directory. Each round runs the same
measurement in two fresh interpreters, one importing that copy (first on ``PYTHONPATH``), one
importing this tree's; rounds alternate which goes first. Each prints JSON; the script prints the
median of the rounds and the best round of each side, each with its ratio (this tree's rate
over the previous release's: at least 0.95 means the bounds cost ordinary expressions nothing
measurable), and the load average. On a shared machine a round can lose half its speed to other
processes; the best round of each side is the least disturbed, which is why its ratio is the
one to read when the load average is high.

Figures:

- ``index ev/s``: ``cefilters.bench.measure`` with 10,000 subscriptions (the README mix, 10%
  ``sql`` filters), events per CPU second through ``SubscriptionIndex.match``;
- ``cesql ns``: the geometric mean, over ``cefilters.sql.bench.CASES``, of the time of one
  ``Expression.matches`` (the fastest of seven samples);
- ``cel ns``: the geometric mean, over ordinary ``cel`` filters, of one ``Filter.matches``
  (the previous release evaluated them with cel-python, this one with ``cefilters.cel``).

Usage: ``python benchmarks/bench_expressions.py [--rounds 7] [--baseline REF]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Run in each interpreter; uses only what both releases have.
MEASURE = r"""
import gc, json, math, sys, time
import cefilters
from cefilters import sql
from cefilters.bench import measure
from cefilters.sql.bench import CASES

assert cefilters.__file__.startswith(sys.argv[1]), cefilters.__file__

def per_call(function, budget=0.1):
    number, start = 1, time.perf_counter()
    function()
    elapsed = time.perf_counter() - start
    number = max(1, int(budget / max(elapsed, 1e-7)))
    samples = []
    for _ in range(7):
        start = time.perf_counter_ns()
        for _ in range(number):
            function()
        samples.append((time.perf_counter_ns() - start) / number)
    return min(samples)  # the least disturbed sample: other processes only ever add time

def geometric(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))

EVENT = {"specversion": "1.0", "id": "1", "source": "/shop/eu/1", "type": "com.example.order",
         "subject": "order-17", "priority": 7}
CEL = [
    'type.startsWith("com.example") && size(subject) > 3',
    'type == "com.example.order"',
    'source.contains("/eu/") && priority > 5',
    'type in ["com.example.refund", "com.example.order", "com.example.invoice"]',
    '!(priority > 30) || subject.endsWith("x")',
]
row = measure(10_000, budget=0.3)
gc.collect()
gc.freeze()  # what measure() and the grammars left behind is not traced again by every collection
cesql = []
for case in CASES:
    expression = sql.compile(case.cesql)
    cesql.append(per_call(lambda: expression.matches(case.event)))
cel = []
for text in CEL:
    compiled = cefilters.compile([{"cel": text}])
    assert compiled.matches(EVENT) in (True, False)
    cel.append(per_call(lambda: compiled.matches(EVENT)))
print(json.dumps({"index": row.index_eps, "cesql": geometric(cesql), "cel": geometric(cel)}))
"""


def _baseline_ref(given: str | None) -> str:
    if given:
        return given
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "-1", "--", "filters/cefilters/cel/budget.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not added:
        raise SystemExit("cannot find the commit that added the bounded evaluator: pass --baseline REF")
    return f"{added}^"


def _extract(ref: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "filters/cefilters"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "filters"


def _run(filters: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(filters)}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(filters)], env=env, capture_output=True, text=True, check=True
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", help="git ref of the previous release (default: see the docstring)")
    args = parser.parse_args()
    ref = _baseline_ref(args.baseline)
    previous: list[dict[str, float]] = []
    current: list[dict[str, float]] = []
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as directory:
        old = _extract(ref, Path(directory))
        for round_ in range(args.rounds):
            order = [(old, previous), (ROOT / "filters", current)]
            for filters, results in order if round_ % 2 == 0 else reversed(order):
                results.append(_run(filters))
            loads.append(os.getloadavg()[0])
            print(f"round {round_ + 1}: previous {previous[-1]}, bounded {current[-1]}")

    def pick(results: list[dict[str, float]], name: str, best: bool, higher_better: bool) -> float:
        values = [r[name] for r in results]
        if not best:
            return statistics.median(values)
        return max(values) if higher_better else min(values)

    print(f"baseline: {ref}")
    header = f"{'previous':>12}{'bounded':>12}{'ratio':>7}"
    print(f"{'':<12}{'median of the rounds':^31}   {'best round':^31}")
    print(f"{'figure':<12}{header}   {header}")
    for name, unit, higher_better in (("index", "ev/s", True), ("cesql", "ns", False), ("cel", "ns", False)):
        cells = []
        for best in (False, True):
            before = pick(previous, name, best, higher_better)
            after = pick(current, name, best, higher_better)
            ratio = after / before if higher_better else before / after
            cells.append(f"{before:>12,.0f}{after:>12,.0f}{ratio:>7.2f}")
        print(f"{name + ' ' + unit:<12}{cells[0]}   {cells[1]}")
    print(f"load average during the run: {min(loads):.2f} to {max(loads):.2f} (2 cores, shared machine)")


if __name__ == "__main__":
    main()
