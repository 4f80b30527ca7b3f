"""Micro-benchmark: CESQL compile and evaluate times next to cel-python on equivalent expressions.

Run ``python -m cefilters.sql.bench`` (``--repeat N``, ``--budget SECONDS`` per measurement).
Each figure is the median over the repeats of the mean time per operation. The cases are the
conformance suite's ``spec_examples.yaml`` expressions with their events, plus typical
subscription filters. cel-python gets its activation converted ahead of time (the cheapest
setting for it); it needs ``cel-python`` installed, which ``cefilters`` depends on.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cefilters import sql

__all__ = ["CASES", "BenchCase", "main"]


@dataclass(frozen=True)
class BenchCase:
    """A CESQL expression, a CEL expression meaning the same, and an event to run them on."""

    name: str
    cesql: str
    cel: str
    event: dict[str, Any]


_BASE: dict[str, Any] = {
    "specversion": "1.0",
    "id": "A234-1234-1234",
    "source": "/shop/eu/1",
    "type": "com.example.order",
}

CASES: tuple[BenchCase, ...] = (
    # Typical subscription filters.
    BenchCase(
        "typical: type = AND source LIKE prefix",
        "type = 'com.example.order' AND source LIKE '/shop/%'",
        "type == 'com.example.order' && source.startsWith('/shop/')",
        _BASE,
    ),
    BenchCase(
        "typical: type IN (3 values)",
        "type IN ('com.example.refund', 'com.example.order', 'com.example.invoice')",
        "type in ['com.example.refund', 'com.example.order', 'com.example.invoice']",
        _BASE,
    ),
    BenchCase(
        "typical: LIKE contains, int compare",
        "source LIKE '%/eu/%' AND priority > 5",
        "source.contains('/eu/') && priority > 5",
        {**_BASE, "priority": 7},
    ),
    # spec_examples.yaml of the conformance suite (one row per distinct expression).
    BenchCase(
        "spec: int(hop) < int(ttl) and ...",
        "int(hop) < int(ttl) and int(hop) < 1000",
        "int(hop) < int(ttl) && int(hop) < 1000",
        {**_BASE, "hop": "5", "ttl": "10"},
    ),
    BenchCase(
        "spec: INT(hop) < INT(ttl) AND ...",
        "INT(hop) < INT(ttl) AND INT(hop) < 1000",
        "int(hop) < int(ttl) && int(hop) < 1000",
        {**_BASE, "hop": "5", "ttl": "10"},
    ),
    BenchCase("spec: hop < ttl", "hop < ttl", "int(hop) < int(ttl)", {**_BASE, "hop": "5", "ttl": "10"}),
    BenchCase("spec: sequence = 5", "sequence = 5", "int(sequence) == 5", {**_BASE, "sequence": "5"}),
    BenchCase(
        "spec: firstname = OR subject =",
        "firstname = 'Francesco' OR subject = 'Francesco'",
        "firstname == 'Francesco' || subject == 'Francesco'",
        {**_BASE, "subject": "Francesco", "firstname": "Doug"},
    ),
    BenchCase(
        "spec: (.. AND ..) OR subject =",
        "(firstname = 'Francesco' AND lastname = 'Guardiani') OR subject = 'Francesco Guardiani'",
        "(firstname == 'Francesco' && lastname == 'Guardiani') || subject == 'Francesco Guardiani'",
        {**_BASE, "subject": "Doug", "firstname": "Francesco", "lastname": "Guardiani"},
    ),
    BenchCase(
        "spec: EXISTS subject", "EXISTS subject", "has(event.subject)", {**_BASE, "subject": "Francesco"}
    ),
    BenchCase('spec: true AND (missing = "")', 'true AND (missing = "")', 'true && (missing == "")', _BASE),
    BenchCase("spec: missing * 5", "missing * 5", "missing * 5", _BASE),
    BenchCase("spec: 1 / missing", "1 / missing", "1 / missing", _BASE),
)


_TARGET_NS = 2000  # a typical filter should evaluate within 2 microseconds


def _measure(operation: Callable[[], object], repeat: int, budget: float) -> float:
    """Median over ``repeat`` runs of the mean nanoseconds per call; each run lasts ~``budget`` s."""
    number, start = 1, time.perf_counter()
    operation()
    elapsed = time.perf_counter() - start
    number = max(1, int(budget / max(elapsed, 1e-7)))
    samples = []
    for _ in range(repeat):
        start_ns = time.perf_counter_ns()
        for _ in range(number):
            operation()
        samples.append((time.perf_counter_ns() - start_ns) / number)
    return statistics.median(samples)


def _cel_runner(case: BenchCase, environment: Any) -> tuple[Callable[[], object], Callable[[], object]]:
    from celpy.adapter import json_to_cel
    from celpy.evaluation import CELEvalError

    activation = {name: json_to_cel(value) for name, value in case.event.items()}
    activation["event"] = json_to_cel(case.event)
    program = environment.program(environment.compile(case.cel))

    def evaluate() -> object:
        try:
            return program.evaluate(activation)
        except CELEvalError as error:  # the missing-attribute cases: an error, as in CESQL
            return error

    return (lambda: environment.program(environment.compile(case.cel))), evaluate


def main(argv: list[str] | None = None) -> int:
    """Print the table; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m cefilters.sql.bench", description=__doc__)
    parser.add_argument("--repeat", type=int, default=7, help="measurements per figure (median)")
    parser.add_argument("--budget", type=float, default=0.03, help="seconds per measurement")
    args = parser.parse_args(argv)
    try:
        import celpy
    except ImportError:
        print("cel-python is not installed: pip install cel-python", file=sys.stderr)
        return 1
    environment = celpy.Environment()

    header = (
        f"{'case':40} {'compile us':>10} {'CEL us':>9} {'x':>5}  {'evaluate ns':>11} {'matches ns':>10}"
        f" {'CEL ns':>9} {'x':>6}"
    )
    print(header)
    print("-" * len(header))
    ratios: list[float] = []
    typical_ns: list[float] = []
    for case in CASES:
        expression = sql.compile(case.cesql)
        cel_compile, cel_evaluate = _cel_runner(case, environment)
        compile_ns = _measure(functools.partial(sql.compile, case.cesql), args.repeat, args.budget)
        evaluate_ns = _measure(functools.partial(expression.evaluate, case.event), args.repeat, args.budget)
        matches_ns = _measure(functools.partial(expression.matches, case.event), args.repeat, args.budget)
        cel_compile_ns = _measure(cel_compile, args.repeat, args.budget)
        cel_ns = _measure(cel_evaluate, args.repeat, args.budget)
        ratios.append(cel_ns / evaluate_ns)
        if case.name.startswith("typical"):
            typical_ns.append(evaluate_ns)
        print(
            f"{case.name:40} {compile_ns / 1000:10.1f} {cel_compile_ns / 1000:9.1f} "
            f"{cel_compile_ns / compile_ns:5.1f}  {evaluate_ns:11.0f} {matches_ns:10.0f} {cel_ns:9.0f} "
            f"{cel_ns / evaluate_ns:6.0f}"
        )
    print("-" * len(header))
    print(
        f"evaluate: CEL / CESQL ratio min {min(ratios):.0f}x, geometric mean "
        f"{statistics.geometric_mean(ratios):.0f}x over {len(CASES)} cases"
    )
    slowest = max(typical_ns)
    print(
        f"typical filters: slowest evaluate {slowest:.0f} ns "
        f"({'within' if slowest <= _TARGET_NS else 'OVER'} the {_TARGET_NS} ns target)"
    )
    load = ", ".join(f"{figure:.1f}" for figure in os.getloadavg())
    python = sys.version.split()[0]
    print(f"Python {python}, {os.cpu_count()} CPUs, load average {load}, {args.repeat} repeats")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
