"""The flush of a durable SQLite commit when the WAL grows against when it is written over in
place, in the same run.

The storage writer commits with ``synchronous=NORMAL`` and its syncer thread flushes the WAL
(``fdatasync``) before any durable caller is answered (docs/storage.md, Durability). How much
that flush costs depends on the file: pages that make it longer also make ``fdatasync`` commit
the file's new size, pages written over in place do not. The checkpointer used to truncate a
busy WAL once it passed its bound (so that every later commit grew the file again); it now starts
the WAL over without truncating it (``RESTART``), and the file is written over in place.

Each round writes ``--commits`` transactions of ``--events`` rows (an event row and a
de-duplication key, as an append writes them) into a fresh database and flushes the WAL after
each commit as the syncer does, while a thread runs a passive checkpoint every ``--every``
seconds from a connection of its own (the checkpointer's rounds); then the policy under test,
run between two transactions: before, a ``TRUNCATE`` checkpoint once the
file is over 16 MiB; now, a ``RESTART`` checkpoint once the WAL holds 8 MiB of frames (the file
kept, at most 16 MiB: ``journal_size_limit``). The two alternate round by round. Printed:
the median flush in milliseconds of each policy, after its first fill of the file, and the
ratio now / before, with the load average before and after.
Usage: ``python benchmarks/bench_wal_flush.py [--rounds 3] [--commits 3000] [--events 30]``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

from drains import uptime

from cebroker.storage.sqlite.checkpoint import FRAME_HEADER

LIMIT = 16 * 1024 * 1024


def _flushes(mode: str, commits: int, events: int, every: float) -> list[float]:
    """Seconds of each WAL flush after a commit, the WAL kept within its bound by ``mode``
    (``TRUNCATE``: the policy before, ``RESTART``: now)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "wal.db"
        wal_path = path.with_name(path.name + "-wal")
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "wal_autocheckpoint=0"):
            conn.execute(f"PRAGMA {pragma}")
        conn.execute(f"PRAGMA journal_size_limit={LIMIT}")
        conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        conn.execute("CREATE TABLE seen (key TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID")
        (page,) = conn.execute("PRAGMA page_size").fetchone()
        wanted = threading.Event()
        stop = threading.Event()

        def checkpoints() -> None:
            # The checkpointer's rounds, from a connection of their own while the writer writes
            # (so that, as in the broker, a round rarely finds every frame copied).
            other = sqlite3.connect(path, isolation_level=None)
            while not stop.wait(every):
                (_, frames, _) = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                # Before: the file's size against the bound; now: the frames against half of it.
                size = wal_path.stat().st_size if mode == "TRUNCATE" else 2 * frames * (page + FRAME_HEADER)
                if size > LIMIT:
                    wanted.set()
            other.close()

        rounds = threading.Thread(target=checkpoints)
        rounds.start()
        body = "x" * 300
        wal: int | None = None
        times: list[float] = []
        seq = 0
        try:
            for _ in range(commits):
                conn.execute("BEGIN IMMEDIATE")
                for _ in range(events):
                    seq += 1
                    conn.execute("INSERT INTO events VALUES (?, ?)", (seq, body))
                    conn.execute("INSERT INTO seen VALUES (?, 0)", (os.urandom(8).hex(),))
                conn.execute("COMMIT")
                if wal is None:
                    wal = os.open(wal_path, os.O_RDWR)
                started = time.perf_counter()
                os.fdatasync(wal)
                times.append(time.perf_counter() - started)
                if wanted.is_set():  # between two transactions, on the writer's connection
                    wanted.clear()
                    conn.execute(f"PRAGMA wal_checkpoint({mode})")
        finally:
            stop.set()
            rounds.join()
            if wal is not None:
                os.close(wal)
            conn.close()
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--every", type=float, default=0.1, help="seconds between two checkpoint rounds")
    args = parser.parse_args()
    print(uptime())
    medians: dict[str, list[float]] = {"TRUNCATE": [], "RESTART": []}
    for round_ in range(args.rounds):
        for mode in medians:
            times = _flushes(mode, args.commits, args.events, args.every)
            # After the first fill: the first commits grow the file under either policy.
            medians[mode].append(statistics.median(times[args.commits // 3 :]) * 1e3)
            print(f"round {round_ + 1}: {mode:8s} flush median {medians[mode][-1]:.3f} ms", flush=True)
    before, now = (statistics.median(medians[mode]) for mode in ("TRUNCATE", "RESTART"))
    print(f"flush after a commit of {args.events} events, median of {args.rounds} rounds:")
    print(f"  WAL truncated (before): {before:.3f} ms")
    print(f"  WAL written in place (now): {now:.3f} ms   ratio now/before {now / before:.2f}")
    print(uptime())


if __name__ == "__main__":
    main()
