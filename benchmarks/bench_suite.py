"""Benchmark: the test suite's own time, in one process (the baseline) and in parallel as
``scripts/test.sh`` runs it (pytest-xdist, ``--dist loadgroup``), the same tests back to back.

Prints each run's time as pytest reports it (its "in N s"), the ratio of the parallel run to the
serial one, and the load average before and after each run: on a machine shared with other work
the two runs see different neighbours, so read the ratio with the load beside it. A test that
fails in either run is reported, and the script exits non-zero.
Usage: ``python benchmarks/bench_suite.py [--workers auto] [pytest arguments, e.g. tests/pipeline]``
(default: ``tests/pipeline tests/storage``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"^(?P<counts>.*) in (?P<seconds>[0-9.]+)s")


def run(arguments: list[str]) -> tuple[float, str]:
    """Run pytest with ``arguments`` from the repository's root; its time and summary line."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line.strip(" =") for line in done.stdout.splitlines() if " in " in line]
    for line in reversed(lines):
        found = SUMMARY.match(line)
        if found:
            return float(found["seconds"]), found["counts"]
    raise SystemExit(f"no pytest summary in the output:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="auto", help="pytest-xdist's -n (default: auto)")
    options, tests = parser.parse_known_args()
    tests = tests or ["tests/pipeline", "tests/storage"]
    print(f"tests: {' '.join(tests)} on {os.cpu_count()} CPUs (machine possibly shared: see the load)")
    results = {}
    runs = (("serial", ["-n", "0"]), ("parallel", ["-n", options.workers, "--dist", "loadgroup"]))
    for name, extra in runs:
        before = load()
        seconds, counts = run([*extra, *tests])
        results[name] = (seconds, counts)
        print(f"{name:9} {seconds:8.1f} s  {counts}  (load before {before}, after {load()})")
    ratio = results["parallel"][0] / results["serial"][0]
    print(f"parallel / serial: {ratio:.2f}")
    if any("failed" in counts or "error" in counts for _, counts in results.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
